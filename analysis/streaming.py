"""Reports streamed into a mechanism's mergeable statistic, and the normal quantile of intervals.

Reports are reduced chunk by chunk to the mechanism's sufficient statistic
(``Mechanism.aggregate``; docs/architecture.md), so memory stays O(k + chunk) however many
reports there are. Every estimator of ``analysis`` starts here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from statistics import NormalDist
from typing import Any

import numpy as np

from client_sdk.mechanisms.base import AggregateStatistic, Mechanism

__all__ = ["ReportSource", "aggregate", "json_safe", "z_value"]

ReportSource = Any
"""A numpy array of reports (one chunk), an iterable of such chunks, or an AggregateStatistic."""


def aggregate(mechanism: Mechanism, reports: ReportSource) -> AggregateStatistic:
    """Reduce reports (an array, an iterable of arrays, or a statistic) to one statistic."""
    if isinstance(reports, AggregateStatistic):
        return reports
    if isinstance(reports, np.ndarray):
        return mechanism.aggregate(reports)
    if isinstance(reports, (str, bytes)) or not isinstance(reports, Iterable):
        raise TypeError(
            "reports must be a numpy array of reports, an iterable of such arrays, or an "
            f"AggregateStatistic; got {type(reports).__name__}"
        )
    total = mechanism.empty_statistic()
    for chunk in reports:
        if isinstance(chunk, AggregateStatistic):
            total = total + chunk
        else:
            total = total + mechanism.aggregate(np.asarray(chunk))
    return total


def z_value(confidence: float) -> float:
    """The two-sided normal quantile for a confidence level in (0, 1).

    >>> round(z_value(0.95), 4)
    1.96
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def json_safe(value: Any) -> Any:
    """Numbers and arrays as JSON values; NaN and infinities as null."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value
