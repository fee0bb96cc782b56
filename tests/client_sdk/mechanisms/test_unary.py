"""Unary encoding (SUE, OUE) beyond the contract suite: the per-bit channel at a k too large to
enumerate, bit independence, packing and counting, and the rounding of the implemented
probabilities. Tolerances: z = 5.5 standard errors per check, chi-square at p >= 1e-6."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from client_sdk import mechanism_from_config
from client_sdk.mechanisms import unary
from client_sdk.mechanisms.unary import OUE, SUE, UnaryEncoding, column_counts
from client_sdk.randomness import bernoulli_lazy
from tests import stats

WIDE = [SUE(epsilon=1.0, k=64), OUE(epsilon=2.0, k=64), OUE(epsilon=0.5, k=67)]


def declared_one_probabilities(m: UnaryEncoding, x: int) -> np.ndarray:
    """P[bit i = 1 | input x] for every i, from the mechanism's own p* and q*."""
    probabilities = np.full(m.k, m.q_star)
    probabilities[x] = m.p_star
    return probabilities


@pytest.mark.parametrize(
    "threshold",
    [
        1 << 55,  # 1/512: only draws that tie on the first byte (0) can succeed
        (5 << 56) + (1 << 55),  # 5.5/256: half the tied draws succeed
        (200 << 56) + (1 << 56) - 1,  # just below 201/256
        1 << 63,  # 1/2, no tie refinement needed
    ],
)
def test_bernoulli_lazy_implements_threshold_over_two_to_the_64(threshold: int) -> None:
    draws = 2_000_000
    ones = int(bernoulli_lazy(np.random.default_rng(threshold % 1000), threshold, draws).sum())
    p = threshold / 2**64
    stats.assert_within_z(ones / draws, p, math.sqrt(p * (1 - p) / draws), what="rate of ones")


def test_bernoulli_lazy_shape_and_bounds() -> None:
    assert bernoulli_lazy(np.random.default_rng(0), 1 << 63, (3, 5)).shape == (3, 5)
    assert not bernoulli_lazy(np.random.default_rng(0), 0, 1000).any()
    with pytest.raises(ValueError, match="threshold"):
        bernoulli_lazy(np.random.default_rng(0), 1 << 64, 10)


@pytest.mark.parametrize("m", WIDE, ids=lambda m: f"{m.name}-{m.epsilon}-{m.k}")
def test_per_bit_marginals_match_p_and_q(m: UnaryEncoding) -> None:
    x, n = 13, 100_000
    reports = m.perturb(np.full(n, x), rng=np.random.default_rng(31))
    ones = column_counts(reports, m.k)
    probabilities = declared_one_probabilities(m, x)
    std_errors = np.sqrt(n * probabilities * (1 - probabilities))
    stats.assert_within_z(ones, n * probabilities, std_errors, what="ones per bit position")
    # All k positions together: the sum of squared z-scores is chi-square with k dof.
    chi2 = float((((ones - n * probabilities) / std_errors) ** 2).sum())
    assert scipy_stats.chi2.sf(chi2, m.k) >= 1e-6, f"chi-square {chi2:.1f} over {m.k} bits"


@pytest.mark.parametrize("m", WIDE, ids=lambda m: f"{m.name}-{m.epsilon}-{m.k}")
def test_bits_are_pairwise_independent(m: UnaryEncoding) -> None:
    x, n = 13, 100_000
    reports = m.perturb(np.full(n, x), rng=np.random.default_rng(32))
    bits = np.unpackbits(reports, axis=1, count=m.k).astype(bool)
    marginal = declared_one_probabilities(m, x)
    # The true bit with a neighbour, two bits of one byte, two across a byte boundary, far bits.
    for i, j in [(x, x + 1), (x - 1, x), (0, 1), (7, 8), (20, 50), (m.k - 2, m.k - 1)]:
        table = np.bincount(2 * bits[:, i] + bits[:, j], minlength=4)
        pi, pj = marginal[i], marginal[j]
        expected = [(1 - pi) * (1 - pj), (1 - pi) * pj, pi * (1 - pj), pi * pj]
        stats.assert_chi_square(table, expected, what=f"2x2 table of bits {i} and {j}")


def test_rows_stay_aligned_across_chunks() -> None:
    m = OUE(epsilon=4.0, k=1024)
    per_chunk = unary.rows_per_chunk(m.k)
    n = 3 * per_chunk + 123
    values = (np.arange(n) * 7) % m.k
    reports = m.perturb(values, rng=np.random.default_rng(33))
    bits = np.unpackbits(reports, axis=1, count=m.k).astype(bool)
    true_bit = bits[np.arange(n), values]
    for start in range(0, n, per_chunk):
        rows = true_bit[start : start + per_chunk]
        se = math.sqrt(m.p_star * (1 - m.p_star) / rows.size)
        stats.assert_within_z(rows.mean(), m.p_star, se, what=f"true bit in chunk at {start}")
    others = (bits.sum() - true_bit.sum()) / (n * (m.k - 1))
    se = math.sqrt(m.q_star * (1 - m.q_star) / (n * (m.k - 1)))
    stats.assert_within_z(others, m.q_star, se, what="other bits")


@pytest.mark.parametrize("k", [2, 9, 64, 67, 1030])
def test_column_counts_equal_unpacked_sums(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unary, "CHUNK_BITS", 8 * 1024)  # many chunks
    rng = np.random.default_rng(k)
    bits = rng.integers(0, 2, size=(5000, k), dtype=np.uint8)
    packed = np.packbits(bits, axis=1)
    np.testing.assert_array_equal(column_counts(packed, k), bits.sum(axis=0))
    np.testing.assert_array_equal(column_counts(packed[:0], k), np.zeros(k, dtype=np.int64))


def test_reports_are_packed_bits_with_zero_padding() -> None:
    m = SUE(epsilon=0.5, k=67)
    reports = m.perturb(np.arange(1000) % 67, rng=np.random.default_rng(3))
    assert reports.dtype == np.uint8
    assert reports.shape == (1000, 9)
    assert not np.any(reports[:, -1] & 0b00011111)  # 67 = 8*8 + 3: five pad bits
    assert SUE(epsilon=0.5, k=67).perturb(np.zeros(0, dtype=np.int64)).shape == (0, 9)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 10.0])
def test_implemented_probabilities_are_rounded_towards_privacy(epsilon: float) -> None:
    for m, (p, q) in [
        (SUE(epsilon=epsilon, k=16), _sue_formula(epsilon)),
        (OUE(epsilon=epsilon, k=16), (0.5, 1 / (math.exp(epsilon) + 1))),
    ]:
        p_impl, q_impl = m._implemented
        assert p_impl == Fraction(m._thresholds[0], 2**64) and float(p_impl) == m.p_star
        assert q_impl == Fraction(m._thresholds[1], 2**64) and float(q_impl) == m.q_star
        p_ideal, q_ideal = m._ideal_probabilities()
        assert p_ideal - Fraction(1, 2**64) < p_impl <= p_ideal  # p rounded down
        assert q_ideal <= q_impl < q_ideal + Fraction(1, 2**64)  # q rounded up
        assert m.p_star == pytest.approx(p, rel=1e-12) and m.q_star == pytest.approx(q, rel=1e-12)
        worst = p_impl * (1 - q_impl) / (q_impl * (1 - p_impl))  # exact, in rationals
        assert worst <= Fraction(math.exp(epsilon))
        assert float(worst) >= math.exp(epsilon) * (1 - 1e-12)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_variance_matches_the_published_formulas(epsilon: float) -> None:
    e, half = math.exp(epsilon), math.exp(epsilon / 2)
    sue, oue = SUE(epsilon=epsilon, k=100), OUE(epsilon=epsilon, k=100)
    # docs/math/unary-encoding.md (Wang et al. 2017): Var* and the coefficient of f_v.
    assert sue.variance_per_user() == pytest.approx(half / (half - 1) ** 2, rel=1e-12)
    assert sue.frequency_coefficient() == pytest.approx(0.0, abs=1e-12)
    assert oue.variance_per_user() == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-12)
    assert oue.frequency_coefficient() == pytest.approx(1.0, rel=1e-12)


def test_unbiased_with_exact_variance_at_a_wide_domain() -> None:
    m = OUE(epsilon=1.0, k=64)
    values = np.repeat(np.arange(64), np.arange(64) + 1)  # 2080 users, unequal counts
    stats.assert_unbiased_with_exact_variance(m, values, repetitions=400, seed=34)


def test_k_beyond_the_bit_vector_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="k"):
        OUE(epsilon=1.0, k=unary.MAX_BIT_VECTOR_K + 1)
    with pytest.raises(ValueError, match="too large to enumerate"):
        next(SUE(epsilon=1.0, k=unary.MAX_ENUMERATED_K + 1).channel_matrices())


def test_wire_refuses_bad_bit_vectors_naming_the_index() -> None:
    m = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": 12})
    good = m.to_wire(m.perturb(np.array([0, 5]), rng=np.random.default_rng(0)))
    assert all(isinstance(p, str) and len(p) == 3 for p in good)  # 2 bytes -> 3 characters
    _, errors = m.parse_wire([good[0], "AAAA", "AP8", 12, good[1]])
    assert [e.index for e in errors] == [1, 2, 3]
    assert "3 base64 characters" in errors[0].reason
    assert "beyond its 12 bits" in errors[1].reason
    assert "base64 string" in errors[2].reason
    with pytest.raises(ValueError, match="shape"):
        m.to_wire(np.zeros((2, 3), dtype=np.uint8))


def _sue_formula(epsilon: float) -> tuple[float, float]:
    half = math.exp(epsilon / 2)
    return half / (half + 1), 1 / (half + 1)
