"""Central selection mechanisms: exact output distributions and privacy on small inputs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from analysis.selection import (
    exponential_mechanism,
    gaussian_noise,
    gaussian_top_k,
    permute_and_flip,
    rational_epsilon,
    report_noisy_max,
    sparse_vector,
    top_k,
)
from client_sdk.sampling import DiscreteLaplace

EPSILON = 1.0
SCORES = np.array([5, 3, 3, 0])


def em_law(u: np.ndarray, epsilon: float) -> np.ndarray:
    eps = float(rational_epsilon(epsilon))
    w = np.exp(-eps * (u.max() - u) / 2)
    return w / w.sum()


def pf_law(u: np.ndarray, epsilon: float) -> np.ndarray:
    """P(r) = p_r int_0^1 prod_{j != r} (1 - p_j t) dt (McKenna, Sheldon 2020)."""
    eps = float(rational_epsilon(epsilon))
    p = np.exp(-eps * (u.max() - u) / 2)
    out = np.empty(u.size)
    for r in range(u.size):
        poly = np.polynomial.Polynomial([1.0])
        for j in range(u.size):
            if j != r:
                poly *= np.polynomial.Polynomial([1.0, -p[j]])
        integral = poly.integ()
        out[r] = p[r] * (integral(1.0) - integral(0.0))
    return out


def rnm_law(u: np.ndarray, epsilon: float, bound: int = 36) -> np.ndarray:
    """P[argmax (u + Z) = r], Z discrete Laplace of scale 2/eps, ties uniform: enumerated over
    every noise vector in [-bound, bound]^k (the rest has probability below 1e-7)."""
    noise = DiscreteLaplace(Fraction(2) / rational_epsilon(epsilon))
    support = np.arange(-bound, bound + 1)
    pmf = noise.pmf(support)
    grids = np.meshgrid(*([support] * u.size), indexing="ij")
    weights = np.prod(np.meshgrid(*([pmf] * u.size), indexing="ij"), axis=0)
    noisy = np.stack([g + value for g, value in zip(grids, u, strict=True)])
    best = noisy == noisy.max(axis=0)
    share = weights / best.sum(axis=0)
    return np.asarray([float(np.sum(share[best[r]])) for r in range(u.size)])


def neighbours(u: np.ndarray) -> list[np.ndarray]:
    """Add/remove one unit (one count +-1) and replacement (one -1, another +1)."""
    out = []
    for i in range(u.size):
        for step in (-1, 1):
            v = u.copy()
            v[i] += step
            out.append(v)
        for j in range(u.size):
            if i != j:
                v = u.copy()
                v[i] -= 1
                v[j] += 1
                out.append(v)
    return out


def worst_ratio(law, u: np.ndarray) -> float:
    base = law(u, EPSILON)
    return max(float(np.max(np.abs(np.log(base) - np.log(law(v, EPSILON))))) for v in neighbours(u))


def sample_counts(draw, size: int, outcomes: int) -> np.ndarray:
    rng = np.random.default_rng(2026)
    return np.bincount([draw(rng) for _ in range(size)], minlength=outcomes)


@pytest.mark.parametrize(
    ("mechanism", "law"),
    [(exponential_mechanism, em_law), (permute_and_flip, pf_law)],
)
def test_selection_follows_its_exact_law_and_is_private(mechanism, law) -> None:
    expected = law(SCORES, EPSILON)
    assert math.isclose(expected.sum(), 1.0, rel_tol=1e-12)
    n = 2000
    observed = sample_counts(lambda rng: mechanism(SCORES, EPSILON, rng=rng), n, SCORES.size)
    assert stats.chisquare(observed, n * expected / expected.sum()).pvalue > 1e-4
    assert worst_ratio(law, SCORES) <= EPSILON + 1e-9
    for u in np.random.default_rng(0).integers(0, 6, size=(10, 4)):
        assert worst_ratio(law, u) <= EPSILON + 1e-9


def test_permute_and_flip_never_scores_below_the_exponential_mechanism() -> None:
    for u in np.random.default_rng(1).integers(0, 8, size=(20, 5)):
        assert pf_law(u, EPSILON) @ u >= em_law(u, EPSILON) @ u - 1e-12


def test_top_k_has_the_law_of_peeling_exponential_mechanisms() -> None:
    w = em_law(SCORES, EPSILON)
    pairs = [(i, j) for i in range(4) for j in range(4) if i != j]
    expected = np.array([w[i] * w[j] / (1 - w[i]) for i, j in pairs])
    n = 2000
    rng = np.random.default_rng(5)
    drawn = [tuple(top_k(SCORES, 2, EPSILON, rng=rng)) for _ in range(n)]
    observed = np.array([drawn.count(pair) for pair in pairs])
    assert stats.chisquare(observed, n * expected / expected.sum()).pvalue > 1e-4


def test_report_noisy_max_follows_its_law_and_is_private() -> None:
    u = np.array([3, 2, 0])
    expected = rnm_law(u, EPSILON)
    assert math.isclose(expected.sum(), 1.0, rel_tol=1e-6)
    n = 2000
    observed = sample_counts(lambda rng: report_noisy_max(u, EPSILON, rng=rng), n, u.size)
    assert stats.chisquare(observed, n * expected / expected.sum()).pvalue > 1e-4
    assert worst_ratio(rnm_law, u) <= EPSILON + 1e-6


def svt_law(q: np.ndarray, threshold: int, epsilon: float, bound: int = 60) -> np.ndarray:
    """P of the answers [T], [F, T], [F, F, T], [F, F, F] (cutoff 1), enumerated over rho."""
    eps = rational_epsilon(epsilon)
    rho_noise = DiscreteLaplace(Fraction(2) / eps)
    nu = DiscreteLaplace(Fraction(4) / eps)
    rho = np.arange(-bound, bound + 1)
    grid = np.arange(-4 * bound, 4 * bound + 1)
    cdf = np.cumsum(nu.pmf(grid))

    def at_least(x: np.ndarray) -> np.ndarray:  # P[nu >= x]
        return 1 - np.interp(x - 1, grid, cdf, left=0.0, right=1.0)

    above = np.stack([at_least(threshold + rho - value) for value in q])  # (queries, rho)
    out = []
    for j in range(q.size + 1):
        prefix = np.prod(1 - above[:j], axis=0)
        tail = above[j] if j < q.size else 1.0
        out.append(float(np.sum(rho_noise.pmf(rho) * prefix * tail)))
    return np.asarray(out)


def test_sparse_vector_follows_its_law_and_is_private() -> None:
    q = np.array([2, 5, 3])
    threshold = 4
    expected = svt_law(q, threshold, EPSILON)
    assert math.isclose(expected.sum(), 1.0, rel_tol=1e-6)
    n = 2000
    rng = np.random.default_rng(9)
    outcomes = np.zeros(q.size + 1)
    for _ in range(n):
        answers = sparse_vector(q, threshold, EPSILON, rng=rng)
        outcomes[len(answers) - 1 if answers[-1] else q.size] += 1
    assert stats.chisquare(outcomes, n * expected / expected.sum()).pvalue > 1e-4
    worst = 0.0
    for shift in itertools.product((-1, 0, 1), repeat=q.size):
        other = svt_law(q + np.asarray(shift), threshold, EPSILON)
        worst = max(worst, float(np.max(np.abs(np.log(expected) - np.log(other)))))
    assert worst <= EPSILON + 1e-6


# ---- report noisy max with Gaussian noise ------------------------------------------------------


def gaussian_top1_law(u: np.ndarray, sd: float) -> np.ndarray:
    """P[argmax (u + Z) = r] for i.i.d. N(0, sd^2) noise: the integral of
    phi((x - u_r)/sd)/sd prod_{j != r} Phi((x - u_j)/sd) over x (the discrete noise on a grid of
    2**-20 sd is the continuous law up to ties of probability about 2**-20)."""
    x = np.linspace(u.min() - 12 * sd, u.max() + 12 * sd, 200_001)
    out = np.empty(u.size)
    for r in range(u.size):
        density = stats.norm.pdf(x, u[r], sd)
        for j in range(u.size):
            if j != r:
                density = density * stats.norm.cdf(x, u[j], sd)
        out[r] = np.trapezoid(density, x)
    return out


def test_gaussian_noise_is_the_analytic_gaussian() -> None:
    from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma

    for epsilon, delta, l2 in ((1.0, 1e-6, math.sqrt(2)), (0.01, 1e-9, 1.0), (8.0, 1e-5, 1.0)):
        sigma = analytic_gaussian_sigma(epsilon, delta, l2)
        scale, noise = gaussian_noise(epsilon, delta, l2)
        variance = noise.sigma2 / scale**2  # the noise's variance on the counts' scale
        assert sigma**2 <= variance <= sigma**2 * (1 + 1e-6)
        assert noise.sigma2 >= (scale * sigma) ** 2 + 16**2  # the smoothing steps are in
        assert 2**19 <= scale * sigma <= 2**21 or scale == 1


def test_gaussian_top_k_follows_its_law() -> None:
    u = np.array([8, 5, 5, 0])
    scale, noise = gaussian_noise(EPSILON, 1e-6, math.sqrt(2))
    expected = gaussian_top1_law(u.astype(float), math.sqrt(noise.sigma2) / scale)
    assert math.isclose(expected.sum(), 1.0, rel_tol=1e-6)
    n = 1000
    observed = sample_counts(lambda rng: gaussian_top_k(u, 1, EPSILON, 1e-6, rng=rng)[0], n, u.size)
    assert stats.chisquare(observed, n * expected).pvalue > 1e-4
    # ties are broken uniformly: equal scores come out equally often
    rng = np.random.default_rng(9)
    tied = np.bincount(
        [
            gaussian_top_k(np.zeros(3, dtype=np.int64), 1, 1e-3, 1e-6, rng=rng)[0]
            for _ in range(300)
        ],
        minlength=3,
    )
    assert stats.chisquare(tied).pvalue > 1e-4
    # far apart, the k largest come out in order; and bad input is refused
    assert gaussian_top_k([10**6, 0, 2 * 10**6, 5], 2, 1.0, 1e-6, rng=rng) == [2, 0]
    with pytest.raises(ValueError, match="k must be in"):
        gaussian_top_k([1, 2], 3, 1.0, 1e-6)
    with pytest.raises(ValueError, match="delta"):
        gaussian_top_k([1, 2], 1, 1.0, 0.0)
