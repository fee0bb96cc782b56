"""The central gap of every estimate kind (analysis.gap through analysis.kinds.KINDS;
docs/math/central-and-shuffle.md).

Exact figures are checked against their formulas; measured ones against their exact expectation
with stated z tolerances (the mean of m squared errors of Laplace noise of variance v has
standard error sqrt(5/m) v: E X^4 = 6 v^2 for Laplace; of normal noise sqrt(2/m) v). Heavy
hitters, in a seeded simulation, against bounds derived from theory: the central peeling
mechanisms' expected number of misses is at most k beta (analysis.kinds._common.items_gap), the
local decoder's expected false discoveries at most alpha, and a string whose frequency is twice the
local detection threshold is found (its z is then at least twice the critical z).
"""

from __future__ import annotations

import json
import math
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import cli
from analysis.gap import (
    GapOptions,
    central_gaussian_sigma,
    gap_kind,
    kind_gap,
    parse_simulation,
    simulated_kind_gap,
)
from analysis.kinds._common.items_gap import central_recall_bound, recall_precision, vocabulary
from analysis.selection import rational_epsilon
from client_sdk.amplification import calibrate_local_epsilon, numerical_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.pckv import PCKV
from client_sdk.mechanisms.pem import PEM
from collector.calibration import central_guarantee, local_epsilon_for
from collector.storage import Storage
from tests.analysis.gap_tolerance import Z, laplace_mse_tolerance


def test_an_unknown_kind_has_no_gap() -> None:

    class Unknown:
        name = "bogus"
        estimate_kind = "bogus"

    with pytest.raises(ValueError, match=r"'bogus' \(estimate kind 'bogus'\).* frequency oracles"):
        gap_kind(Unknown())  # type: ignore[arg-type]


def test_simulation_specs() -> None:
    assert parse_simulation("zipf").parameter == 1.1
    assert parse_simulation("zipf:1.5").parameter == 1.5
    assert parse_simulation("uniform").parameter is None
    for bad in ("pareto", "zipf:x", "zipf:0", "uniform:2"):
        with pytest.raises(ValueError, match="--simulate"):
            parse_simulation(bad)


# ---- frequencies: the shuffled column ----------------------------------------------------------


def test_shuffled_column_exact() -> None:
    oue = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": 100})
    n = 100_000
    column = kind_gap(oue, n, GapOptions(delta=1e-6))["shuffled_column"]
    eps0 = calibrate_local_epsilon(1.0, n, 1e-6)
    assert column["central_epsilon"] == 1.0 and column["local_epsilon"] == eps0
    assert numerical_epsilon(eps0, n, 1e-6) <= 1.0 * (1 + 1e-3)
    exact = column["exact"]
    shuffled = mechanism_from_config({"mechanism": "oue", "epsilon": eps0, "k": 100})
    assert isinstance(oue, FrequencyOracle) and isinstance(shuffled, FrequencyOracle)
    assert exact["local_only_variance"] == oue.variance_per_user() / n
    assert exact["shuffled_variance"] == pytest.approx(shuffled.variance_per_user() / n)
    sigma = central_gaussian_sigma(1.0, 1e-6)
    assert exact["central_gaussian_variance"] == pytest.approx(sigma**2 / n**2)
    assert exact["central_laplace_variance"] == pytest.approx(8 / n**2)
    # the order the issue states: local-only >> shuffled >> curator
    assert exact["local_only_variance"] > 100 * exact["shuffled_variance"]
    assert exact["shuffled_variance"] > exact["central_gaussian_variance"]
    assert 0 < exact["share_of_gap_closed"] < 1
    assert exact["shuffled_best_variance"] <= exact["shuffled_variance"]


def test_shuffled_column_of_a_stored_campaign_uses_the_real_batches() -> None:
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 5.0, "k": 20})
    sizes = (3000, 1200, 5000)
    column = kind_gap(grr, sum(sizes), GapOptions(batch_sizes=sizes))["shuffled_column"]
    guarantee = central_guarantee(5.0, list(sizes), 1e-6)
    assert guarantee is not None
    assert column["central_epsilon"] == guarantee["epsilon"]
    assert column["local_epsilon"] == 5.0 and column["smallest_batch"] == 1200
    local_only = mechanism_from_config(
        {"mechanism": "grr", "epsilon": guarantee["epsilon"], "k": 20}
    )
    assert isinstance(local_only, FrequencyOracle) and isinstance(grr, FrequencyOracle)
    assert column["exact"]["local_only_variance"] == pytest.approx(
        local_only.variance_per_user() / sum(sizes)
    )
    assert column["exact"]["shuffled_variance"] == pytest.approx(
        grr.variance_per_user() / sum(sizes)
    )


def test_shuffled_column_measured_in_simulation() -> None:
    k, n = 200, 40_000
    oue = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": k})
    document = simulated_kind_gap(oue, n, parse_simulation("zipf"), GapOptions(), seed=3)
    exact = document["shuffled_column"]["exact"]
    measured = document["simulation"]["shuffled_column_measured"]
    # per-item errors are about normal: the mean of k squared errors has the standard error
    # sqrt(2 sum_v Var_v^2) / k
    for name in ("local_only", "shuffled"):
        expected = measured[f"{name}_expected"]  # exact at the true frequencies
        assert expected >= exact[f"{name}_variance"]  # the f-independent term is a lower bound
        std_error = measured[f"{name}_mse_std_error"]  # sqrt(2 sum_v Var_v^2) / k
        assert abs(measured[f"{name}_mse"] - expected) < Z * std_error
    m = k * 10  # ten runs of the curator over k items
    expected = exact["central_laplace_variance"]
    assert abs(measured["central_laplace_mse"] - expected) < laplace_mse_tolerance(expected, m)
    assert measured["local_over_shuffled"] > 50


# ---- heavy hitters ---------------------------------------------------------------------------


def test_recall_precision_and_vocabulary() -> None:
    assert recall_precision(["a", "b", "x"], {"a", "b", "c", "d"}) == {
        "answered": 3,
        "correct": 2,
        "recall": 0.5,
        "precision": 2 / 3,
    }
    assert recall_precision([], {"a"})["precision"] is None
    words = vocabulary(2000, 3, np.random.default_rng(0))
    assert len(set(words)) == 2000 and max(len(w) for w in words) <= 3
    with pytest.raises(ValueError, match="max_length is 1"):
        vocabulary(2000, 1, np.random.default_rng(0))


def test_central_recall_bound_is_below_the_exact_law() -> None:
    """One round (k = 1): the exponential mechanism picks the top with probability
    1 / (1 + sum_r exp(-eps (u* - u_r)/2)) exactly, which the bound 1 - beta never exceeds."""
    scores = np.array([30, 22, 21, 5, 0])
    for epsilon in (0.2, 0.5, 1.0, 2.0):
        eps = float(rational_epsilon(epsilon))
        beta = np.exp(-eps * (30 - scores[1:]) / 2)
        exact = 1 / (1 + beta.sum())
        bound = central_recall_bound(scores, 1, epsilon)
        assert bound == pytest.approx(max(0.0, 1 - beta.sum()))
        assert bound <= exact
    assert central_recall_bound(np.array([5, 5, 1]), 1, 1.0) == 0.0  # a tie at the k-th count


@pytest.fixture(scope="module")
def pem_gap() -> dict[str, Any]:
    pem = mechanism_from_config({"mechanism": "pem", "epsilon": 4.0, "max_length": 4})
    options = GapOptions(top=10, vocabulary=1000, repetitions=10)
    return simulated_kind_gap(pem, 20_000, parse_simulation("zipf:1.1"), options, seed=11)


def test_heavy_hitters_central_selection_against_its_bound(pem_gap: dict[str, Any]) -> None:
    top = pem_gap["simulation"]["top_k"]
    k, runs = top["k"], 10
    for name, result in top["central"].items():
        beta = 1 - result["recall_bound"]  # E[misses per run] <= k beta
        misses = round((1 - result["recall"]) * k * runs)
        # Markov: P[misses >= 20 E] <= 0.05
        assert misses <= max(1, 20 * k * beta * runs), name
        assert result["answered"] == k and result["runs"] == runs
    svt = pem_gap["simulation"]["above_threshold"]["central"]["sparse_vector"]
    assert svt["answered"] <= svt["cutoff"] and svt["recall"] is not None


def test_heavy_hitters_local_decoder_against_its_guarantees(pem_gap: dict[str, Any]) -> None:
    simulation = pem_gap["simulation"]
    # E[false discoveries] <= alpha = 0.05: two or more has probability at most 0.025
    assert simulation["local_false_discoveries"] <= 1
    threshold = pem_gap["detection"]["local_frequency"]
    estimate = simulation["local_estimate"]
    significant = {item["value"] for item in estimate["items"] if item["significant"]}
    # a string held by twice the detection threshold has an expected z of at least twice the
    # critical z (about 4 sd above it): found unless its prefixes were lost at an earlier level
    true_frequencies = simulation["top_k"]["true_frequencies"]
    sure = [value for value, f in true_frequencies.items() if f >= 2 * threshold]
    assert sure and set(sure) <= significant
    local = simulation["top_k"]["local"]
    assert local["correct"] <= local["answered"] <= top_k_size(pem_gap)
    # the price of locality in selection: the curator's recall is at least the local one's
    assert simulation["top_k"]["central"]["exponential_mechanism"]["recall"] >= local["recall"]


def top_k_size(document: dict[str, Any]) -> int:
    return int(document["simulation"]["top_k"]["k"])


def test_heavy_hitter_detection_thresholds_exact() -> None:
    pem = mechanism_from_config({"mechanism": "pem", "epsilon": 2.0, "max_length": 4})
    detection = kind_gap(pem, 50_000, GapOptions(vocabulary=500))["detection"]
    assert detection["central_laplace_frequency"] == pytest.approx(
        (2 / 2.0) * math.log(500 / (2 * 0.05)) / 50_000
    )
    assert isinstance(pem, PEM)
    p, q = pem.p_star, pem.q_star
    from scipy.stats import norm

    n_last = 50_000 / pem.levels
    expected = norm.isf(0.05 / 500) * math.sqrt(q * (1 - q) / n_last) / (p - q)
    assert detection["local_frequency"] == pytest.approx(expected, rel=1e-9)


def test_sketch_gap_runs_against_the_vocabulary() -> None:
    cms = mechanism_from_config(
        {"mechanism": "cms", "epsilon": 4.0, "m": 1024, "hashes": 16, "max_length": 4}
    )
    document = simulated_kind_gap(
        cms, 10_000, parse_simulation("zipf"), GapOptions(top=5, repetitions=3), seed=2
    )
    assert document["kind"] == "sketch" and document["detection"]["local_frequency"] > 0
    assert document["simulation"]["vocabulary"] == 1000
    assert len(document["simulation"]["local_estimate"]["items"]) == 1000


# ---- marginals, key-value, distributions, ranges ------------------------------------------------

MULTI = {
    "mechanism": "multi",
    "epsilon": 2.0,
    "protocol": "smp",
    "attributes": [{"name": "os", "k": 3}, {"name": "v", "k": 5}, {"name": "c", "k": 4}],
    "marginals": [["os", "v"], ["v", "c"]],
}


def test_multi_gap_exact_and_measured() -> None:
    m = mechanism_from_config(MULTI)
    assert isinstance(m, Multi)
    n = 20_000
    document = simulated_kind_gap(m, n, parse_simulation("zipf"), GapOptions(), seed=5)
    tables = document["tables"]
    assert [t["attributes"] for t in tables] == [["os", "v"], ["v", "c"]]
    laplace = 2 * (2 * 2 / 2.0) ** 2 / n**2  # two tables: Delta_1 = 4 under replace
    sigma = central_gaussian_sigma(2.0, 1e-6)
    for j, table in enumerate(tables):
        cells = table["cells"]
        assert table["ldp_cell_variance"] == pytest.approx(
            float(np.mean(m.variance(n, j, np.full(cells, 1 / cells))))
        )
        assert table["central_laplace_cell_variance"] == pytest.approx(laplace)
        assert table["central_gaussian_cell_variance"] == pytest.approx(2 * sigma**2 / n**2)
    for table in document["simulation"]["tables"]:
        cells = 15 if table["attributes"] == ["os", "v"] else 20
        expected = table["central_laplace_expected"]
        tolerance = laplace_mse_tolerance(expected, cells * 10)
        assert abs(table["central_laplace_mse"] - expected) < tolerance
        # the LDP tables (consistent) are within their exact variance's reach, far above central
        assert table["ldp_mse"] < 3 * table["ldp_expected"]
        assert table["ldp_mse"] > 100 * table["central_laplace_mse"]


def test_key_value_gap() -> None:
    m = mechanism_from_config({"mechanism": "pckv", "epsilon": 2.0, "k": 10, "padding": 2})
    assert isinstance(m, PCKV)
    n = 10_000
    document = simulated_kind_gap(m, n, parse_simulation("zipf"), GapOptions(), seed=7)
    b = 2 * (2 * 2) / 2.0  # half the budget each, Delta = 2 l under replace
    assert document["frequency"]["central_laplace_variance"] == pytest.approx(2 * b * b / n**2)
    assert document["frequency"]["ldp_variance_at_zero"] == pytest.approx(
        float(m.frequency_variance(n, np.zeros(1))[0])
    )
    frequency = document["simulation"]["frequency"]
    expected = frequency["central_laplace_expected"]
    assert abs(frequency["central_laplace_mse"] - expected) < laplace_mse_tolerance(expected, 100)
    mean = document["simulation"]["mean"]
    assert mean["keys"] == 10 and mean["ldp_mse"] > mean["central_laplace_mse"]
    # the delta method is a first-order figure: the measured error is of its size
    assert mean["central_laplace_mse"] < 3 * mean["central_laplace_delta_method"]


def test_distribution_gap() -> None:
    m = mechanism_from_config(
        {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0, "upper": 10, "bins": 16}
    )
    n = 20_000
    document = simulated_kind_gap(m, n, parse_simulation("lognormal"), GapOptions(), seed=1)
    assert document["central_laplace_bucket_variance"] == pytest.approx(4 * 2 * 1.0 / n**2)
    simulation = document["simulation"]
    w1 = simulation["wasserstein_1"]
    # both CDFs are close to the truth on a range of 10; the curator's much closer
    assert w1["ldp"] < 0.5 and w1["central_laplace"] < w1["ldp"]
    bucket = simulation["bucket_mse"]
    # clipping at zero only removes noise mass from empty buckets: at most the unclipped figure
    expected = bucket["central_laplace_expected_before_clipping"]
    assert bucket["central_laplace"] < expected + laplace_mse_tolerance(expected, 16 * 10)
    assert [q["q"] for q in simulation["quantiles"]] == [0.5, 0.9, 0.99]
    hierarchical = mechanism_from_config({"mechanism": "hierarchical", "epsilon": 2.0, "k": 16})
    with pytest.raises(ValueError, match="draws numbers"):
        simulated_kind_gap(hierarchical, 100, parse_simulation("lognormal"), GapOptions())


@pytest.mark.parametrize("variant", [{}, {"variant": "haar"}], ids=["b-ary", "haar"])
def test_range_gap_exact_and_measured(variant: dict[str, str]) -> None:
    m = mechanism_from_config({"mechanism": "hierarchical", "epsilon": 2.0, "k": 64, **variant})
    n = 20_000
    document = simulated_kind_gap(m, n, parse_simulation("zipf"), GapOptions(), seed=4)
    b = 2 / 2.0
    for row in document["by_length"]:
        assert row["central_flat"] == pytest.approx(row["length"] * 2 * b * b / n**2)
    assert document["variance_ratio_to_best_central"] > 100
    measured = document["simulation"]["range_mse"]
    for name in ("central_flat", "central_hierarchical"):
        expected = measured[f"{name}_expected"]
        # 400 correlated ranges over 10 runs: the 10 runs are the independent units
        assert abs(measured[name] - expected) < laplace_mse_tolerance(expected, 10)
    assert measured["ldp"] < 3 * measured["ldp_expected"]


# ---- the command -------------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_gap_command_simulates_heavy_hitters(capsys: pytest.CaptureFixture[str]) -> None:
    config = {"mechanism": "pem", "epsilon": 4.0, "max_length": 4}
    code, out, _ = _run(
        capsys, "gap", "--mechanism", json.dumps(config), "--n", "5000", "--simulate",
        "zipf:1.3", "--top", "5", "--repetitions", "2", "--vocabulary", "300", "--seed", "1",
    )  # fmt: skip
    assert code == 0
    document = json.loads(out)
    assert document["kind"] == "discovery" and document["simulation"]["population"] == "zipf:1.3"
    assert document["simulation"]["top_k"]["k"] == 5
    code, table, _ = _run(
        capsys, "gap", "--mechanism", json.dumps(config), "--n", "5000", "--format", "table"
    )
    assert code == 0 and "detection.central_laplace_frequency" in table
    code, _, err = _run(
        capsys, "gap", "--mechanism", json.dumps(config), "--n", "50", "--simulate", "pareto"
    )
    assert code == 2 and "--simulate must be one of" in err
    code, _, err = _run(capsys, "gap", "--mechanism", json.dumps(config), "--n", "50", "--top", "0")
    assert code == 2 and "--top must be a positive integer" in err


def test_gap_command_on_a_stored_shuffled_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shuffled column of a stored campaign comes from the batches it received."""
    epsilon0 = local_epsilon_for(1.0, 1000, 1e-6)
    config = {"mechanism": "grr", "epsilon": epsilon0, "k": 8}
    mechanism = mechanism_from_config(config)
    db = tmp_path / "collector.db"
    rng = np.random.default_rng(4)
    sizes = [1000, 1500]
    with Storage(db) as storage:
        storage.create_campaign(
            {"name": "shuffled", "mechanism": config, "domain": [f"v{i}" for i in range(8)],
             "shuffle": {"min_batch": 1000, "central_epsilon": 1.0, "delta": 1e-6}}
        )  # fmt: skip
        for index, size in enumerate(sizes):
            payloads = mechanism.to_wire(mechanism.perturb(rng.integers(0, 8, size), rng=rng))
            reports = [(secrets.token_hex(16), json.dumps(p)) for p in payloads]
            storage.insert_batch("shuffled", f"batch-{index}", reports, size=size)
    code, out, err = _run(capsys, "gap", "--db", str(db), "--campaign", "shuffled")
    assert code == 0, err
    document = json.loads(out)
    column = document["shuffled_column"]
    assert column["smallest_batch"] == 1000 and column["batches"] == 2
    assert column["central_epsilon"] == numerical_epsilon(epsilon0, 1000, 1e-6)
    assert column["central_epsilon"] <= 1.0 * (1 + 1e-3)  # the campaign's target holds
    assert document["n"] == sum(sizes)
    code, _, err = _run(
        capsys, "gap", "--db", str(db), "--campaign", "shuffled", "--simulate", "zipf"
    )
    assert code == 2 and "--simulate draws its own population" in err


def test_heavy_hitter_truth_with_fewer_strings_than_k() -> None:
    """The top-k truth holds only strings someone holds (never the zero-count rest)."""
    from analysis import estimate
    from analysis.gap import measured_kind_gap

    cms = mechanism_from_config(
        {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 4, "max_length": 8}
    )
    words = [f"w{i}" for i in range(40)]
    values = ["w1"] * 300 + ["w2"] * 200
    raw = estimate(cms, cms.perturb(values, rng=np.random.default_rng(0)), candidates=words)
    truth = {w: values.count(w) for w in words}
    document = measured_kind_gap(cms, raw, truth, GapOptions(top=10, repetitions=2))
    assert document["top_k"]["k"] == 2 and document["top_k"]["truth"] == ["w1", "w2"]
    assert document["above_threshold"]["threshold"] == 200 / 500
    with pytest.raises(ValueError, match="sum to 0"):
        measured_kind_gap(cms, raw, dict.fromkeys(words, 0), GapOptions())


@pytest.mark.parametrize(
    ("config", "spec", "key"),
    [
        ({"mechanism": "fourier", "epsilon": 1.0, "order": 2,
          "attributes": [{"name": n} for n in ("a", "b", "c", "d", "e")]}, "zipf", "sizes"),
        ({"mechanism": "laplace", "epsilon": 1, "lower": 0, "upper": 5}, "lognormal:0.5",
         "ldp_squared_error"),
        ({"mechanism": "rappor", "k": 32, "h": 2, "m": 16, "f": 0.5, "p": 0.5, "q": 0.75},
         "uniform", "ldp_mse"),
    ],
)  # fmt: skip
def test_gap_command_covers_fourier_mean_and_rappor(
    config: dict[str, Any], spec: str, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["gap", "--mechanism", json.dumps(config), "--n", "3000", "--vocabulary", "20"]
    assert cli.main([*arguments, "--format", "json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    kind = mechanism_from_config(config).estimate_kind
    assert exact["kind"] == kind and "simulation" not in exact
    assert cli.main([*arguments, "--simulate", spec, "--seed", "4"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["simulation"]["population"] == parse_simulation(spec).describe()
    assert key in document["simulation"]
    assert cli.main([*arguments, "--format", "table"]) == 0
    assert "variance_ratio" in capsys.readouterr().out
