"""Fourier marginals of binary attributes (Cormode, Kulkarni & Srivastava, SIGMOD 2018): exact
privacy over every pair of input tuples, the device side against the declared channel, unbiased
cells with their exact variance, the wire and bad configs (docs/math/marginals.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.kinds.fourier.estimate import FourierEstimate
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.fourier import Fourier
from client_sdk.secrets_store import DeviceKeys
from tests.stats import assert_chi_square, assert_within_z


def fourier(d: int, order: int = 2, epsilon: float = 1.0) -> Fourier:
    attributes = [{"name": f"b{j}"} for j in range(d)]
    m = mechanism_from_config(
        {"mechanism": "fourier", "epsilon": epsilon, "attributes": attributes, "order": order}
    )
    assert isinstance(m, Fourier)
    return m


@pytest.mark.parametrize(("d", "order"), [(1, 1), (2, 2), (3, 1), (3, 2), (4, 3), (4, 4)])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_exact_privacy_over_every_pair_of_tuples(d: int, order: int, epsilon: float) -> None:
    m = fourier(d, order, epsilon)
    (matrix,) = list(m.channel_matrices())
    assert matrix.shape == (2**d, 2 * m.coefficients)
    assert np.allclose(matrix.sum(axis=1), 1.0)
    worst = m.implemented_epsilon()
    assert worst <= epsilon + 1e-12
    assert worst == pytest.approx(epsilon, rel=1e-9)  # tight: the claim is not loose


def test_device_side_matches_the_declared_channel() -> None:
    m = fourier(3, 2, 1.5)
    (matrix,) = list(m.channel_matrices())
    rng = np.random.default_rng(7)
    for row, tuple_ in enumerate([(0, 0, 0), (1, 0, 1), (1, 1, 1)]):
        assert row < 3
        index = int(np.ravel_multi_index(tuple_, (2, 2, 2)))
        reports = m.perturb(np.tile(tuple_, (60_000, 1)), rng=rng)
        outputs = 2 * reports["coefficient"] + reports["bit"]
        observed = np.bincount(outputs, minlength=2 * m.coefficients)
        assert_chi_square(observed, matrix[index], what=f"outputs of {tuple_}")


def test_cells_unbiased_with_exact_variance() -> None:
    m = fourier(3, 2, 1.0)
    rng = np.random.default_rng(11)
    n, repetitions = 1500, 400
    x = (rng.random((n, 3)) < [0.2, 0.5, 0.7]).astype(np.int64)
    x[:, 1] = np.where(rng.random(n) < 0.6, x[:, 0], x[:, 1])  # correlated b0 and b1
    cells = np.empty((repetitions, 4))
    one_way = np.empty((repetitions, 2))
    for r in range(repetitions):
        est = FourierEstimate(n, 0.95, {}, m.aggregate(m.perturb(x, rng=rng)), m)
        cells[r] = est.raw_marginal("b1", "b0").frequencies.ravel()
        one_way[r] = est.raw_marginal("b2").frequencies
    truth = np.bincount(x[:, 1] * 2 + x[:, 0], minlength=4) / n
    exact = m.cell_variance(n, 2, truth)
    assert_within_z(cells.mean(axis=0), truth, np.sqrt(exact / repetitions), what="cells")
    ratios = cells.var(axis=0, ddof=1) / exact
    assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="cell variance ratio")
    truth_1 = np.bincount(x[:, 2], minlength=2) / n
    exact_1 = m.cell_variance(n, 1, truth_1)
    assert_within_z(one_way.mean(axis=0), truth_1, np.sqrt(exact_1 / repetitions), what="1-way")
    ratios_1 = one_way.var(axis=0, ddof=1) / exact_1
    assert_within_z(ratios_1, 1.0, math.sqrt(2 / (repetitions - 1)), what="1-way variance ratio")
    # the raw marginal's standard errors are the exact ones at the projected cells
    se = est.raw_marginal("b1", "b0").std_errors.ravel()
    assert np.all(se > 0) and np.allclose(se, np.sqrt(exact), rtol=0.05)


def test_post_processed_marginals_are_consistent_with_intervals() -> None:
    m = fourier(5, 2, 1.0)
    rng = np.random.default_rng(5)
    n = 20_000
    x = (rng.random((n, 5)) < [0.05, 0.5, 0.3, 0.9, 0.5]).astype(np.int64)
    x[:, 4] = x[:, 1]
    est = FourierEstimate(n, 0.95, {}, m.aggregate(m.perturb(x, rng=rng)), m, replicates=200)
    tables = {(a, b): est.marginal(f"b{a}", f"b{b}") for a in range(5) for b in range(a + 1, 5)}
    for t in tables.values():
        assert np.all(t.frequencies >= 0) and t.frequencies.sum() == pytest.approx(1.0)
        assert t.ci_low is not None and t.ci_high is not None
        assert np.all(t.ci_low <= t.frequencies + 1e-12)
        assert np.all(t.frequencies <= t.ci_high + 1e-12)
    for a in range(5):  # every table's 1-way marginal of b_a agrees
        sums = [
            t.frequencies.sum(axis=1 if pair[0] == a else 0)
            for pair, t in tables.items()
            if a in pair
        ]
        assert np.ptp(np.array(sums), axis=0).max() < 2e-3
    covered, total = 0, 0
    for (a, b), t in tables.items():
        truth = np.bincount(x[:, a] * 2 + x[:, b], minlength=4).reshape(2, 2) / n
        assert t.ci_low is not None and t.ci_high is not None
        covered += int(np.sum((t.ci_low <= truth + 1e-12) & (truth <= t.ci_high + 1e-12)))
        total += truth.size
    assert covered / total >= 0.85  # 40 cells of nominal 95% intervals
    assert est.marginal("b4", "b1").frequencies.shape == (2, 2)
    assert len(est.to_dict()["tables"]) == 10


def test_the_device_draws_one_coefficient_from_its_keyed_source() -> None:
    m = fourier(4, 2)
    keys = DeviceKeys(b"k" * 32, "campaign")
    x = np.zeros((50, 4), dtype=np.int64)
    first = m.perturb(x, permanent=keys, rng=np.random.default_rng(0))
    again = m.perturb(x[:3], permanent=keys, rng=np.random.default_rng(1))
    assert len(set(first["coefficient"].tolist() + again["coefficient"].tolist())) == 1


def test_wire_round_trip_and_malformed_payloads() -> None:
    m = fourier(3, 2)
    reports = m.perturb(np.array([[0, 1, 1], [1, 0, 0]]), rng=np.random.default_rng(0))
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    good, errors = m.parse_wire([[0, 1], [6, 0], [1, 2], "x", [True, 0], [5, 1]])
    assert len(good) == 2
    assert [(e.index, e.reason) for e in errors] == [
        (1, "coefficient must be an integer in [0, 6)"),
        (2, "bit must be 0 or 1"),
        (3, "payload must be [coefficient, bit]"),
        (4, "coefficient must be an integer in [0, 6)"),
    ]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"attributes": [{"name": "a"}, {"name": "b", "k": 3}]}, r"attributes\[1\]\.k must be 2"),
        ({"attributes": [{"name": "a"}, {"name": "b", "k": 1}]}, r"attributes\[1\]\.k"),
        ({"attributes": [{"name": "a"}, {"name": "a"}]}, "distinct"),
        ({"order": 3}, "order must be"),
        ({"order": 0}, "order must be"),
        ({"attributes": [{"name": "a", "labels": ["x"]}, {"name": "b"}]}, r"labels must be 2"),
        ({"epsilon": -1}, "epsilon"),
    ],
)
def test_bad_configs_name_the_field(change: dict[str, object], match: str) -> None:
    config: dict[str, object] = {
        "mechanism": "fourier",
        "epsilon": 1.0,
        "attributes": [{"name": "a"}, {"name": "b"}],
        "order": 2,
        **change,
    }
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(config)


def test_records_config_round_trip_and_bad_tuples() -> None:
    m = mechanism_from_config(
        {
            "mechanism": "fourier",
            "epsilon": 1.0,
            "attributes": [{"name": "wifi", "labels": ["off", "on"]}, {"name": "dark"}],
        }
    )
    assert isinstance(m, Fourier) and m.order == 2
    assert mechanism_from_config(m.to_config()) == m
    assert m.encode_records([{"wifi": "on", "dark": 0}]).tolist() == [[1, 0]]
    with pytest.raises(ValueError, match="unknown attribute"):
        m.encode_records([{"wifi": "on", "dark": 0, "os": "x"}])
    with pytest.raises(ValueError, match="misses attribute 'dark'"):
        m.encode_records([{"wifi": "on"}])
    with pytest.raises(ValueError, match=r"values\[0, 1\] \(dark\) must be 0 or 1"):
        m.perturb(np.array([[0, 2]]), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="shape"):
        m.perturb(np.array([0, 1]), rng=np.random.default_rng(0))
    est = FourierEstimate(1, 0.95, {}, m.aggregate(m.perturb(np.array([[0, 1]]))), m)
    with pytest.raises(ValueError, match="distinct attributes"):
        est.marginal("wifi", "wifi")
    three = fourier(3, 2)
    est = FourierEstimate(1, 0.95, {}, three.aggregate(three.perturb(np.zeros((1, 3), int))), three)
    with pytest.raises(ValueError, match="at most order = 2"):
        est.marginal("b0", "b1", "b2")
    with pytest.raises(ValueError, match="'os'"):
        est.marginal("os")


def test_many_attributes_are_norm_subbed_table_by_table() -> None:
    m = fourier(25, 3, 2.0)  # C(25, 3) tables of 8 cells: above the consistency limit
    rng = np.random.default_rng(3)
    x = (rng.random((4000, 25)) < 0.3).astype(np.int64)
    est = FourierEstimate(4000, 0.95, {}, m.aggregate(m.perturb(x, rng=rng)), m, replicates=20)
    assert est._tables is None
    marginal = est.marginal("b3", "b17", "b9")
    assert marginal.frequencies.shape == (2, 2, 2) and np.all(marginal.frequencies >= 0)
    assert marginal.frequencies.sum() == pytest.approx(1.0)
    assert marginal.ci_low is not None and np.all(marginal.ci_low <= marginal.frequencies + 1e-12)
    raw = est.raw_marginal("b3", "b17", "b9")
    assert raw.frequencies.sum() == pytest.approx(1.0)  # shared coefficients: sums to one
    assert np.allclose(raw.frequencies.sum(axis=(1, 2)), est.raw_marginal("b3").frequencies)
