"""client_sdk.randomness: the word sources and the exact samplers every mechanism is built on.

Distributional checks are chi-square tests at fixed seeds with a stated level (p > 1e-6: a
correct sampler fails one in a million runs, and these seeds are fixed, so they pass or fail
deterministically); exactness checks compare with exact rational arithmetic.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from client_sdk.randomness import (
    BYTE_LANE_BITS,
    SYSTEM_RANDOM,
    WORD_BITS,
    WORD_SPAN,
    HmacWordSource,
    _exact_byte,
    _refine_bytes,
    bernoulli,
    bernoulli_bytes,
    bernoulli_lazy,
    byte_tables,
    probability_threshold,
    raw_words,
    resolve_rng,
    sample_subsets,
    threshold_probability,
    uniform_below,
    uniform_below_32,
)
from tests.stats import assert_chi_square

P_FLOOR = 1e-6


def chi_square_uniform(values: np.ndarray, high: int) -> float:
    counts = np.bincount(values, minlength=high)
    assert counts.size == high
    return float(stats.chisquare(counts).pvalue)


def test_the_system_source_gives_uniform_64_bit_words() -> None:
    words = SYSTEM_RANDOM.words(200_000)
    assert words.dtype == np.uint64 and words.size == 200_000
    # Every byte lane is uniform over 256 values (not a seeded test: p > 1e-6 is the level).
    lanes = words.view(np.uint8).reshape(-1, 8)
    for lane in range(8):
        assert chi_square_uniform(lanes[:, lane].astype(np.int64), 256) > P_FLOOR
    assert resolve_rng(None) is SYSTEM_RANDOM


def test_hmac_words_are_hmac_sha256_in_counter_mode_and_consumed_in_order() -> None:
    key = bytes(range(32))
    expected = b"".join(
        hmac.new(key, i.to_bytes(8, "big"), hashlib.sha256).digest() for i in range(3)
    )
    whole = HmacWordSource(key).words(12)
    assert whole.tobytes() == np.frombuffer(expected, dtype="<u8").astype(np.uint64).tobytes()
    split = HmacWordSource(key)
    assert np.array_equal(np.concatenate([split.words(5), split.words(7)]), whole)
    assert not np.array_equal(HmacWordSource(bytes(32)).words(12), whole)
    assert repr(split) == "HmacWordSource(<secret key>)"  # never the key
    with pytest.raises(ValueError, match="16 bytes"):
        HmacWordSource(b"short")


def test_resolve_rng_refuses_other_sources() -> None:
    with pytest.raises(TypeError, match="rng must be"):
        resolve_rng(np.random.RandomState(0))  # type: ignore[arg-type]


@pytest.mark.parametrize("high", [1, 2, 3, 7, 10, 1000, (1 << 33) + 1])
def test_uniform_below_stays_in_range(high: int) -> None:
    draws = uniform_below(np.random.default_rng(1), high, 10_000)
    assert draws.min() >= 0 and draws.max() < high


@pytest.mark.parametrize("high", [3, 7, 10, 97])
def test_uniform_below_is_uniform(high: int) -> None:
    draws = uniform_below(np.random.default_rng(2), high, 100_000)
    assert chi_square_uniform(draws, high) > P_FLOOR


def test_uniform_below_with_a_range_per_draw() -> None:
    highs = np.array([2, 5, 9] * 30_000)
    draws = uniform_below(np.random.default_rng(3), highs, highs.size)
    assert np.all((draws >= 0) & (draws < highs))
    for high in (2, 5, 9):
        assert chi_square_uniform(draws[highs == high], high) > P_FLOOR
    with pytest.raises(ValueError, match="high"):
        uniform_below(np.random.default_rng(3), 0, 5)


@pytest.mark.parametrize("high", [3, 100, 4096, 5000, 1 << 20])
def test_uniform_below_32_is_uniform(high: int) -> None:
    draws = uniform_below_32(np.random.default_rng(4), high, 200_000)
    assert draws.min() >= 0 and draws.max() < high
    if high <= 5000:
        assert chi_square_uniform(draws, high) > P_FLOOR
    else:  # too many cells for counts: compare the top 64 buckets instead
        assert chi_square_uniform(draws * 64 // high, 64) > P_FLOOR


@pytest.mark.parametrize("probability", [Fraction(1, 3), Fraction(2, 7), 0.25, 1e-30, 1.0])
def test_thresholds_round_in_the_asked_direction(probability: float | Fraction) -> None:
    exact = Fraction(probability)
    down = probability_threshold(probability, rounding="down")
    up = probability_threshold(probability, rounding="up")
    assert threshold_probability(down) <= exact or down == WORD_SPAN - 1
    assert threshold_probability(up) >= exact or up == WORD_SPAN - 1
    assert 0 <= up - down <= 1
    with pytest.raises(ValueError, match="probability"):
        probability_threshold(1.5)
    with pytest.raises(ValueError, match="rounding"):
        probability_threshold(0.5, rounding="sideways")


@pytest.mark.parametrize("sampler", [bernoulli, bernoulli_lazy])
@pytest.mark.parametrize("probability", [Fraction(1, 3), Fraction(1, 1000), Fraction(255, 256)])
def test_bernoulli_draws_have_the_threshold_probability(
    sampler: object, probability: Fraction
) -> None:
    threshold = probability_threshold(probability)
    p = float(threshold_probability(threshold))
    n = 400_000
    draws = sampler(np.random.default_rng(5), threshold, n)  # type: ignore[operator]
    assert draws.dtype == np.bool_ and draws.shape == (n,)
    z = (draws.sum() - n * p) / np.sqrt(n * p * (1 - p))
    assert abs(z) < 5.5


def test_the_lazy_bernoulli_resolves_ties_with_the_low_bits() -> None:
    """A threshold whose top byte is 0 and low bits are not: only ties can give 1."""
    threshold = (1 << 55) + 12345  # P = 2**-9 + tiny, all of it from ties on the top byte
    draws = bernoulli_lazy(np.random.default_rng(6), threshold, 2_000_000)
    p = threshold / WORD_SPAN
    z = (draws.sum() - draws.size * p) / np.sqrt(draws.size * p * (1 - p))
    assert abs(z) < 5.5
    assert not bernoulli_lazy(np.random.default_rng(6), 0, 1000).any()


def test_raw_words_of_a_seeded_generator_are_reproducible() -> None:
    a = raw_words(np.random.default_rng(7), 10)
    b = raw_words(np.random.default_rng(7), 10)
    assert a.dtype == np.uint64 and np.array_equal(a, b)


def test_sample_subsets_draws_distinct_uniform_members() -> None:
    subsets = sample_subsets(np.random.default_rng(8), 30_000, 10, 3)  # 3-subsets of [0, 10)
    assert subsets.shape == (30_000, 3)
    assert all(len(set(row)) == 3 for row in subsets[:2000].tolist())
    assert chi_square_uniform(subsets.ravel(), 10) > P_FLOOR


# Thresholds of OUE's q at eps 0.5, 1, 2, 4, 8 and 12, and the extremes of the grid.
BYTE_THRESHOLDS = [
    probability_threshold(1 / (Fraction(math.exp(eps)) + 1), rounding="up")
    for eps in (0.5, 1.0, 2.0, 4.0, 8.0, 12.0)
] + [0, 1, 1 << 63, WORD_SPAN - 1]


def exact_byte_probabilities(threshold: int) -> list[Fraction]:
    """P(byte b) for 8 independent Bernoulli(threshold / 2**64) bits, most significant first."""
    q = threshold_probability(threshold)
    return [q ** b.bit_count() * (1 - q) ** (8 - b.bit_count()) for b in range(256)]


@pytest.mark.parametrize("threshold", BYTE_THRESHOLDS)
def test_byte_tables_implement_the_exact_byte_distribution(threshold: int) -> None:
    """Enumerate the sampler's paths exactly: each 16-bit lane decided by the table (mass
    2**-16), each word after a straddling lane decided by the binary search (mass 2**-80), and
    the words tied with a boundary, which continue with exact arithmetic (their interval split
    among the cells as the cumulative distribution says). The sum per byte is its probability."""
    tables = byte_tables(threshold)
    cumulative = [Fraction(c, 1 << 512) for c in tables.cumulative]
    mass = [Fraction(0)] * 256
    lanes = np.bincount(tables.lane, minlength=257)
    for b in range(256):
        mass[b] += Fraction(int(lanes[b]), 1 << BYTE_LANE_BITS)
    word = Fraction(1, 1 << (BYTE_LANE_BITS + WORD_BITS))
    for u in np.flatnonzero(tables.lane == 256).tolist():
        begin, count = int(tables.start[u]), int(tables.count[u])
        bounds = [int(v) for v in tables.bounds[begin : begin + count]]
        first = int(tables.first[u])
        assert bounds == sorted(bounds) and count >= 1
        edges = [-1, *bounds, WORD_SPAN]
        for i in range(count + 1):  # the words strictly between two boundaries' top bits
            mass[first + i] += max(0, edges[i + 1] - edges[i] - 1) * word
        for w in sorted(set(bounds)):  # a tied word's interval, split exactly
            low = (Fraction(u) * WORD_SPAN + w) * word
            high = low + word
            for b in range(256):
                overlap = min(high, cumulative[b + 1]) - max(low, cumulative[b])
                if overlap > 0:
                    mass[b] += overlap
    assert mass == exact_byte_probabilities(threshold)


@pytest.mark.parametrize("threshold", BYTE_THRESHOLDS[:4])
def test_refinement_and_exact_ties_find_the_cell_of_the_uniform_number(threshold: int) -> None:
    tables = byte_tables(threshold)
    straddling = np.flatnonzero(tables.lane == 256)
    assert straddling.size
    rng = np.random.default_rng(11)
    lanes = rng.choice(straddling, 2000)
    words = raw_words(rng, lanes.size)
    ties = tables.bounds[tables.start[lanes[:50]]]  # words equal to a boundary's top bits
    words[:50] = ties

    def never(size: int) -> np.ndarray:
        raise AssertionError("an untied word must be decided by the search")

    cells, tied = _refine_bytes(tables, lanes[50:].astype(np.int64), words[50:], never)
    assert not tied.any()
    for u, w, cell in zip(lanes[50:].tolist(), words[50:].tolist(), cells.tolist(), strict=True):
        assert cell == _exact_byte(tables.cumulative, (u << 64) | w, 80, never)
    drawn: list[int] = []

    def more(size: int) -> np.ndarray:
        drawn.extend(raw_words(rng, size).tolist())
        return np.array(drawn[-size:], dtype=np.uint64)

    cells, tied = _refine_bytes(tables, lanes[:50].astype(np.int64), words[:50], more)
    assert tied.all() and drawn  # (a boundary on the 80-bit grid is decided at once)
    position = 0
    for u, w, cell in zip(lanes[:50].tolist(), words[:50].tolist(), cells.tolist(), strict=True):
        prefix, bits = (u << 64) | w, 80
        while True:  # the words this draw consumed: until its interval lies in one cell
            scale = 512 - bits
            if (prefix << scale) >= tables.cumulative[cell] and (
                (prefix + 1) << scale
            ) <= tables.cumulative[cell + 1]:
                break
            prefix, bits = (prefix << 64) | drawn[position], bits + 64
            position += 1
    assert position == len(drawn)


@pytest.mark.parametrize("threshold", BYTE_THRESHOLDS[:5])
def test_bernoulli_bytes_follow_the_byte_distribution(threshold: int) -> None:
    draws = bernoulli_bytes(np.random.default_rng(12), threshold, (500_000, 2))
    assert draws.dtype == np.uint8 and draws.shape == (500_000, 2)
    observed = np.bincount(draws.ravel(), minlength=256)
    assert_chi_square(observed, [float(p) for p in exact_byte_probabilities(threshold)])
    bits = np.unpackbits(draws, axis=1).astype(float)  # and no dependence between bytes
    q = float(threshold_probability(threshold))
    covariance = np.cov(bits[:, 7], bits[:, 8])[0, 1]
    assert abs(covariance) < 5.5 * q * (1 - q) / math.sqrt(bits.shape[0])


def test_bernoulli_bytes_with_the_csprng_and_bad_thresholds() -> None:
    threshold = BYTE_THRESHOLDS[1]
    draws = bernoulli_bytes(None, threshold, 200_000)
    q = float(threshold_probability(threshold))
    ones = np.unpackbits(draws).sum()
    assert abs(ones - 8 * draws.size * q) < 5.5 * math.sqrt(8 * draws.size * q * (1 - q))
    assert not bernoulli_bytes(None, 0, 100).any()
    with pytest.raises(ValueError, match="threshold"):
        bernoulli_bytes(None, WORD_SPAN, 10)
