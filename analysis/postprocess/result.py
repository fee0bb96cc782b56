"""The post-processed estimate, and the two lookups every method starts with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from analysis.kinds.frequencies.estimate import FloatArray, FrequencyEstimate
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism


@dataclasses.dataclass(frozen=True)
class PostProcessedEstimate(FrequencyEstimate):
    """A :class:`FrequencyEstimate` after post-processing, with what was done to it.

    ``details`` holds the method's parameters and diagnostics (``theta`` for ``norm-sub``,
    ``iterations``/``converged``/``stopped_by`` for ``mle``, how the intervals were made);
    ``raw`` is the unbiased estimate it came from, never modified.
    """

    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    raw: FrequencyEstimate | None = None


def raw_of(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Post-processing always starts from the raw unbiased estimate."""
    raw = getattr(estimate, "raw", None)
    return raw if isinstance(raw, FrequencyEstimate) else estimate


def oracle_of(estimate: FrequencyEstimate, mechanism: Mechanism | None) -> FrequencyOracle:
    """The given mechanism, or the one the estimate's config describes; a frequency oracle."""
    built = mechanism if mechanism is not None else mechanism_from_config(estimate.mechanism)
    if not isinstance(built, FrequencyOracle):
        raise ValueError(
            f"post-processing needs a frequency oracle; got {type(built).__name__} "
            f"({estimate.mechanism.get('mechanism')!r})"
        )
    return built


def processed(
    raw: FrequencyEstimate,
    method: str,
    frequencies: FloatArray,
    std_errors: FloatArray,
    ci_low: FloatArray,
    ci_high: FloatArray,
    details: Mapping[str, Any],
) -> PostProcessedEstimate:
    """The :class:`PostProcessedEstimate` of ``raw`` after ``method``."""
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
