"""The admin estimate: a campaign's stored reports summarised with its mechanism's own debiasing
and standard errors (``client_sdk``), never with ``analysis`` (docs/architecture.md: imports
flow device -> collector -> analysis).

:func:`summarize` is the one place that knows how to summarise a mechanism; numeric mechanisms
are added here as they land. A mechanism it cannot summarise raises :class:`UnsupportedEstimate`
(the web layer's 422), never a 500.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

from client_sdk.mechanisms import AggregateStatistic, FrequencyOracle
from client_sdk.mechanisms.numeric import NumericMechanism
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
    """JSON summary of a campaign's statistic, shaped like ``ldp-analyze estimate --format json``.

    Frequency oracles: f_v from ``estimate_frequencies`` (Wang et al. 2017, the pure-protocol
    estimator), the mechanism's ``standard_errors`` (the exact ``variance(n, f)`` with the
    estimate projected onto the simplex plugged in), and normal intervals at ``confidence``.

    Numeric mechanisms: the unbiased ``mean`` of the statistic (sums of per-report unbiased
    estimates), the mechanism's own ``standard_errors`` (s/sqrt(n) from the sample variance,
    or the data-free worst case for one report), and the worst-case standard errors beside
    them.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    if statistic.n < campaign.min_batch_size:
        raise BatchTooSmall(
            f"campaign {campaign.name!r} has {statistic.n} reports, fewer than its "
            f"min_batch_size {campaign.min_batch_size}; no estimate is released"
        )
    mechanism = campaign.mechanism
    # By what the devices record (value_kind); the isinstance checks the interface it implies.
    kind = getattr(mechanism, "value_kind", None)
    if kind == "category" and isinstance(mechanism, FrequencyOracle):
        frequencies = mechanism.estimate_frequencies(statistic)
        std_errors = mechanism.standard_errors(statistic)
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
    if kind == "number" and isinstance(mechanism, NumericMechanism):
        return _summarize_numeric(campaign, mechanism, statistic, confidence)
    raise UnsupportedEstimate(
        f"the collector cannot summarise mechanism {mechanism.name!r}; "
        "export the reports or use `ldp-analyze estimate`"
    )


def _summarize_numeric(
    campaign: StoredCampaign,
    mechanism: NumericMechanism,
    statistic: AggregateStatistic,
    confidence: float,
) -> dict[str, Any]:
    n = statistic.n
    mean = mechanism.mean(statistic)
    std_errors, method = mechanism.standard_errors(statistic)
    worst = mechanism.worst_case_standard_errors(n)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)

    def shaped(values: Any) -> Any:
        array = np.asarray(values, dtype=np.float64)
        return array.tolist() if mechanism.value_shape else float(array.reshape(-1)[0])

    return {
        "campaign": campaign.name,
        "config_id": campaign.config_id,
        "mechanism": campaign.config,
        "n": n,
        "confidence": confidence,
        "mean": shaped(mean),
        "std_error": shaped(std_errors),
        "ci_low": shaped(mean - z * std_errors),
        "ci_high": shaped(mean + z * std_errors),
        "worst_case_std_error": shaped(worst),
        "variance_method": method,
    }
