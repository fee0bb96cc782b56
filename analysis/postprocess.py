"""Consistency post-processing of frequency estimates (REFERENCE.md section 3).

The raw estimate of a pure protocol is unbiased, but it can be negative and need not sum to one.
The functions here turn it into a consistent table without ever changing the raw estimate: each
returns a new :class:`PostProcessedEstimate` that says what was done (``postprocessing``), keeps
the details that matter (the shift theta of ``norm-sub``, the iterations of the MLE and what
stopped them) and keeps a reference to the raw estimate it started from. Everything here is
post-processing of the reports, so none of it costs privacy.

Methods (Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li, NDSS 2020):

- ``base``: the raw unbiased estimate, unchanged.
- ``base-pos``: negative estimates set to 0.
- ``norm``: the same shift (1 - sum f)/k added to every item, so the table sums to 1.
- ``norm-sub``: the Euclidean projection onto the probability simplex (Duchi, Shalev-Shwartz,
  Singer, Chandra, ICML 2008), in O(k log k).
- ``mle``: the maximum-likelihood estimate by the iterative Bayesian update, an EM algorithm
  (Agrawal & Aggarwal, PODS 2001; ElSalamouny & Palamidessi, EuroS&P 2020), with a certified
  stopping rule (:func:`iterative_bayesian_update`). It uses the mechanism's exact channel where
  it has a compact form (GRR: p* on the diagonal, q* off it; Hadamard response, whose statistic
  is its output histogram, through fast Walsh-Hadamard transforms), and otherwise the
  support-count approximation of multi-freq-ldpy: the channel p* on the diagonal and q* off it,
  applied to the normalised support counts. Every EM step is O(k) (O(K log K) for HR).

Intervals. ``base`` keeps its exact normal intervals; ``base-pos`` clips them (a monotone map
of the estimate, so coverage is kept, and the raw standard error bounds the clipped one, max(.,
0) being 1-Lipschitz). The other methods have no closed-form variance, so their standard errors
come from a seeded **parametric bootstrap over the sufficient statistic**: draw B statistics
from their law under a fitted distribution (the post-processed estimate when it is a
distribution, else the simplex projection of the raw one), re-run the raw estimator and the same
post-processing on each, and take the replicates' standard deviation. The statistic is drawn
exactly where its law is simple (the multinomial output histogram of an exact channel;
independent binomial support counts, exact for unary encoding whose bits are independent and
marginally exact for the other pure protocols) and by running the mechanism itself on a
population with the fitted counts otherwise. The interval is then the normal one around the
estimate for ``norm`` (a linear, unbiased map of the raw estimate) and the percentile interval,
with a one-sided bias correction (:func:`bootstrap_interval`), for ``norm-sub`` and ``mle``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.linalg
from scipy import special

from analysis.estimation import FloatArray, FrequencyEstimate, z_value
from client_sdk.mechanisms.base import AggregateStatistic, FrequencyOracle, Mechanism
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.hadamard import HR
from client_sdk.mechanisms.registry import mechanism_from_config

METHODS: tuple[str, ...] = ("base", "base-pos", "norm", "norm-sub", "mle")
"""The post-processing methods, by the names the CLI and the reports use."""

ALIASES: dict[str, str] = {"em": "mle", "ibu": "mle"}

DEFAULT_TOLERANCE = 0.01
"""EM stops once the log-likelihood of all reports is certified within this of its maximum."""
DEFAULT_MAX_ITERATIONS = 10_000
BOOTSTRAP_TOLERANCE = 0.1
"""Log-likelihood gap the bootstrap's EM refits stop at (about 0.45 standard errors at most in
any direction, to the quadratic approximation; far less in practice)."""
BOOTSTRAP_MAX_ITERATIONS = 1_000
BOOTSTRAP_WARM_START = 0.1
"""Refits start at (1 - w) * estimate + w * uniform, near their own MLE but with no zero."""
DEFAULT_REPLICATES = 200
SAMPLERS: tuple[str, ...] = ("auto", "exact", "binomial", "simulate", "multinomial")
SIMULATION_BUDGET = 20_000_000
"""Most simulated reports (n times replicates) the ``auto`` bootstrap sampler spends on HR."""


@dataclasses.dataclass(frozen=True)
class PostProcessedEstimate(FrequencyEstimate):
    """A :class:`FrequencyEstimate` after post-processing, with what was done to it.

    ``details`` holds the method's parameters and diagnostics (``theta`` for ``norm-sub``,
    ``iterations``/``converged``/``stopped_by`` for ``mle``, how the intervals were made);
    ``raw`` is the unbiased estimate it came from, never modified.
    """

    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    raw: FrequencyEstimate | None = None


# ---- the transforms, on arrays (one row per estimate; rows are independent) --------------------


def project_simplex(values: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Euclidean projection of each row onto the probability simplex, and the shift theta.

    Duchi, Shalev-Shwartz, Singer, Chandra, ICML 2008, Figure 1 (REFERENCE.md section 3): sort
    descending, rho = max{j : u_j - (sum_{r<=j} u_r - 1)/j > 0}, theta = (sum_{r<=rho} u_r - 1)
    / rho, output max(v - theta, 0). This equals NDSS 2020's Norm-Sub. O(k log k) per row.
    Returns arrays shaped like ``values`` and like ``values`` without its last axis.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"values must have at least one item; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values must be finite to be projected onto the simplex")
    u = -np.sort(-v, axis=-1)
    excess = np.cumsum(u, axis=-1) - 1.0
    j = np.arange(1, v.shape[-1] + 1, dtype=np.float64)
    positive = u - excess / j > 0  # True for j = 1 .. rho, False after (Duchi et al., Lemma 2)
    rho = np.sum(positive, axis=-1)
    theta = np.take_along_axis(excess, (rho - 1)[..., None], axis=-1)[..., 0] / rho
    return np.maximum(v - theta[..., None], 0.0), theta


def _base_pos(values: FloatArray) -> FloatArray:
    return np.maximum(values, 0.0)


def _norm(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    shift = (1.0 - values.sum(axis=-1)) / values.shape[-1]
    return values + shift[..., None], shift


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


ChannelMap = Callable[[FloatArray], FloatArray]


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

    One EM step is theta_x <- theta_x * sum_y obs(y) A[y|x] / (theta A)(y) (REFERENCE.md section
    3; Agrawal & Aggarwal, PODS 2001). ``forward(theta)`` computes theta A (rows of theta are
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


# ---- channels for EM --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Channel:
    """How EM sees a mechanism: the channel maps and how to read observations from a statistic.

    ``kind`` is ``"exact"`` or ``"support-count approximation"``. ``observe`` maps one statistic
    to the output distribution EM fits. ``forward`` maps input distributions to output
    distributions (exactly, when the channel is exact: the multinomial bootstrap uses it).
    """

    kind: str
    k: int
    forward: ChannelMap
    backward: ChannelMap
    observe: Callable[[AggregateStatistic], FloatArray]
    diagonal: tuple[float, float] | None = None
    """(p, q) when the channel is p*I + q*(J - I): its MLE then has a closed form."""

    @property
    def exact(self) -> bool:
        return self.kind == "exact"


def _diagonal_channel(p: float, q: float) -> tuple[ChannelMap, ChannelMap]:
    """The k x k matrix p*I + q*(J - I), applied in O(k) per row without building it."""

    def apply(x: FloatArray) -> FloatArray:
        return q * x.sum(axis=-1, keepdims=True) + (p - q) * x

    return apply, apply  # symmetric: forward and backward are the same map


def channel_for(mechanism: FrequencyOracle, statistic: AggregateStatistic) -> Channel:
    """The channel EM uses for this mechanism and statistic (see the module docstring)."""
    k = mechanism.k
    if isinstance(mechanism, GRR):
        # GRR's statistic is its output histogram and its channel is exactly p*I + q*(J - I).
        p, q = mechanism.p_star, mechanism.q_star
        forward, backward = _diagonal_channel(p, q)
        return Channel("exact", k, forward, backward, _histogram_observation, (p, q))
    if isinstance(mechanism, HR):
        forward, backward = _hadamard_channel(mechanism)
        return Channel("exact", k, forward, backward, _histogram_observation)
    p, q = mechanism.p_star, mechanism.q_star
    forward, backward = _diagonal_channel(p, q)

    def observe_support(statistic: AggregateStatistic) -> FloatArray:
        support = np.asarray(mechanism.support_from_statistic(statistic), dtype=np.float64)
        total = support.sum()
        if total <= 0:
            raise ValueError("no report supports any item: nothing for EM to fit")
        return support / total

    return Channel("support-count approximation", k, forward, backward, observe_support, (p, q))


def _hadamard_channel(mechanism: HR) -> tuple[ChannelMap, ChannelMap]:
    """Hadamard response's exact channel, applied with fast Walsh-Hadamard transforms.

    With the layout of ``client_sdk.mechanisms.hadamard`` (symbol x owns row r_x = x mod (b-1)
    + 1 of H_b in block j_x = x div (b-1); P(y|x) = alpha on its half-set, beta elsewhere),
    [y = (c, o) in C_x] = [c = j_x] (1 + H_b[r_x, o]) / 2, so

        (theta A)(c, o) = beta sum(theta) + (alpha - beta)/2 (F_c + FWHT(theta~_c)[o])
        (A r)_x         = beta sum(r) + (alpha - beta)/2 (R_{j_x} + FWHT(r_{j_x})[r_x])

    where theta~_c places block c's frequencies at their rows and F_c, R_c are block sums:
    O(K log K)-like per row instead of the dense O(kK). The tests check it against
    ``channel_matrices()``. alpha = p* / (b/2) and beta = q*_other_block / (b/2).
    """
    b, blocks = mechanism.block_size, mechanism.num_blocks
    alpha = 2.0 * mechanism.p_star / b
    beta = 2.0 * mechanism.q_star_other_block / b
    items = np.arange(mechanism.k)
    block_of, row_of = items // (b - 1), items % (b - 1) + 1
    half = (alpha - beta) / 2.0
    transform = _walsh_hadamard(b)

    def forward(theta: FloatArray) -> FloatArray:
        lead = theta.shape[:-1]
        placed = np.zeros((*lead, blocks, b))
        placed[..., block_of, row_of] = theta
        spectrum = transform(placed)
        spectrum += placed.sum(axis=-1, keepdims=True)
        out = beta * theta.sum(axis=-1)[..., None, None] + half * spectrum
        return out.reshape(*lead, blocks * b)

    def backward(ratio: FloatArray) -> FloatArray:
        lead = ratio.shape[:-1]
        blocked = ratio.reshape(*lead, blocks, b)
        spectrum = transform(blocked)
        totals = blocked.sum(axis=-1)
        picked = spectrum[..., block_of, row_of] + totals[..., block_of]
        return beta * ratio.sum(axis=-1, keepdims=True) + half * picked

    return forward, backward


def _walsh_hadamard(size: int) -> ChannelMap:
    """The unnormalised Walsh-Hadamard transform of length ``size`` (Sylvester order, as
    ``client_sdk.mechanisms.hadamard.fwht``) on the last axis, as two small matrix products.

    H_{2^m} = H_{2^a} (x) H_{2^(m-a)} (Kronecker, Sylvester order), so with the last axis
    reshaped to (2^a, 2^(m-a)), the transform is H_{2^a} X H_{2^(m-a)}: two BLAS calls instead of
    m vectorized butterfly passes, which matters when EM transforms a few rows thousands of
    times. The tests check it against ``fwht``.
    """
    bits = size.bit_length() - 1
    if size < 1 or size != 1 << bits:
        raise ValueError(f"size must be a power of two; got {size}")
    left, right = 1 << (bits // 2), 1 << (bits - bits // 2)
    h_left = scipy.linalg.hadamard(left).astype(np.float64) if left > 1 else np.ones((1, 1))
    h_right = scipy.linalg.hadamard(right).astype(np.float64) if right > 1 else np.ones((1, 1))

    def transform(values: FloatArray) -> FloatArray:
        lead = values.shape[:-1]
        square = np.asarray(values, dtype=np.float64).reshape(*lead, left, right)
        return np.asarray(h_left @ square @ h_right).reshape(*lead, size)

    return transform


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


def _histogram_observation(statistic: AggregateStatistic) -> FloatArray:
    if statistic.n <= 0:
        raise ValueError("cannot fit EM to zero reports")
    return np.asarray(statistic.counts, dtype=np.float64).ravel() / statistic.n


# ---- the public post-processing functions -----------------------------------------------------


def _raw_of(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Post-processing always starts from the raw unbiased estimate."""
    raw = getattr(estimate, "raw", None)
    return raw if isinstance(raw, FrequencyEstimate) else estimate


def _mechanism_of(estimate: FrequencyEstimate, mechanism: Mechanism | None) -> FrequencyOracle:
    built = mechanism if mechanism is not None else mechanism_from_config(estimate.mechanism)
    if not isinstance(built, FrequencyOracle):
        raise ValueError(
            f"post-processing needs a frequency oracle; got {type(built).__name__} "
            f"({estimate.mechanism.get('mechanism')!r})"
        )
    return built


def _result(
    raw: FrequencyEstimate,
    method: str,
    frequencies: FloatArray,
    std_errors: FloatArray,
    ci_low: FloatArray,
    ci_high: FloatArray,
    details: Mapping[str, Any],
) -> PostProcessedEstimate:
    return PostProcessedEstimate(
        frequencies=frequencies,
        std_errors=std_errors,
        n=raw.n,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=raw.confidence,
        mechanism=dict(raw.mechanism),
        statistic=raw.statistic,
        postprocessing=method,
        details=dict(details),
        raw=raw,
    )


def base(estimate: FrequencyEstimate) -> PostProcessedEstimate:
    """The raw unbiased estimate (copied), with its exact normal intervals."""
    raw = _raw_of(estimate)
    return _result(
        raw,
        "base",
        raw.frequencies.copy(),
        raw.std_errors.copy(),
        raw.ci_low.copy(),
        raw.ci_high.copy(),
        {"intervals": "normal, exact variance"},
    )


def base_pos(estimate: FrequencyEstimate) -> PostProcessedEstimate:
    """Negative estimates set to zero (NDSS 2020 Base-Pos); intervals clipped likewise.

    max(., 0) is monotone, so the clipped interval covers a (non-negative) true frequency
    whenever the raw one does; it is 1-Lipschitz, so the raw standard error bounds the clipped
    estimate's.
    """
    raw = _raw_of(estimate)
    frequencies = _base_pos(raw.frequencies)
    return _result(
        raw,
        "base-pos",
        frequencies,
        raw.std_errors.copy(),
        _base_pos(raw.ci_low),
        _base_pos(raw.ci_high),
        {
            "clipped_items": int(np.sum(raw.frequencies < 0)),
            "intervals": "raw normal interval clipped at 0; std_error is the raw (upper bound)",
        },
    )


def norm(
    estimate: FrequencyEstimate,
    mechanism: Mechanism | None = None,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    sampler: str = "auto",
) -> PostProcessedEstimate:
    """Add the same shift (1 - sum f)/k to every item (NDSS 2020 Norm); bootstrap intervals."""
    raw = _raw_of(estimate)
    frequencies, shift = _norm(raw.frequencies)
    details: dict[str, Any] = {"shift": float(shift)}
    return _with_bootstrap(
        raw,
        "norm",
        frequencies,
        details,
        mechanism,
        lambda rows, _stats: _norm(rows)[0],
        replicates=replicates,
        seed=seed,
        sampler=sampler,
        fitted=None,
        interval="normal",
    )


def norm_sub(
    estimate: FrequencyEstimate,
    mechanism: Mechanism | None = None,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    sampler: str = "auto",
) -> PostProcessedEstimate:
    """The Euclidean projection onto the simplex (NDSS 2020 Norm-Sub); bootstrap intervals.

    ``details["theta"]`` is the shift subtracted from every kept item.
    """
    raw = _raw_of(estimate)
    frequencies, theta = project_simplex(raw.frequencies)
    details: dict[str, Any] = {
        "theta": float(theta),
        "zeroed_items": int(np.sum(frequencies == 0)),
    }
    return _with_bootstrap(
        raw,
        "norm-sub",
        frequencies,
        details,
        mechanism,
        lambda rows, _stats: project_simplex(rows)[0],
        replicates=replicates,
        seed=seed,
        sampler=sampler,
        fitted=frequencies,
        interval="bias-corrected percentile",
    )


def mle(
    estimate: FrequencyEstimate,
    mechanism: Mechanism | None = None,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    sampler: str = "auto",
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
    """
    raw = _raw_of(estimate)
    oracle = _mechanism_of(raw, mechanism)
    channel = channel_for(oracle, raw.statistic)
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

    return _with_bootstrap(
        raw,
        "mle",
        result.theta,
        details,
        oracle,
        refit,
        replicates=replicates,
        seed=seed,
        sampler=sampler,
        fitted=result.theta,
        interval="bias-corrected percentile",
    )


def postprocess(
    estimate: FrequencyEstimate,
    method: str,
    mechanism: Mechanism | None = None,
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    sampler: str = "auto",
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> PostProcessedEstimate:
    """Apply one post-processing ``method`` (one of :data:`METHODS`, or ``em``/``ibu``).

    ``mechanism`` defaults to the one the estimate's config describes. ``replicates`` is the
    number of bootstrap replicates for the intervals (0: no intervals, reported as NaN).
    """
    name = ALIASES.get(method, method)
    if name == "base":
        return base(estimate)
    if name == "base-pos":
        return base_pos(estimate)
    if name == "norm":
        return norm(estimate, mechanism, replicates=replicates, seed=seed, sampler=sampler)
    if name == "norm-sub":
        return norm_sub(estimate, mechanism, replicates=replicates, seed=seed, sampler=sampler)
    if name == "mle":
        return mle(
            estimate,
            mechanism,
            tol=tol,
            max_iterations=max_iterations,
            replicates=replicates,
            seed=seed,
            sampler=sampler,
        )
    known = ", ".join([*METHODS, *ALIASES])
    raise ValueError(f"postprocessing method must be one of {known}; got {method!r}")


# ---- the parametric bootstrap -----------------------------------------------------------------


Refit = Callable[[FloatArray, Sequence[AggregateStatistic]], FloatArray]


def _with_bootstrap(
    raw: FrequencyEstimate,
    method: str,
    frequencies: FloatArray,
    details: dict[str, Any],
    mechanism: Mechanism | None,
    refit: Refit,
    *,
    replicates: int,
    seed: int,
    sampler: str,
    fitted: FloatArray | None,
    interval: str,
) -> PostProcessedEstimate:
    if replicates < 0:
        raise ValueError(f"replicates must be >= 0; got {replicates!r}")
    if replicates == 0:
        nan = np.full_like(frequencies, np.nan)
        details["intervals"] = "not computed (replicates=0)"
        return _result(raw, method, frequencies, nan, nan.copy(), nan.copy(), details)
    oracle = _mechanism_of(raw, mechanism)
    generating = fitted if fitted is not None else project_simplex(raw.frequencies)[0]
    bootstrap = parametric_bootstrap(
        oracle,
        raw.statistic,
        generating,
        refit,
        replicates=replicates,
        seed=seed,
        sampler=sampler,
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
    return _result(raw, method, frequencies, std_errors, low, high, details)


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

    - ``exact`` (GRR): each report is uniform over all k values with probability k q*, else the
      true value (p* I + q*(J - I) = k q* U + (p* - q*) I), so the histogram is c - u +
      Multinomial(sum u, uniform) with u_x ~ Bin(c_x, k q*): exact, O(k) per replicate;
    - ``binomial`` (pure protocols): independent support counts C_v ~ Bin(c_v, p*) +
      Bin(n - c_v, q*): exact for unary encoding (independent bits), exact in each margin for
      the others;
    - ``simulate``: the mechanism's own ``perturb`` on the population: exact for every
      mechanism, O(n) per replicate;
    - ``multinomial`` (an exact channel): the output histogram of n reports whose inputs are
      drawn i.i.d. from ``generating``, O(K) per replicate. Its variance has the sampling term
      f(1 - f)/n on top of the fixed-population one (REFERENCE.md section 0), so intervals are
      slightly conservative;
    - ``auto``: ``exact`` for GRR, ``binomial`` for pure protocols, ``simulate`` when n times
      the replicates is at most :data:`SIMULATION_BUDGET` reports, else ``multinomial`` where
      the channel is exact (HR) and ``simulate`` regardless otherwise.

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
    chosen = _choose_sampler(mechanism, statistic, sampler, replicates)
    counts = integer_counts(theta, n)
    k = mechanism.k
    statistics: list[AggregateStatistic]
    if chosen == "exact":
        uniform = rng.binomial(counts, k * mechanism.q_star, size=(replicates, k))
        spread = rng.multinomial(uniform.sum(axis=1), np.full(k, 1.0 / k))
        draws = counts - uniform + spread
        statistics = [AggregateStatistic(d.astype(np.int64), n) for d in draws]
    elif chosen == "binomial":
        draws = rng.binomial(counts, mechanism.p_star, size=(replicates, k)) + rng.binomial(
            n - counts, mechanism.q_star, size=(replicates, k)
        )
        statistics = [AggregateStatistic(d.astype(np.int64), n) for d in draws]
    elif chosen == "multinomial":
        probabilities = np.clip(channel_for(mechanism, statistic).forward(theta), 0.0, None)
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
    mechanism: FrequencyOracle, statistic: AggregateStatistic, sampler: str, replicates: int
) -> str:
    grr = isinstance(mechanism, GRR)
    exact_channel = channel_for(mechanism, statistic).exact
    pure_support = (
        np.asarray(statistic.counts).shape == (mechanism.k,)
        and type(mechanism).estimate_frequencies is FrequencyOracle.estimate_frequencies
        and type(mechanism).support_from_statistic is FrequencyOracle.support_from_statistic
    )
    if sampler == "auto":
        if grr:
            return "exact"
        if pure_support:
            return "binomial"
        if exact_channel and statistic.n * replicates > SIMULATION_BUDGET:
            return "multinomial"
        return "simulate"
    if sampler == "exact" and not grr:
        raise ValueError(f"sampler 'exact' is GRR's; {mechanism.name} has no such decomposition")
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
