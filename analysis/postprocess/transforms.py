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

from typing import Any

import numpy as np

from analysis.estimation import FloatArray, FrequencyEstimate
from analysis.postprocess.bootstrap import DEFAULT_REPLICATES, BootstrapSettings, with_bootstrap
from analysis.postprocess.result import PostProcessedEstimate, processed, raw_of
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.simplex import project_simplex

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
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    sampler: str = "auto",
) -> PostProcessedEstimate:
    """Add the same shift (1 - sum f)/k to every item (NDSS 2020 Norm); bootstrap intervals.

    The intervals are normal around the estimate: Norm is a linear, unbiased map of the raw one.
    """
    raw = raw_of(estimate)
    frequencies, shift = _norm(raw.frequencies)
    details: dict[str, Any] = {"shift": float(shift)}
    return with_bootstrap(
        raw,
        "norm",
        frequencies,
        details,
        mechanism,
        lambda rows, _statistics: _norm(rows)[0],
        BootstrapSettings(replicates, seed, sampler),
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

    ``details["theta"]`` is the shift subtracted from every kept item. The intervals are
    bias-corrected percentile intervals (``bootstrap_interval``).
    """
    raw = raw_of(estimate)
    frequencies, theta = project_simplex(raw.frequencies)
    details: dict[str, Any] = {
        "theta": float(theta),
        "zeroed_items": int(np.sum(frequencies == 0)),
    }
    return with_bootstrap(
        raw,
        "norm-sub",
        frequencies,
        details,
        mechanism,
        lambda rows, _statistics: project_simplex(rows)[0],
        BootstrapSettings(replicates, seed, sampler),
        fitted=frequencies,
        interval="bias-corrected percentile",
    )
