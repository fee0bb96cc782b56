"""Central selection mechanisms: what a trusted curator answers "which items are frequent" with.

The central baselines beside the local protocols (docs/math/central-and-shuffle.md,
docs/math/heavy-hitters.md), all on integer scores u (counts: sensitivity Delta = 1, one count
changing by one under add/remove, two under replacement), sampled exactly from
``client_sdk.sampling`` (integer Bernoulli(exp(-gamma)) of Canonne, Kamath, Steinke 2020, the
exact discrete Laplace) with the OS CSPRNG by default; epsilon is first rounded *down* to a
rational with a bounded denominator (``floor_fraction``), so the implemented epsilon never
exceeds the stated one.

- :func:`exponential_mechanism`: P(r) proportional to exp(-eps (u* - u_r) / (2 Delta))
  (McSherry, Talwar, FOCS 2007), eps-DP; by rejection: propose r uniformly, accept with
  Bernoulli(exp(-eps (u* - u_r) / (2 Delta))).
- :func:`top_k`: k rounds of the exponential mechanism, removing each pick: the same law as
  one-shot top-k with Gumbel noise (Durfee, Rogers, NeurIPS 2019); k eps-DP by composition.
- :func:`permute_and_flip`: visit the items in a uniformly random order and stop at r with
  probability exp(-eps (u* - u_r) / (2 Delta)) (McKenna, Sheldon, NeurIPS 2020), eps-DP, never
  worse than the exponential mechanism in expected score.
- :func:`report_noisy_max`: the index of the largest u_r + Z_r, Z_r discrete Laplace of scale
  2 Delta / eps, ties broken uniformly; only the index is released.
- :func:`sparse_vector`: AboveThreshold as Lyu, Su, Li (PVLDB 2017) Algorithm 1 with discrete
  Laplace noise: rho of scale 2 Delta/eps once, nu_i of scale 4 c Delta/eps per query, answer
  "above" when q_i + nu_i >= T + rho, halt after c answers "above".
- :func:`gaussian_top_k`: report noisy max with Gaussian noise, one shot: every count plus one
  discrete Gaussian draw, the k largest released (ties uniformly), (eps, delta)-DP as a
  post-processing of the noisy histogram. sigma is the analytic Gaussian's (Balle & Wang, ICML
  2018) at the histogram's L2 sensitivity (sqrt 2 under replacement, 1 under add/remove); the
  counts are scaled by a power of two G (G sigma about 2**20) and the discrete noise has
  s^2 >= (G sigma)^2 + 16^2: up to a statistical distance below 1e-1000 it is a
  post-processing of the continuous Gaussian of G sigma on the scaled integer counts (the
  convolution lemma, as ``client_sdk.mechanisms.gaussian`` states for its grid).

The tests check each output distribution exactly on small inputs (enumerated) and the privacy
ratio over neighbouring inputs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma
from client_sdk.randomness import RandomSource, uniform_below
from client_sdk.sampling import DiscreteGaussian, DiscreteLaplace, bernoulli_exp, floor_fraction

__all__ = [
    "exponential_mechanism",
    "gaussian_noise",
    "gaussian_top_k",
    "permute_and_flip",
    "rational_epsilon",
    "report_noisy_max",
    "sparse_vector",
    "top_k",
]

MAX_EPSILON_DENOMINATOR = 1 << 20
IntArray = npt.NDArray[np.int64]


def rational_epsilon(epsilon: float | Fraction) -> Fraction:
    """epsilon rounded down to a fraction with denominator at most 2**20 (the implemented one)."""
    value = Fraction(epsilon)
    if value <= 0:
        raise ValueError(f"epsilon must be positive; got {epsilon!r}")
    rounded = floor_fraction(value, MAX_EPSILON_DENOMINATOR)
    if rounded <= 0:
        raise ValueError(f"epsilon is too small to represent; got {epsilon!r}")
    return rounded


def _scores(scores: npt.ArrayLike) -> IntArray:
    array = np.asarray(scores)
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError("scores must be a non-empty 1-D array of integers (counts)")
    return array.astype(np.int64)


def _exponents(
    u: IntArray, epsilon: float | Fraction, sensitivity: int
) -> tuple[IntArray, IntArray]:
    """(num, den) with num/den = eps (u* - u_r) / (2 Delta), integers."""
    if sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer; got {sensitivity!r}")
    eps = rational_epsilon(epsilon)
    num = eps.numerator * (u.max() - u)
    den = np.full(u.size, eps.denominator * 2 * sensitivity, dtype=np.int64)
    return num.astype(np.int64), den


def exponential_mechanism(
    scores: npt.ArrayLike,
    epsilon: float | Fraction,
    *,
    sensitivity: int = 1,
    rng: RandomSource | None = None,
) -> int:
    """One index r with probability proportional to exp(-eps (u* - u_r) / (2 Delta)), exactly."""
    u = _scores(scores)
    num, den = _exponents(u, epsilon, sensitivity)
    batch = max(8, min(u.size, 1 << 16))
    while True:  # the acceptance rate is at least 1/len(u) (the best item is always accepted)
        proposal = uniform_below(rng, u.size, batch)
        accepted = bernoulli_exp(rng, num[proposal], den[proposal])
        if accepted.any():
            return int(proposal[np.argmax(accepted)])


def top_k(
    scores: npt.ArrayLike,
    k: int,
    epsilon: float | Fraction,
    *,
    sensitivity: int = 1,
    rng: RandomSource | None = None,
) -> list[int]:
    """k distinct indices, by k rounds of the exponential mechanism at ``epsilon`` each."""
    u = _scores(scores)
    if not 1 <= k <= u.size:
        raise ValueError(f"k must be in [1, {u.size}]; got {k!r}")
    remaining = np.arange(u.size)
    chosen: list[int] = []
    for _ in range(k):
        pick = exponential_mechanism(u[remaining], epsilon, sensitivity=sensitivity, rng=rng)
        chosen.append(int(remaining[pick]))
        remaining = np.delete(remaining, pick)
    return chosen


def _permutation(rng: RandomSource | None, size: int) -> IntArray:
    """A uniformly random permutation of [0, size) (Fisher-Yates with exact uniform draws)."""
    order = np.arange(size)
    draws = uniform_below(rng, np.arange(size, 0, -1, dtype=np.int64), size) if size else order
    for i in range(size - 1):
        j = i + int(draws[i])
        order[i], order[j] = order[j], order[i]
    return order


def permute_and_flip(
    scores: npt.ArrayLike,
    epsilon: float | Fraction,
    *,
    sensitivity: int = 1,
    rng: RandomSource | None = None,
) -> int:
    """Permute-and-flip (McKenna, Sheldon 2020): the first item, in a uniformly random order,
    whose Bernoulli(exp(-eps (u* - u_r) / (2 Delta))) succeeds; an item with the best score
    always succeeds."""
    u = _scores(scores)
    num, den = _exponents(u, epsilon, sensitivity)
    order = _permutation(rng, u.size)
    flips = bernoulli_exp(rng, num[order], den[order])
    return int(order[np.argmax(flips)])


def report_noisy_max(
    scores: npt.ArrayLike,
    epsilon: float | Fraction,
    *,
    sensitivity: int = 1,
    rng: RandomSource | None = None,
) -> int:
    """argmax of u_r + Z_r, Z_r discrete Laplace of scale 2 Delta / eps, ties uniform."""
    u = _scores(scores)
    noise = DiscreteLaplace(Fraction(2 * sensitivity) / rational_epsilon(epsilon))
    noisy = u + noise.sample(rng, u.size)
    best = np.flatnonzero(noisy == noisy.max())
    return int(best[uniform_below(rng, best.size, 1)[0]]) if best.size > 1 else int(best[0])


def sparse_vector(
    queries: Sequence[int] | npt.ArrayLike,
    threshold: int,
    epsilon: float | Fraction,
    *,
    cutoff: int = 1,
    sensitivity: int = 1,
    rng: RandomSource | None = None,
) -> list[bool]:
    """AboveThreshold (Lyu, Su, Li 2017, Algorithm 1) with discrete Laplace noise.

    Returns one answer per query until ``cutoff`` answers are True (then it halts: the list is
    shorter than the queries).
    """
    q = _scores(queries)
    eps = rational_epsilon(epsilon)
    if cutoff < 1:
        raise ValueError(f"cutoff must be a positive integer; got {cutoff!r}")
    rho = DiscreteLaplace(Fraction(2 * sensitivity) / eps).sample(rng, 1)[0]
    nu = DiscreteLaplace(Fraction(4 * cutoff * sensitivity) / eps).sample(rng, q.size)
    answers: list[bool] = []
    above = 0
    for value, noise in zip(q, nu, strict=True):
        answer = bool(value + noise >= threshold + rho)
        answers.append(answer)
        above += answer
        if above >= cutoff:
            break
    return answers


SMOOTHING = 16
"""Grid steps added (in quadrature) to the discrete Gaussian's sigma (module docstring)."""
GRID_SIGMA = 1 << 20
"""The counts are scaled by a power of two G so that G sigma is about this many grid steps: the
16 smoothing steps then add a relative 2**-32 to the variance."""


@functools.lru_cache(maxsize=64)
def gaussian_noise(
    epsilon: float, delta: float, l2_sensitivity: float
) -> tuple[int, DiscreteGaussian]:
    """(G, noise) of :func:`gaussian_top_k`: the counts times G plus the discrete Gaussian with
    s^2 >= (G sigma)^2 + 16^2, sigma the analytic Gaussian's at (epsilon, delta) and the counts'
    L2 sensitivity; the noise on the counts' scale has variance s^2 / G^2."""
    sigma = analytic_gaussian_sigma(float(epsilon), float(delta), float(l2_sensitivity))
    scale = 1 << max(0, math.floor(math.log2(GRID_SIGMA / sigma)))
    spread = scale * sigma
    return scale, DiscreteGaussian.at_least(spread * spread + SMOOTHING * SMOOTHING)


def gaussian_top_k(
    scores: npt.ArrayLike,
    k: int,
    epsilon: float,
    delta: float,
    *,
    l2_sensitivity: float = 2**0.5,
    rng: RandomSource | None = None,
) -> list[int]:
    """The k indices with the largest G u_r + Z_r, Z_r discrete Gaussian
    (:func:`gaussian_noise`), largest first, ties broken uniformly; (epsilon, delta)-DP."""
    u = _scores(scores)
    if not 1 <= k <= u.size:
        raise ValueError(f"k must be in [1, {u.size}]; got {k!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}")
    scale, noise = gaussian_noise(epsilon, delta, l2_sensitivity)
    if int(u.max()) > (1 << 62) // scale:
        raise ValueError("scores are too large for the Gaussian grid")
    noisy = u * scale + noise.sample(rng, u.size)
    tie_break = uniform_below(rng, 1 << 62, u.size)
    order = np.lexsort((tie_break, -noisy))
    return [int(i) for i in order[:k]]
