"""The maximum-likelihood estimate by EM (the iterative Bayesian update), with SQUAREM.

Agrawal & Aggarwal, PODS 2001; ElSalamouny & Palamidessi, EuroS&P 2020; Varadhan & Roland,
Scand. J. Statist. 2008 (docs/math/postprocessing.md). EM fits the channel the mechanism gives
(``FrequencyOracle.em_channel``): exact where it has a compact form (GRR; Hadamard response
through fast Walsh-Hadamard transforms), the support-count approximation otherwise. Every EM
step is O(k) (about O(K log K) for HR). Iteration stops on a certified bound of the
log-likelihood's distance to its maximum.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from analysis.kinds.frequencies.estimate import FloatArray, FrequencyEstimate
from analysis.postprocess.bootstrap import BootstrapOptions, BootstrapSettings, with_bootstrap
from analysis.postprocess.result import PostProcessedEstimate, oracle_of, raw_of
from client_sdk.mechanisms.base import AggregateStatistic, ChannelMap, Mechanism

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_TOLERANCE = 0.01
"""EM stops once the log-likelihood of all reports is certified within this of its maximum."""
DEFAULT_MAX_ITERATIONS = 10_000
BOOTSTRAP_TOLERANCE = 0.1
"""Log-likelihood gap the bootstrap's EM refits stop at (about 0.45 standard errors at most in
any direction, to the quadratic approximation; far less in practice)."""
BOOTSTRAP_MAX_ITERATIONS = 1_000
BOOTSTRAP_WARM_START = 0.1
"""Refits start at (1 - w) * estimate + w * uniform, near their own MLE but with no zero."""


@dataclasses.dataclass(frozen=True)
class EMResult:
    """The outcome of :func:`iterative_bayesian_update`.

    ``theta`` has the shape of the observations' leading axes plus ``(k,)``. ``stopped_by`` is
    ``"tolerance"`` (the certified log-likelihood gap of every row fell to ``tol``) or
    ``"max_iterations"``. ``gap`` is that certificate at ``theta`` (the largest over rows),
    ``last_change`` the L1 length of the last iteration. ``log_likelihood`` is the mean
    log-likelihood per observation after each iteration (of the first row), when asked for.
    """

    theta: FloatArray
    iterations: int
    converged: bool
    stopped_by: str
    gap: float
    last_change: float
    log_likelihood: list[float] | None = None
    rows_converged: int = 0


def iterative_bayesian_update(
    observed: npt.ArrayLike,
    forward: ChannelMap,
    backward: ChannelMap,
    k: int,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    accelerate: bool = True,
    record_log_likelihood: bool = False,
    initial: npt.ArrayLike | None = None,
) -> EMResult:
    """EM for the input distribution theta of a channel A[y|x] from an output distribution.

    One EM step is theta_x <- theta_x * sum_y obs(y) A[y|x] / (theta A)(y) (Agrawal &
    Aggarwal, PODS 2001). ``forward(theta)`` computes theta A (rows of theta are
    distributions over the k inputs) and ``backward(r)`` computes A r over the inputs, both on
    the last axis, so the rows of ``observed`` are fitted together, vectorized (a row leaves the
    batch once it meets the stopping rule). Starting from the uniform distribution (or from
    ``initial``, strictly positive), every iterate stays on the simplex and the log-likelihood
    sum_y obs(y) log (theta A)(y) never decreases.

    Plain EM crawls when the MLE lies on the boundary of the simplex (many zero frequencies, small
    epsilon). With ``accelerate`` (the default) each iteration is one SQUAREM cycle (Varadhan &
    Roland, Scand. J. Statist. 2008, scheme S3): two EM steps, an extrapolation along them
    (shortened until it stays non-negative), and one more EM step; a row whose extrapolation
    would lower the likelihood keeps the plain double step instead, so the likelihood still
    never decreases.

    Stopping rule: the mean log-likelihood L(theta) = sum_y obs(y) log (theta A)(y) is concave,
    and its gradient g_x = (A r)_x is what the EM step already computes, so
    L(theta_MLE) - L(theta) <= max_x g_x - sum_x theta_x g_x (the Frank-Wolfe duality gap).
    Iteration stops when that certified gap is at most ``tol`` in every row
    (``stopped_by="tolerance"``), or after ``max_iterations`` iterations, whichever comes first
    (an iteration is one EM step, or one SQUAREM cycle of three). Unlike a small change between
    iterates, which EM also shows on the flat stretches where it crawls, the gap bounds the
    distance to the maximum of the likelihood.
    """
    obs = np.asarray(observed, dtype=np.float64)
    if not (tol > 0 and math.isfinite(tol)):
        raise ValueError(f"tol must be a positive finite number; got {tol!r}")
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1; got {max_iterations!r}")
    if obs.ndim == 0 or np.any(obs < 0) or not np.all(np.isfinite(obs)):
        raise ValueError("observed output frequencies must be finite and non-negative")

    def step(theta: FloatArray, rows: FloatArray) -> tuple[FloatArray, FloatArray]:
        predicted = forward(theta)
        ratio = np.divide(rows, predicted, out=np.zeros_like(rows), where=predicted > 0)
        gradient = backward(ratio)
        updated = theta * gradient
        gap = np.max(gradient, axis=-1) - np.sum(updated, axis=-1)
        return updated / updated.sum(axis=-1, keepdims=True), gap

    flat_obs = obs.reshape(-1, obs.shape[-1])
    theta = np.full((flat_obs.shape[0], k), 1.0 / k)
    if initial is not None:
        start = np.asarray(initial, dtype=np.float64)
        if start.shape[-1] != k or np.any(start <= 0) or not np.all(np.isfinite(start)):
            raise ValueError("initial must be strictly positive frequencies over the k items")
        theta = np.broadcast_to(start / start.sum(axis=-1, keepdims=True), theta.shape).copy()
    gaps = np.full(flat_obs.shape[0], np.inf)
    changes = np.full(flat_obs.shape[0], np.inf)
    active = np.arange(flat_obs.shape[0])  # rows still iterating: converged rows drop out
    trace: list[float] | None = [] if record_log_likelihood else None
    iterations = 0
    while active.size:
        rows = flat_obs[active]
        current = theta[active]
        updated, gap = step(current, rows)
        gaps[active] = gap
        keep = gap > tol
        if iterations >= max_iterations or not np.any(keep):
            break
        active, rows, current, updated = active[keep], rows[keep], current[keep], updated[keep]
        if accelerate:
            updated = _squarem_cycle(current, updated, rows, step, forward)
        changes[active] = np.sum(np.abs(updated - current), axis=-1)
        theta[active] = updated
        iterations += 1
        if trace is not None:
            trace.append(float(_row_log_likelihood(flat_obs[:1], forward(theta[:1]))[0]))
    gap_max = float(np.max(gaps))
    converged = gap_max <= tol
    return EMResult(
        rows_converged=int(np.sum(gaps <= tol)),
        theta=theta.reshape(*obs.shape[:-1], k),
        iterations=iterations,
        converged=converged,
        stopped_by="tolerance" if converged else "max_iterations",
        gap=gap_max,
        last_change=float(np.max(changes)) if iterations else math.inf,
        log_likelihood=trace,
    )


def _squarem_cycle(
    theta: FloatArray,
    first: FloatArray,
    rows: FloatArray,
    step: Callable[[FloatArray, FloatArray], tuple[FloatArray, FloatArray]],
    forward: ChannelMap,
) -> FloatArray:
    """One SQUAREM S3 cycle per row, never lowering any row's likelihood below two EM steps.

    ``first`` is the EM step from ``theta``; ``rows`` the observations of those rows.
    """
    second = step(first, rows)[0]
    r = first - theta
    v = second - first - r
    r_norm = np.sqrt(np.sum(r * r, axis=-1, keepdims=True))
    v_norm = np.sqrt(np.sum(v * v, axis=-1, keepdims=True))
    alpha = np.where(v_norm > 0, -r_norm / np.where(v_norm > 0, v_norm, 1.0), -1.0)
    alpha = np.minimum(alpha, -1.0)  # alpha = -1 gives exactly the double EM step
    for _ in range(60):
        candidate = theta - 2 * alpha * r + alpha * alpha * v
        # Strictly positive: EM can never revive a coordinate that an extrapolation zeroed.
        infeasible = np.any(candidate <= 0, axis=-1, keepdims=True)
        if not np.any(infeasible):
            break
        alpha = np.where(infeasible, np.minimum((alpha - 1) / 2, -1.0), alpha)
        alpha = np.where(infeasible & (alpha > -1.0 - 1e-12), -1.0, alpha)
    candidate = np.maximum(theta - 2 * alpha * r + alpha * alpha * v, 0.0)
    candidate /= candidate.sum(axis=-1, keepdims=True)
    extrapolated = step(candidate, rows)[0]
    better = _row_log_likelihood(rows, forward(extrapolated)) >= _row_log_likelihood(
        rows, forward(second)
    )
    return np.where(better[..., None], extrapolated, second)


def _row_log_likelihood(observed: FloatArray, predicted: FloatArray) -> FloatArray:
    """sum_y obs(y) log predicted(y) per row (terms with obs(y) = 0 contribute nothing)."""
    safe = np.where(observed > 0, predicted, 1.0)
    with np.errstate(divide="ignore"):
        return np.sum(np.where(observed > 0, observed * np.log(safe), 0.0), axis=-1)


def diagonal_channel_mle(observed: npt.ArrayLike, p: float, q: float) -> FloatArray:
    """The exact maximiser of sum_y obs(y) log (theta A)(y) for A = p*I + q*(J - I), per row.

    With theta on the simplex, (theta A)(y) = q + (p - q) theta_y, so the likelihood separates
    and its KKT conditions give theta_y = max(0, s * obs(y) - q/(p - q)) with s fixing the sum
    to 1: a water-filling found like the simplex projection (sort, then the largest support
    whose last item stays positive), in O(k log k). This is the fixed point EM converges to for
    GRR and for the support-count approximation; tests check EM against it.
    """
    o = np.asarray(observed, dtype=np.float64)
    if not p > q:
        raise ValueError(f"the channel needs p > q; got p={p!r}, q={q!r}")
    o = o / o.sum(axis=-1, keepdims=True)
    r = q / (p - q)
    u = -np.sort(-o, axis=-1)
    j = np.arange(1, o.shape[-1] + 1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (1.0 + j * r) / np.cumsum(u, axis=-1)
        positive = s * u - r > 0
    rho = np.maximum(np.sum(positive, axis=-1), 1)
    scale = np.take_along_axis(s, (rho - 1)[..., None], axis=-1)
    return np.maximum(scale * o - r, 0.0)


def mle(
    estimate: FrequencyEstimate,
    mechanism: Mechanism | None = None,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    **options: Unpack[BootstrapOptions],
) -> PostProcessedEstimate:
    """The maximum-likelihood estimate by iterative Bayesian update (EM); bootstrap intervals.

    ``tol`` bounds the log-likelihood of all n reports below its maximum (certified by the
    duality gap, see :func:`iterative_bayesian_update`): with the default 0.01 the estimate lies
    within about sqrt(2 * 0.01) = 0.14 standard errors of the exact MLE in any direction, to the
    quadratic approximation. ``details`` records the channel used (``"exact"`` or
    ``"support-count approximation"``), the iterations, the certified gap, whether the stopping
    rule was met (``converged``, ``stopped_by``) and the last L1 change. On a diagonal channel
    (GRR, the support-count approximation) the bootstrap refits use the closed-form maximiser of
    the same likelihood (:func:`diagonal_channel_mle`), the point EM converges to. Elsewhere (HR)
    they run EM warm-started near the estimate, to the looser :data:`BOOTSTRAP_TOLERANCE` and at
    most :data:`BOOTSTRAP_MAX_ITERATIONS` iterations, and ``details["bootstrap_refits"]`` says
    how many met it: at small epsilon EM needs thousands of iterations per replicate otherwise.
    ``options`` are the bootstrap's (:class:`~analysis.postprocess.bootstrap.BootstrapOptions`).
    """
    raw = raw_of(estimate)
    oracle = oracle_of(raw, mechanism)
    channel = oracle.em_channel()
    per_report_tol = tol / raw.n
    result = iterative_bayesian_update(
        channel.observe(raw.statistic),
        channel.forward,
        channel.backward,
        channel.k,
        tol=per_report_tol,
        max_iterations=max_iterations,
    )
    details: dict[str, Any] = {
        "channel": channel.kind,
        "iterations": result.iterations,
        "converged": result.converged,
        "stopped_by": result.stopped_by,
        "log_likelihood_gap": result.gap * raw.n,
        "tolerance": tol,
        "max_iterations": max_iterations,
        "last_change": result.last_change,
    }

    def refit(_rows: FloatArray, statistics: Sequence[AggregateStatistic]) -> FloatArray:
        observed = np.stack([channel.observe(s) for s in statistics])
        if channel.diagonal is not None:
            # The exact MLE that EM converges to (to within tol), without the iterations.
            details["bootstrap_refits"] = "closed-form MLE of the same likelihood"
            return diagonal_channel_mle(observed, *channel.diagonal)
        refits = iterative_bayesian_update(
            observed,
            channel.forward,
            channel.backward,
            channel.k,
            tol=max(tol, BOOTSTRAP_TOLERANCE) / raw.n,
            max_iterations=min(max_iterations, BOOTSTRAP_MAX_ITERATIONS),
            initial=(1 - BOOTSTRAP_WARM_START) * result.theta + BOOTSTRAP_WARM_START / channel.k,
        )
        details["bootstrap_refits"] = (
            f"EM warm-started at the estimate, to a log-likelihood gap of "
            f"{max(tol, BOOTSTRAP_TOLERANCE):g} in at most "
            f"{min(max_iterations, BOOTSTRAP_MAX_ITERATIONS)} iterations: "
            f"{refits.rows_converged} of {len(statistics)} met it"
        )
        return refits.theta

    settings = BootstrapSettings(**options)
    return with_bootstrap(
        raw,
        "mle",
        result.theta,
        details,
        oracle,
        refit,
        settings,
        fitted=result.theta,
        interval="bias-corrected percentile",
    )
