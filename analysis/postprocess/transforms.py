"""The consistency transforms of Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li (NDSS 2020).

- ``base``: the raw unbiased estimate, unchanged, with its exact normal intervals;
- ``base-pos``: negative estimates set to 0, intervals clipped likewise;
- ``norm``: the same shift (1 - sum f)/k added to every item, so the table sums to 1;
- ``norm-sub``: the Euclidean projection onto the probability simplex (Duchi, Shalev-Shwartz,
  Singer, Chandra, ICML 2008), in O(k log k).

``norm`` and ``norm-sub`` have no closed-form variance: their intervals come from the parametric
bootstrap (``analysis.postprocess.bootstrap``; docs/math/postprocessing.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.kinds.frequencies.estimate import FloatArray, FrequencyEstimate
from analysis.postprocess.bootstrap import (
    BootstrapOptions,
    BootstrapSettings,
    with_bootstrap,
)
from analysis.postprocess.result import PostProcessedEstimate, processed, raw_of
from client_sdk.mechanisms.base import AggregateStatistic, Mechanism
from client_sdk.mechanisms.simplex import project_simplex

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["base", "base_pos", "norm", "norm_sub", "project_simplex"]


def _base_pos(values: FloatArray) -> FloatArray:
    return np.maximum(values, 0.0)


def _norm(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    shift = (1.0 - values.sum(axis=-1)) / values.shape[-1]
    return values + shift[..., None], shift


def base(estimate: FrequencyEstimate) -> PostProcessedEstimate:
    """The raw unbiased estimate (copied), with its exact normal intervals."""
    raw = raw_of(estimate)
    return processed(
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
    raw = raw_of(estimate)
    frequencies = _base_pos(raw.frequencies)
    return processed(
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
    **options: Unpack[BootstrapOptions],
) -> PostProcessedEstimate:
    """Add the same shift (1 - sum f)/k to every item (NDSS 2020 Norm); bootstrap intervals.

    ``details["shift"]`` is the shift. The intervals are normal around the estimate: Norm is a
    linear, unbiased map of the raw one. ``options`` are the bootstrap's
    (:class:`~analysis.postprocess.bootstrap.BootstrapOptions`).
    """
    return _shifted(estimate, "norm", mechanism, BootstrapSettings(**options))


def norm_sub(
    estimate: FrequencyEstimate,
    mechanism: Mechanism | None = None,
    **options: Unpack[BootstrapOptions],
) -> PostProcessedEstimate:
    """The Euclidean projection onto the simplex (NDSS 2020 Norm-Sub); bootstrap intervals.

    ``details["theta"]`` is the shift subtracted from every kept item. The intervals are
    bias-corrected percentile intervals (``bootstrap_interval``), the replicates drawn from the
    projected estimate itself. ``options`` are the bootstrap's.
    """
    return _shifted(estimate, "norm-sub", mechanism, BootstrapSettings(**options))


def _shifted(
    estimate: FrequencyEstimate,
    method: str,
    mechanism: Mechanism | None,
    settings: BootstrapSettings,
) -> PostProcessedEstimate:
    """Norm (one shift added to every item) or Norm-Sub (one shift subtracted, then clipped)."""
    raw = raw_of(estimate)
    transform = _norm if method == "norm" else project_simplex
    frequencies, shift = transform(raw.frequencies)
    details: dict[str, Any]
    if method == "norm":
        details = {"shift": float(shift)}
        fitted, interval = None, "normal"
    else:
        details = {"theta": float(shift), "zeroed_items": int(np.sum(frequencies == 0))}
        fitted, interval = frequencies, "bias-corrected percentile"

    def refit(rows: FloatArray, _statistics: Sequence[AggregateStatistic]) -> FloatArray:
        return transform(rows)[0]

    return with_bootstrap(
        raw,
        method,
        frequencies,
        details,
        mechanism,
        refit,
        settings,
        fitted=fitted,
        interval=interval,
    )
