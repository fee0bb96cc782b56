"""``ldp-demo --dap``: the third trust model end to end on this machine (docs/dap.md).

1. Two collector services (``ldp-collector serve``, real processes on free local ports): the
   DAP Leader and the Helper, each with its own SQLite database.
2. A Histogram task (one bucket per label; with ``--local-mechanism sue|oue`` a
   MultihotCountVec task of length = max_weight = labels) provisioned on both through
   ``ldp-collector dap keygen`` and ``dap task add``, each Aggregator adding discrete Laplace
   noise at ``epsilon`` (``dp = "laplace:EPSILON"``, docs/math/dap-noise.md), or the noise
   ``dp`` names (``--dp gaussian:RHO``: the discrete Gaussian, rho-zCDP); its campaign
   document (the task's public part and both HPKE keys) is what the app pins.
3. A simulated fleet (a Zipf population over the labels) through the real ``TelemetryClient``
   (``clients`` of them, each with its own ``state_dir``, in threads), whose ``PrivacyPolicy``
   trusts exactly these two Aggregators and sets its central ceiling at the task's epsilon
   (a Gaussian task's at the policy's ``max_central_delta``): each value sharded with Prio3,
   both shares sealed,
   queued and uploaded to the Leader. With ``--local-epsilon``, each value is first randomized
   on the device (a local guarantee too): k-ary randomized response (``grr``, reported one-hot)
   or, with ``--local-mechanism sue|oue``, a unary encoding whose bit vector is sharded (Prio3's
   MultihotCountVec composition).
4. ``ldp-collector dap drive`` aggregates with the Helper; the Collector role
   (``analysis.dap_collect``) collects the interval and unshards; with local randomization the
   histogram is debiased (``analysis.dap_local``).

It prints the truth beside the estimate with its standard errors (``--json``: one document
with ``devices``, ``accepted``, ``truth``, ``estimate``, ``std_errors``, ``epsilon``).
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from analysis.demo_population import zipf_population
from client_sdk import PrivacyPolicy, TelemetryClient
from client_sdk.dap.campaign import (
    DapCampaign,
    b64encode,
    dap_campaign_document,
    dap_object,
    dp_parameter,
)
from client_sdk.dap.messages import Interval
from client_sdk.vdaf.rr import unary_chunk_length

__all__ = ["CAMPAIGN_NAME", "dap_lines", "run_dap_demo"]

CAMPAIGN_NAME = "demo-dap"
TIME_PRECISION = 3600
MIN_BATCH_SIZE = 100


def run_dap_demo(
    *,
    devices: int = 1_000,
    labels: int = 8,
    epsilon: float = 1.0,
    local_epsilon: float | None = None,
    local_mechanism: str = "grr",
    dp: str | None = None,
    seed: int = 0,
    clients: int = 2,
    keep: bool = False,
    workdir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run the whole DAP pipeline (module docstring); the result document ``--json`` prints.
    ``dp``: the task's noise (``"laplace:EPSILON"``, ``"gaussian:RHO"`` or ``"none"``); ``None``
    is ``"laplace:<epsilon>"``. ``local_mechanism``: ``grr`` (before a Histogram task), ``sue``
    or ``oue`` (before a MultihotCountVec task), used with ``local_epsilon``."""
    from analysis.dap_collect import collect
    from analysis.dap_local import for_campaign
    from collector.dap.cli import read_key
    from collector.dap.task import TaskSpec
    from collector.process import CollectorProcess

    if devices < MIN_BATCH_SIZE:
        raise ValueError(
            f"devices must be at least the task's min_batch_size {MIN_BATCH_SIZE}; got {devices}"
        )
    if labels < 2:
        raise ValueError(f"labels must be at least 2; got {labels}")
    dp = f"laplace:{epsilon}" if dp is None else dp
    dp_parameter(dp, "dp")  # a bad --dp is refused before any process starts
    if local_mechanism not in ("grr", "sue", "oue"):
        raise ValueError(f"local_mechanism must be grr, sue or oue; got {local_mechanism!r}")
    unary = local_mechanism != "grr"
    if unary and local_epsilon is None:
        raise ValueError(f"local_mechanism {local_mechanism} needs a local_epsilon")
    started = time.perf_counter()
    root = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="ldp-demo-dap-"))
    root.mkdir(parents=True, exist_ok=True)
    domain = [f"item-{i:02d}" for i in range(labels)]
    values = zipf_population(devices, labels, seed=seed)
    aggregator_token, collector_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    leader = CollectorProcess(root / "leader.db", workers=1, log_dir=root)
    helper = CollectorProcess(root / "helper.db", workers=1, log_dir=root)
    try:
        with leader, helper:
            task = {
                "task_id": b64encode(os.urandom(32)),
                "task_info": "ldp-demo --dap",
                "leader": f"{leader.url}/dap/",
                "helper": f"{helper.url}/dap/",
                "vdaf": (
                    {
                        "type": "multihotcountvec",
                        "length": labels,
                        "max_weight": labels,
                        "chunk_length": unary_chunk_length(labels),
                    }
                    if unary
                    else {
                        "type": "histogram",
                        "length": labels,
                        "chunk_length": max(1, math.isqrt(labels)),
                    }
                ),
                "min_batch_size": MIN_BATCH_SIZE,
                "time_precision": TIME_PRECISION,
                "dp": dp,
            }
            task_file = root / "task.json"
            task_file.write_text(json.dumps(task), encoding="utf-8")
            spec = TaskSpec.load(str(task_file))
            collector_config = _cli("dap", "keygen", "--out", str(root / "collector.json"))
            verify_key = b64encode(os.urandom(spec.build_vdaf().VERIFY_KEY_SIZE))
            keys = {}
            for role, server in (("leader", leader), ("helper", helper)):
                key_file = str(root / f"{role}.json")
                _cli("dap", "keygen", "--out", key_file)
                _cli(
                    "dap", "task", "add", "--db", server.db, "--task", str(task_file),
                    "--role", role, f"--verify-key={verify_key}", "--hpke-key", key_file,
                    f"--collector-hpke-config={collector_config.strip()}",
                    # "=": a random base64url value may begin with "-", which argparse would
                    # take for an option and refuse
                    f"--aggregator-token={aggregator_token}",
                    f"--collector-token={collector_token if role == 'leader' else ''}",
                )  # fmt: skip
                keys[role] = read_key(key_file)[0]
            local = None
            if local_epsilon is not None:
                local = {"mechanism": local_mechanism, "epsilon": local_epsilon, "k": labels}
            document = dap_campaign_document(
                CAMPAIGN_NAME,
                dap_object(spec.to_json(), keys["leader"], keys["helper"]),
                domain=domain,
                local=local,
            )
            # The app's policy: these two Aggregators, by URL and key, and the central ceiling
            # (the task's epsilon; a Gaussian task's at the policy's max_central_delta).
            policy: dict[str, Any] = {
                "trusted_aggregators": {
                    spec.leader: b64encode(keys["leader"].public_key),
                    spec.helper: b64encode(keys["helper"].public_key),
                },
            }
            campaign = DapCampaign.from_document(document, name=CAMPAIGN_NAME)
            central = campaign.central_epsilon_at(PrivacyPolicy().max_central_delta)
            if math.isfinite(central):
                policy["max_central_epsilon"] = central
            upload_started = time.perf_counter()
            shards = np.array_split(values, clients)
            # Threads, not processes: sharding is milliseconds a report, while a spawned
            # process would spend longer importing than the whole fleet takes.
            with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                futures = [
                    pool.submit(
                        run_dap_shard,
                        leader.url,
                        str(root / f"client-{i}"),
                        document,
                        policy,
                        [domain[v] for v in shard],
                    )
                    for i, shard in enumerate(shards)
                ]
                accepted = sum(f.result() for f in futures)
            upload_seconds = time.perf_counter() - upload_started
            drive = _cli("dap", "drive", "--db", str(leader.db))
            unit = int(time.time()) // TIME_PRECISION
            _config, private_key = read_key(str(root / "collector.json"))
            result = collect(
                spec,
                leader=f"{leader.url}/dap",
                token=collector_token,
                private_key=private_key,
                interval=Interval(unit - 1, 3),
            )
            result = for_campaign(result, document, spec.task_id)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    truth = np.bincount(values, minlength=labels)
    return {
        "devices": devices,
        "accepted": accepted,
        "labels": domain,
        "truth": [int(c) for c in truth],
        **result,
        "driver": drive.strip(),
        "upload_seconds": round(upload_seconds, 3),
        "total_seconds": round(time.perf_counter() - started, 3),
        "workdir": str(root) if keep else None,
    }


def run_dap_shard(
    leader_url: str,
    state_dir: str,
    document: dict[str, Any],
    policy: dict[str, Any],
    labels: list[str],
) -> int:
    """One client: record its devices' labels and flush; the reports acknowledged."""
    with TelemetryClient(
        leader_url,
        state_dir=state_dir,
        campaigns=[document],
        policy=PrivacyPolicy(**policy),
        batch_size=200,
    ) as client:
        for start in range(0, len(labels), 200):
            client.record_many(CAMPAIGN_NAME, labels[start : start + 200])
        return client.flush()


def dap_lines(result: dict[str, Any]) -> list[str]:
    """The human-readable summary of :func:`run_dap_demo`'s document."""
    lines = [
        f"DAP: {result['accepted']} of {result['devices']} devices' reports accepted by the "
        f"Leader, {result['report_count']} aggregated and collected "
        f"({result['total_seconds']:.1f} s, uploads {result['upload_seconds']:.1f} s).",
    ]
    if result.get("rho") is not None:
        lines.append(
            f"Central {result['rho']:g}-zCDP ({result['dp']}), epsilon {result['epsilon']:.4g} "
            f"at delta {result['delta']:g}: {result['assumes']}."
        )
    else:
        lines.append(f"Central epsilon {result['epsilon']} ({result['dp']}): {result['assumes']}.")
    if result.get("local_epsilon") is not None:
        lines.append(
            f"Local epsilon {result['local_epsilon']}: {result['local']['mechanism']} on each "
            "device before sharding (holds even if both aggregators collude)."
        )
    lines.append(f"{'label':<10} {'truth':>8} {'estimate':>10} {'std error':>10}")
    for label, truth, value, error in zip(
        result["labels"], result["truth"], result["estimate"], result["std_errors"], strict=True
    ):
        lines.append(f"{label:<10} {truth:>8} {value:>10.1f} {error:>10.2f}")
    return lines


def _cli(*args: str) -> str:
    """``ldp-collector ARGS`` as a real process; its stdout (``RuntimeError`` with stderr)."""
    from collector.process import entry_point

    done = subprocess.run(
        [*entry_point("ldp-collector", "collector.cli"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ldp-collector {args[0]} {args[1]}: {done.stderr.strip()}")
    return done.stdout
