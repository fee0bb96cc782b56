"""The hierarchical histogram (Hay et al. 2010; Cormode, Kulkarni & Srivastava 2019): exact
privacy, the device side against its declared channel, unbiased consistent ranges with their
exact variance, quantiles, the wire and bad inputs (docs/math/richer-data.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.estimation import DocumentedEstimate, estimate
from analysis.kinds.ranges.estimate import RangeEstimate
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.hierarchical import HaarWavelet, Hierarchical, best_branching
from tests.stats import assert_chi_square, assert_within_z


def tree(epsilon: float, k: int, branching: int | None = None) -> Hierarchical:
    config: dict[str, object] = {"mechanism": "hierarchical", "epsilon": epsilon, "k": k}
    if branching is not None:
        config["branching"] = branching
    m = mechanism_from_config(config)
    assert isinstance(m, Hierarchical)
    return m


def test_branching_by_the_variance_bound() -> None:
    assert best_branching(1024) == 4  # (B - 1) h^2: 100 at B = 2, 75 at B = 4, 112 at B = 8
    assert tree(1.0, 1024).b == 4
    assert tree(1.0, 1024, 2).height == 10


@pytest.mark.parametrize(("epsilon", "k", "branching"), [(1.0, 8, 2), (3.0, 9, 3), (0.5, 7, 2)])
def test_exact_privacy(epsilon: float, k: int, branching: int) -> None:
    m = tree(epsilon, k, branching)
    matrices = list(m.channel_matrices())
    assert len(matrices) >= m.height
    assert all(np.allclose(matrix.sum(axis=1), 1.0) for matrix in matrices)
    worst = m.implemented_epsilon()
    assert worst <= epsilon * (1 + 1e-9)
    assert worst == pytest.approx(epsilon, rel=1e-9)


def test_levels_are_uniform_and_each_level_follows_its_oracle() -> None:
    m = tree(1.0, 16, 4)  # levels of 4 (GRR) and 16 (OUE) nodes
    rng = np.random.default_rng(3)
    value = 13
    reports = m.perturb(np.full(120_000, value), rng=rng)
    levels = reports["level"]
    assert_chi_square(np.bincount(levels, minlength=3)[1:], np.full(2, 0.5), what="levels")
    grr, oue = m.oracles
    assert (grr.name, oue.name) == ("grr", "oue")
    level1 = reports["value"][levels == 1]
    (matrix,) = list(grr.channel_matrices())
    assert_chi_square(np.bincount(level1, minlength=4), matrix[value // 4], what="level 1")
    counts = m.aggregate(reports).counts
    n2 = int((levels == 2).sum())
    p, q = oue.p_star, oue.q_star
    expected = np.full(16, q)
    expected[value] = p
    assert_within_z(counts[4:20] / n2, expected, np.sqrt(expected * (1 - expected) / n2))


def population(k: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(99)
    return np.minimum(rng.geometric(0.15, n) - 1, k - 1)


@pytest.mark.parametrize(("epsilon", "k", "branching"), [(2.0, 32, 4), (1.0, 12, 2)])
def test_ranges_unbiased_with_exact_variance(epsilon: float, k: int, branching: int) -> None:
    m = tree(epsilon, k, branching)
    values = population(k, 2000)
    truth = np.bincount(values, minlength=k) / values.size
    rng = np.random.default_rng(5)
    repetitions = 400
    ranges = [(0, 3), (2, 9), (5, k)]
    results = np.empty((repetitions, len(ranges) + 1))
    for r in range(repetitions):
        est = estimate(m, m.perturb(values, rng=rng))
        results[r, :-1] = [est.range(lo, hi)[0] for lo, hi in ranges]
        results[r, -1] = est.frequencies[1]
    assert isinstance(est, RangeEstimate)
    exact = np.array([est.range_variance(lo, hi, truth) for lo, hi in ranges])
    exact = np.append(exact, est.range_variance(1, 2, truth))
    targets = [truth[lo:hi].sum() for lo, hi in ranges] + [truth[1]]
    assert_within_z(results.mean(axis=0), targets, np.sqrt(exact / repetitions), what="range")
    ratios = results.var(axis=0, ddof=1) / exact
    assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="variance ratio")
    assert est.frequencies.sum() == pytest.approx(1.0)  # consistency with the known total
    # the reported standard error is the exact one at the plug-in frequencies
    assert est.range(2, 9)[1] ** 2 == pytest.approx(est.range_variance(2, 9, est.plug_in))


@pytest.mark.parametrize("variant", ["b-ary", "haar"])
def test_quantiles_of_a_known_population_within_their_intervals(variant: str) -> None:
    # coverage of the true quantile by quantile_interval (nominal 95%) over 200 seeded runs:
    # at least 0.95 - 5.5 * sqrt(0.95 * 0.05 / 200) = 0.865 (the item grid makes it conservative)
    m = haar(2.0, 64) if variant == "haar" else tree(2.0, 64)
    values = population(64, 5000)
    rng = np.random.default_rng(31)
    runs, quantiles = 200, (0.5, 0.9)
    truth = [int(np.quantile(values, q, method="inverted_cdf")) for q in quantiles]
    covered = np.zeros(len(quantiles))
    for _ in range(runs):
        est = estimate(m, m.perturb(values, rng=rng))
        for i, q in enumerate(quantiles):
            low, high = est.quantile_interval(q)
            assert low <= est.quantile(q) <= high
            covered[i] += low <= truth[i] <= high
    assert np.all(covered / runs >= 0.865), covered / runs
    assert isinstance(est, DocumentedEstimate)
    assert est.to_dict()["quantiles"][0]["ci_low"] <= est.to_dict()["quantiles"][0]["value"]
    assert "quantiles" in est.format_table()


def test_range_outside_the_domain_names_lo_and_hi() -> None:
    m = tree(1.0, 8, 2)
    est = estimate(m, m.perturb(np.arange(8), rng=np.random.default_rng(0)))
    with pytest.raises(ValueError, match=r"lo=3, hi=9"):
        est.range(3, 9)
    with pytest.raises(ValueError, match=r"lo=-1"):
        est.range(-1, 2)
    with pytest.raises(ValueError, match=r"lo=4, hi=4"):
        est.range(4, 4)
    with pytest.raises(ValueError, match="q must be"):
        est.quantile(0.0)


def test_wire_round_trip_and_malformed_payloads() -> None:
    m = tree(1.0, 16, 4)
    reports = m.perturb(np.arange(16), rng=np.random.default_rng(1))
    decoded = m.from_wire(m.to_wire(reports))
    assert m.aggregate(decoded) == m.aggregate(reports)
    good, errors = m.parse_wire([[1, 2], [0, 1], [1, 4], [2, 5], "x", [3, 1], [2, "AAAA"]])
    assert len(good) == 1
    assert [e.index for e in errors] == [1, 2, 3, 4, 5, 6]
    assert "level must be" in errors[0].reason


@pytest.mark.parametrize(
    ("field", "value"), [("k", 1), ("k", 2.0), ("branching", 1), ("branching", 99), ("epsilon", -1)]
)
def test_bad_configs_name_the_field(field: str, value: object) -> None:
    config: dict[str, object] = {"mechanism": "hierarchical", "epsilon": 1.0, "k": 8}
    config[field] = value
    with pytest.raises(ValueError, match=field):
        mechanism_from_config(config)


def test_config_round_trip() -> None:
    m = tree(2.0, 100)
    assert mechanism_from_config(m.to_config()) == m


def test_a_device_keeps_its_level_from_its_keyed_source() -> None:
    from client_sdk.secrets_store import DeviceKeys

    m = tree(1.0, 16, 4)
    levels = set()
    for device in range(12):
        keys = DeviceKeys(bytes([device]) * 32, "hierarchical-test")
        reports = m.perturb(np.arange(16), rng=np.random.default_rng(device), permanent=keys)
        assert len(set(reports["level"].tolist())) == 1  # one level per device and campaign
        levels.add(int(reports["level"][0]))
    assert levels == {1, 2}  # and devices spread over the levels


# ---- the Haar wavelet variant ------------------------------------------------------------------


def haar(epsilon: float, k: int) -> HaarWavelet:
    m = mechanism_from_config(
        {"mechanism": "hierarchical", "epsilon": epsilon, "k": k, "variant": "haar"}
    )
    assert isinstance(m, HaarWavelet)
    return m


def test_haar_config_round_trip_and_bad_variant() -> None:
    m = haar(1.0, 12)
    assert m.to_config() == {
        "mechanism": "hierarchical",
        "epsilon": 1.0,
        "k": 12,
        "variant": "haar",
    }
    assert mechanism_from_config(m.to_config()) == m
    assert (m.height, m.coefficients) == (4, 15)  # D = 16 leaves
    with pytest.raises(ValueError, match=r"variant must be 'haar'.*got 'wavelet'"):
        mechanism_from_config(
            {"mechanism": "hierarchical", "epsilon": 1, "k": 8, "variant": "wavelet"}
        )
    with pytest.raises(ValueError, match="branching"):  # the Haar tree is binary: no branching
        mechanism_from_config(
            {"mechanism": "hierarchical", "epsilon": 1, "k": 8, "variant": "haar", "branching": 4}
        )
    with pytest.raises(ValueError, match="k"):
        haar(1.0, 1)


@pytest.mark.parametrize(("epsilon", "k"), [(1.0, 8), (0.5, 11), (3.0, 16)])
def test_haar_exact_privacy(epsilon: float, k: int) -> None:
    m = haar(epsilon, k)
    matrices = list(m.channel_matrices())
    assert [matrix.shape for matrix in matrices] == [
        (k, 1 << level) for level in range(1, m.height + 1)
    ]
    assert all(np.allclose(matrix.sum(axis=1), 1.0) for matrix in matrices)
    worst = m.implemented_epsilon()  # every pair of items, every (level, row, bit)
    assert worst <= epsilon * (1 + 1e-12)
    assert worst == pytest.approx(epsilon, rel=1e-9)


def test_haar_device_side_matches_its_channel() -> None:
    m = haar(1.0, 16)  # levels of 1, 2, 4, 8 coefficients
    rng = np.random.default_rng(21)
    for value in (0, 6, 15):
        reports = m.perturb(np.full(80_000, value), rng=rng)
        levels = reports["level"]
        assert_chi_square(np.bincount(levels, minlength=5)[1:], np.full(4, 0.25), what="levels")
        for level, matrix in enumerate(m.channel_matrices(), start=1):
            outputs = reports["value"][levels == level]
            assert_chi_square(
                np.bincount(outputs, minlength=1 << level), matrix[value], what=f"level {level}"
            )


def test_haar_reconstruction_is_exact_for_a_power_of_two() -> None:
    # with D = k the constrained least squares is the Haar inverse: the true coefficients give
    # back the true leaves exactly
    m = haar(1.0, 16)
    f = np.random.default_rng(2).dirichlet(np.ones(16))
    w, c = m.consistency
    assert np.allclose(w @ (m.design @ f) + c, f)
    padded = haar(1.0, 11)  # padded leaves drop out: exact for every f on the 11 items
    f = f[:11] / f[:11].sum()
    w, c = padded.consistency
    assert np.allclose(w @ (padded.design @ f) + c, f)


@pytest.mark.parametrize(("epsilon", "k"), [(1.0, 16), (2.0, 12)])
def test_haar_ranges_unbiased_with_exact_variance(epsilon: float, k: int) -> None:
    m = haar(epsilon, k)
    values = population(k, 2000)
    truth = np.bincount(values, minlength=k) / values.size
    rng = np.random.default_rng(15)
    repetitions = 400
    ranges = [(0, 3), (2, 9), (5, k), (1, 2)]
    results = np.empty((repetitions, len(ranges)))
    for r in range(repetitions):
        est = estimate(m, m.perturb(values, rng=rng))
        results[r] = [est.range(lo, hi)[0] for lo, hi in ranges]
    assert isinstance(est, RangeEstimate)
    exact = np.array([est.range_variance(lo, hi, truth) for lo, hi in ranges])
    targets = [truth[lo:hi].sum() for lo, hi in ranges]
    assert_within_z(results.mean(axis=0), targets, np.sqrt(exact / repetitions), what="range")
    ratios = results.var(axis=0, ddof=1) / exact
    assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="variance ratio")
    assert est.frequencies.sum() == pytest.approx(1.0)
    assert est.range(2, 9)[1] ** 2 == pytest.approx(est.range_variance(2, 9, est.plug_in))
    assert est.cdf(4) == est.range(0, 5)
    assert "Haar wavelet" in est.format_table()


def test_haar_wire_and_keyed_level() -> None:
    from client_sdk.secrets_store import DeviceKeys

    m = haar(4.0, 64)
    reports = m.perturb(np.arange(64), rng=np.random.default_rng(1))
    assert m.aggregate(m.from_wire(m.to_wire(reports))) == m.aggregate(reports)
    good, errors = m.parse_wire([[1, 1], [0, 1], [1, 2], [3, 7], [3, 8], "x", [2, True]])
    assert len(good) == 2
    assert [e.index for e in errors] == [1, 2, 4, 5, 6]
    assert "level must be" in errors[0].reason and "[0, 2)" in errors[1].reason
    levels = set()
    for device in range(12):
        keys = DeviceKeys(bytes([device]) * 32, "haar-test")
        out = m.perturb(np.arange(64), rng=np.random.default_rng(device), permanent=keys)
        assert len(set(out["level"].tolist())) == 1
        levels.add(int(out["level"][0]))
    assert len(levels) > 2


def test_bary_consistency_is_hay_et_al_two_passes() -> None:
    # the KKT solve equals Hay et al.'s two passes for a complete tree with the root known
    b, m = 2, tree(1.0, 16, 2)
    y = np.random.default_rng(4).normal(size=m.nodes)
    levels = [y[m.offsets[level - 1] : m.offsets[level]] for level in range(1, m.height + 1)]
    z = [levels[-1]]  # bottom-up: leaves at height 1
    for i, noisy in zip(range(2, m.height + 1), reversed(levels[:-1]), strict=True):
        children = z[0].reshape(-1, b).sum(axis=1)
        z.insert(0, ((b**i - b ** (i - 1)) * noisy + (b ** (i - 1) - 1) * children) / (b**i - 1))
    parent = np.ones(1)  # top-down from the known root
    for level_z in z:
        siblings = level_z.reshape(-1, b).sum(axis=1)
        parent = level_z + np.repeat((parent - siblings) / b, b)
    w, c = m.consistency
    assert np.allclose(w @ y + c, parent)
