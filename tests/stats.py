"""Statistical assertions with stated error rates (docs/architecture.md, "How the claims are
checked").

Every check here can fail: tolerances are z standard errors of the exact variance, chi-square
p-values against the declared distribution, or exact ratios of implemented probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats

from client_sdk.mechanisms.base import FrequencyOracle

Z_TOLERANCE = 5.5
"""Two-sided z for one check: a false alarm probability of about 4e-8."""


def assert_within_z(
    observed: npt.ArrayLike,
    expected: npt.ArrayLike,
    std_error: npt.ArrayLike,
    *,
    z: float = Z_TOLERANCE,
    what: str = "value",
) -> None:
    """Every |observed - expected| <= z * std_error."""
    o = np.asarray(observed, dtype=float)
    e = np.asarray(expected, dtype=float)
    se = np.asarray(std_error, dtype=float)
    scores = np.abs(o - e) / se
    worst = int(np.argmax(scores)) if scores.ndim else 0
    assert np.all(scores <= z), (
        f"{what}: |z| = {float(np.max(scores)):.2f} > {z} at index {worst} "
        f"(observed {np.ravel(o)[worst]}, expected {np.ravel(np.broadcast_to(e, o.shape))[worst]})"
    )


def chi_square_pvalue(
    observed: npt.ArrayLike, probabilities: npt.ArrayLike, *, min_expected: float = 5.0
) -> float:
    """Pearson chi-square p-value of counts against probabilities; sparse cells are pooled."""
    counts = np.asarray(observed, dtype=float)
    probs = np.asarray(probabilities, dtype=float)
    assert counts.shape == probs.shape
    assert abs(probs.sum() - 1) < 1e-9, f"probabilities sum to {probs.sum()}"
    total = counts.sum()
    expected = probs * total
    assert np.all(counts[expected == 0] == 0), "observed an output of probability zero"
    keep = expected >= min_expected
    pooled_obs = counts[keep].tolist()
    pooled_exp = expected[keep].tolist()
    if np.any(~keep & (expected > 0)):
        pooled_obs.append(counts[~keep].sum())
        pooled_exp.append(expected[~keep].sum())
    if len(pooled_obs) < 2:
        return 1.0
    return float(scipy_stats.chisquare(pooled_obs, pooled_exp).pvalue)


def assert_chi_square(
    observed: npt.ArrayLike,
    probabilities: npt.ArrayLike,
    *,
    alpha: float = 1e-6,
    what: str = "outputs",
) -> None:
    """Fail when the counts are implausible under the probabilities (p < alpha)."""
    p = chi_square_pvalue(observed, probabilities)
    assert p >= alpha, f"{what}: chi-square p-value {p:.3g} < {alpha}"


def assert_exact_privacy(mechanism: FrequencyOracle, *, rtol: float = 1e-9) -> None:
    """The implemented channel's worst ratio is at most e^eps, and tight (within rtol)."""
    bound = mechanism.privacy_epsilon
    worst = mechanism.implemented_epsilon()
    assert worst <= bound + rtol * max(bound, 1.0), (
        f"implemented epsilon {worst!r} > claimed {bound!r}"
    )
    assert worst >= bound - rtol * max(bound, 1.0) - 1e-15, (
        f"implemented epsilon {worst!r} is below the claim {bound!r}: the claim is not tight"
    )


def skewed_population(k: int, n: int) -> npt.NDArray[np.int64]:
    """A fixed population of n users with harmonic (1/v) frequencies, every item present."""
    weights = 1.0 / np.arange(1, k + 1)
    counts = np.maximum(1, np.floor(weights / weights.sum() * n)).astype(int)
    counts[0] += n - counts.sum()
    return np.repeat(np.arange(k), counts)


def repeated_estimates(
    mechanism: FrequencyOracle,
    values: npt.NDArray[np.int64],
    repetitions: int,
    seed: int,
    *,
    perturb: str = "perturb",
) -> npt.NDArray[np.float64]:
    """Estimates from ``repetitions`` independent randomizations of one fixed population.

    ``perturb`` names the method that randomizes: ``"perturb"``, or for memoizing mechanisms
    ``"perturb_independent_devices"`` (every report from a new device).
    """
    randomize = getattr(mechanism, perturb)
    rng = np.random.default_rng(seed)
    out = np.empty((repetitions, mechanism.k))
    batch = max(1, 200_000 // max(len(values), 1))
    for start in range(0, repetitions, batch):
        stop = min(repetitions, start + batch)
        reports = randomize(np.tile(values, stop - start), rng=rng)
        for r in range(start, stop):
            chunk = reports[(r - start) * len(values) : (r - start + 1) * len(values)]
            out[r] = mechanism.estimate_frequencies(mechanism.aggregate(chunk))
    return out


def fresh_device_estimates(
    mechanism: FrequencyOracle, values: npt.NDArray[np.int64], repetitions: int, seed: int
) -> npt.NDArray[np.float64]:
    """:func:`repeated_estimates` of a memoizing mechanism over fleets of new devices."""
    return repeated_estimates(
        mechanism, values, repetitions, seed, perturb="perturb_independent_devices"
    )


def assert_unbiased_with_exact_variance(
    mechanism: FrequencyOracle,
    values: npt.NDArray[np.int64],
    *,
    repetitions: int = 1000,
    seed: int = 12345,
    estimates_fn: Callable[..., npt.NDArray[np.float64]] = repeated_estimates,
) -> tuple[float, float]:
    """Mean of the estimates within z SE of the truth; per-item variance matches the formula.

    The sample variance of R draws has relative standard error sqrt(2/(R-1)) (normal
    approximation); each item is checked at z = 5.5 with that error, and the variance ratio
    averaged over items at the same z with the error of the average treated as one item's
    (conservative: items may be correlated). Returns (mean variance ratio, max |z| of the mean).
    """
    n = len(values)
    truth = np.bincount(values, minlength=mechanism.k) / n
    exact = mechanism.variance(n, truth)
    est = estimates_fn(mechanism, values, repetitions, seed)
    mean = est.mean(axis=0)
    assert_within_z(mean, truth, np.sqrt(exact / repetitions), what="mean estimate")
    empirical = est.var(axis=0, ddof=1)
    ratios = empirical / exact
    rel_se = math.sqrt(2 / (repetitions - 1))
    assert_within_z(ratios, 1.0, rel_se, what="variance ratio per item")
    mean_ratio = float(ratios.mean())
    assert abs(mean_ratio - 1) <= Z_TOLERANCE * rel_se, f"mean variance ratio {mean_ratio:.4f}"
    return mean_ratio, float(np.max(np.abs(mean - truth) / np.sqrt(exact / repetitions)))
