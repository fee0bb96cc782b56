"""The DAP Collector (draft-ietf-ppm-dap-18, "Collecting Results"): start a collection job on
the Leader, poll it (honouring ``Retry-After``), open both aggregate shares and unshard.

The result is in the estimate shape: the values, their standard errors from the noise both
aggregators added (the sum of two independent discrete Laplace draws: variance 2 Var[DL],
docs/math/dap-noise.md), the number of reports, and the guarantee with what it assumes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import requests

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

__all__ = ["collect", "decode_result"]

POLL_LIMIT = 30  # seconds of Retry-After honoured at most, each time


def decode_result(
    spec: TaskSpec, resp: CollectionJobResp, req: CollectionJobReq, private_key: bytes
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
    epsilon = spec.epsilon()
    std_error = spec.noise_std_error()
    return {
        "task_id": spec.task_id_text,
        "vdaf": spec.vdaf,
        "interval": {"start": resp.interval.start, "duration": resp.interval.duration},
        "report_count": resp.report_count,
        "estimate": merged[0] if spec.vdaf["type"] in ("count", "sum") else merged,
        "std_errors": [std_error] * len(merged),
        "epsilon": None if epsilon is None else float(epsilon),
        "dp": spec.dp,
        "assumes": (
            "at least one of the two aggregators is honest (adds its noise and does not collude)"
            if epsilon is not None
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
) -> dict[str, Any]:
    """Run one collection job for ``interval`` and return the decoded result.
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
            return decode_result(spec, resp, req, private_key)
        if poll.status_code != 202:
            raise RuntimeError(f"the collection job failed: {poll.status_code} {poll.text}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the collection job was not ready within {timeout} s")
        retry = poll.headers.get("Retry-After", "1")
        sleep(min(float(retry) if retry.isdigit() else 1.0, POLL_LIMIT))
