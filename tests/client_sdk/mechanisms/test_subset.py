"""Subset selection beyond the contract suite: the choice of d, the exact e^eps structure of the
channel, membership marginals at a k too large to enumerate, the absence of any order in reports
and on the wire, and the exact small-integer sampler behind Floyd's algorithm.
Tolerances: z = 5.5 standard errors per check, chi-square at p >= 1e-6."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from client_sdk import mechanism_from_config
from client_sdk.mechanisms import subset, unary
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.subset import SS, colex_rank, optimal_subset_size
from client_sdk.mechanisms.unary import column_counts
from client_sdk.randomness import uniform_below_32
from tests import stats


def members(report: np.ndarray, k: int) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(report, count=k))


# ---- the subset size --------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("k", [2, 3, 5, 17, 40])
def test_chosen_d_minimizes_the_exact_total_error(k: int, epsilon: float) -> None:
    chosen = SS(epsilon=epsilon, k=k)
    errors = [SS(epsilon=epsilon, k=k, d=d).total_variance() for d in range(1, k)]
    assert chosen.d == optimal_subset_size(k, epsilon)
    assert chosen.total_variance() <= min(errors) * (1 + 1e-12)


def test_chosen_d_matches_the_reference_table() -> None:
    # docs/math/subset-selection.md, k = 1000: d* and Var* for eps = 0.5, 1, 2, 4, 8 (8: GRR).
    for epsilon, d, var_star in [
        (0.5, 378, 15.64),
        (1, 269, 3.67),
        (2, 119, 0.721),
        (4, 18, 0.074),
        (8, 1, 0.0004),
    ]:
        m = SS(epsilon=epsilon, k=1000)
        assert m.d == d
        assert m.variance_per_user() == pytest.approx(var_star, abs=0.006 * var_star + 5e-5)


def test_d_one_is_grr() -> None:
    for epsilon, k in [(0.5, 2), (1.0, 7), (3.0, 30)]:
        ss, grr = SS(epsilon=epsilon, k=k, d=1), GRR(epsilon=epsilon, k=k)
        assert (ss.p_star, ss.q_star) == (grr.p_star, grr.q_star)


def test_config_pins_d_and_round_trips() -> None:
    m = mechanism_from_config({"mechanism": "ss", "epsilon": 1.0, "k": 64})
    config = m.to_config()
    assert config == {"mechanism": "ss", "epsilon": 1.0, "k": 64, "d": 17}
    assert json.loads(json.dumps(config)) == config
    assert mechanism_from_config(config) == m == SS(epsilon=1.0, k=64, d=17)
    explicit = SS(epsilon=1.0, k=64, d=40)
    assert mechanism_from_config(explicit.to_config()) == explicit != m


@pytest.mark.parametrize("d", [0, 8, -1, 2.0, True, "3"])
def test_bad_d_is_refused_naming_the_field(d: object) -> None:
    with pytest.raises(ValueError, match=r"^d must"):
        mechanism_from_config({"mechanism": "ss", "epsilon": 1.0, "k": 8, "d": d})


# ---- exact channel -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "k", "d"), [(0.5, 5, 2), (1.0, 7, 3), (3.0, 8, 5), (8.0, 6, 1)]
)
def test_every_subset_with_x_is_e_eps_times_every_subset_without(
    epsilon: float, k: int, d: int
) -> None:
    m = SS(epsilon=epsilon, k=k, d=d)
    inside, outside = m.subset_probabilities()
    ratio = inside / outside  # exact rationals, as implemented
    assert ratio <= Fraction(math.exp(epsilon))
    assert float(ratio) >= math.exp(epsilon) * (1 - 1e-12)
    (matrix,) = m.channel_matrices()
    assert matrix.shape == (k, math.comb(k, d))
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
    for x in range(k):
        contains_x = np.array(
            [x in members(np.packbits(row), k) for row in _all_bitmaps_in_rank_order(k, d)]
        )
        np.testing.assert_array_equal(matrix[x, contains_x], float(inside))
        np.testing.assert_array_equal(matrix[x, ~contains_x], float(outside))
    stats.assert_exact_privacy(m)


def test_colex_rank_is_a_bijection() -> None:
    k, d = 9, 4
    bitmaps = _all_bitmaps_in_rank_order(k, d)
    np.testing.assert_array_equal(
        colex_rank(np.packbits(bitmaps, axis=1), k, d), np.arange(math.comb(k, d))
    )


def test_channel_holds_when_chunks_and_blocks_are_tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    # Force many chunks (5 rows each) and Floyd blocks of 2 steps, to exercise every boundary.
    monkeypatch.setattr(unary, "CHUNK_BITS", 5 * 8)
    monkeypatch.setattr(subset, "FLOYD_BLOCK_DRAWS", 10)
    for m in [SS(epsilon=1.0, k=8, d=4), SS(epsilon=1.5, k=8, d=6)]:
        (matrix,) = m.channel_matrices()
        rng = np.random.default_rng(41)
        for x in [0, 3, 7]:
            reports = m.perturb(np.full(12_000, x), rng=rng)
            observed = np.bincount(m.output_index(reports), minlength=matrix.shape[1])
            stats.assert_chi_square(observed, matrix[x], what=f"d={m.d}, input {x}")


# ---- a wide domain (k = 64): marginals and order ----------------------------------------------


@pytest.mark.parametrize("d", [17, 50])
def test_membership_marginals_at_a_wide_domain(d: int) -> None:
    m = SS(epsilon=1.0, k=64, d=d)
    x, n = 21, 100_000
    reports = m.perturb(np.full(n, x), rng=np.random.default_rng(42))
    assert np.all(np.unpackbits(reports, axis=1, count=64).sum(axis=1) == d)
    counts = column_counts(reports, 64)
    probabilities = np.full(64, m.q_star)
    probabilities[x] = m.p_star
    std_errors = np.sqrt(n * probabilities * (1 - probabilities))
    stats.assert_within_z(counts, n * probabilities, std_errors, what="membership per value")
    chi2 = float((((counts - n * probabilities) / std_errors) ** 2).sum())
    assert scipy_stats.chi2.sf(chi2, 64) >= 1e-6, f"chi-square {chi2:.1f} over 64 values"


@pytest.mark.parametrize("x", [0, 30, 63])
def test_the_true_value_has_no_special_position(x: int) -> None:
    """The only order a bitmap has is the order of values; the rank of x among the members (0:
    the first member listed) must follow the hypergeometric law of d-1 uniform others, so being
    first, last or anywhere says nothing beyond membership itself. A sampler that put x first,
    or drew the others unevenly around x, fails here."""
    m = SS(epsilon=2.0, k=64, d=9)
    n = 60_000
    reports = m.perturb(np.full(n, x), rng=np.random.default_rng(43 + x))
    bits = np.unpackbits(reports, axis=1, count=64).astype(bool)
    holds_x = bits[:, x]
    below = bits[holds_x, :x].sum(axis=1)  # members listed before x
    law = scipy_stats.hypergeom(m.k - 1, x, m.size - 1)
    stats.assert_chi_square(
        np.bincount(below, minlength=m.size), law.pmf(np.arange(m.size)), what="rank of x"
    )
    # The members listed first (the smallest member) when x is not a member are what uniform
    # d-subsets of the 63 other values give, too.
    first = np.argmax(bits[~holds_x], axis=1)
    others = np.delete(np.arange(64), x)
    first_other = np.searchsorted(others, first)  # rank of the first member among the others
    # P[smallest of a uniform d-subset of 63 values is the i-th] = C(63-i-1, d-1) / C(63, d).
    law_first = [math.comb(62 - i, m.size - 1) / math.comb(63, m.size) for i in range(63)]
    stats.assert_chi_square(
        np.bincount(first_other, minlength=63), law_first, what="first member without x"
    )


def test_wire_form_is_canonical_and_carries_no_order() -> None:
    m = SS(epsilon=1.0, k=20)  # d = 6
    reports = m.perturb(np.arange(300) % 20, rng=np.random.default_rng(44))
    payloads = m.to_wire(reports)
    rng = np.random.default_rng(45)
    for report, payload in zip(reports[:50], payloads[:50], strict=True):
        listed = members(report, m.k)
        assert listed.size == m.d
        for _ in range(3):  # however the members are listed, the report and payload are one
            bits = np.zeros(m.k, dtype=bool)
            for value in rng.permutation(listed):
                bits[value] = True
            assert m.to_wire(np.packbits(bits)[None, :]) == [payload]
    decoded = m.from_wire(payloads)
    np.testing.assert_array_equal(decoded, reports)
    assert m.to_wire(decoded) == payloads
    # Another spelling of the same bytes is refused: no second encoding exists to hide order in.
    last = payloads[0][-1]
    alias = payloads[0][:-1] + ("B" if last == "A" else "A")
    _, errors = m.parse_wire([alias])
    assert len(errors) == 1


def test_from_wire_checks_the_subset_size() -> None:
    m = SS(epsilon=1.0, k=12, d=3)
    good = m.to_wire(m.perturb(np.array([4]), rng=np.random.default_rng(0)))[0]
    four = m.to_wire(np.packbits(np.array([[1, 1, 1, 1] + [0] * 8], dtype=bool), axis=1))[0]
    two = m.to_wire(np.packbits(np.array([[1, 1] + [0] * 10], dtype=bool), axis=1))[0]
    reports, errors = m.parse_wire([good, four, two, good])
    assert len(reports) == 2
    assert [e.index for e in errors] == [1, 2]
    assert "exactly 3 ones; got 4" in errors[0].reason
    with pytest.raises(ValueError, match=r"report 1: .*exactly 3 ones"):
        m.from_wire([good, two])


def test_unbiased_with_exact_variance_at_a_wide_domain() -> None:
    m = SS(epsilon=1.0, k=64)
    values = np.repeat(np.arange(64), np.arange(64) % 5 + 1)
    stats.assert_unbiased_with_exact_variance(m, values, repetitions=400, seed=46)


# ---- the small-integer sampler -----------------------------------------------------------------


@pytest.mark.parametrize("high", [1, 7, 3000, 4096, 5000, 3 << 30])
def test_uniform_below_32_is_uniform(high: int) -> None:
    draws = 1_200_000
    values = uniform_below_32(np.random.default_rng(high), high, draws)
    assert values.dtype == np.int64 and values.min() >= 0 and values.max() < high
    if high == 1:
        return
    # Every value for small ranges; 12 equal bins of 2**28 values for 3 * 2**30.
    bins = high if high <= 5000 else 12
    observed = np.bincount(values // (high // bins), minlength=bins)
    stats.assert_chi_square(observed, np.full(bins, 1 / bins), what=f"uniform below {high}")


def test_uniform_below_32_broadcasts_a_range_per_row() -> None:
    highs = np.array([[2], [3], [3000]])
    values = uniform_below_32(np.random.default_rng(5), highs, (3, 300_000))
    for high, row in zip(highs[:, 0], values, strict=True):
        assert row.max() < high
        stats.assert_chi_square(np.bincount(row, minlength=high), np.full(high, 1 / high))
    with pytest.raises(ValueError, match="high"):
        uniform_below_32(None, 0, 3)
    with pytest.raises(ValueError, match="high"):
        uniform_below_32(None, (1 << 32) + 1, 3)
    with pytest.raises(ValueError, match="broadcast"):
        uniform_below_32(None, np.array([2, 3]), 3)


def _all_bitmaps_in_rank_order(k: int, d: int) -> np.ndarray:
    import itertools

    rows = []
    for combo in itertools.combinations(range(k), d):
        row = np.zeros(k, dtype=bool)
        row[list(combo)] = True
        rows.append(row)
    rows.sort(key=lambda r: sum(math.comb(int(c), i + 1) for i, c in enumerate(np.flatnonzero(r))))
    return np.array(rows)
