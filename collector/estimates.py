"""The admin estimate: a campaign's stored reports summarised with its mechanism's own debiasing
and exact variance (``client_sdk``), never with ``analysis`` (DESIGN.md: imports flow device ->
collector -> analysis).

:func:`summarize` is the one place that knows how to summarise a mechanism; numeric mechanisms
are added here as they land. A mechanism it cannot summarise raises :class:`UnsupportedEstimate`
(the web layer's 422), never a 500.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

from client_sdk.mechanisms import AggregateStatistic, FrequencyOracle
from collector.storage import Storage, StoredCampaign


class UnsupportedEstimate(ValueError):
    """The collector has no summary for this campaign's mechanism (use ``ldp-analyze``)."""


class BatchTooSmall(ValueError):
    """Fewer reports than the campaign's ``min_batch_size``: no estimate is released."""


def aggregate_campaign(storage: Storage, campaign: StoredCampaign) -> AggregateStatistic:
    """The campaign's mergeable statistic, streamed over stored chunks (memory O(k + chunk))."""
    mechanism = campaign.mechanism
    statistic = mechanism.empty_statistic()
    for chunk in storage.iter_report_chunks(campaign.name):
        statistic = statistic + mechanism.aggregate(chunk)
    return statistic


def summarize(
    campaign: StoredCampaign, statistic: AggregateStatistic, *, confidence: float = 0.95
) -> dict[str, Any]:
    """JSON summary of a campaign's statistic, shaped like ``ldp-analyze estimate --format json``.

    Frequency oracles: f_v from ``estimate_frequencies`` (Wang et al. 2017, the pure-protocol
    estimator), standard errors from the exact ``variance(n, f)`` with the estimate clipped to
    [0, 1] plugged in, and normal intervals at ``confidence``.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    if statistic.n < campaign.min_batch_size:
        raise BatchTooSmall(
            f"campaign {campaign.name!r} has {statistic.n} reports, fewer than its "
            f"min_batch_size {campaign.min_batch_size}; no estimate is released"
        )
    mechanism = campaign.mechanism
    if isinstance(mechanism, FrequencyOracle):
        frequencies = mechanism.estimate_frequencies(statistic)
        variance = mechanism.variance(statistic.n, np.clip(frequencies, 0.0, 1.0))
        std_errors = np.sqrt(np.maximum(variance, 0.0))
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        labels = campaign.domain or [str(v) for v in range(mechanism.k)]
        items = [
            {
                "value": label,
                "frequency": float(f),
                "std_error": float(se),
                "ci_low": float(f - z * se),
                "ci_high": float(f + z * se),
            }
            for label, f, se in zip(labels, frequencies, std_errors, strict=True)
        ]
        return {
            "campaign": campaign.name,
            "config_id": campaign.config_id,
            "mechanism": campaign.config,
            "n": statistic.n,
            "confidence": confidence,
            "postprocessing": "base",
            "items": items,
        }
    raise UnsupportedEstimate(
        f"the collector cannot summarise mechanism {mechanism.name!r}; "
        "export the reports or use `ldp-analyze estimate`"
    )
