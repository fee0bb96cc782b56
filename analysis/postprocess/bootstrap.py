"""The seeded parametric bootstrap over the sufficient statistic (docs/math/postprocessing.md).

Post-processed estimates other than ``base`` and ``base-pos`` have no closed-form variance. Their
standard errors come from B statistics drawn from their law under a fitted distribution, on
which the raw estimator and the same post-processing are re-run (:func:`parametric_bootstrap`),
and their intervals are normal around the estimate or percentile intervals with a one-sided
bias correction (:func:`bootstrap_interval`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
from scipy import special

from analysis.kinds.frequencies.estimate import FloatArray, FrequencyEstimate
from analysis.postprocess.result import PostProcessedEstimate, oracle_of, processed
from analysis.streaming import z_value
from client_sdk.mechanisms.base import AggregateStatistic, EMChannel, FrequencyOracle, Mechanism
from client_sdk.mechanisms.simplex import project_simplex

DEFAULT_REPLICATES = 200
SAMPLERS: tuple[str, ...] = ("auto", "exact", "binomial", "simulate", "multinomial")
SIMULATION_BUDGET = 20_000_000
"""Most simulated reports (n times replicates) the ``auto`` bootstrap sampler spends on HR."""

Refit = Callable[[FloatArray, Sequence[AggregateStatistic]], FloatArray]
"""Re-runs a post-processing on bootstrap draws: (raw estimate rows, their statistics) -> rows."""


class BootstrapOptions(TypedDict, total=False):
    """The bootstrap's keyword options, as the post-processing functions take them."""

    replicates: int
    """How many replicates (default :data:`DEFAULT_REPLICATES`; 0: no intervals, NaN)."""
    seed: int
    """The seed of ``numpy.random.default_rng`` (default 0)."""
    sampler: str
    """One of :data:`SAMPLERS` (default ``"auto"``; see :func:`parametric_bootstrap`)."""


@dataclasses.dataclass(frozen=True)
class BootstrapSettings:
    """How many replicates (0: no intervals), the seed and the sampler (:data:`SAMPLERS`)."""

    replicates: int = DEFAULT_REPLICATES
    seed: int = 0
    sampler: str = "auto"


def with_bootstrap(
    raw: FrequencyEstimate,
    method: str,
    frequencies: FloatArray,
    details: dict[str, Any],
    mechanism: Mechanism | None,
    refit: Refit,
    settings: BootstrapSettings,
    *,
    fitted: FloatArray | None,
    interval: str,
) -> PostProcessedEstimate:
    """``frequencies`` (the result of ``method`` on ``raw``) with bootstrap standard errors.

    The draws come from ``fitted`` (else the simplex projection of the raw estimate);
    ``interval`` is ``"normal"``, ``"percentile"`` or ``"bias-corrected percentile"``.
    """
    replicates, seed = settings.replicates, settings.seed
    if replicates < 0:
        raise ValueError(f"replicates must be >= 0; got {replicates!r}")
    if replicates == 0:
        nan = np.full_like(frequencies, np.nan)
        details["intervals"] = "not computed (replicates=0)"
        return processed(raw, method, frequencies, nan, nan.copy(), nan.copy(), details)
    oracle = oracle_of(raw, mechanism)
    generating = fitted if fitted is not None else project_simplex(raw.frequencies)[0]
    bootstrap = parametric_bootstrap(
        oracle,
        raw.statistic,
        generating,
        refit,
        replicates=replicates,
        seed=seed,
        sampler=settings.sampler,
    )
    std_errors = bootstrap.replicates.std(axis=0, ddof=1)
    if interval == "normal":
        z = z_value(raw.confidence)
        low, high = frequencies - z * std_errors, frequencies + z * std_errors
    else:
        low, high = bootstrap_interval(
            bootstrap.replicates,
            frequencies,
            raw.confidence,
            bias_corrected=interval == "bias-corrected percentile",
        )
    details["intervals"] = (
        f"parametric bootstrap, {replicates} replicates, {interval}, sampler "
        f"{bootstrap.sampler}, seed {seed}"
    )
    return processed(raw, method, frequencies, std_errors, low, high, details)


def bootstrap_interval(
    replicates: FloatArray, estimate: FloatArray, confidence: float, *, bias_corrected: bool
) -> tuple[FloatArray, FloatArray]:
    """Percentile interval of bootstrap replicates (one column per item), optionally with a
    one-sided version of Efron's bias correction (BC; Efron, JASA 1981; Efron & Tibshirani,
    "An Introduction to the Bootstrap", 1993, section 14.3).

    The percentile interval is [q(alpha/2), q(1 - alpha/2)] of the replicates. BC moves both
    quantile levels to Phi(2 z0 + z_level), z0 = Phi^-1(share of replicates below the
    estimate, ties counted half). Norm-Sub and the MLE shrink the heavy items; refitted on data
    drawn from their own shrunk fit they shrink them twice, so their replicates sit below the
    estimate and the plain percentile interval misses heavy items too often. The correction is
    applied upwards only (z0 clipped at 0): for items at the boundary of the simplex the share
    below is decided by ties among near-zero values and its sign is noise, and there the
    percentile interval already covers (it reaches down to 0).
    """
    reps = np.asarray(replicates, dtype=np.float64)
    alpha = 1.0 - confidence
    levels = np.array([alpha / 2, 1 - alpha / 2])
    if not bias_corrected:
        low, high = np.quantile(reps, levels, axis=0)
        return low, high
    count = reps.shape[0]
    below = np.mean(reps < estimate, axis=0) + 0.5 * np.mean(reps == estimate, axis=0)
    below = np.clip(below, 1.0 / (count + 1), count / (count + 1))
    z0 = np.maximum(special.ndtri(below), 0.0)  # one-sided: see the docstring
    shifted = special.ndtr(2 * z0[None, :] + special.ndtri(levels)[:, None])  # (2, k)
    ordered = np.sort(reps, axis=0)
    # np.quantile's default (linear) rule, one level per column.
    position = shifted * (count - 1)
    lower = np.floor(position).astype(np.int64)
    upper = np.minimum(lower + 1, count - 1)
    weight = position - lower
    columns = np.arange(reps.shape[1])
    values = (1 - weight) * ordered[lower, columns] + weight * ordered[upper, columns]
    return values[0], values[1]


@dataclasses.dataclass(frozen=True)
class BootstrapResult:
    """Replicates of a post-processed estimate, shape (replicates, k), and the sampler used."""

    replicates: FloatArray
    sampler: str


def parametric_bootstrap(
    mechanism: FrequencyOracle,
    statistic: AggregateStatistic,
    generating: npt.ArrayLike,
    refit: Refit,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    sampler: str = "auto",
) -> BootstrapResult:
    """Re-run an estimator on statistics drawn for a population with frequencies ``generating``.

    The population has ``statistic.n`` users with whole counts nearest to n * generating (the
    fixed-population model of the raw estimate's exact variance). Each replicate draws the
    statistic of their reports, computes the mechanism's raw estimate from it and applies
    ``refit`` (which gets the raw rows and the statistics). Samplers:

    - ``exact`` (an exact diagonal channel on the output histogram, GRR's): each report is
      uniform over all k values with probability k q, else the true value (p I + q(J - I) =
      k q U + (p - q) I), so the histogram is c - u + Multinomial(sum u, uniform) with
      u_x ~ Bin(c_x, k q): exact, O(k) per replicate;
    - ``binomial`` (pure protocols): independent support counts C_v ~ Bin(c_v, p*) +
      Bin(n - c_v, q*): exact for unary encoding (independent bits), exact in each margin for
      the others;
    - ``simulate``: the mechanism's own ``perturb`` on the population: exact for every
      mechanism, O(n) per replicate;
    - ``multinomial`` (an exact channel): the output histogram of n reports whose inputs are
      drawn i.i.d. from ``generating``, O(K) per replicate. Its variance has the sampling term
      f(1 - f)/n on top of the fixed-population one (docs/math/postprocessing.md), so
      intervals are slightly conservative;
    - ``auto``: ``exact`` where it applies (GRR), ``binomial`` for pure protocols, ``simulate``
      when n times the replicates is at most :data:`SIMULATION_BUDGET` reports, else
      ``multinomial`` where the channel is exact (HR) and ``simulate`` regardless otherwise.

    Seeded with ``numpy.random.default_rng(seed)``: a simulation on the analysis side, not a
    device.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}; got {sampler!r}")
    if replicates < 2:
        raise ValueError(f"replicates must be >= 2; got {replicates!r}")
    n = int(statistic.n)
    if n <= 0:
        raise ValueError("cannot bootstrap an estimate of zero reports")
    theta = np.clip(np.asarray(generating, dtype=np.float64), 0.0, None)
    theta = theta / theta.sum()
    rng = np.random.default_rng(seed)
    channel = mechanism.em_channel()
    chosen = _choose_sampler(mechanism, channel, statistic, sampler, replicates)
    counts = integer_counts(theta, n)
    k = mechanism.k
    statistics: list[AggregateStatistic]
    if chosen == "exact":
        assert channel.diagonal is not None
        q = channel.diagonal[1]
        uniform = rng.binomial(counts, k * q, size=(replicates, k))
        spread = rng.multinomial(uniform.sum(axis=1), np.full(k, 1.0 / k))
        draws = counts - uniform + spread
        statistics = [AggregateStatistic(d.astype(np.int64), n) for d in draws]
    elif chosen == "binomial":
        draws = rng.binomial(counts, mechanism.p_star, size=(replicates, k)) + rng.binomial(
            n - counts, mechanism.q_star, size=(replicates, k)
        )
        statistics = [AggregateStatistic(d.astype(np.int64), n) for d in draws]
    elif chosen == "multinomial":
        probabilities = np.clip(channel.forward(theta), 0.0, None)
        probabilities /= probabilities.sum()
        draws = rng.multinomial(n, probabilities, size=replicates)
        shape = np.asarray(statistic.counts).shape
        statistics = [AggregateStatistic(d.reshape(shape).astype(np.int64), n) for d in draws]
    else:
        population = np.repeat(np.arange(k), counts)
        # A memoizing mechanism needs a device secret to perturb; simulations use the method it
        # offers for independent new devices (same report distribution).
        simulate = getattr(mechanism, "perturb_independent_devices", mechanism.perturb)
        statistics = [mechanism.aggregate(simulate(population, rng=rng)) for _ in range(replicates)]
    raw_rows = np.stack([mechanism.estimate_frequencies(s) for s in statistics])
    return BootstrapResult(np.asarray(refit(raw_rows, statistics), dtype=np.float64), chosen)


def _choose_sampler(
    mechanism: FrequencyOracle,
    channel: EMChannel,
    statistic: AggregateStatistic,
    sampler: str,
    replicates: int,
) -> str:
    exact_channel = channel.exact
    exact_diagonal = exact_channel and channel.diagonal is not None
    pure_support = (
        np.asarray(statistic.counts).shape == (mechanism.k,)
        and type(mechanism).estimate_frequencies is FrequencyOracle.estimate_frequencies
        and type(mechanism).support_from_statistic is FrequencyOracle.support_from_statistic
    )
    if sampler == "auto":
        if exact_diagonal:
            return "exact"
        if pure_support:
            return "binomial"
        if exact_channel and statistic.n * replicates > SIMULATION_BUDGET:
            return "multinomial"
        return "simulate"
    if sampler == "exact" and not exact_diagonal:
        raise ValueError(
            f"sampler 'exact' needs an exact diagonal channel (GRR's); {mechanism.name} has none"
        )
    if sampler == "multinomial" and not exact_channel:
        raise ValueError(f"sampler 'multinomial' needs an exact channel; {mechanism.name} has none")
    if sampler == "binomial" and not pure_support:
        raise ValueError(
            f"sampler 'binomial' needs a pure protocol's support counts; {mechanism.name} differs"
        )
    return sampler


def integer_counts(frequencies: npt.ArrayLike, n: int) -> npt.NDArray[np.int64]:
    """Whole counts summing to ``n`` nearest to n * frequencies (largest remainders)."""
    f = np.asarray(frequencies, dtype=np.float64)
    scaled = f * n / f.sum()
    counts = np.floor(scaled).astype(np.int64)
    missing = int(n - counts.sum())
    if missing > 0:
        order = np.argsort(-(scaled - counts), kind="stable")
        counts[order[:missing]] += 1
    return counts
