"""1BitMean with alpha-point rounding and memoization (client_sdk/mechanisms/onebitmean.py):
exact privacy, the implemented output law, unbiasedness with the exact variance (rounding and
output perturbation included), and what memoization does to an averaging attack."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.mechanisms.onebitmean import OneBitMean
from client_sdk.secrets_store import DeviceKeys
from tests import stats

SECRET = bytes(range(64, 96))
SCOPE = "counter-config-id"
LOWER, UPPER = 0.0, 10.0


def make(**change: Any) -> OneBitMean:
    config = {"mechanism": "onebitmean", "epsilon": 1.0, "lower": LOWER, "upper": UPPER} | change
    m = mechanism_from_config(config)
    assert isinstance(m, OneBitMean)
    return m


# ---- config ------------------------------------------------------------------------------------


def test_config_round_trip_and_defaults() -> None:
    m = make(buckets=4)
    config = m.to_config()
    assert config == {
        "mechanism": "onebitmean",
        "epsilon": 1.0,
        "lower": 0.0,
        "upper": 10.0,
        "buckets": 4,
        "gamma": 0.0,
        "memoize": True,
    }
    assert mechanism_from_config(json.loads(json.dumps(config))) == m
    assert is_memoized(m) and not is_memoized(make(memoize=False))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"buckets": 0}, "buckets"),
        ({"buckets": 1.5}, "buckets"),
        ({"gamma": 0.5}, "gamma"),
        ({"gamma": -0.1}, "gamma"),
        ({"gamma": True}, "gamma"),
        ({"memoize": 1}, "memoize"),
        ({"upper": -1.0}, "upper|lower"),
        ({"epsilon": 0}, "epsilon"),
        ({"dim": 3}, "dim"),
    ],
)
def test_bad_configs_are_refused(change: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make(**change)


# ---- privacy and the output law ----------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, 0.1])
def test_exact_privacy(gamma: float) -> None:
    m = make(gamma=gamma, buckets=3)
    implemented = m.implemented_epsilon()
    assert implemented <= m.privacy_epsilon * (1 + 1e-12)
    assert implemented >= m.privacy_epsilon * (1 - 1e-9)  # tight
    assert m.epsilon_inf == 1.0
    if gamma:
        assert m.privacy_epsilon < 0.9  # flipping helps one report; not unlimited ones
    # Every value's output law lies between the extremes, so no pair of values does worse.
    laws = np.array([m.output_distribution(x) for x in np.linspace(-1.0, 11.0, 61)])
    worst = float(np.max(np.log(laws.max(axis=0) / laws.min(axis=0))))
    assert worst <= m.privacy_epsilon * (1 + 1e-9)


@pytest.mark.parametrize(
    "change", [{"buckets": 4, "gamma": 0.1}, {"buckets": 1}, {"memoize": False, "gamma": 0.2}]
)
def test_reports_follow_the_declared_law(change: dict[str, Any]) -> None:
    m = make(**change)
    rng = np.random.default_rng(51)
    for x in (0.0, 3.3, 10.0):
        bits = m.perturb_independent_devices(np.full(100_000, x), rng=rng)
        p_one = m.output_distribution(x)[1]
        stats.assert_within_z(bits.mean(), p_one, math.sqrt(p_one * (1 - p_one) / bits.size))


def test_the_papers_estimator_and_bound() -> None:
    m, e = make(memoize=False), math.exp(1.0)
    # lower + m (b (e^eps+1) - 1)/(e^eps-1), up to the 2**-64 rounding of the probabilities.
    np.testing.assert_allclose(
        m.estimates(np.array([0, 1])), [-10 / (e - 1), 10 * e / (e - 1)], rtol=1e-12
    )
    bound = 100 / 4 * ((e + 1) / (e - 1)) ** 2
    assert m.worst_case_variance()[0] == pytest.approx(bound, rel=1e-12)
    assert np.all(m.variance(np.linspace(0, 10, 11)) <= bound * (1 + 1e-12))


# ---- estimation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"buckets": 1},
        {"buckets": 5, "gamma": 0.1},
        {"memoize": False},
        {"buckets": 64},
        {"epsilon": 3.0, "buckets": 3, "gamma": 0.05},
    ],
)
def test_unbiased_with_exact_variance(change: dict[str, Any]) -> None:
    """Repeated rounds of a fleet of new devices (own alpha, own bits) over a fixed population:
    the mean estimate is unbiased (z = 5.5) and its variance is sum_i Var_i / n^2, which with
    rounding is the variance of unrounded 1BitMean (relative error sqrt(2/(R-1)), z = 5.5)."""
    m = make(**change)
    rng = np.random.default_rng(61)
    # Off-centre, with mass at the ends, so that every term of the variance matters.
    values = np.concatenate([rng.uniform(6.0, UPPER, 1000), np.repeat([LOWER, UPPER], 250)])
    n, repetitions = values.size, 1000
    bits = m.perturb_independent_devices(np.tile(values, repetitions), rng=rng)
    means = m.estimates(bits).reshape(repetitions, n).mean(axis=1)
    exact = float(m.variance(values).sum()) / n**2
    stats.assert_within_z(means.mean(), values.mean(), math.sqrt(exact / repetitions))
    ratio = means.var(ddof=1) / exact
    stats.assert_within_z(ratio, 1.0, math.sqrt(2 / (repetitions - 1)), what="variance ratio")


@pytest.mark.parametrize(
    "change", [{"buckets": 3, "gamma": 0.1}, {"memoize": False}, {"epsilon": 3.0, "buckets": 1}]
)
def test_variance_is_that_of_one_unbiased_bit(change: dict[str, Any]) -> None:
    """A report is mid + s (2b - 1) with b ~ Bernoulli(P1(x)) (``output_distribution``, checked
    against the sampler above), so an unbiased decoding has variance exactly 4 s^2 P1 (1 - P1)."""
    m = make(**change)
    xs = np.linspace(LOWER - 1, UPPER + 1, 49)
    p_one = np.array([m.output_distribution(x)[1] for x in xs])
    scale = (m.estimates(np.array([1]))[0] - m.estimates(np.array([0]))[0]) / 2
    np.testing.assert_allclose(m.variance(xs), 4 * scale**2 * p_one * (1 - p_one), rtol=1e-9)
    decoded = m.midpoint + scale * (2 * p_one - 1)  # E[estimate]: the clipped value
    np.testing.assert_allclose(decoded, np.clip(xs, LOWER, UPPER), atol=1e-9)


def test_mean_and_error_through_the_numeric_statistic() -> None:
    m = make(buckets=8)
    rng = np.random.default_rng(62)
    values = rng.uniform(2.0, 9.0, 50_000)
    reports = m.perturb_independent_devices(values, rng=rng)
    statistic = m.aggregate(reports[:20_000]) + m.aggregate(reports[20_000:])
    whole = m.aggregate(reports)
    # Float sums merge exactly up to the order of additions (numpy's summation may differ).
    assert statistic.n == whole.n
    np.testing.assert_allclose(statistic.counts, whole.counts, rtol=1e-12)
    se = math.sqrt(float(m.variance(values).sum())) / values.size
    stats.assert_within_z(m.mean(statistic)[0], values.mean(), se)
    from analysis import estimate

    result = estimate(m, reports)
    stats.assert_within_z(np.ravel(result.mean)[0], values.mean(), se)


# ---- memoization --------------------------------------------------------------------------------


def test_alpha_point_rounding_is_unbiased_across_devices() -> None:
    m = make(buckets=4)  # points 0, 2.5, 5, 7.5, 10
    rng = np.random.default_rng(71)
    x, devices = 3.3, 4000
    points = np.array(
        [
            m.rounded_points([x], permanent=DeviceKeys(rng.bytes(32), SCOPE))[0]
            for _ in range(devices)
        ]
    )
    assert set(points.tolist()) == {1, 2}
    up = 0.8 / 2.5  # fractional position of 3.3 in [2.5, 5]
    stats.assert_within_z(np.mean(points == 2), up, math.sqrt(up * (1 - up) / devices))


def test_memoized_reports_are_permanent() -> None:
    m = make(buckets=4)
    rng = np.random.default_rng(72)
    first = m.perturb([3.3] * 50, rng=rng, permanent=DeviceKeys(SECRET, SCOPE))
    assert np.all(first == first[0])
    assert np.array_equal(
        m.perturb([3.3] * 5, rng=rng, permanent=DeviceKeys(SECRET, SCOPE)), first[:5]
    )
    sweep = np.linspace(LOWER, UPPER, 1001)
    keys = m.memo_keys(sweep, permanent=DeviceKeys(SECRET, SCOPE))
    points = m.rounded_points(sweep, permanent=DeviceKeys(SECRET, SCOPE))
    assert len(set(keys)) == len(set(points.tolist())) <= m.buckets + 1
    assert np.all(np.diff(points) >= 0)  # one alpha per device: rounding is monotone
    assert m.lifetime_epsilon == 5.0
    with pytest.raises(ValueError, match="needs permanent=<keyed source>"):
        m.perturb([1.0], rng=rng)
    with pytest.raises(ValueError, match="takes no keyed source"):
        make(memoize=False).perturb([1.0], permanent=DeviceKeys(SECRET, SCOPE))


def test_averaging_attack_without_and_with_memoization() -> None:
    """1,000 reports of x = 8 from one device. Unmemoized, their mean estimate recovers x
    (standard error 0.33). Memoized, the 1,000 reports are one bit: across devices the
    attacker sees 1 at exactly the one-report rate P[b = 1 | x] (z = 5.5)."""
    x, reports, devices = 8.0, 1000, 500
    rng = np.random.default_rng(73)
    plain = make(memoize=False)
    recovered = plain.estimates(plain.perturb(np.full(reports, x), rng=rng)).mean()
    assert abs(recovered - x) <= stats.Z_TOLERANCE * math.sqrt(plain.variance([x])[0] / reports)
    m = make(buckets=2)
    ones = 0
    for _ in range(devices):
        bits = m.perturb(np.full(reports, x), rng=rng, permanent=DeviceKeys(rng.bytes(32), SCOPE))
        assert np.all(bits == bits[0])
        ones += int(bits[0])
    p_one = m.output_distribution(x)[1]
    stats.assert_within_z(ones / devices, p_one, math.sqrt(p_one * (1 - p_one) / devices))


# ---- wire ----------------------------------------------------------------------------------------


def test_wire_round_trip_and_malformed_payloads() -> None:
    m = make(memoize=False)
    reports = m.perturb(np.linspace(0, 10, 20), rng=np.random.default_rng(1))
    payloads = json.loads(json.dumps(m.to_wire(reports)))
    assert set(payloads) <= {0, 1}
    np.testing.assert_array_equal(m.from_wire(payloads), reports)
    parsed, errors = m.parse_wire([1, 2, -1, True, "1", 0.0, None, 0])
    assert parsed.tolist() == [1, 0] and [e.index for e in errors] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="bits"):
        m.estimates(np.array([0, 2]))
