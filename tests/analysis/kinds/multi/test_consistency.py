"""CALM marginal tables (Zhang et al., CCS 2018) beyond the raw cells: the choice of the tables,
their exact privacy, maximum-entropy reconstruction, consistency of every post-processed
marginal and its bootstrap intervals (docs/math/marginals.md)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import analysis.kinds.multi.estimate
from analysis.kinds.multi.estimate import (
    MultiEstimate,
    consistent_tables,
    estimate_multi,
    max_entropy,
)
from analysis.streaming import z_value
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.multi import Multi, choose_tables, cover_pairs, pair_cell_variance
from tests.analysis.postprocess.common import oracle
from tests.stats import assert_chi_square, assert_within_z


def calm(ks: tuple[int, ...], marginals: object, epsilon: float = 1.0) -> Multi:
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": epsilon,
            "protocol": "smp",
            "attributes": [{"name": f"a{j}", "k": k} for j, k in enumerate(ks)],
            "marginals": marginals,
        }
    )
    assert isinstance(m, Multi)
    return m


@pytest.mark.parametrize("ks", [(2,) * 10, (2, 4, 6, 10, 15, 20), (3,) * 7])
@pytest.mark.parametrize("size", [2, 3, 4])
def test_covers_hold_every_pair(ks: tuple[int, ...], size: int) -> None:
    tables = cover_pairs(ks, size)
    pairs = {p for t in tables for p in itertools.combinations(t, 2)}
    assert pairs == set(itertools.combinations(range(len(ks)), 2))
    assert all(len(t) <= size for t in tables)


def test_the_table_size_follows_the_noise_term() -> None:
    # many binary attributes at a large epsilon: a few big tables beat 45 pairs
    binary = (2,) * 10
    chosen = choose_tables(4.0, binary)
    assert len(chosen[0]) > 2 and len(chosen) < 45
    scores = {s: pair_cell_variance(4.0, binary, cover_pairs(binary, s)) for s in range(2, 9)}
    assert pair_cell_variance(4.0, binary, chosen) == min(scores.values())
    # large domains: every pair as its own table
    assert choose_tables(1.0, (2, 4, 6, 10, 15, 20)) == cover_pairs((2, 4, 6, 10, 15, 20), 2)
    m = calm((2,) * 6, {"cover": 2}, epsilon=4.0)
    assert m.marginals is not None and len(m.marginals) == len(choose_tables(4.0, (2,) * 6))
    assert mechanism_from_config(m.to_config()) == m
    fixed = calm((2, 3, 2, 2), {"cover": 2, "size": 3})
    assert fixed.marginals is not None and all(len(t) <= 3 for t in fixed.marginals)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_chosen_tables_are_exactly_private_on_whole_tuples(epsilon: float) -> None:
    m = calm((2, 3, 2), {"cover": 2, "size": 2}, epsilon)
    worst = m.implemented_epsilon()
    assert worst <= epsilon + 1e-12 and worst == pytest.approx(epsilon, rel=1e-9)
    m = calm((2, 2, 2, 2), {"cover": 2, "size": 3}, epsilon)
    assert m.implemented_epsilon() <= epsilon + 1e-12


@pytest.mark.parametrize(
    ("marginals", "match"),
    [
        ({"cover": 3}, r"marginals\.cover must be 2"),
        ({"cover": 2, "size": 1}, r"marginals\.size must be"),
        ({"cover": 2, "sizes": 2}, r"marginals as a mapping must be .*'sizes'"),
        ([["a0", "a0"]], r"marginals\[0\] must list 2 to 8 distinct attributes"),
        ([["a0", "b"]], r"marginals\[0\]: attribute must be one of .*'b'"),
        ("pairs", "marginals must be a list"),
    ],
)
def test_bad_marginal_specs_name_the_field(marginals: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        calm((2, 3, 2), marginals)


def test_maximum_entropy_recovers_a_markov_chain_from_its_pairs() -> None:
    rng = np.random.default_rng(2)
    ks = (3, 4, 2)
    p01 = rng.dirichlet(np.ones(12)).reshape(3, 4)
    p2_given_1 = rng.dirichlet(np.ones(2), size=4)  # a0 -- a1 -- a2
    joint = p01[:, :, None] * p2_given_1[None, :, :]
    tables = [joint.sum(axis=2)[None], joint.sum(axis=0)[None]]
    fit = max_entropy((0, 1, 2), ks, tables, [(0, 1), (1, 2)])[0]
    assert np.allclose(fit, joint, atol=1e-9)
    # over (a2, a0) alone the tables constrain only the 1-way marginals: independence
    pair = max_entropy((2, 0), ks, tables, [(0, 1), (1, 2)])[0]
    assert pair.shape == (2, 3)
    assert np.allclose(pair, np.outer(joint.sum(axis=(0, 1)), joint.sum(axis=(1, 2))), atol=1e-9)


def _population(n: int, rng: np.random.Generator) -> np.ndarray:
    latent = rng.integers(0, 2, n)
    x = np.stack(
        [
            (rng.integers(0, k, n) * (rng.random(n) < 0.5) + latent * (k // 2)) % k
            for k in (3, 4, 5)
        ],
        axis=1,
    )
    return x


def test_post_processed_marginals_are_consistent_and_reconstructed() -> None:
    rng = np.random.default_rng(8)
    x = _population(60_000, rng)
    m = calm((3, 4, 5), [["a0", "a1"], ["a1", "a2"]], epsilon=2.0)
    est = estimate_multi(m, m.perturb(x, rng=rng), replicates=100)
    assert isinstance(est, MultiEstimate)
    for names in (("a0", "a1"), ("a2", "a1"), ("a0", "a2"), ("a0", "a1", "a2")):
        marginal = est.marginal(*names)
        f = marginal.frequencies
        assert f.shape == tuple((3, 4, 5)[int(n[1])] for n in names)
        assert np.all(f >= 0) and f.sum() == pytest.approx(1.0)
        assert marginal.ci_low is not None and marginal.ci_high is not None
        assert np.all(marginal.ci_low <= f + 1e-9) and np.all(f <= marginal.ci_high + 1e-9)
        assert np.all(np.isfinite(marginal.std_errors)) and np.all(marginal.std_errors >= 0)
    # a0-a2 is not collected: maximum entropy through a1, agreeing with the tables' 1-way sums
    rebuilt = est.marginal("a0", "a2")
    assert rebuilt.method == "max-entropy" and est.marginal("a0", "a1").method == "consistent"
    assert np.allclose(rebuilt.frequencies.sum(axis=1), est.tables[0].sum(axis=1), atol=1e-6)
    assert np.allclose(rebuilt.frequencies.sum(axis=0), est.tables[1].sum(axis=0), atol=1e-6)
    assert np.abs(est.tables[0].sum(axis=0) - est.tables[1].sum(axis=1)).max() < 2e-3
    three = est.marginal("a2", "a0", "a1").frequencies
    assert np.allclose(three.sum(axis=1), est.tables[1].T, atol=1e-6)
    # the raw cells are the unbiased ones, with exact standard errors
    raw = est.raw_marginal("a1", "a0")
    assert np.allclose(raw.frequencies, est._raw_tables[0].T)
    with pytest.raises(ValueError, match="no table of the config's marginals covers a0, a2"):
        est.raw_marginal("a0", "a2")


def test_bootstrap_intervals_cover_the_collected_cells() -> None:
    rng = np.random.default_rng(21)
    x = _population(40_000, rng)
    m = calm((3, 4, 5), {"cover": 2}, epsilon=1.0)
    covered, total = 0, 0
    for seed in range(3):
        est = estimate_multi(m, m.perturb(x, rng=rng), replicates=200, seed=seed)
        for a, b in itertools.combinations(range(3), 2):
            marginal = est.marginal(f"a{a}", f"a{b}")
            ks = (3, 4, 5)
            counts = np.bincount(x[:, a] * ks[b] + x[:, b], minlength=ks[a] * ks[b])
            truth = counts.reshape(ks[a], ks[b]) / len(x)
            assert marginal.ci_low is not None and marginal.ci_high is not None
            covered += int(np.sum((marginal.ci_low <= truth) & (truth <= marginal.ci_high)))
            total += truth.size
    # 141 cells of nominal 95% intervals: far below would mean intervals too narrow
    assert 0.88 <= covered / total <= 1.0


def test_unknown_attributes_and_too_many_in_a_reconstruction() -> None:
    m = calm((2, 3, 2, 2), [["a0", "a1"], ["a2", "a3"]])
    est = estimate_multi(m, m.perturb(np.zeros((20, 4), int), rng=np.random.default_rng(0)))
    with pytest.raises(ValueError, match="'zz'"):
        est.marginal("a0", "zz")
    with pytest.raises(ValueError, match="at most 3 attributes"):
        est.marginal("a0", "a1", "a2", "a3")
    with pytest.raises(ValueError, match="replicates"):
        estimate_multi(m, est.statistic, replicates=1)
    assert est.marginal("a1", "a2").method == "max-entropy"


def test_tables_take_the_oracle_of_least_exact_variance() -> None:
    from client_sdk.mechanisms.multi import table_oracle

    assert [table_oracle(2.0, c).name for c in (4, 40, 300)] == ["grr", "olh", "oue"]
    for cells in (4, 40, 300):
        chosen = table_oracle(2.0, cells).total_variance()
        others = [
            oracle({"mechanism": name, "epsilon": 2.0, "k": cells})
            for name in ("grr", "oue", "olh")
        ]
        assert chosen == min(o.total_variance() for o in others)


def test_an_olh_table_private_on_the_wire_and_unbiased_with_exact_variance() -> None:
    m = calm((5, 8, 2), [["a0", "a1"], ["a1", "a2"]], epsilon=2.0)
    assert [o.name for o in m.oracles] == ["olh", "grr"]
    small = calm((5, 8), [["a0", "a1"]], epsilon=2.0)
    assert small.implemented_epsilon() <= 2.0 + 1e-12  # every tuple pair, per public seed
    rng = np.random.default_rng(17)
    n, repetitions = 2000, 300
    x = np.stack([rng.integers(0, 5, n), np.minimum(rng.geometric(0.3, n) - 1, 7)], axis=1)
    x = np.concatenate([x, rng.integers(0, 2, (n, 1))], axis=1)
    reports = m.perturb(x, rng=rng)
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    good, errors = m.parse_wire([[0, {"seed": "zz", "y": 0}], [0, 3]])
    assert len(good) == 0 and errors[0].reason.startswith("a0,a1: ")
    cells = np.empty((repetitions, 40))
    for r in range(repetitions):
        cells[r] = m.estimate(m.aggregate(m.perturb(x, rng=rng)), 0)
    truth = np.bincount(x[:, 0] * 8 + x[:, 1], minlength=40) / n
    exact = m.variance(n, 0, truth)
    assert_within_z(cells.mean(axis=0), truth, np.sqrt(exact / repetitions), what="OLH cells")
    ratios = cells.var(axis=0, ddof=1) / exact
    assert_within_z(ratios, 1.0, np.sqrt(2 / (repetitions - 1)), what="OLH variance ratio")


def test_table_reports_match_the_declared_channel() -> None:
    m = calm((2, 3, 2), [["a0", "a1"], ["a1", "a2"]], epsilon=1.0)
    assert [o.name for o in m.oracles] == ["grr", "grr"]
    (matrix,) = list(m.channel_matrices())  # outputs (table, cell), table 0's cells first
    x = (1, 2, 0)
    reports = m.perturb(np.tile(np.array([x]), (80_000, 1)), rng=np.random.default_rng(9))
    index = np.where(reports["attribute"] == 0, 0, 6) + reports["values"][:, 0]
    observed = np.bincount(index, minlength=matrix.shape[1])
    row = (x[0] * 3 + x[1]) * 2 + x[2]
    assert_chi_square(observed, matrix[row], what="table reports")


def test_one_replicate_projects_all_tables_at_once_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate's consistency projects its padded tables in one call: the same bits as
    projecting table by table (a padded cell never enters the support)."""
    m = calm((2, 4, 6, 10, 15, 20), {"cover": 2}, epsilon=0.5)
    x = np.random.default_rng(61).integers(0, 2, (20_000, 6)) * np.array([1, 3, 5, 9, 14, 19])
    raw = estimate_multi(m, m.perturb(x, rng=np.random.default_rng(62)), replicates=0)._raw_tables
    assert min(t.min() for t in raw) < 0  # the projection has work to do
    together = consistent_tables(raw, list(m.units))
    monkeypatch.setattr(
        analysis.kinds.multi.estimate,
        "_norm_sub_all",
        lambda tables: [analysis.kinds.multi.estimate._norm_sub(t) for t in tables],
    )
    apart = consistent_tables(raw, list(m.units))
    assert all(np.array_equal(a, b) for a, b in zip(together, apart, strict=True))


SKEWED_KS = (2, 4, 6, 10, 15, 20)


def _skewed_population(n: int, rng: np.random.Generator) -> np.ndarray:
    """Six attributes with Zipf-like marginals (exponent 1.1, the shape of device models,
    countries or app versions), tied by a latent class (60/30/10%) that rotates each attribute's
    order (by 0, 1 and k // 2 places)."""
    latent = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    columns = []
    for k in SKEWED_KS:
        zipf = 1.0 / np.arange(1, k + 1) ** 1.1
        column = np.empty(n, dtype=np.int64)
        for c, shift in enumerate((0, 1, k // 2)):
            rows = latent == c
            p = np.roll(zipf, shift)
            column[rows] = rng.choice(k, int(rows.sum()), p=p / p.sum())
        columns.append(column)
    return np.stack(columns, axis=1)


@pytest.mark.parametrize(
    ("marginals", "oracles"),
    [
        ({"cover": 2}, None),  # 15 pairs: GRR for the 3 smallest, OUE for the others
        ({"cover": 2}, ["grr"] * 15),
        ({"cover": 2}, ["oue"] * 15),
        ({"cover": 2}, ["olh"] * 15),
        ({"cover": 2, "size": 3}, None),  # 7 triples: big sparse tables, most Norm-Sub work
    ],
)
def test_one_way_marginals_from_tables_are_calibrated(
    marginals: object, oracles: list[str] | None
) -> None:
    """Every attribute lies in several tables: its 1-way marginal combines them, and its
    standard error is that of the combination as computed (not of one table's sum, about twice
    too wide before). The issue's configuration: epsilon 2, n = 200,000. 20 runs x 57 cells:
    RMS z moved by about 0.02-0.03 between seeds and configurations while writing this, and
    the coverage of nominal 95% intervals has a standard error of about 0.007 (more: the cells
    of a run are correlated), so both bands are about 4 of those wide on each side. Before:
    RMS z 0.61-0.68 and coverage 0.996-0.997 with OUE or OLH tables, 0.85 and 0.97 with
    triples; with GRR tables only the smallest table dominated the old average, RMS z 0.96."""
    rng = np.random.default_rng(2026)
    n = 200_000
    x = _skewed_population(n, rng)
    config = calm(SKEWED_KS, marginals, epsilon=2.0).to_config()
    if oracles is not None:
        config["table_oracles"] = oracles
    m = mechanism_from_config(config)
    assert isinstance(m, Multi)
    z = z_value(0.95)
    scores, raw_scores, covered = [], [], []
    for run in range(20):
        est = estimate_multi(m, m.perturb(x, rng=rng), replicates=0, seed=run)
        for a, k in enumerate(SKEWED_KS):
            truth = np.bincount(x[:, a], minlength=k) / n
            marginal, raw = est.marginal(f"a{a}"), est.raw_marginal(f"a{a}")
            scores.append((marginal.frequencies - truth) / marginal.std_errors)
            raw_scores.append((raw.frequencies - truth) / raw.std_errors)
            covered.append(np.abs(marginal.frequencies - truth) <= z * marginal.std_errors)
    for what, values in (("marginal", scores), ("raw_marginal", raw_scores)):
        cells = np.concatenate(values)
        rms = float(np.sqrt(np.mean(cells**2)))
        assert 0.9 <= rms <= 1.1, f"{what}: RMS z {rms:.3f} over {cells.size} cells"
    coverage = float(np.mean(np.concatenate(covered)))
    assert 0.92 <= coverage <= 0.98, f"95% intervals cover {coverage:.3f}"
