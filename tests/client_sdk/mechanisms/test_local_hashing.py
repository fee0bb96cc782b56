"""Local hashing (BLH, OLH): the hash family, its seeds, the output distribution, the exact
privacy per public seed, the aggregation paths and the estimator at a larger k.

The contract suite (``test_frequency_contract.py``) covers the rest for the small configs in
``cases.py``; its chi-square test skips local hashing (the seed is public randomness), so the
distribution of ``perturb`` is checked here instead.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, WireFormatError
from client_sdk.mechanisms.local_hashing import (
    BLH,
    HASH_PRIME,
    OLH,
    REPORT_DTYPE,
    SEED_SPACE,
    local_hash,
)
from tests import stats

P = (1 << 31) - 1


def reference_hash(seed: int, x: int, g: int) -> int:
    """The family as the module docstring specifies it, independently, in Python integers."""
    a, b = seed // P + 1, seed % P
    return g * ((a * x + b) % P) // P


# (seed, x, g, h) computed once with ``reference_hash``; they pin the family forever, since
# stored reports are decoded with it.
HASH_VECTORS = [
    (0, 0, 2, 0),
    (0, 5, 2, 0),
    (12345678901234567, 0, 2, 1),
    (12345678901234567, 1, 2, 1),
    (12345678901234567, 1023, 4, 1),
    (4611686011984936961, 0, 5, 4),
    (4611686011984936961, 1, 5, 4),
    (4611686011984936961, 2147483645, 21, 0),
    (2685821657736338717, 7, 3, 0),
    (2685821657736338717, 999999, 56, 19),
    (1234567890123456789, 42, 1000, 494),
    (3074457345618258602, 2, 2147483646, 715827886),
    (2147483647, 3, 7, 0),
    (2147483646, 1, 3, 0),
]


def test_hash_vectors_follow_the_documented_formula() -> None:
    assert P == HASH_PRIME
    assert SEED_SPACE == (P - 1) * P
    for seed, x, g, expected in HASH_VECTORS:
        assert reference_hash(seed, x, g) == expected, (seed, x, g)
        assert int(local_hash(np.uint64(seed), x, g)) == expected, (seed, x, g)


def test_vectorized_hash_matches_reference_on_random_and_extreme_seeds() -> None:
    rng = np.random.default_rng(11)
    seeds = [0, 1, P - 1, P, SEED_SPACE - 1, SEED_SPACE - P, *rng.integers(0, SEED_SPACE, 40)]
    items = [0, 1, 2, 1000, P - 3, P - 2, *rng.integers(0, P - 1, 20)]
    for g in (2, 3, 21, 56, 1 << 20, P - 1):
        table = local_hash(np.array(seeds, dtype=np.uint64)[:, None], np.array(items)[None, :], g)
        expected = [[reference_hash(int(s), int(x), g) for x in items] for s in seeds]
        np.testing.assert_array_equal(table, expected)
        assert table.min() >= 0 and table.max() < g


def test_collision_probability_is_exact_and_near_one_over_g() -> None:
    for g in (2, 3, 5, 21, 56, 1000):
        m = OLH(1.0, 10, g=g)
        # Class sizes straight from the intervals of the range reduction.
        sizes = [-(-(j + 1) * P // g) - (-(-j * P // g)) for j in range(g)]
        assert sum(sizes) == P
        expected = Fraction(sum(s * (s - 1) for s in sizes), P * (P - 1))
        assert m.collision_probability == expected
        assert m.collision_probability <= Fraction(1, g)  # universal
        assert Fraction(1, g) - m.collision_probability < Fraction(1, P)
        assert abs(m.q_star - 1 / g) < 2 / P
    assert BLH(1.0, 10).collision_probability == Fraction(1, 2) - Fraction(1, 2 * P)


@pytest.mark.parametrize("config", [("blh", 1.0), ("olh", 0.5), ("olh", 3.0)])
def test_collision_rate_over_drawn_seeds(config: tuple[str, float]) -> None:
    name, epsilon = config
    m: Any = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": 50})
    seeds = m.perturb(np.zeros(200_000, dtype=np.int64), rng=np.random.default_rng(3))["seed"]
    g = m.buckets
    same = local_hash(seeds, 17, g) == local_hash(seeds, 49, g)
    c = float(m.collision_probability)
    stats.assert_within_z(same.mean(), c, math.sqrt(c * (1 - c) / seeds.size), what="collisions")


def test_seeds_cover_the_whole_seed_space() -> None:
    m = OLH(2.0, 100)
    seeds = m.perturb(np.zeros(160_000, dtype=np.int64), rng=np.random.default_rng(4))["seed"]
    assert int(seeds.max()) < SEED_SPACE
    top = (seeds.astype(np.float64) * (16 / SEED_SPACE)).astype(np.int64)
    stats.assert_chi_square(np.bincount(top, minlength=16), np.full(16, 1 / 16), what="top bits")
    low = (seeds % np.uint64(16)).astype(np.int64)
    stats.assert_chi_square(np.bincount(low, minlength=16), np.full(16, 1 / 16), what="low bits")
    # a = seed // P + 1 ranges over [1, P-1]: its top bits are uniform too.
    a = seeds // np.uint64(P) + np.uint64(1)
    a_top = (a.astype(np.float64) * (8 / P)).astype(np.int64)
    stats.assert_chi_square(np.bincount(a_top, minlength=8), np.full(8, 1 / 8), what="a")


def test_seeds_with_the_csprng_are_in_range_and_spread() -> None:
    seeds = OLH(1.0, 10).perturb(np.zeros(20_000, dtype=np.int64))["seed"]
    assert int(seeds.max()) < SEED_SPACE
    top = (seeds.astype(np.float64) * (4 / SEED_SPACE)).astype(np.int64)
    stats.assert_chi_square(np.bincount(top, minlength=4), np.full(4, 1 / 4), what="top bits")


@pytest.mark.parametrize(
    "config", [("blh", 1.0, 6), ("olh", 0.5, 5), ("olh", 1.5, 8), ("olh", 3.0, 12)]
)
def test_agreement_rate_and_uniform_disagreement(config: tuple[str, float, int]) -> None:
    """y == h_seed(x) with probability p; otherwise y is uniform over the g - 1 other buckets."""
    name, epsilon, k = config
    m: Any = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": k})
    g, p = m.buckets, m.p_star
    rng = np.random.default_rng(2025)
    draws = 60_000
    for x in range(k):
        reports = m.perturb(np.full(draws, x), rng=rng)
        hashed = local_hash(reports["seed"], x, g)
        agree = reports["y"] == hashed
        stats.assert_within_z(
            agree.mean(), p, math.sqrt(p * (1 - p) / draws), what=f"agreement for {x}"
        )
        if g > 2:
            shift = (reports["y"][~agree].astype(np.int64) - hashed[~agree]) % g
            observed = np.bincount(shift, minlength=g)
            assert observed[0] == 0
            stats.assert_chi_square(
                observed[1:], np.full(g - 1, 1 / (g - 1)), what=f"disagreeing y for {x}"
            )


def test_disagreement_is_uniform_for_a_larger_g() -> None:
    m = OLH(4.0, 20)  # g = 56
    reports = m.perturb(np.full(300_000, 3), rng=np.random.default_rng(8))
    hashed = local_hash(reports["seed"], 3, m.buckets)
    agree = reports["y"] == hashed
    shift = (reports["y"][~agree].astype(np.int64) - hashed[~agree]) % m.buckets
    observed = np.bincount(shift, minlength=m.buckets)
    assert observed[0] == 0
    stats.assert_chi_square(observed[1:], np.full(m.buckets - 1, 1 / (m.buckets - 1)))


@pytest.mark.parametrize("config", [("blh", 1.0), ("olh", 0.5), ("olh", 3.0), ("olh", 6.0)])
def test_privacy_conditions_on_the_public_seed(config: tuple[str, float]) -> None:
    name, epsilon = config
    m: Any = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": 10})
    g = m.buckets
    matrices = list(m.channel_matrices())
    assert len(matrices) == len(m.check_seeds()) >= 3
    colliding = separating = 0
    for seed, matrix in zip(m.check_seeds(), matrices, strict=True):
        assert matrix.shape == (10, g)
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
        hashed = [reference_hash(seed, x, g) for x in range(10)]
        np.testing.assert_array_equal(matrix.argmax(axis=1), hashed)
        colliding += len(set(hashed)) < 10
        separating += len(set(hashed)) > 1
        ratio = matrix.max(axis=0) / matrix.min(axis=0)
        assert np.all(ratio <= math.exp(epsilon) * (1 + 1e-9))
    assert colliding and separating
    stats.assert_exact_privacy(m)


def test_channel_ratio_is_grr_over_g_with_p_rounded_down() -> None:
    m = OLH(1.5, 8)
    p = m.p_star
    ratio = p * (m.buckets - 1) / (1 - p)
    assert ratio <= math.exp(1.5)
    assert ratio >= math.exp(1.5) * (1 - 1e-12)


@pytest.mark.parametrize("n_reports", [1, 37, 511, 512, 700, 70_000])
def test_support_counts_match_brute_force(n_reports: int) -> None:
    m = OLH(2.0, 40)
    rng = np.random.default_rng(n_reports)
    reports = m.perturb(rng.integers(0, 40, n_reports), rng=rng)
    counts = m.support_counts(reports)
    sample = range(n_reports) if n_reports <= 700 else rng.choice(n_reports, 300, replace=False)
    if n_reports <= 700:
        expected = np.zeros(40, dtype=np.int64)
        for i in sample:
            s, y = int(reports["seed"][i]), int(reports["y"][i])
            for v in range(40):
                expected[v] += reference_hash(s, v, m.buckets) == y
        np.testing.assert_array_equal(counts, expected)
    else:
        table = local_hash(reports["seed"][:, None], np.arange(40)[None, :], m.buckets)
        np.testing.assert_array_equal(counts, (table == reports["y"][:, None]).sum(axis=0))


def test_interval_table_and_start_residues_are_the_exact_formulas() -> None:
    from client_sdk.mechanisms.local_hashing import (
        _INTERVAL_TABLE_MAX,
        _bucket_intervals,
        _start_residues,
    )

    for g in (2, 3, 8, 1001, _INTERVAL_TABLE_MAX, _INTERVAL_TABLE_MAX + 1):
        m = OLH(1.0, 10, g=g)
        assert (m._starts is None) == (g > _INTERVAL_TABLE_MAX)
        y = np.unique(np.r_[0, 1, g // 2, g - 2, g - 1]).astype(np.uint32)
        low, width = m._intervals(y)
        expected_low, expected_width = _bucket_intervals(y, g)
        np.testing.assert_array_equal(low, expected_low)
        np.testing.assert_array_equal(width, expected_width)
        if m._starts is not None:  # every bucket's interval, and they tile [0, P)
            every = np.arange(g, dtype=np.uint32)
            np.testing.assert_array_equal(m._intervals(every)[0], _bucket_intervals(every, g)[0])
            assert m._starts[0] == 0 and m._starts[-1] == HASH_PRIME
    edges = np.array([0, 1, 2, HASH_PRIME // 2, HASH_PRIME - 2, HASH_PRIME - 1])
    b, low = (a.ravel() for a in np.meshgrid(edges, edges))
    rng = np.random.default_rng(3)
    b = np.r_[b, rng.integers(0, HASH_PRIME, 10_000)]
    low = np.r_[low, rng.integers(0, HASH_PRIME, 10_000)]
    got = _start_residues(b.astype(np.uint64), low.astype(np.int64))
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, (b - low) % HASH_PRIME)


@pytest.mark.parametrize("g", [5, 70_000])  # bucket intervals from the table, then computed
def test_support_counts_match_the_hash_table_for_any_g(g: int) -> None:
    m = OLH(1.0, 50, g=g)
    rng = np.random.default_rng(g)
    reports = m.perturb(rng.integers(0, 50, 3000), rng=rng)
    table = local_hash(reports["seed"][:, None], np.arange(50)[None, :], g)
    expected = (table == reports["y"][:, None]).sum(axis=0)
    np.testing.assert_array_equal(m.support_counts(reports), expected)  # incremental
    np.testing.assert_array_equal(
        m.support_counts(reports[:200]), (table[:200] == reports["y"][:200, None]).sum(axis=0)
    )  # direct


def test_support_counts_at_a_large_k_both_paths() -> None:
    m = BLH(1.0, 3000)
    rng = np.random.default_rng(6)
    reports = m.perturb(rng.integers(0, 3000, 2000), rng=rng)
    table = local_hash(reports["seed"][:, None], np.arange(3000)[None, :], 2)
    expected = (table == reports["y"][:, None]).sum(axis=0)
    np.testing.assert_array_equal(m.support_counts(reports), expected)  # incremental
    small = reports[:100]
    np.testing.assert_array_equal(
        m.support_counts(small), (table[:100] == small["y"][:, None]).sum(axis=0)
    )  # direct


@pytest.mark.parametrize(
    ("name", "epsilon", "k"), [("olh", 1.0, 100), ("olh", 4.0, 64), ("blh", 2.0, 100)]
)
def test_unbiased_with_exact_variance_at_a_larger_k(name: str, epsilon: float, k: int) -> None:
    m = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": k})
    assert isinstance(m, FrequencyOracle)
    weights = 1.0 / np.arange(1, k + 1)
    counts = np.maximum(1, np.floor(weights / weights.sum() * 4000)).astype(int)
    values = np.repeat(np.arange(k), counts)
    stats.assert_unbiased_with_exact_variance(m, values, repetitions=1200, seed=21)


def test_olh_buckets_and_config() -> None:
    for epsilon, g in [(0.1, 2), (0.5, 3), (1.0, 4), (1.5, 5), (3.0, 21), (4.0, 56)]:
        m = OLH(epsilon, 10)
        assert m.g == m.buckets == g == max(2, round(math.exp(epsilon) + 1))
        config = m.to_config()
        assert config["g"] == g
        assert mechanism_from_config(config) == m
        assert mechanism_from_config({"mechanism": "olh", "epsilon": epsilon, "k": 10}) == m
    assert OLH(1.0, 10, g=7).buckets == 7
    assert BLH(1.0, 10).to_config() == {"mechanism": "blh", "epsilon": 1.0, "k": 10}


@pytest.mark.parametrize("g", [1, 0, 2.0, True, "3", P])
def test_bad_g_is_refused_naming_the_field(g: object) -> None:
    with pytest.raises(ValueError, match="g must"):
        mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": 10, "g": g})


def test_epsilon_too_large_for_olh_and_k_too_large() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        OLH(30.0, 10)
    with pytest.raises(ValueError, match="k must"):
        BLH(1.0, P)


def test_wire_payloads_are_fixed_width_hex_and_small_integers() -> None:
    m = OLH(3.0, 12)
    reports = m.perturb(np.arange(300) % 12, rng=np.random.default_rng(0))
    payloads = json.loads(json.dumps(m.to_wire(reports)))
    for payload, report in zip(payloads, reports, strict=True):
        assert set(payload) == {"seed", "y"}
        assert len(payload["seed"]) == 16 and payload["seed"] == payload["seed"].lower()
        assert int(payload["seed"], 16) == int(report["seed"])
        assert 0 <= payload["y"] < m.buckets < 2**53
    np.testing.assert_array_equal(m.from_wire(payloads), reports)
    assert m.from_wire([]).dtype == REPORT_DTYPE


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"seed": f"{SEED_SPACE:016x}", "y": 0}, "outside the seed space"),
        ({"seed": "ffffffffffffffff", "y": 0}, "outside the seed space"),
        ({"seed": "0123456789ABCDEF", "y": 0}, "lowercase hex"),
        ({"seed": "0123456789abcdeg", "y": 0}, "lowercase hex"),
        ({"seed": "123", "y": 0}, "16 hex digits"),
        ({"seed": "00000000000000000", "y": 0}, "16 hex digits"),
        ({"seed": 5, "y": 0}, "string"),
        ({"seed": "0000000000000000", "y": 5}, r"y must be in \[0, 5\)"),
        ({"seed": "0000000000000000", "y": -1}, "y must be in"),
        ({"seed": "0000000000000000", "y": 1.0}, "integer"),
        ({"seed": "0000000000000000", "y": True}, "integer"),
        ({"seed": "0000000000000000"}, "exactly the fields"),
        ({"seed": "0000000000000000", "y": 0, "x": 1}, "exactly the fields"),
        (["0000000000000000", 0], "object"),
        ("0000000000000000", "object"),
    ],
)
def test_from_wire_rejects_bad_payloads_naming_index_and_reason(
    payload: object, reason: str
) -> None:
    m = OLH(1.5, 8)  # g = 5
    good = {"seed": f"{SEED_SPACE - 1:016x}", "y": 4}
    reports, errors = m.parse_wire([good, good, payload])
    assert len(reports) == 2 and [e.index for e in errors] == [2]
    with pytest.raises(WireFormatError, match=f"report 2: .*{reason}"):
        m.from_wire([good, good, payload])


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_any_hex_seed_is_accepted_exactly_when_in_the_seed_space(seed: int) -> None:
    m = BLH(1.0, 4)
    reports, errors = m.parse_wire([{"seed": f"{seed:016x}", "y": 1}])
    if seed < SEED_SPACE:
        assert not errors and int(reports["seed"][0]) == seed
    else:
        assert [e.index for e in errors] == [0] and "seed space" in errors[0].reason


def test_aggregate_refuses_reports_outside_the_family() -> None:
    m = OLH(1.5, 8)
    bad = np.zeros(3, dtype=REPORT_DTYPE)
    bad["seed"][1] = SEED_SPACE
    with pytest.raises(ValueError, match=r"reports\[1\]\.seed"):
        m.aggregate(bad)
    bad["seed"][1] = 0
    bad["y"][2] = 5
    with pytest.raises(ValueError, match=r"reports\[2\]\.y"):
        m.aggregate(bad)
    with pytest.raises(ValueError, match="structured"):
        m.aggregate(np.zeros(3, dtype=np.int64))
