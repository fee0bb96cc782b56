"""The DAP Collector (draft-ietf-ppm-dap-18, "Collecting Results"): start a collection job on
the Leader, poll it (honouring ``Retry-After``), open both aggregate shares and unshard.

The result is in the estimate shape: the values, their standard errors from the noise both
aggregators added (the sum of two independent draws: variance twice one draw's,
docs/math/dap-noise.md), the number of reports, and the guarantee with what it assumes: per
collection and composed over the task's collections so far (which the Leader lists).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import requests

from analysis.accounting import Zcdp, pure_dp
from analysis.kinds._common.gap import DEFAULT_DELTA  # the one of ``ldp-analyze gap``
from client_sdk.dap.hpke import open_base
from client_sdk.dap.messages import (
    AggregateShareAad,
    CollectionJobReq,
    CollectionJobResp,
    Interval,
    Query,
    Role,
    aggregate_share_info,
)
from collector.dap.task import TaskSpec, b64encode, signed

__all__ = ["collect", "decode_result", "guarantee"]

UNIT = (
    "one report: the neighbouring batches differ in one report. Disjoint batches compose in "
    "parallel only for a device that reports at most once per batch; the cumulative figure "
    "is for a device with one report in every collected batch, and a device with m reports "
    "in one batch has m times the per-report rho (m^2 for zCDP) or epsilon (group privacy)"
)

POLL_LIMIT = 30  # seconds of Retry-After honoured at most, each time


def guarantee(
    spec: TaskSpec, collections: int | None = None, delta: float = DEFAULT_DELTA
) -> dict[str, Any]:
    """The task's DP guarantee for one collection, and composed over ``collections`` (None:
    unknown): pure epsilon for Laplace (k collections: k epsilon, and the exact composition's
    epsilon at ``delta``, analysis.accounting.pure_dp), rho-zCDP for the discrete Gaussian
    (k collections: k rho) with its (epsilon, delta) conversion (analysis.accounting.Zcdp)."""
    kind, parameter = spec.dp_parameter()
    if parameter is None:
        return {"mechanism": "none", "per_collection": None, "collections": collections,
                "cumulative": None, "unit": UNIT}  # fmt: skip
    value = float(parameter)
    cumulative: dict[str, Any] | None = None
    if kind == "laplace":
        per = {"epsilon": value, "delta": 0.0}
        if collections:
            exact = (pure_dp(value) * collections).epsilon_at(delta)
            cumulative = {"epsilon": value * collections, "delta": 0.0,
                          "epsilon_at_delta": exact, "at_delta": delta}  # fmt: skip
    else:
        per = Zcdp(value).summary(delta)
        if collections:
            cumulative = (Zcdp(value) * collections).summary(delta)
    return {"mechanism": kind, "per_collection": per, "collections": collections,
            "cumulative": cumulative, "unit": UNIT}  # fmt: skip


def decode_result(
    spec: TaskSpec,
    resp: CollectionJobResp,
    req: CollectionJobReq,
    private_key: bytes,
    *,
    collections: int | None = None,
    delta: float = DEFAULT_DELTA,
) -> dict[str, Any]:
    """Open both aggregate shares, merge them, decode each field element as a signed integer."""
    vdaf = spec.build_vdaf()
    aad = AggregateShareAad(spec.task_id, spec.configuration(), req).encode()
    shares = []
    for role, sealed in (
        (Role.LEADER, resp.leader_encrypted_agg_share),
        (Role.HELPER, resp.helper_encrypted_agg_share),
    ):
        plain = open_base(private_key, sealed.enc, aggregate_share_info(role), aad, sealed.payload)
        shares.append(vdaf.decode_agg_share(None, plain))
    merged = [signed(x, vdaf.field.MODULUS) for x in vdaf.merge(None, shares)]
    std_error = spec.noise_std_error()
    privacy = guarantee(spec, collections, delta)
    per = privacy["per_collection"] or {}
    return {
        "task_id": spec.task_id_text,
        "vdaf": spec.vdaf,
        "interval": {"start": resp.interval.start, "duration": resp.interval.duration},
        "report_count": resp.report_count,
        "estimate": merged[0] if spec.vdaf["type"] in ("count", "sum") else merged,
        "std_errors": [std_error] * len(merged),
        "epsilon": per.get("epsilon"),
        "delta": per.get("delta"),
        "rho": per.get("rho"),
        "dp": spec.dp,
        "privacy": privacy,
        "assumes": (
            "at least one of the two aggregators is honest (adds its noise and does not collude)"
            if privacy["per_collection"] is not None
            else "no noise: the exact sum is released to the Collector"
        ),
    }


def collect(
    spec: TaskSpec,
    *,
    leader: str,
    token: str,
    private_key: bytes,
    interval: Interval,
    timeout: float = 300.0,
    sleep: Callable[[float], None] = time.sleep,
    delta: float = DEFAULT_DELTA,
) -> dict[str, Any]:
    """Run one collection job for ``interval`` and return the decoded result, with the
    guarantee composed over the task's collections the Leader lists (this one included).
    ``RuntimeError`` naming the Leader's problem document if it refuses."""
    req = CollectionJobReq(Query.time_interval(interval))
    job = b64encode(os.urandom(16))
    url = f"{leader.rstrip('/')}/tasks/{spec.task_id_text}/collection_jobs/{job}"
    headers = {"Authorization": f"Bearer {token}"}
    put = requests.put(
        url,
        data=req.encode(),
        headers={**headers, "Content-Type": CollectionJobReq.MEDIA_TYPE},
        timeout=60,
    )
    if put.status_code not in (200, 201):
        raise RuntimeError(f"the Leader refused the collection job: {put.status_code} {put.text}")
    deadline = time.monotonic() + timeout
    while True:
        poll = requests.get(url, headers=headers, timeout=120)
        if poll.status_code == 200:
            resp = CollectionJobResp.decode(poll.content)
            count = _collections(leader, spec, headers)
            return decode_result(spec, resp, req, private_key, collections=count, delta=delta)
        if poll.status_code != 202:
            raise RuntimeError(f"the collection job failed: {poll.status_code} {poll.text}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the collection job was not ready within {timeout} s")
        retry = poll.headers.get("Retry-After", "1")
        sleep(min(float(retry) if retry.isdigit() else 1.0, POLL_LIMIT))


def _collections(leader: str, spec: TaskSpec, headers: dict[str, str]) -> int | None:
    """How many collections of the task the Leader has answered; None if it cannot say (a
    Leader without this project's ``/collections`` route)."""
    url = f"{leader.rstrip('/')}/tasks/{spec.task_id_text}/collections"
    try:
        answer = requests.get(url, headers=headers, timeout=60)
        return len(answer.json()["collections"]) if answer.status_code == 200 else None
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
