"""Multi-attribute protocols SPL, SMP, RS+FD (Wang et al. 2017; Arcolezi et al. 2021): exact
privacy over every pair of input tuples, the device side against the declared channel, unbiased
marginals with their exact variance, the wire and bad configs (docs/math/richer-data.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from analysis.estimation import DocumentedEstimate, estimate
from analysis.kinds.multi.estimate import MultiEstimate
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.multi import Multi, _worst_rsfd_ratio
from tests.stats import assert_chi_square, assert_within_z


def multi(protocol: str, ks: tuple[int, ...], epsilon: float = 1.0) -> Multi:
    attributes = [{"name": f"a{j}", "k": k} for j, k in enumerate(ks)]
    m = mechanism_from_config(
        {"mechanism": "multi", "epsilon": epsilon, "protocol": protocol, "attributes": attributes}
    )
    assert isinstance(m, Multi)
    return m


@pytest.mark.parametrize("protocol", ["spl", "smp", "rsfd"])
@pytest.mark.parametrize(("ks", "epsilon"), [((2, 3), 1.0), ((3, 4), 2.0), ((2, 2, 3), 0.7)])
def test_exact_privacy_over_every_pair_of_tuples(
    protocol: str, ks: tuple[int, ...], epsilon: float
) -> None:
    m = multi(protocol, ks, epsilon)
    (matrix,) = list(m.channel_matrices())
    assert matrix.shape[0] == math.prod(ks)
    assert np.allclose(matrix.sum(axis=1), 1.0)
    worst = m.implemented_epsilon()
    assert worst <= epsilon * (1 + 1e-9)
    assert worst == pytest.approx(epsilon, rel=1e-6)  # tight


def test_published_rsfd_epsilon_is_weaker_under_whole_tuple_neighbours() -> None:
    # Arcolezi et al. run GRR at eps' = ln(d(e^eps - 1) + 1); between tuples that differ in every
    # attribute the ratio is then e^eps' (1.49 at eps = 1, d = 2), not e^eps.
    ks = (3, 4)
    published = math.log(2 * math.expm1(1.0) + 1)
    assert math.log(_worst_rsfd_ratio(published, ks)) == pytest.approx(published, rel=1e-9)
    assert published == pytest.approx(1.49, abs=0.01)
    assert multi("rsfd", ks).epsilon_prime == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("protocol", ["spl", "smp", "rsfd"])
def test_device_side_matches_the_declared_channel(protocol: str) -> None:
    m = multi(protocol, (2, 3))
    (matrix,) = list(m.channel_matrices())
    x = (1, 2)
    reports = m.perturb(np.tile(np.array([x]), (100_000, 1)), rng=np.random.default_rng(4))
    if protocol == "smp":  # outputs (j, y_j), attribute 0's outputs first
        index = np.where(
            reports["attribute"] == 0, reports["values"][:, 0], 2 + reports["values"][:, 0]
        )
    else:
        index = reports["values"][:, 0] * 3 + reports["values"][:, 1]
    observed = np.bincount(index, minlength=matrix.shape[1])
    assert_chi_square(observed, matrix[x[0] * 3 + x[1]], what=protocol)


@pytest.mark.parametrize("protocol", ["spl", "smp", "rsfd"])
def test_marginals_unbiased_with_exact_variance(protocol: str) -> None:
    m = multi(protocol, (3, 5), epsilon=2.0)
    rng = np.random.default_rng(21)
    n = 2000
    x = np.stack([rng.integers(0, 3, n), np.minimum(rng.geometric(0.35, n) - 1, 4)], axis=1)
    repetitions = 400
    estimates = {0: np.empty((repetitions, 3)), 1: np.empty((repetitions, 5))}
    for r in range(repetitions):
        est = estimate(m, m.perturb(x, rng=rng))
        for j, name in enumerate(("a0", "a1")):
            estimates[j][r] = est.marginal(name).frequencies
    for j, k in enumerate((3, 5)):
        truth = np.bincount(x[:, j], minlength=k) / n
        exact = m.variance(n, j, truth)
        assert_within_z(estimates[j].mean(axis=0), truth, np.sqrt(exact / repetitions))
        ratios = estimates[j].var(axis=0, ddof=1) / exact
        assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="variance ratio")
    assert isinstance(est, MultiEstimate)
    assert isinstance(est, DocumentedEstimate)
    marginal = est.marginal("a1")
    assert marginal.frequencies.shape == marginal.std_errors.shape == (5,)
    assert len(est.to_dict()["marginals"]) == 2
    assert "a1" in est.format_table()


def test_unknown_attribute_and_two_way_marginals_are_refused() -> None:
    m = multi("smp", (2, 3))
    est = estimate(m, m.perturb(np.array([[0, 1], [1, 2]]), rng=np.random.default_rng(0)))
    with pytest.raises(ValueError, match="attribute must be one of a0, a1; got 'os'"):
        est.marginal("os")
    with pytest.raises(ValueError, match="need the config's 'marginals'"):
        est.marginal("a0", "a1")


@pytest.mark.parametrize("protocol", ["spl", "smp", "rsfd"])
def test_wire_round_trip_and_malformed_payloads(protocol: str) -> None:
    m = multi(protocol, (2, 16))  # a GRR attribute and (for spl, smp) an OUE one
    reports = m.perturb(np.array([[0, 5], [1, 15], [1, 0]]), rng=np.random.default_rng(2))
    decoded = m.from_wire(m.to_wire(reports))
    assert m.aggregate(decoded) == m.aggregate(reports)
    bad = ["x", [0], [5, 1], [0, -1, 3]]
    good, errors = m.parse_wire(bad)
    assert len(good) == 0 and [e.index for e in errors] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"protocol": "xyz"}, "protocol"),
        ({"attributes": [{"name": "os", "k": 1}]}, r"attributes\[0\]\.k"),
        ({"attributes": [{"name": "os", "k": 2}, {"name": "os", "k": 3}]}, "distinct"),
        ({"attributes": [{"name": "os"}]}, r"attributes\[0\]"),
        ({"attributes": []}, "attributes"),
    ],
)
def test_bad_configs_name_the_field(change: dict[str, object], match: str) -> None:
    config: dict[str, object] = {
        "mechanism": "multi",
        "epsilon": 1.0,
        "protocol": "spl",
        "attributes": [{"name": "os", "k": 3}],
    }
    config.update(change)
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(config)


def test_bad_tuples_and_config_round_trip() -> None:
    m = multi("rsfd", (2, 3))
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        m.perturb(np.array([0, 1]))
    with pytest.raises(ValueError, match=r"values\[1, 1\] \(a1\) must be in \[0, 3\)"):
        m.perturb(np.array([[0, 1], [1, 3]]))
    assert mechanism_from_config(m.to_config()) == m


def tables_mechanism(epsilon: float = 2.0) -> Multi:
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": epsilon,
            "protocol": "smp",
            "attributes": [{"name": "os", "k": 3}, {"name": "v", "k": 2}, {"name": "c", "k": 4}],
            "marginals": [["os", "v"], ["v", "c"], ["os", "c"]],
        }
    )
    assert isinstance(m, Multi)
    return m


def test_tables_exact_privacy_and_config() -> None:
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": 1.0,
            "protocol": "smp",
            "attributes": [{"name": "os", "k": 2}, {"name": "v", "k": 2}, {"name": "c", "k": 2}],
            "marginals": [["os", "v"], ["v", "c"]],
        }
    )
    assert isinstance(m, Multi)
    assert m.implemented_epsilon() == pytest.approx(1.0, rel=1e-9)
    assert m.implemented_epsilon() <= 1.0 + 1e-12
    assert mechanism_from_config(m.to_config()) == m


def test_tables_unbiased_with_exact_variance_and_consistent() -> None:
    m = tables_mechanism()
    rng = np.random.default_rng(31)
    n = 3000
    x = np.stack(
        [rng.integers(0, 3, n), rng.integers(0, 2, n), np.minimum(rng.geometric(0.4, n) - 1, 3)],
        axis=1,
    )
    x[:, 1] = np.where(rng.random(n) < 0.7, x[:, 0] % 2, x[:, 1])  # correlated os and v
    repetitions = 300
    raw = np.empty((repetitions, 6))
    sums = np.empty((repetitions, 3))
    for r in range(repetitions):
        est = estimate(m, m.perturb(x, rng=rng))
        raw[r] = m.estimate(est.statistic, 0)  # the (os, v) table, unbiased
        sums[r] = est._raw_tables[0].sum(axis=1)  # its raw 1-way sums over v
    truth = np.bincount(x[:, 0] * 2 + x[:, 1], minlength=6) / n
    exact = m.variance(n, 0, truth)
    assert_within_z(raw.mean(axis=0), truth, np.sqrt(exact / repetitions), what="cells")
    ratios = raw.var(axis=0, ddof=1) / exact
    assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="cell variance ratio")
    masks = np.array(
        [
            [True, True, False, False, False, False],
            [False, False, True, True, False, False],
            [False, False, False, False, True, True],
        ]
    )
    exact_sums = m.sum_variance(n, 0, masks, truth)
    ratios = sums.var(axis=0, ddof=1) / exact_sums
    assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="sum variance ratio")
    # consistency: non-negative tables summing to one whose shared 1-way marginals agree
    tables = est.tables
    assert all(np.all(t >= 0) and t.sum() == pytest.approx(1.0) for t in tables)
    os_from_first, os_from_third = tables[0].sum(axis=1), tables[2].sum(axis=1)
    assert np.abs(os_from_first - os_from_third).max() < 2e-3
    marginal = est.marginal("v", "os")
    assert marginal.frequencies.shape == marginal.std_errors.shape == (2, 3)
    assert np.allclose(marginal.frequencies, tables[0].T)
    one_way = est.marginal("c")
    assert one_way.frequencies.shape == (4,) and np.all(one_way.std_errors > 0)
    assert len(est.to_dict()["tables"]) == 3


def test_tables_bad_configs_and_queries() -> None:
    base = {
        "mechanism": "multi",
        "epsilon": 1.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 3}, {"name": "v", "k": 2}, {"name": "c", "k": 2}],
    }
    with pytest.raises(ValueError, match=r"marginals\[0\]: attribute must be one of .*'x'"):
        mechanism_from_config({**base, "marginals": [["os", "x"]]})
    with pytest.raises(ValueError, match="protocol 'spl'"):
        mechanism_from_config({**base, "protocol": "spl", "marginals": [["os", "v"]]})
    m = mechanism_from_config({**base, "marginals": [["os", "v"]]})
    est = estimate(m, m.perturb(np.array([[0, 1, 0], [2, 0, 1]]), rng=np.random.default_rng(0)))
    with pytest.raises(ValueError, match=r"no table .* covers c"):
        est.marginal("c")
    with pytest.raises(ValueError, match=r"no table .* covers os, c"):
        est.marginal("os", "c")


COVERED = [{"name": f"a{j}", "k": k} for j, k in enumerate((2, 4, 6, 10, 15, 20))]


def test_cover_writes_its_cost_aware_oracles_and_old_configs_keep_theirs() -> None:
    from client_sdk.mechanisms.multi import TABLE_ORACLES, _oracle, table_oracle

    base = {"mechanism": "multi", "epsilon": 2.0, "protocol": "smp", "attributes": COVERED}
    m = mechanism_from_config({**base, "marginals": {"cover": 2}})
    assert isinstance(m, Multi)
    config = m.to_config()
    assert config["table_oracles"] == [o.name for o in m.oracles] == list(m.table_oracles)
    assert mechanism_from_config(config) == m
    # eps = 2: OUE within 0.5% of OLH's variance wherever OLH is the least, so no OLH table
    assert "olh" not in config["table_oracles"]
    for oracle, size in zip(m.oracles, m.sizes, strict=True):
        variances = {n: _oracle(n, 2.0, size).total_variance() for n in TABLE_ORACLES}
        assert oracle.total_variance() <= min(variances.values()) * 1.005
        cheaper = TABLE_ORACLES[: TABLE_ORACLES.index(oracle.name)]
        assert all(variances[n] > min(variances.values()) * 1.005 for n in cheaper)
    # the same tables listed without oracles (a config written before the field): least variance
    old = mechanism_from_config({**base, "marginals": config["marginals"]})
    assert isinstance(old, Multi) and old.table_oracles is None
    assert [o.name for o in old.oracles] == [table_oracle(2.0, c).name for c in old.sizes]
    assert "olh" in [o.name for o in old.oracles]
    assert "table_oracles" not in old.to_config()
    assert mechanism_from_config(old.to_config()) == old


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"table_oracles": ["grr"]}, r"table_oracles must list one oracle per table \(2\)"),
        ({"table_oracles": "grr"}, r"table_oracles must list .*got 'grr'"),
        ({"table_oracles": ["grr", "rappor"]}, r"table_oracles\[1\] must be one of .*'rappor'"),
        ({"table_oracles": ["oue", 1]}, r"table_oracles\[1\] must be one of grr, oue, olh"),
        ({"marginals": None, "table_oracles": ["grr"]}, "table_oracles needs marginals"),
    ],
)
def test_bad_table_oracles_are_refused(change: dict[str, object], match: str) -> None:
    config = {
        "mechanism": "multi",
        "epsilon": 1.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 2}, {"name": "v", "k": 3}, {"name": "c", "k": 2}],
        "marginals": [["os", "v"], ["v", "c"]],
        **change,
    }
    if config["marginals"] is None:
        del config["marginals"]
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(config)


@pytest.mark.parametrize("oracles", [["grr", "olh"], ["oue", "grr"], ["olh", "oue"]])
def test_given_table_oracles_exactly_private_and_match_the_channel(oracles: list[str]) -> None:
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": 1.5,
            "protocol": "smp",
            "attributes": [{"name": "os", "k": 2}, {"name": "v", "k": 3}, {"name": "c", "k": 2}],
            "marginals": [["os", "v"], ["v", "c"]],
            "table_oracles": oracles,
        }
    )
    assert isinstance(m, Multi)
    assert [o.name for o in m.oracles] == oracles
    assert mechanism_from_config(m.to_config()) == m
    assert m.implemented_epsilon() <= 1.5 + 1e-12  # every tuple pair (OLH: per public seed)
    x = np.tile(np.array([[1, 2, 0]]), (60_000, 1))
    reports = m.perturb(x, rng=np.random.default_rng(21))
    units = np.asarray(reports["attribute"])
    assert_chi_square(np.bincount(units, minlength=2), np.full(2, 0.5), what="table drawn")
    cells = (1 * 3 + 2, 2 * 2 + 0)
    built: list[Any] = list(m.oracles)
    for j, oracle in enumerate(built):
        mine = reports[units == j]
        if oracle.name == "oue":  # the 2**6 bit vectors of the table's 6 cells
            observed = np.bincount(
                oracle.output_index(mine["bits"][:, 0, :1]), minlength=1 << oracle.k
            )
            (channel,) = list(oracle.channel_matrices())
            assert_chi_square(observed, channel[cells[j]], what="OUE table")
            continue
        if oracle.name == "grr":
            observed = np.bincount(mine["values"][:, 0], minlength=oracle.k)
            (channel,) = list(oracle.channel_matrices())
            assert_chi_square(observed, channel[cells[j]], what="GRR table")
            continue
        # OLH: y given the hash of the true cell is randomized response over g buckets
        from client_sdk.mechanisms.local_hashing import local_hash

        g = oracle.buckets
        kept = local_hash(mine["seed"], cells[j], g) == mine["values"][:, 0]
        p = float(oracle._keep_probability)
        assert_chi_square(
            np.bincount(kept.astype(int), minlength=2), np.array([1 - p, p]), what="OLH kept"
        )
