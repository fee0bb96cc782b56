"""Range queries and quantiles from hierarchical-histogram or Haar reports
(docs/math/richer-data.md).

Hay, Rastogi, Miklau & Suciu, PVLDB 2010; Cormode, Kulkarni & Srivastava, PVLDB 2019. The leaf
frequencies are the consistent least-squares fit of the mechanism's unbiased linear estimates
(tree nodes, or Haar coefficients) with the known total (``RangeMechanism.estimate_leaves``:
unbiased); a range sum is a fixed linear functional of those estimates, so its exact
fixed-population variance is ``RangeMechanism.functional_variance``,
evaluated at the plug-in frequencies (the leaves projected onto the simplex, as the frequency
oracles' standard errors are). Quantiles read the non-negative (projected) leaves.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any

import numpy as np

from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from analysis.text_tables import INTERVAL_COLUMNS, aligned, interval_cells
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.hierarchical import RangeMechanism, first_at_least


@dataclasses.dataclass(frozen=True)
class RangeEstimate:
    """Consistent leaf frequencies with exact standard errors, ranges and quantiles.

    ``frequencies`` (k,) sum to one (unbiased, may be negative); ``std_errors`` are their exact
    standard errors at ``plug_in`` (the leaves projected onto the simplex); ``range(lo, hi)``
    gives ``(frequency, std_error)`` of the items lo <= v < hi, ``range_variance`` the exact
    variance at any true frequencies, ``quantile(q)`` an item, ``cdf(r)`` the estimated
    P[v <= r] with its exact standard error and ``quantile_interval(q)`` the items where the
    pointwise interval of the CDF first reaches q.
    """

    frequencies: FloatArray
    std_errors: FloatArray
    n: int
    confidence: float
    mechanism: dict[str, Any]
    statistic: AggregateStatistic
    plug_in: FloatArray
    oracle: RangeMechanism = dataclasses.field(repr=False)

    @property
    def k(self) -> int:
        return int(self.frequencies.size)

    def _check_range(self, lo: Any, hi: Any) -> tuple[int, int]:
        for name, value in (("lo", lo), ("hi", hi)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{name} must be an integer; got {value!r}")
        if not 0 <= int(lo) < int(hi) <= self.k:
            raise ValueError(
                f"range must satisfy 0 <= lo < hi <= k={self.k}; got lo={lo!r}, hi={hi!r}"
            )
        return int(lo), int(hi)

    def range(self, lo: int, hi: int) -> tuple[float, float]:
        """(frequency, std_error) of the items lo <= v < hi."""
        lo, hi = self._check_range(lo, hi)
        w, _ = self.oracle.consistency
        weights = w[lo:hi].sum(axis=0)
        variance = self.oracle.functional_variance(weights, self.plug_in, self.n)[0]
        return float(self.frequencies[lo:hi].sum()), float(np.sqrt(max(variance, 0.0)))

    def range_variance(self, lo: int, hi: int, frequencies: Any) -> float:
        """The exact variance of ``range(lo, hi)`` at given true leaf frequencies."""
        lo, hi = self._check_range(lo, hi)
        w, _ = self.oracle.consistency
        return float(self.oracle.functional_variance(w[lo:hi].sum(axis=0), frequencies, self.n)[0])

    def cdf(self, r: int) -> tuple[float, float]:
        """(P[v <= r], std_error): the range [0, r + 1)."""
        return self.range(0, r + 1)

    @cached_property
    def _prefixes(self) -> tuple[FloatArray, FloatArray]:
        """The unbiased F(r) for every r, with its exact standard error (at the plug-in)."""
        return self.oracle.prefix_estimates(self.frequencies, self.plug_in, self.n)

    def quantile(self, q: float) -> int:
        """The smallest item r with the estimated F(r) = P[v <= r] >= q (F unbiased)."""
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1); got {q!r}")
        return first_at_least(self._prefixes[0], q)

    def quantile_interval(self, q: float) -> tuple[int, int]:
        """The items where F(r) +- z SE(r) first reaches q: the true q-quantile lies between them
        with about the ``confidence`` (the exact pointwise errors of F, inverted)."""
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1); got {q!r}")
        cumulative, errors = self._prefixes
        z = z_value(self.confidence)
        return (
            first_at_least(cumulative + z * errors, q),
            first_at_least(cumulative - z * errors, q),
        )

    def to_dict(self, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> dict[str, Any]:
        z = z_value(self.confidence)
        return json_safe(
            {
                "n": self.n,
                "mechanism": self.mechanism,
                "confidence": self.confidence,
                "variant": self.oracle.description,
                "postprocessing": "consistency (least squares, known total)",
                "items": [
                    {
                        "value": i,
                        "frequency": float(f),
                        "std_error": float(se),
                        "ci_low": float(f - z * se),
                        "ci_high": float(f + z * se),
                    }
                    for i, (f, se) in enumerate(zip(self.frequencies, self.std_errors, strict=True))
                ],
                "quantiles": [
                    {
                        "q": q,
                        "value": self.quantile(q),
                        "ci_low": self.quantile_interval(q)[0],
                        "ci_high": self.quantile_interval(q)[1],
                    }
                    for q in quantiles
                ],
            }
        )

    def format_table(self, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> str:
        rows = [[item["value"], *interval_cells(item)] for item in self.to_dict()["items"]]
        lines = [
            f"n = {self.n}; {self.oracle.description}",
            aligned(["item", *INTERVAL_COLUMNS], rows),
        ]
        text = ", ".join(
            f"p{100 * q:g} = {self.quantile(q)} {list(self.quantile_interval(q))}"
            for q in quantiles
        )
        lines.append(f"quantiles: {text}")
        return "\n".join(lines)


def estimate_ranges(
    mechanism: RangeMechanism,
    reports: ReportSource | AggregateStatistic,
    *,
    confidence: float = 0.95,
) -> RangeEstimate:
    """The consistent leaves of a range campaign (B-ary or Haar), with exact standard errors."""
    statistic = aggregate(mechanism, reports)
    leaves, plug_in, std_errors = mechanism.leaf_estimates(statistic)
    return RangeEstimate(
        frequencies=leaves,
        std_errors=std_errors,
        n=statistic.n,
        confidence=confidence,
        mechanism=mechanism.to_config(),
        statistic=statistic,
        plug_in=plug_in,
        oracle=mechanism,
    )
