"""Key-value estimates from PCKV reports (Gu et al., USENIX Security 2020;
docs/math/richer-data.md): per key, the frequency with its exact standard error and the mean
with a delta-method standard error."""

from __future__ import annotations

import dataclasses
from typing import Any

from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from analysis.text_tables import INTERVAL_COLUMNS, aligned
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.pckv import PCKV


@dataclasses.dataclass(frozen=True)
class KeyValueEstimate:
    """Per key (arrays of shape (k,)): ``frequencies`` (unbiased when every record has at most
    ``padding`` keys; ``notes`` says so) with their exact ``frequency_std_errors``, and ``means``
    (a ratio estimator, clipped to [-1, 1]) with delta-method ``mean_std_errors``."""

    frequencies: FloatArray
    frequency_std_errors: FloatArray
    means: FloatArray
    mean_std_errors: FloatArray
    n: int
    confidence: float
    mechanism: dict[str, Any]
    notes: tuple[str, ...] = ()
    """What the numbers assume (``PCKV.bias_note``: devices with more pairs than the padding)."""

    def to_dict(self) -> dict[str, Any]:
        z = z_value(self.confidence)
        return json_safe(
            {
                "n": self.n,
                "mechanism": self.mechanism,
                "confidence": self.confidence,
                "notes": list(self.notes),
                "keys": [
                    {
                        "key": i,
                        "frequency": f,
                        "frequency_std_error": fs,
                        "frequency_ci": [f - z * fs, f + z * fs],
                        "mean": m,
                        "mean_std_error": ms,
                        "mean_ci": [m - z * ms, m + z * ms],
                    }
                    for i, (f, fs, m, ms) in enumerate(
                        zip(
                            self.frequencies,
                            self.frequency_std_errors,
                            self.means,
                            self.mean_std_errors,
                            strict=True,
                        )
                    )
                ],
            }
        )

    def format_table(self) -> str:
        columns = ["key", *INTERVAL_COLUMNS, "mean", "std_error", "ci_low", "ci_high"]
        rows = [
            [
                key["key"],
                key["frequency"],
                key["frequency_std_error"],
                *key["frequency_ci"],
                key["mean"],
                key["mean_std_error"],
                *key["mean_ci"],
            ]
            for key in self.to_dict()["keys"]
        ]
        lines = [
            f"n = {self.n}; PCKV-{'UE' if self.mechanism.get('variant') == 'ue' else 'GRR'}",
            aligned(columns, rows),
        ]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def estimate_key_value(
    mechanism: PCKV, reports: ReportSource | AggregateStatistic, *, confidence: float = 0.95
) -> KeyValueEstimate:
    statistic = aggregate(mechanism, reports)
    means, mean_errors = mechanism.means(statistic)
    return KeyValueEstimate(
        frequencies=mechanism.frequencies(statistic),
        frequency_std_errors=mechanism.frequency_standard_errors(statistic),
        means=means,
        mean_std_errors=mean_errors,
        n=statistic.n,
        confidence=confidence,
        mechanism=mechanism.to_config(),
        notes=(mechanism.bias_note(),),
    )
