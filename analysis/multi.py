"""Estimates of multi-attribute campaigns (SPL, SMP, RS+FD; docs/math/richer-data.md).

Each attribute's 1-way marginal comes from the mechanism's unbiased estimator with its exact
fixed-population variance (``Multi.estimate``, ``Multi.variance``), at the plug-in frequencies
clipped to [0, 1].
"""

from __future__ import annotations

import dataclasses
from typing import Any

from analysis.estimation import ReportSource, aggregate, json_safe, z_value
from client_sdk.mechanisms.base import AggregateStatistic
from client_sdk.mechanisms.multi import Marginal, Multi


@dataclasses.dataclass(frozen=True)
class MultiEstimate:
    """The 1-way marginals of every attribute; ``marginal(name)`` returns one."""

    n: int
    confidence: float
    mechanism: dict[str, Any]
    statistic: AggregateStatistic
    oracle: Multi = dataclasses.field(repr=False)

    def marginal(self, *names: str) -> Marginal:
        """The marginal of one attribute (2-way marginals are not estimated by this protocol)."""
        if len(names) != 1:
            raise ValueError(
                f"protocol {self.oracle.protocol!r} estimates 1-way marginals only; got {names!r}"
            )
        return self.oracle.marginal(self.statistic, names[0])

    def to_dict(self) -> dict[str, Any]:
        z = z_value(self.confidence)
        out = []
        for name in self.oracle.names:
            m = self.marginal(name)
            out.append(
                {
                    "attribute": name,
                    "items": [
                        {
                            "value": i,
                            "frequency": float(f),
                            "std_error": float(se),
                            "ci_low": float(f - z * se),
                            "ci_high": float(f + z * se),
                        }
                        for i, (f, se) in enumerate(zip(m.frequencies, m.std_errors, strict=True))
                    ],
                }
            )
        return json_safe(
            {
                "n": self.n,
                "mechanism": self.mechanism,
                "confidence": self.confidence,
                "marginals": out,
            }
        )

    def format_table(self) -> str:
        lines = [f"n = {self.n}; protocol {self.oracle.protocol}"]
        for name in self.oracle.names:
            m = self.marginal(name)
            lines.append(f"{name}:")
            for i, (f, se) in enumerate(zip(m.frequencies, m.std_errors, strict=True)):
                lines.append(f"  {i:>6} {f:>10.4f} {se:>10.4f}")
        return "\n".join(lines)


def estimate_multi(
    mechanism: Multi, reports: ReportSource | AggregateStatistic, *, confidence: float = 0.95
) -> MultiEstimate:
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    return MultiEstimate(statistic.n, confidence, mechanism.to_config(), statistic, mechanism)
