"""The admin estimate: a campaign's stored reports summarised with its mechanism's own debiasing
and standard errors (``client_sdk``), never with ``analysis`` (docs/architecture.md: imports
flow device -> collector -> analysis).

:func:`summarize` asks the mechanism (:meth:`Mechanism.summary`): a new kind of mechanism
answers there, never here. A mechanism without a summary raises :class:`UnsupportedEstimate`
(the web layer's 422), never a 500.
"""

from __future__ import annotations

from typing import Any

from client_sdk.mechanisms import AggregateStatistic
from client_sdk.mechanisms.factory import below_epsilon_floor
from collector.storage import Storage, StoredCampaign


class UnsupportedEstimate(ValueError):
    """The collector has no summary for this campaign's mechanism (use ``ldp-analyze``)."""


class BatchTooSmall(ValueError):
    """Fewer reports than the campaign's ``min_batch_size``: no estimate is released."""


def aggregate_campaign(
    storage: Storage,
    campaign: StoredCampaign,
    *,
    since: str | None = None,
    until: str | None = None,
) -> AggregateStatistic:
    """The campaign's mergeable statistic, streamed over stored chunks (memory O(k + chunk));
    ``since``/``until``: the reports of those UTC days only (inclusive)."""
    mechanism = campaign.mechanism
    statistic = mechanism.empty_statistic()
    for chunk in storage.iter_report_chunks(campaign.name, since=since, until=until):
        statistic = statistic + mechanism.aggregate(chunk)
    return statistic


def summarize(
    campaign: StoredCampaign, statistic: AggregateStatistic, *, confidence: float = 0.95
) -> dict[str, Any]:
    """JSON summary of a campaign's statistic, shaped like ``ldp-analyze estimate --format json``:
    the campaign's head, then what its mechanism's :meth:`~Mechanism.summary` answers (frequency
    oracles, numeric mechanisms, ranges, distributions, key-value; docs/collector.md)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    if statistic.n < campaign.min_batch_size:
        raise BatchTooSmall(
            f"campaign {campaign.name!r} has {statistic.n} reports, fewer than its "
            f"min_batch_size {campaign.min_batch_size}; no estimate is released"
        )
    mechanism = campaign.mechanism
    refusal = below_epsilon_floor(mechanism)
    if refusal is not None:
        raise UnsupportedEstimate(f"campaign {campaign.name!r}: {refusal}")
    body = mechanism.summary(statistic, confidence=confidence, labels=campaign.domain)
    if body is None:
        raise UnsupportedEstimate(
            f"the collector cannot summarise mechanism {mechanism.name!r}; "
            "export the reports or use `ldp-analyze estimate`"
        )
    head = {
        "campaign": campaign.name,
        "config_id": campaign.config_id,
        "mechanism": campaign.config,
        "n": statistic.n,
        "confidence": confidence,
    }
    return head | body
