"""``ldp-analyze collect``: the DAP Collector role.

    ldp-analyze collect --task task.json --leader URL --collector-key key.json \\
        --token TOKEN --interval START,DURATION

``START`` and ``DURATION`` are in units of the task's ``time_precision``. Prints one JSON
document: the estimate, its standard errors from the aggregators' noise, the report count,
the guarantee per collection and over the task's collections so far, and the trust assumption
(docs/dap.md). ``--campaign FILE`` (the campaign document the devices pinned) debiases a
histogram or count randomized on the devices (its ``local``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from analysis.dap_collect import DEFAULT_DELTA, collect
from analysis.dap_local import for_campaign
from client_sdk.dap.messages import Interval
from collector.dap.cli import read_key
from collector.dap.task import TaskSpec


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("collect", help="collect a DAP batch from the Leader")
    parser.add_argument("--task", required=True, help="the task file (JSON, docs/dap.md)")
    parser.add_argument("--leader", required=True, help="the Leader's DAP URL (.../dap)")
    parser.add_argument(
        "--collector-key", required=True, help="key file (ldp-collector dap keygen)"
    )
    parser.add_argument("--token", required=True, help="the collector bearer token")
    parser.add_argument("--interval", required=True, help="START,DURATION in time units")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait")
    parser.add_argument(
        "--delta",
        type=float,
        default=DEFAULT_DELTA,
        help=f"delta of a Gaussian task's (epsilon, delta) figures (default {DEFAULT_DELTA:g})",
    )
    parser.add_argument(
        "--campaign",
        default=None,
        help="the task's campaign document (docs/dap.md): with local randomized response, the "
        "result is debiased and both guarantees stated",
    )
    parser.set_defaults(handler=_collect)


def _interval(text: str) -> Interval:
    start, _, duration = text.partition(",")
    if not (start.isdigit() and duration.isdigit()) or int(duration) < 1:
        raise ValueError(
            f"--interval must be START,DURATION (integers, DURATION >= 1); got {text!r}"
        )
    return Interval(int(start), int(duration))


def _collect(args: argparse.Namespace) -> int:
    spec = TaskSpec.load(args.task)
    _config, private_key = read_key(args.collector_key)
    result = collect(
        spec,
        leader=args.leader,
        token=args.token,
        private_key=private_key,
        interval=_interval(args.interval),
        timeout=args.timeout,
        delta=args.delta,
    )
    if args.campaign is not None:
        with open(args.campaign, encoding="utf-8") as file:
            result = for_campaign(result, json.load(file), spec.task_id)
    print(json.dumps(result))
    return 0
