"""``ldp-collector dap``: HPKE keys, task provisioning and the Leader's aggregation driver.

    ldp-collector dap keygen --out key.json [--config-id N]
    ldp-collector dap task add --db DB --task task.json --role leader|helper \\
        --verify-key B64 --hpke-key key.json --collector-hpke-config B64 \\
        --aggregator-token TOKEN [--collector-token TOKEN]
    ldp-collector dap drive --db DB [--task-id ID] [--job-size N] [--loop SECONDS]
    ldp-collector dap gc --db DB [--task-id ID]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from client_sdk.dap.hpke import generate_key_pair
from client_sdk.dap.messages import HpkeConfig
from collector.dap import aggregator
from collector.dap.api import send
from collector.dap.task import AggregatorTask, TaskSpec, b64decode, b64encode
from collector.storage import Storage

__all__ = ["register"]

MIN_TOKEN_LENGTH = 16


def register(commands: Any) -> None:
    dap = commands.add_parser("dap", help="the DAP aggregators (Leader, Helper)")
    actions = dap.add_subparsers(dest="action", required=True, metavar="ACTION")

    keygen = actions.add_parser("keygen", help="an X25519 HPKE key pair and its HpkeConfig")
    keygen.add_argument("--out", required=True, help="the key file to write (0600)")
    keygen.add_argument("--config-id", type=int, default=1, help="HpkeConfig id (0-255)")
    keygen.set_defaults(handler=_keygen)

    task = actions.add_parser("task", help="provision tasks")
    task_actions = task.add_subparsers(dest="task_action", required=True, metavar="ACTION")
    add = task_actions.add_parser("add", help="provision a task in this aggregator")
    add.add_argument("--db", required=True, help="this aggregator's collector database")
    add.add_argument("--task", required=True, help="the task file (JSON, docs/dap.md)")
    add.add_argument(
        "--role",
        required=True,
        choices=("leader", "helper"),
        help="this aggregator's role in the task",
    )
    add.add_argument(
        "--verify-key",
        required=True,
        help="the VDAF verify key (base64url; write --verify-key=KEY, as a key may start with -)",
    )
    add.add_argument("--hpke-key", required=True, help="this aggregator's key file (dap keygen)")
    add.add_argument(
        "--collector-hpke-config", required=True, help="the Collector's HpkeConfig (base64url)"
    )
    add.add_argument("--aggregator-token", required=True, help="bearer token Leader -> Helper")
    add.add_argument("--collector-token", default="", help="bearer token Collector -> Leader")
    add.set_defaults(handler=_task_add)

    drive = actions.add_parser("drive", help="the Leader's aggregation jobs to the Helper")
    drive.add_argument("--db", required=True, help="the Leader's collector database")
    drive.add_argument("--task-id", help="one task (default: every Leader task)")
    drive.add_argument("--job-size", type=int, default=1000, help="reports per job")
    drive.add_argument("--loop", type=float, default=0, help="repeat every SECONDS (0: once)")
    drive.set_defaults(handler=_drive)

    gc = actions.add_parser(
        "gc",
        help="retention: drop expired pending reports, forget expired anti-replay ids and "
        "the aggregation jobs no one can ask for again",
    )
    gc.add_argument("--db", required=True, help="a Leader's or a Helper's collector database")
    gc.add_argument("--task-id", help="one task (default: every task here)")
    gc.set_defaults(handler=_gc)


def _keygen(args: argparse.Namespace) -> int:
    if not 0 <= args.config_id <= 255:
        raise ValueError(f"--config-id must be in [0, 255]; got {args.config_id}")
    pair = generate_key_pair()
    config = HpkeConfig(args.config_id, 0x0020, 0x0001, 0x0001, pair.public_key)
    document = {
        "hpke_config": b64encode(config.encode()),
        "private_key": b64encode(pair.private_key),
    }
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(document, file)
    print(document["hpke_config"])
    return 0


def read_key(path: str) -> tuple[HpkeConfig, bytes]:
    """An ``HpkeConfig`` and private key from a ``dap keygen`` file."""
    with open(path, encoding="utf-8") as file:
        document = json.load(file)
    config = HpkeConfig.decode(b64decode(document["hpke_config"], "hpke_config"))
    return config, b64decode(document["private_key"], "private_key", 32)


def _task_add(args: argparse.Namespace) -> int:
    spec = TaskSpec.load(args.task)
    config, private_key = read_key(args.hpke_key)
    vdaf = spec.build_vdaf()
    for flag, token in (
        ("--aggregator-token", args.aggregator_token),
        ("--collector-token", args.collector_token),
    ):
        if token and len(token) < MIN_TOKEN_LENGTH:
            raise ValueError(f"{flag} must be at least {MIN_TOKEN_LENGTH} characters")
    if args.role == "leader" and not args.collector_token:
        raise ValueError("--collector-token is required for a leader task")
    task = AggregatorTask(
        spec=spec,
        role=args.role,
        verify_key=b64decode(args.verify_key, "--verify-key", vdaf.VERIFY_KEY_SIZE),
        hpke_config=config,
        hpke_private_key=private_key,
        collector_hpke_config=HpkeConfig.decode(
            b64decode(args.collector_hpke_config, "--collector-hpke-config")
        ),
        aggregator_token=args.aggregator_token,
        collector_token=args.collector_token,
    )
    with Storage(args.db, create=False) as storage:
        aggregator.provision(storage.db.conn, task)
    print(f"dap task {spec.task_id_text}: {args.role}")
    return 0


def _drive(args: argparse.Namespace) -> int:
    with Storage(args.db, create=False) as storage:
        conn = storage.db.conn
        while True:
            ids = (
                [args.task_id]
                if args.task_id
                else [
                    r[0]
                    for r in conn.execute("SELECT task_id FROM dap_tasks WHERE role = 'leader'")
                ]
            )
            for task_id in ids:
                task = aggregator.load_task(conn, task_id, "leader")
                totals = aggregator.drive(conn, task, send, job_size=args.job_size)
                print(f"dap drive {task_id}: {json.dumps(totals)}", flush=True)
            if args.loop <= 0:
                return 0
            time.sleep(args.loop)


def _gc(args: argparse.Namespace) -> int:
    with Storage(args.db, create=False) as storage:
        conn = storage.db.conn
        rows = conn.execute("SELECT task_id, role FROM dap_tasks").fetchall()
        for task_id, role in rows:
            if args.task_id in (None, task_id):
                task = aggregator.load_task(conn, task_id, role)
                counts = aggregator.forget_expired(conn, task)
                print(f"dap gc {task_id}: {json.dumps(counts)}", flush=True)
    return 0
