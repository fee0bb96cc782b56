"""The exact discrete samplers (CKS 2020) against their exact distributions.

Every goodness-of-fit check is a Pearson chi-square at alpha = 1e-6 with a fixed seed, over one
cell per integer in the bulk plus the two far tails pooled into one cell each with their exact
mass (so a sampler that cuts or fattens its tails fails). A negative control shows the same
test rejects a sampler whose scale is off by 7%.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk.sampling import (
    DiscreteGaussian,
    DiscreteLaplace,
    bernoulli_exp,
    bernoulli_fraction,
    floor_fraction,
)
from tests import stats

DRAWS = 200_000


def test_bernoulli_exp_has_probability_exp_minus_gamma() -> None:
    """Mixed gammas in one call (below 1, 1, integers, above 1 with a fraction, 0)."""
    gammas = [(0, 1), (1, 3), (1, 1), (2, 1), (7, 3), (9, 2), (3, 4), (50, 7)]
    num = np.repeat([g[0] for g in gammas], DRAWS // 4)
    den = np.repeat([g[1] for g in gammas], DRAWS // 4)
    draws = bernoulli_exp(np.random.default_rng(11), num, den)
    for i, (a, b) in enumerate(gammas):
        chunk = draws[i * (DRAWS // 4) : (i + 1) * (DRAWS // 4)]
        p = math.exp(-a / b)
        n = chunk.size
        if p == 1.0:
            assert chunk.all()
            continue
        stats.assert_within_z(chunk.sum(), n * p, math.sqrt(n * p * (1 - p)), what=f"gamma={a}/{b}")


def test_bernoulli_fraction_is_exact_ratio() -> None:
    rng = np.random.default_rng(3)
    for num, den in [(0, 5), (5, 5), (1, 3), (2**40 + 1, 2**41), (7, 10**15)]:
        draws = bernoulli_fraction(rng, np.full(DRAWS, num), np.full(DRAWS, den))
        p = num / den
        if p in (0.0, 1.0):
            assert draws.sum() == p * DRAWS
        else:
            sd = math.sqrt(DRAWS * p * (1 - p))
            stats.assert_within_z(draws.sum(), DRAWS * p, sd, what=f"{num}/{den}")


def laplace_cells(dist: DiscreteLaplace, bulk: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell probabilities for (-inf, -bulk-1], -bulk..bulk, [bulk+1, inf), exactly."""
    xs = np.arange(-bulk, bulk + 1)
    tail = dist.tail(bulk + 1)
    return xs, np.concatenate([[tail], dist.pmf(xs), [tail]])


def histogram(samples: np.ndarray, bulk: int) -> np.ndarray:
    inner = np.bincount(np.clip(samples, -bulk - 1, bulk + 1) + bulk + 1, minlength=2 * bulk + 3)
    return inner


@pytest.mark.parametrize(
    "scale", [Fraction(1, 3), Fraction(1), Fraction(7, 3), Fraction(40), Fraction(1001, 10)]
)
def test_discrete_laplace_matches_its_pmf_including_tails(scale: Fraction) -> None:
    dist = DiscreteLaplace(scale)
    samples = dist.sample(np.random.default_rng(20), DRAWS)
    # Choose the bulk so that each tail cell expects about 40 draws: the tails are tested.
    bulk = max(1, math.floor(float(scale) * math.log(DRAWS / 40 / (1 + dist.ratio))))
    _, probabilities = laplace_cells(dist, bulk)
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    assert 10 <= DRAWS * probabilities[0] <= 80
    stats.assert_chi_square(histogram(samples, bulk), probabilities, what=f"Lap_Z({scale})")


def test_discrete_laplace_chi_square_detects_a_wrong_scale() -> None:
    samples = DiscreteLaplace(Fraction(7, 3)).sample(np.random.default_rng(21), DRAWS)
    wrong = DiscreteLaplace(Fraction(5, 2))
    _, probabilities = laplace_cells(wrong, 20)
    assert stats.chi_square_pvalue(histogram(samples, 20), probabilities) < 1e-6


def test_discrete_laplace_with_a_large_scale_matches_binned_cdf() -> None:
    """The scale the Laplace mechanism really uses (2**20 grid steps over epsilon)."""
    scale = 1 / floor_fraction(Fraction(0.7) / 2**20, 2**40)
    dist = DiscreteLaplace(scale)
    samples = dist.sample(np.random.default_rng(22), DRAWS)
    s = float(scale)
    edges = np.round(np.array([-8, -4, -2, -1, -0.5, -0.2, 0, 0.2, 0.5, 1, 2, 4, 8]) * s)

    def cdf(x: float) -> float:  # P[X <= x] for an integer x
        return dist.tail(int(-x)) if x < 0 else 1 - dist.tail(int(x) + 1)

    cuts = [cdf(e) for e in edges]
    probabilities = np.diff(np.concatenate([[0.0], cuts, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=len(edges) + 1)
    stats.assert_chi_square(observed, probabilities, what="Lap_Z(large)")
    stats.assert_within_z(samples.var(), dist.variance(), dist.variance() * math.sqrt(5 / DRAWS))


def gaussian_cells(dist: DiscreteGaussian, bulk: int) -> np.ndarray:
    sigma = math.sqrt(dist.sigma2)
    far = np.arange(bulk + 1, bulk + 1 + int(60 * sigma) + 60)
    tail = float(dist.pmf(far).sum())
    return np.concatenate([[tail], dist.pmf(np.arange(-bulk, bulk + 1)), [tail]])


@pytest.mark.parametrize(("t", "m"), [(1, 1), (2, 3), (7, 7), (30, 31), (4, 13)])
def test_discrete_gaussian_matches_its_pmf_including_tails(t: int, m: int) -> None:
    dist = DiscreteGaussian(t, m)
    samples = dist.sample(np.random.default_rng(30), DRAWS)
    # The tail cells start at the largest bulk whose tails still expect 20 draws or more.
    bulk = 1
    while DRAWS * gaussian_cells(dist, bulk + 1)[0] >= 20:
        bulk += 1
    probabilities = gaussian_cells(dist, bulk)
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    assert 5 <= DRAWS * probabilities[0] <= 150
    stats.assert_chi_square(histogram(samples, bulk), probabilities, what=f"N_Z(0, {t}*{m})")


def test_discrete_gaussian_chi_square_detects_a_wrong_sigma() -> None:
    samples = DiscreteGaussian(7, 7).sample(np.random.default_rng(31), DRAWS)
    probabilities = gaussian_cells(DiscreteGaussian(7, 8), 20)
    assert stats.chi_square_pvalue(histogram(samples, 20), probabilities) < 1e-6


def test_discrete_gaussian_with_a_large_sigma_matches_binned_pmf() -> None:
    dist = DiscreteGaussian.at_least(1000.5**2)
    samples = dist.sample(np.random.default_rng(32), DRAWS)
    sigma = math.sqrt(dist.sigma2)
    support = np.arange(-int(40 * sigma), int(40 * sigma) + 1)
    pmf = dist.pmf(support)
    edges = np.round(np.linspace(-4, 4, 33) * sigma).astype(np.int64)
    cell = np.searchsorted(edges, support, side="left")
    probabilities = np.bincount(cell, weights=pmf, minlength=len(edges) + 1)
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=len(edges) + 1)
    stats.assert_chi_square(observed, probabilities / probabilities.sum(), what="N_Z(large)")


@pytest.mark.parametrize(("t", "m"), [(1, 1), (1, 2), (3, 4), (40, 41)])
def test_discrete_gaussian_variance_and_normalizer_are_exact(t: int, m: int) -> None:
    dist = DiscreteGaussian(t, m)
    xs = np.arange(-2000, 2001)
    pmf = dist.pmf(xs)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-14)
    assert dist.variance() == pytest.approx(float((xs**2 * pmf).sum()), rel=1e-13)
    # Below sigma^2 only for tiny sigma: 2 pi^2 sigma^2 makes the gap vanish fast.
    if dist.sigma2 == 1:
        assert dist.variance() < 1 - 1e-8
    else:
        assert dist.variance() == pytest.approx(dist.sigma2, rel=1e-15)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(41, 4)])
def test_discrete_laplace_variance_is_exact(scale: Fraction) -> None:
    dist = DiscreteLaplace(scale)
    xs = np.arange(-3000, 3001)
    pmf = dist.pmf(xs)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-13)
    assert dist.variance() == pytest.approx(float((xs**2 * pmf).sum()), rel=1e-12)


def test_samplers_are_reproducible_and_use_the_csprng_by_default() -> None:
    lap, gauss = DiscreteLaplace(Fraction(5, 2)), DiscreteGaussian(6, 6)
    for dist in (lap, gauss):
        a = dist.sample(np.random.default_rng(9), 1000)
        b = dist.sample(np.random.default_rng(9), 1000)
        np.testing.assert_array_equal(a, b)
        # The OS CSPRNG: the variance is right within 5.5 standard errors (kurtosis <= 6).
        draws = dist.sample(None, DRAWS)
        assert draws.dtype == np.int64
        se = dist.variance() * math.sqrt(8 / DRAWS)
        stats.assert_within_z(draws.var(), dist.variance(), se, what=type(dist).__name__)
        stats.assert_within_z(draws.mean(), 0.0, math.sqrt(dist.variance() / DRAWS))


def test_at_least_gives_the_requested_variance_with_t_near_sigma() -> None:
    """sigma^2 = t*m just above the target, with the proposal scale t in [0.75 sigma, sigma]."""
    for target in (1.0, 17.3, 4096.0**2 + 256, 3.9e12):
        dist = DiscreteGaussian.at_least(target)
        assert target <= dist.sigma2 < target + dist.t
        assert 0.75 * math.sqrt(target) - 3 <= dist.t <= math.sqrt(target) + 1
    # At the sizes the Gaussian mechanism uses, the best of 129 proposal scales wastes ~nothing.
    target = 1.2345e13
    assert DiscreteGaussian.at_least(target).sigma2 / target - 1 < 1e-9


def test_bad_parameters_are_refused() -> None:
    for scale in (0, -1, Fraction(2**41, 3)):
        with pytest.raises(ValueError, match="scale"):
            DiscreteLaplace(Fraction(scale))
    with pytest.raises(ValueError, match="t must"):
        DiscreteGaussian(0, 3)
    with pytest.raises(ValueError, match="m must"):
        DiscreteGaussian(3, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="t <= 2"):
        DiscreteGaussian(2**25, 2**25)
    with pytest.raises(ValueError, match="factor"):
        DiscreteGaussian(3, 50)
    with pytest.raises(ValueError, match="sigma2"):
        DiscreteGaussian.at_least(math.nan)
    with pytest.raises(ValueError, match="numerators"):
        bernoulli_exp(None, [-1], [2])


@settings(max_examples=300, deadline=None)
@given(
    numerator=st.integers(min_value=0, max_value=10**9),
    denominator=st.integers(min_value=1, max_value=10**9),
    max_denominator=st.integers(min_value=1, max_value=400),
)
def test_floor_fraction_is_the_best_lower_approximation(
    numerator: int, denominator: int, max_denominator: int
) -> None:
    value = Fraction(numerator, denominator)
    got = floor_fraction(value, max_denominator)
    assert got <= value and got.denominator <= max_denominator
    best = max(Fraction(math.floor(value * q), q) for q in range(1, max_denominator + 1))
    assert got == best


def test_floor_fraction_is_tight_for_laplace_rates() -> None:
    for epsilon in (0.01, 0.1, 0.3, 0.7, 1.0, 2.9, 7.77, 20.0):
        rate = Fraction(epsilon) / 2**20
        approx = floor_fraction(rate, 2**40)
        assert approx <= rate
        assert float((rate - approx) / rate) < 1e-12
