"""client_sdk.randomness: the word sources and the exact samplers every mechanism is built on.

Distributional checks are chi-square tests at fixed seeds with a stated level (p > 1e-6: a
correct sampler fails one in a million runs, and these seeds are fixed, so they pass or fail
deterministically); exactness checks compare with exact rational arithmetic.
"""

from __future__ import annotations

import hashlib
import hmac
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from client_sdk.randomness import (
    SYSTEM_RANDOM,
    WORD_SPAN,
    HmacWordSource,
    bernoulli,
    bernoulli_lazy,
    probability_threshold,
    raw_words,
    resolve_rng,
    sample_subsets,
    threshold_probability,
    uniform_below,
    uniform_below_32,
)

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
