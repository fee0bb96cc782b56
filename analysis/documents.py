"""The JSON documents of a stored campaign's estimates: what ``ldp-analyze estimate`` prints,
the report embeds and the dashboard serves, built once here.

A categorical campaign's document is ``{"campaign", "config_id", "mechanism", "n",
"confidence", "postprocessing", "items": [{"value", "frequency", "std_error", "ci_low",
"ci_high"}], "sum_of_frequencies"}`` (with ``top`` N, the N most frequent items with their
Bonferroni significance, ``analysis.heavy_hitters``); a numeric campaign's gives the mean with
its standard error, shaped like the collector's; every other kind writes its own
(``DocumentedEstimate.to_dict``). The daily series is one such point per UTC day.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from analysis.dataset import StoredCampaign
from analysis.estimation import DocumentedEstimate, FrequencyEstimate, MeanEstimate, json_safe
from analysis.heavy_hitters import bonferroni_z, top_k

__all__ = [
    "daily_series_document",
    "frequency_document",
    "labels_of",
    "mean_document",
    "series_point",
]


def labels_of(campaign: StoredCampaign, k: int) -> list[str]:
    """The campaign's item labels: its domain, else the item indices."""
    return list(campaign.domain) if campaign.domain else [str(v) for v in range(k)]


def frequency_document(
    campaign: StoredCampaign,
    result: FrequencyEstimate,
    *,
    top: int | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The JSON document of a (possibly post-processed) frequency estimate."""
    labels = labels_of(campaign, len(result.frequencies))
    document: dict[str, Any] = {
        "campaign": campaign.name,
        "config_id": campaign.config_id,
        "mechanism": campaign.config,
        "n": result.n,
        "confidence": result.confidence,
        "postprocessing": result.postprocessing,
    }
    details = getattr(result, "details", None)
    if details:
        document["postprocessing_details"] = dict(details)
    if top is None:
        document["items"] = [
            {
                "value": labels[v],
                "frequency": result.frequencies[v],
                "std_error": result.std_errors[v],
                "ci_low": result.ci_low[v],
                "ci_high": result.ci_high[v],
            }
            for v in range(len(labels))
        ]
    else:
        hitters = top_k(result, top, alpha=alpha)
        document["top"] = top
        document["domain_size"] = len(labels)
        document["alpha"] = alpha
        document["bonferroni_z"] = bonferroni_z(alpha, len(labels))
        document["items"] = [
            {
                "value": labels[h.index],
                "frequency": h.frequency,
                "std_error": h.std_error,
                "ci_low": h.ci_low,
                "ci_high": h.ci_high,
                "z": h.z,
                "threshold": h.threshold,
                "significant": h.significant,
            }
            for h in hitters
        ]
    document["sum_of_frequencies"] = float(np.sum(result.frequencies))
    return json_safe(document)


def mean_document(campaign: StoredCampaign, result: MeanEstimate) -> dict[str, Any]:
    """The JSON document of a numeric campaign's mean (shaped like the collector's)."""
    return json_safe(
        {
            "campaign": campaign.name,
            "config_id": campaign.config_id,
            "mechanism": campaign.config,
            "n": result.n,
            "confidence": result.confidence,
            "mean": result.mean,
            "std_error": result.std_errors,
            "ci_low": result.ci_low,
            "ci_high": result.ci_high,
            "worst_case_std_error": result.worst_case_std_errors,
            "variance_method": result.variance_method,
        }
    )


def series_point(campaign: StoredCampaign, result: Any) -> dict[str, Any]:
    """One day's estimate in the daily series: the items, the mean, or the kind's document."""
    if isinstance(result, FrequencyEstimate):
        document = frequency_document(campaign, result)
        return {"items": document["items"]}
    if isinstance(result, MeanEstimate):
        document = mean_document(campaign, result)
        return {k: document[k] for k in ("mean", "std_error", "ci_low", "ci_high")}
    if isinstance(result, DocumentedEstimate):
        return dict(result.to_dict())
    raise ValueError(f"campaign {campaign.name!r}: no daily series for this kind of estimate")


def daily_series_document(
    campaign: StoredCampaign,
    points: Iterable[tuple[str, int, Any]],
    *,
    since: str | None,
    until: str | None,
    confidence: float,
) -> dict[str, Any]:
    """The series of ``(day, n, estimate)`` points: each day's n, and its estimate (``None``:
    a day below the campaign's ``min_batch_size`` shows nothing but n)."""
    days: list[dict[str, Any]] = []
    for day, n, result in points:
        point = None if result is None else series_point(campaign, result)
        days.append({"day": day, "n": n, "estimate": point})
    return json_safe(
        {
            "campaign": campaign.name,
            "config_id": campaign.config_id,
            "mechanism": campaign.config,
            "by": "day",
            "since": since,
            "until": until,
            "min_batch_size": campaign.min_batch_size,
            "confidence": confidence,
            "days": days,
        }
    )
