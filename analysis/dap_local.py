"""Randomized response inside Prio3: debiasing a collected histogram, count or multihot count
vector whose reports were randomized on the device before sharding (a campaign's ``local``,
docs/dap.md).

Before a Histogram (or Count) the device reports k-ary randomized response's output (``grr``,
the project's one definition) one-hot; before a MultihotCountVec it reports a unary encoding's
bit vector (``sue``, Erlingsson, Pihur, Korolova CCS 2014; ``oue``, Wang, Blocki, Li, Jha, USENIX
Security 2017; ``client_sdk.vdaf.rr``). Either way the collected vector is the mechanism's
support counts C_v plus the Aggregators' noise, and the unbiased estimate is the mechanism's,
f_v = (C_v/n - q*)/(p* - q*) (Wang et al. 2017; docs/math/randomized-response.md). Its variance
adds the two independent sources: the mechanism's exact variance, and the noise's variance
divided by (p* - q*)^2 (the estimator is linear in C_v). Both guarantees hold at once: the
local epsilon against everyone (the two Aggregators colluding included), the central epsilon
against the Collector and either Aggregator while one of them is honest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from client_sdk.dap.campaign import DapCampaign
from client_sdk.mechanisms import Mechanism
from client_sdk.mechanisms.base import AggregateStatistic, FrequencyOracle

__all__ = ["debias_local", "for_campaign"]


def for_campaign(result: dict[str, Any], document: Any, task_id: bytes) -> dict[str, Any]:
    """``result`` read through the campaign whose devices reported it: verified (its
    ``config_id``), of this task, and debiased when it randomizes on the device (``local``)."""
    name = document.get("name") if isinstance(document, dict) else None
    campaign = DapCampaign.from_document(document, name=str(name))
    if campaign.task.task_id != task_id:
        raise ValueError(
            f"campaign {campaign.name!r} is not of this task (its dap.task_id differs)"
        )
    result = {**result, "campaign": campaign.name}
    return result if campaign.local is None else debias_local(result, campaign.local)


def debias_local(result: dict[str, Any], local: Mechanism) -> dict[str, Any]:
    """``result`` (``analysis.dap_collect.collect``'s) with its estimate debiased for the
    device's randomized response ``local``: counts per bucket (a count task: the number of
    ``True``), standard errors from both randomizations, and both guarantees."""
    if not isinstance(local, FrequencyOracle):
        raise ValueError(f"local must be a frequency oracle; got {type(local).__name__}")
    n = int(result["report_count"])
    collected = result["estimate"]
    scalar = not isinstance(collected, list)
    counts = np.asarray([n - collected, collected] if scalar else collected, dtype=np.float64)
    if counts.shape != (local.k,):
        raise ValueError(f"the collected result has {counts.size} buckets, local has k={local.k}")
    statistic = AggregateStatistic(counts, n)
    frequencies = local.estimate_frequencies(statistic)
    grr_std = local.standard_errors(statistic) * n
    noise_std = float(result["std_errors"][0]) / (local.p_star - local.q_star)
    std = np.sqrt(grr_std**2 + noise_std**2)
    estimate = [float(c) for c in frequencies * n]
    central = result.get("epsilon")
    return {
        **result,
        "collected": collected,
        "estimate": estimate[1] if scalar else estimate,
        "std_errors": [float(std[1])] if scalar else [float(s) for s in std],
        "local": local.to_config(),
        "local_epsilon": float(local.privacy_epsilon),
        "guarantees": {
            "local": {
                "epsilon": float(local.privacy_epsilon),
                "against": "everyone, both aggregators colluding included",
            },
            "central": {
                "epsilon": central,
                "against": "the collector and either aggregator, while one aggregator is honest",
            }
            if central is not None
            else None,
        },
        "assumes": "nothing for the local guarantee; "
        + (result.get("assumes") or "")
        + " for the central one",
    }
