"""dBitFlip (client_sdk/mechanisms/dbitflip.py): exact privacy, the implemented channel,
unbiasedness with the exact variance, the reduction to SUE at d = k, and memoization."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np
import pytest

from analysis import estimate
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import WireFormatError
from client_sdk.mechanisms.dbitflip import DBitFlip
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.mechanisms.unary import SUE
from client_sdk.secrets_store import DeviceKeys
from tests import stats

SECRET = bytes(range(32, 64))
SCOPE = "histogram-config-id"


def plain(epsilon: float, k: int, d: int) -> DBitFlip:
    m = mechanism_from_config(
        {"mechanism": "dbitflip", "epsilon": epsilon, "k": k, "d": d, "memoize": False}
    )
    assert isinstance(m, DBitFlip)
    return m


# ---- config ----------------------------------------------------------------------------------


def test_config_round_trip_and_defaults() -> None:
    m = mechanism_from_config({"mechanism": "dbitflip", "epsilon": 1.0, "k": 8, "d": 3})
    assert isinstance(m, DBitFlip) and m.memoize and is_memoized(m)
    config = m.to_config()
    assert config == {"mechanism": "dbitflip", "epsilon": 1.0, "k": 8, "d": 3, "memoize": True}
    assert mechanism_from_config(json.loads(json.dumps(config))) == m
    assert not is_memoized(plain(1.0, 8, 3))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"d": 0}, "d must be"),
        ({"d": 9}, "d must be"),
        ({"d": 2.0}, "d must be"),
        ({"k": 1}, "k must be"),
        ({"epsilon": -1}, "epsilon"),
        ({"memoize": "yes"}, "memoize"),
        ({"colour": 1}, "colour"),
    ],
)
def test_bad_configs_are_refused(change: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mechanism_from_config({"mechanism": "dbitflip", "epsilon": 1.0, "k": 8, "d": 2} | change)
    with pytest.raises(ValueError, match=r"missing d"):
        mechanism_from_config({"mechanism": "dbitflip", "epsilon": 1.0, "k": 8})


# ---- privacy and the channel -------------------------------------------------------------------


@pytest.mark.parametrize(("k", "d"), [(5, 2), (4, 3), (4, 4), (6, 1)])
def test_exact_privacy_is_claimed_and_tight(k: int, d: int) -> None:
    m = plain(1.2, k, d)
    stats.assert_exact_privacy(m)
    expected = 1.2 if d >= 2 else 0.6  # one bit (d = 1) carries eps/2 only
    assert m.privacy_epsilon == pytest.approx(expected, rel=1e-12)
    assert m.privacy_epsilon <= expected
    assert len(list(m.channel_matrices())) == math.comb(k, d)


def test_reports_follow_the_declared_channel() -> None:
    """Joint law of (bucket set, bits) for a fixed value: uniform sets, bits as declared."""
    m = plain(1.0, 5, 2)
    matrices = list(m.channel_matrices())
    sets = list(itertools.combinations(range(5), 2))
    rng = np.random.default_rng(31)
    for x in (0, 3):
        reports = m.perturb(np.full(60_000, x), rng=rng)
        condition = np.array([sets.index(tuple(b)) for b in reports["buckets"].tolist()])
        cell = condition * 4 + m.bits_index(reports)
        observed = np.bincount(cell, minlength=len(sets) * 4)
        expected = np.concatenate([matrix[x] for matrix in matrices]) / len(sets)
        stats.assert_chi_square(observed, expected, what=f"dbitflip reports for input {x}")


# ---- estimation ----------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "d"), [(6, 2), (6, 1), (5, 5)])
def test_unbiased_with_exact_variance(k: int, d: int) -> None:
    m = plain(1.0, k, d)
    stats.assert_unbiased_with_exact_variance(
        m,
        stats.skewed_population(k, 2000),
        repetitions=1000,
        seed=41,
        estimates_fn=stats.fresh_device_estimates,
    )


def test_variance_is_the_papers_formula() -> None:
    """k e^(eps/2) / (n d (e^(eps/2)-1)^2) + f (k/d - 1)/n, up to the 2**-64 rounding of p."""
    k, d, n, eps = 16, 3, 1000, 1.4
    m = plain(eps, k, d)
    f = np.linspace(0, 2 / k, k)
    half = math.exp(eps / 2)
    closed = k * half / (n * d * (half - 1) ** 2) + f * (k / d - 1) / n
    np.testing.assert_allclose(m.variance(n, f), closed, rtol=1e-12)


def test_reduces_to_sue_at_d_equal_k() -> None:
    k, eps = 7, 1.3
    m, sue = plain(eps, k, k), SUE(eps, k)
    # The same p and q up to their rounding to the 2**-64 grid (q = 1 - p here, rounded up there).
    assert (m.p_star, m.q_star) == pytest.approx((sue.p_star, sue.q_star), rel=1e-15)
    f = np.arange(1, k + 1) / (k * (k + 1) / 2)
    np.testing.assert_allclose(m.variance(500, f), sue.variance(500, f), rtol=1e-12)
    assert m.total_variance() == pytest.approx(sue.total_variance(), rel=1e-12)
    reports = m.perturb(stats.skewed_population(k, 3000), rng=np.random.default_rng(2))
    assert np.all(reports["buckets"] == np.arange(k))
    as_sue = np.packbits(reports["bits"], axis=1)  # bit j is bucket j
    np.testing.assert_allclose(
        m.estimate_frequencies(m.aggregate(reports)),
        sue.estimate_frequencies(sue.aggregate(as_sue)),
        rtol=1e-12,
    )


def test_estimate_through_analysis() -> None:
    m = plain(2.0, 10, 3)
    values = stats.skewed_population(10, 20_000)
    result = estimate(m, m.perturb(values, rng=np.random.default_rng(4)))
    truth = np.bincount(values, minlength=10) / len(values)
    stats.assert_within_z(result.frequencies, truth, np.sqrt(m.variance(len(values), truth)))


# ---- wire ------------------------------------------------------------------------------------


def test_wire_round_trip_and_malformed_payloads() -> None:
    m = plain(1.0, 9, 3)
    reports = m.perturb(np.arange(50) % 9, rng=np.random.default_rng(6))
    payloads = json.loads(json.dumps(m.to_wire(reports)))
    decoded = m.from_wire(payloads)
    np.testing.assert_array_equal(decoded, reports)
    good = payloads[0]
    bad = [
        None,
        {"buckets": good["buckets"]},
        {**good, "extra": 1},
        {**good, "buckets": [0, 1]},
        {**good, "buckets": [2, 1, 5]},
        {**good, "buckets": [1, 1, 5]},
        {**good, "buckets": [0, 1, 9]},
        {**good, "buckets": [0, 1, True]},
        {**good, "bits": "////"},
        {**good, "bits": 7},
    ]
    parsed, errors = m.parse_wire([good, *bad, good])
    assert len(parsed) == 2
    assert [e.index for e in errors] == list(range(1, len(bad) + 1))
    with pytest.raises(WireFormatError, match="report 1"):
        m.from_wire([good, *bad])


# ---- memoization -------------------------------------------------------------------------------


def test_memoized_reports_are_permanent_per_pattern() -> None:
    m = DBitFlip(1.0, 12, 3)
    buckets = m.device_buckets(permanent=DeviceKeys(SECRET, SCOPE))
    assert buckets.tolist() == sorted(set(buckets.tolist())) and len(buckets) == 3
    outside = [v for v in range(12) if v not in buckets.tolist()]
    rng = np.random.default_rng(7)
    values = np.array([*outside, *buckets.tolist(), *buckets.tolist()])
    reports = m.perturb(values, rng=rng, permanent=DeviceKeys(SECRET, SCOPE))
    again = m.perturb(values, rng=rng, permanent=DeviceKeys(SECRET, SCOPE))
    np.testing.assert_array_equal(reports, again)  # same value, same report, forever
    assert np.all(reports["buckets"] == buckets)
    first_outside = reports["bits"][0]
    assert all(np.array_equal(row, first_outside) for row in reports["bits"][: len(outside)])
    keys = m.memo_keys(values, permanent=DeviceKeys(SECRET, SCOPE))
    assert len(set(keys)) == 4 == min(m.d + 1, m.k)  # "none" plus one per sampled bucket
    assert m.lifetime_epsilon == pytest.approx(4 * m.privacy_epsilon)
    assert m.memo_keys([0], permanent=DeviceKeys(SECRET, "other")) != m.memo_keys(
        [0], permanent=DeviceKeys(SECRET, SCOPE)
    )


def test_memoization_needs_the_keyed_source() -> None:
    with pytest.raises(ValueError, match="needs permanent=<keyed source>"):
        DBitFlip(1.0, 8, 2).perturb([1], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="permanent must be a keyed source"):
        DBitFlip(1.0, 8, 2).perturb([1], permanent=SECRET)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes no keyed source"):
        plain(1.0, 8, 2).perturb([1], permanent=DeviceKeys(SECRET, SCOPE))


def test_memoized_device_reports_follow_the_channel() -> None:
    """Across many devices (one secret each), one memoized report of value x is a draw of the
    declared channel: uniform bucket sets and bits as declared."""
    m = DBitFlip(1.0, 4, 2)
    matrices = list(m.channel_matrices())
    sets = list(itertools.combinations(range(4), 2))
    rng = np.random.default_rng(9)
    x = 2
    reports = np.concatenate(
        [m.perturb([x], permanent=DeviceKeys(rng.bytes(32), SCOPE)) for _ in range(6000)]
    )
    condition = np.array([sets.index(tuple(b)) for b in reports["buckets"].tolist()])
    observed = np.bincount(condition * 4 + m.bits_index(reports), minlength=len(sets) * 4)
    expected = np.concatenate([matrix[x] for matrix in matrices]) / len(sets)
    stats.assert_chi_square(observed, expected, what="memoized dbitflip reports")


def test_averaging_attack_learns_nothing_beyond_one_report() -> None:
    """1,000 memoized reports of one value are one report: averaging them gives its bits."""
    m = DBitFlip(1.0, 8, 8)  # every bucket sampled: unmemoized, averaging would expose v
    value, rng = 5, np.random.default_rng(10)
    unmemoized = plain(1.0, 8, 8).perturb(np.full(1000, value), rng=rng)
    assert int(np.argmax(unmemoized["bits"].mean(axis=0))) == value
    hits = 0
    devices = 300
    for _ in range(devices):
        reports = m.perturb(
            np.full(1000, value), rng=rng, permanent=DeviceKeys(rng.bytes(32), SCOPE)
        )
        assert np.all(reports["bits"] == reports["bits"][0])
        ones = np.flatnonzero(reports["bits"][0])
        guess = int(rng.choice(ones)) if ones.size else int(rng.integers(8))
        hits += guess == value
    # The Bayes guess from one report (a random set bit) succeeds at the rate of one report.
    (matrix,) = list(m.channel_matrices())
    bayes = float(matrix.max(axis=0).sum() / 8)
    stats.assert_within_z(hits / devices, bayes, math.sqrt(bayes * (1 - bayes) / devices))
