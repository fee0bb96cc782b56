"""The frequencies of a frequency oracle's domain, with exact standard errors.

The estimate comes from the mechanism's merged statistic alone, through its own debiasing
(``estimate_frequencies``) and standard errors (``standard_errors``), so the collector's admin
estimate and this one can never disagree (docs/math/frequency-oracles.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.streaming import ReportSource, aggregate, z_value
from client_sdk.mechanisms.base import AggregateStatistic, FrequencyOracle

__all__ = ["FloatArray", "FrequencyEstimate", "estimate_frequencies"]

FloatArray = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True)
class FrequencyEstimate:
    """Estimated frequencies of a categorical campaign, with their error.

    ``std_errors`` are the mechanism's ``standard_errors``: its exact fixed-population variance
    with the estimate projected onto the probability simplex plugged in for the true
    frequencies; the intervals are normal intervals at ``confidence``. ``postprocessing`` says
    what was done to the raw unbiased estimate (``"base"``: nothing).
    """

    frequencies: FloatArray
    std_errors: FloatArray
    n: int
    ci_low: FloatArray
    ci_high: FloatArray
    confidence: float
    mechanism: dict[str, Any]
    statistic: AggregateStatistic
    postprocessing: str = "base"

    @property
    def counts(self) -> FloatArray:
        """Estimated counts n * f_v."""
        return self.frequencies * self.n


def estimate_frequencies(
    mechanism: FrequencyOracle, reports: ReportSource, *, confidence: float = 0.95
) -> FrequencyEstimate:
    """Debiased frequencies with exact standard errors and normal confidence intervals."""
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    frequencies = mechanism.estimate_frequencies(statistic)
    std_errors = mechanism.standard_errors(statistic)
    z = z_value(confidence)
    return FrequencyEstimate(
        frequencies=frequencies,
        std_errors=std_errors,
        n=statistic.n,
        ci_low=frequencies - z * std_errors,
        ci_high=frequencies + z * std_errors,
        confidence=confidence,
        mechanism=mechanism.to_config(),
        statistic=statistic,
    )
