"""Hadamard response: the FWHT, the choice of form, the textbook formulas of the basic form
(docs/math/hadamard.md), the block-mass-corrected estimator against an independent brute-force
decoder, and unbiasedness with the exact variance at a larger k (the contract suite covers
small k)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.hadamard import HR, MATRIX_FWHT_MAX, fwht, valid_block_counts
from tests import stats


def sylvester(size: int) -> np.ndarray:
    """H_size by the recursive definition [[H, H], [H, -H]]."""
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < size:
        h = np.block([[h, h], [h, -h]])
    return h


def in_half_set(row: int, offset: int) -> bool:
    return bin(row & offset).count("1") % 2 == 0


@pytest.mark.parametrize("size", [1, 2, 8, 64, 1024])
def test_fwht_is_the_sylvester_hadamard_product(size: int) -> None:
    rng = np.random.default_rng(size)
    values = rng.integers(-1000, 1000, (3, size))
    expected = values @ sylvester(size).T
    np.testing.assert_array_equal(fwht(values), expected)
    np.testing.assert_array_equal(fwht(fwht(values)), size * values)  # H H = K I
    floats = rng.normal(size=size)
    np.testing.assert_allclose(fwht(floats), sylvester(size) @ floats, atol=1e-9)


@pytest.mark.parametrize("size", [2048, MATRIX_FWHT_MAX * 2])
def test_fwht_float_paths_equal_the_exact_integer_transform(size: int) -> None:
    """Float rows use matrix products up to MATRIX_FWHT_MAX and butterflies beyond it."""
    values = np.random.default_rng(size).integers(-1000, 1000, (2, 3, size))
    exact = fwht(values)
    floats = fwht(values.astype(np.float64))
    assert floats.dtype == np.float64 and floats.shape == values.shape
    np.testing.assert_allclose(floats, exact, atol=1e-6)


def test_fwht_leaves_its_input_alone_and_refuses_bad_lengths() -> None:
    values = np.arange(8, dtype=np.uint8)
    fwht(values)
    np.testing.assert_array_equal(values, np.arange(8))
    assert fwht(values)[1] == -4  # unsigned input is transformed in int64, without wrapping
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.ones(6))
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.ones((2, 0)))


def test_basic_form_matches_the_reference_formulas() -> None:
    for epsilon, k in [(0.5, 5), (1.0, 7), (0.3, 100)]:
        m = HR(epsilon, k, blocks=1)
        e = math.exp(epsilon)
        big_k = 2 ** math.ceil(math.log2(k + 1))
        assert m.block_size == m.num_outputs == big_k
        assert m.p_star == pytest.approx(e / (e + 1), rel=1e-15)
        assert m.q_star == 0.5
        assert m.variance_per_user() == pytest.approx((e + 1) ** 2 / (e - 1) ** 2, rel=1e-12)
        assert m.frequency_coefficient() == -1.0
        (matrix,) = m.channel_matrices()
        levels = sorted(set(matrix.ravel().tolist()))
        assert levels == pytest.approx(
            [2 / (big_k * (1 + e)), 2 * e / (big_k * (1 + e))], rel=1e-12
        )
        inside = matrix == matrix.max()
        assert np.all(inside.sum(axis=1) == big_k // 2)
        # Any two half-sets meet in K/4 outputs.
        overlaps = inside.astype(int) @ inside.T.astype(int)
        assert np.all(overlaps[~np.eye(k, dtype=bool)] == big_k // 4)


def test_blocked_channel_structure() -> None:
    m = HR(2.0, 12)
    assert (m.num_blocks, m.block_size) == (4, 4)
    (matrix,) = m.channel_matrices()
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
    for x in range(12):
        inside = np.flatnonzero(matrix[x] == matrix[x].max())
        block, row = x // 3, x % 3 + 1
        expected = [block * 4 + o for o in range(4) if in_half_set(row, o)]
        np.testing.assert_array_equal(inside, expected)
    assert matrix.max() / matrix.min() == pytest.approx(math.exp(2.0), rel=1e-12)
    stats.assert_exact_privacy(m)


@pytest.mark.parametrize("k", [2, 3, 5, 6, 12, 31, 32, 100, 1000])
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 4.0, 5.0, 9.0])
def test_the_chosen_form_minimizes_the_exact_total_variance(k: int, epsilon: float) -> None:
    m = HR(epsilon, k)
    assert m.blocks in valid_block_counts(k)
    best = min(HR(epsilon, k, blocks=b).total_variance() for b in valid_block_counts(k))
    assert m.total_variance() <= best * (1 + 1e-12)
    assert m.num_blocks * (m.block_size - 1) >= k > (m.num_blocks - 1) * (m.block_size - 1)
    config = m.to_config()
    assert config["blocks"] == m.blocks
    assert mechanism_from_config(config) == m
    assert mechanism_from_config({"mechanism": "hr", "epsilon": epsilon, "k": k}) == m


def test_form_by_regime() -> None:
    assert HR(0.5, 1000).blocks == 1  # high privacy: basic form
    assert HR(1.0, 1000).blocks == 1
    blocked = HR(4.0, 1000).blocks
    assert blocked is not None and blocked > 1  # large epsilon: blocked
    assert HR(9.0, 1000).blocks == 1000  # very large epsilon: one symbol per block of 2
    # Never worse than the paper's layout (empty blocks dropped) at the uniform distribution.
    for k, epsilon in [(100, 4.0), (1024, 2.0), (1024, 4.0), (64, 2.0)]:
        paper_blocks = 2 ** math.floor(math.log2(min(2 * k, math.exp(epsilon))))
        paper_size = 2 ** math.ceil(math.log2(k / paper_blocks + 1))
        used = -(-k // (paper_size - 1))
        assert HR(epsilon, k).total_variance() <= HR(epsilon, k, blocks=used).total_variance()


@pytest.mark.parametrize("blocks", [0, 3, 5, 13, 2.0, True, "2"])
def test_invalid_block_counts_are_refused_naming_the_field(blocks: object) -> None:
    with pytest.raises(ValueError, match="blocks"):
        mechanism_from_config({"mechanism": "hr", "epsilon": 2.0, "k": 12, "blocks": blocks})


def test_valid_block_counts() -> None:
    assert valid_block_counts(5) == [5, 2, 1]  # b = 2, 4, 8
    assert valid_block_counts(12) == [12, 4, 2, 1]  # b = 2, 4, 8, 16
    assert valid_block_counts(2) == [2, 1]
    with pytest.raises(ValueError, match="epsilon"):
        HR(800.0, 5)


def brute_force_estimate(m: HR, reports: np.ndarray) -> np.ndarray:
    """f_v = kappa * sum(2 A_v - M_v) / n, straight from the definitions (no transform)."""
    b = m.block_size
    blocks, offsets = reports // b, reports % b
    alpha = m.p_star / (b / 2)
    beta = (1 - m.p_star) / ((2 * m.num_blocks - 1) * (b / 2))
    kappa = 2 / (b * (alpha - beta))
    out = np.empty(m.k)
    for v in range(m.k):
        block, row = v // (b - 1), v % (b - 1) + 1
        in_block = blocks == block
        in_half = in_block & np.array([in_half_set(row, int(o)) for o in offsets])
        out[v] = kappa * (2 * in_half.sum() - in_block.sum()) / len(reports)
    return out


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 5), (2.0, 12), (4.0, 37), (2.0, 12)])
def test_transform_decoder_matches_brute_force(epsilon: float, k: int) -> None:
    m = HR(epsilon, k)
    rng = np.random.default_rng(k)
    reports = m.perturb(rng.integers(0, k, 3000), rng=rng)
    np.testing.assert_allclose(
        m.estimate_frequencies(m.aggregate(reports)), brute_force_estimate(m, reports), atol=1e-9
    )
    b = m.block_size
    support = [
        sum(
            1
            for y in reports
            if y // b == v // (b - 1) and in_half_set(v % (b - 1) + 1, int(y % b))
        )
        for v in range(k)
    ]
    np.testing.assert_array_equal(m.support_counts(reports), support)


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 100), (4.0, 100), (2.0, 64), (5.0, 64)])
def test_unbiased_with_exact_variance_at_a_larger_k(epsilon: float, k: int) -> None:
    m = HR(epsilon, k)
    # Unequal block masses: the variance depends on them in the blocked form.
    weights = 1.0 / np.arange(1, k + 1)
    counts = np.maximum(1, np.floor(weights / weights.sum() * 5000)).astype(int)
    values = np.repeat(np.arange(k), counts)
    stats.assert_unbiased_with_exact_variance(m, values, repetitions=2000, seed=31)


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 100), (4.0, 100), (2.0, 12)])
def test_total_variance_is_the_expected_squared_error_at_uniform(epsilon: float, k: int) -> None:
    m = HR(epsilon, k)
    n, repetitions = 20 * k, 3000
    values = np.arange(n) % k
    truth = np.full(k, 1 / k)
    assert m.total_variance(n) == pytest.approx(float(np.sum(m.variance(n, truth))), rel=1e-12)
    assert m.total_variance(n) == pytest.approx(
        (k * m.variance_per_user() + m.frequency_coefficient()) / n, rel=1e-12
    )
    errors = stats.repeated_estimates(m, values, repetitions, seed=5) - truth
    squared = (errors**2).sum(axis=1)
    stats.assert_within_z(
        squared.mean(),
        m.total_variance(n),
        squared.std(ddof=1) / math.sqrt(repetitions),
        what="mean squared error",
    )


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 100), (4.0, 100)])
def test_outputs_match_the_channel_at_a_larger_k(epsilon: float, k: int) -> None:
    m = HR(epsilon, k)
    (matrix,) = m.channel_matrices()
    rng = np.random.default_rng(77)
    for x in (0, 1, k // 2, k - 2, k - 1):
        reports = m.perturb(np.full(60_000, x), rng=rng)
        observed = np.bincount(m.output_index(reports), minlength=m.num_outputs)
        stats.assert_chi_square(observed, matrix[x], what=f"outputs for input {x}")
    stats.assert_exact_privacy(m)


def test_aggregation_validates_reports_and_statistics() -> None:
    m = HR(2.0, 12)
    with pytest.raises(ValueError, match=r"reports\[1\]"):
        m.aggregate(np.array([0, m.num_outputs]))
    with pytest.raises(ValueError, match="integer"):
        m.aggregate(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="shape"):
        m.estimate_frequencies(HR(0.5, 5).aggregate(np.array([0, 1])))
    assert m.aggregate(np.zeros(0, dtype=np.int64)) == m.empty_statistic()
    reports, errors = m.parse_wire([0, m.num_outputs - 1, m.num_outputs, -1])
    assert list(reports) == [0, m.num_outputs - 1]
    assert [e.index for e in errors] == [2, 3]
    assert "output" in errors[0].reason
