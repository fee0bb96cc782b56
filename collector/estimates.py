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
from client_sdk.mechanisms.factory import below_epsilon_floor
from client_sdk.mechanisms.hierarchical import RangeMechanism, first_at_least
from client_sdk.mechanisms.numeric import NumericMechanism
from client_sdk.mechanisms.pckv import PCKV
from client_sdk.mechanisms.square_wave import SquareWave, grid_quantile, to_histogram
from collector.storage import Storage, StoredCampaign

SUMMARY_QUANTILES = (0.5, 0.9, 0.99)


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

    Richer values (docs/math/richer-data.md), by ``estimate_kind``: ``"range"`` (hierarchical,
    B-ary or Haar) the consistent leaves with exact errors and quantiles with the intervals of
    the exact CDF errors; ``"distribution"`` (square_wave) the EMS histogram and quantiles with
    the closed-form mean (no bootstrap here: its intervals come from ``ldp-analyze estimate``);
    ``"key-value"`` (pckv) per-key frequencies and means with their standard errors.
    """
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
    richer = getattr(mechanism, "estimate_kind", None)
    head = {
        "campaign": campaign.name,
        "config_id": campaign.config_id,
        "mechanism": campaign.config,
        "n": statistic.n,
        "confidence": confidence,
    }
    if richer == "range" and isinstance(mechanism, RangeMechanism):
        return head | _summarize_ranges(campaign, mechanism, statistic, confidence)
    if richer == "distribution" and isinstance(mechanism, SquareWave):
        return head | _summarize_distribution(mechanism, statistic, confidence)
    if richer == "key-value" and isinstance(mechanism, PCKV):
        return head | _summarize_key_value(mechanism, statistic, confidence)
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


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _summarize_ranges(
    campaign: StoredCampaign,
    mechanism: RangeMechanism,
    statistic: AggregateStatistic,
    confidence: float,
) -> dict[str, Any]:
    leaves, plug_in, std_errors = mechanism.leaf_estimates(statistic)
    cumulative, cdf_errors = mechanism.prefix_estimates(leaves, plug_in, statistic.n)
    z = _z(confidence)
    labels = campaign.domain or [str(v) for v in range(mechanism.k)]
    return {
        "variant": mechanism.description,
        "postprocessing": "consistency (least squares, known total)",
        "items": [
            {
                "value": label,
                "frequency": float(f),
                "std_error": float(se),
                "ci_low": float(f - z * se),
                "ci_high": float(f + z * se),
            }
            for label, f, se in zip(labels, leaves, std_errors, strict=True)
        ],
        "quantiles": [
            {
                "q": q,
                "value": first_at_least(cumulative, q),
                "ci_low": first_at_least(cumulative + z * cdf_errors, q),
                "ci_high": first_at_least(cumulative - z * cdf_errors, q),
            }
            for q in SUMMARY_QUANTILES
        ],
    }


def _summarize_distribution(
    mechanism: SquareWave, statistic: AggregateStatistic, confidence: float
) -> dict[str, Any]:
    theta, iterations = mechanism.fit(statistic)
    histogram = to_histogram(theta, mechanism.bins)
    edges = np.linspace(mechanism.lower, mechanism.upper, mechanism.bins + 1)
    mean = mechanism.mean(statistic)
    std_error = mechanism.mean_standard_error(statistic)
    z = _z(confidence)
    return {
        "postprocessing": "ems",
        "mean": {
            "value": mean,
            "std_error": std_error,
            "ci_low": mean - z * std_error,
            "ci_high": mean + z * std_error,
        },
        "quantiles": [
            {"q": q, "value": float(grid_quantile(theta, q, mechanism.lower, mechanism.upper))}
            for q in SUMMARY_QUANTILES
        ],
        "histogram": [
            {"low": float(edges[i]), "high": float(edges[i + 1]), "frequency": float(f)}
            for i, f in enumerate(histogram)
        ],
        "ems_iterations": iterations,
        "intervals": "bootstrap intervals of the histogram and quantiles: ldp-analyze estimate",
    }


def _summarize_key_value(
    mechanism: PCKV, statistic: AggregateStatistic, confidence: float
) -> dict[str, Any]:
    frequencies = mechanism.frequencies(statistic)
    frequency_errors = mechanism.frequency_standard_errors(statistic)
    means, mean_errors = mechanism.means(statistic)
    z = _z(confidence)
    return {
        "notes": [mechanism.bias_note()],
        "keys": [
            {
                "key": key,
                "frequency": float(f),
                "frequency_std_error": float(fs),
                "frequency_ci": [float(f - z * fs), float(f + z * fs)],
                "mean": float(m),
                "mean_std_error": float(ms),
                "mean_ci": [float(m - z * ms), float(m + z * ms)],
            }
            for key, (f, fs, m, ms) in enumerate(
                zip(frequencies, frequency_errors, means, mean_errors, strict=True)
            )
        ],
    }
