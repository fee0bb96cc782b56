"""Consistency post-processing of frequency estimates (docs/math/postprocessing.md).

The raw estimate of a pure protocol is unbiased, but it can be negative and need not sum to one.
The functions here turn it into a consistent table without ever changing the raw estimate: each
returns a new :class:`PostProcessedEstimate` that says what was done (``postprocessing``), keeps
the details that matter (the shift theta of ``norm-sub``, the iterations of the MLE and what
stopped them) and keeps a reference to the raw estimate it started from. Everything here is
post-processing of the reports, so none of it costs privacy.

Methods (Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li, NDSS 2020), by module:

- :mod:`~analysis.postprocess.transforms`: ``base`` (the raw estimate), ``base-pos`` (negatives
  set to 0), ``norm`` (one shift so the table sums to 1), ``norm-sub`` (the projection onto the
  simplex);
- :mod:`~analysis.postprocess.em`: ``mle``, the maximum-likelihood estimate by EM with SQUAREM
  and a certified stopping rule, on the channel the mechanism gives
  (``FrequencyOracle.em_channel``: exact for GRR and Hadamard response, the support-count
  approximation otherwise);
- :mod:`~analysis.postprocess.bootstrap`: the seeded parametric bootstrap over the sufficient
  statistic behind the intervals of ``norm``, ``norm-sub`` and ``mle``.

Intervals. ``base`` keeps its exact normal intervals; ``base-pos`` clips them (a monotone map of
the estimate, so coverage is kept, and the raw standard error bounds the clipped one, max(., 0)
being 1-Lipschitz). The other methods take their standard errors from the bootstrap; the interval
is the normal one around the estimate for ``norm`` (a linear, unbiased map of the raw estimate)
and the percentile interval with a one-sided bias correction for ``norm-sub`` and ``mle``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.kinds.frequencies.estimate import FrequencyEstimate
from analysis.postprocess.bootstrap import (
    DEFAULT_REPLICATES,
    SAMPLERS,
    SIMULATION_BUDGET,
    BootstrapOptions,
    BootstrapResult,
    BootstrapSettings,
    bootstrap_interval,
    integer_counts,
    parametric_bootstrap,
)
from analysis.postprocess.em import (
    BOOTSTRAP_MAX_ITERATIONS,
    BOOTSTRAP_TOLERANCE,
    BOOTSTRAP_WARM_START,
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_TOLERANCE,
    EMResult,
    diagonal_channel_mle,
    iterative_bayesian_update,
    mle,
)
from analysis.postprocess.result import PostProcessedEstimate
from analysis.postprocess.transforms import base, base_pos, norm, norm_sub, project_simplex
from client_sdk.mechanisms.base import Mechanism

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ALIASES",
    "BOOTSTRAP_MAX_ITERATIONS",
    "BOOTSTRAP_TOLERANCE",
    "BOOTSTRAP_WARM_START",
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_REPLICATES",
    "DEFAULT_TOLERANCE",
    "METHODS",
    "SAMPLERS",
    "SIMULATION_BUDGET",
    "BootstrapOptions",
    "BootstrapResult",
    "BootstrapSettings",
    "EMResult",
    "PostProcessedEstimate",
    "base",
    "base_pos",
    "bootstrap_interval",
    "diagonal_channel_mle",
    "integer_counts",
    "iterative_bayesian_update",
    "mle",
    "norm",
    "norm_sub",
    "parametric_bootstrap",
    "postprocess",
    "project_simplex",
]

METHODS: tuple[str, ...] = ("base", "base-pos", "norm", "norm-sub", "mle")
"""The post-processing methods, by the names the CLI and the reports use."""

ALIASES: dict[str, str] = {"em": "mle", "ibu": "mle"}


def postprocess(
    estimate: FrequencyEstimate,
    method: str,
    mechanism: Mechanism | None = None,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    **options: Unpack[BootstrapOptions],
) -> PostProcessedEstimate:
    """Apply one post-processing ``method`` (one of :data:`METHODS`, or ``em``/``ibu``).

    ``mechanism`` defaults to the one the estimate's config describes. ``tol`` and
    ``max_iterations`` are the MLE's; ``options`` the bootstrap's (:class:`BootstrapOptions`:
    ``replicates``, 0 for no intervals, reported as NaN; ``seed``; ``sampler``).
    """
    name = ALIASES.get(method, method)
    if name == "base":
        return base(estimate)
    if name == "base-pos":
        return base_pos(estimate)
    if name == "norm":
        return norm(estimate, mechanism, **options)
    if name == "norm-sub":
        return norm_sub(estimate, mechanism, **options)
    if name == "mle":
        return mle(estimate, mechanism, tol=tol, max_iterations=max_iterations, **options)
    known = ", ".join([*METHODS, *ALIASES])
    raise ValueError(f"postprocessing method must be one of {known}; got {method!r}")
