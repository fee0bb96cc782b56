"""``ldp-shuffler``: the anonymizing shuffler between devices and the collector.

    ldp-shuffler init-db --db shuffler.db
    ldp-shuffler serve --db shuffler.db --collector http://127.0.0.1:8000 --port 8100
    ldp-shuffler forward --db shuffler.db --collector URL   # the forwarder alone
    ldp-shuffler credentials keygen --key operator.key      # device credentials (optional)
    ldp-shuffler credentials issue --key operator.key --count 1000

``serve`` runs the app under gunicorn (the collector's gthread worker and address-free logger,
``collector.server``) and the forwarder beside it in a child process of the same process group,
restarted with a growing delay whenever it exits (``shuffler.supervisor``; ``/readyz`` says
``forwarder-down`` meanwhile).
The collector token is ``LDP_SHUFFLER_TOKEN`` (the same variable on the collector). It prints
``ldp-shuffler: serving http://HOST:PORT`` once it listens. No access log: the shuffler keeps
nothing about who sent what.
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from client_sdk._extras import closed_pipe
from client_sdk._version import __version__
from collector.cors import cors_origin
from collector.dbguard import check_private_database
from collector.server import LOGGER_CLASS, WORKER_CLASS, GunicornApp
from shuffler.credentials import DEFAULT_QUOTA
from shuffler.forwarder import DEFAULT_MAX_REQUEST_BYTES
from shuffler.storage import DEFAULT_MAX_AGE, DEFAULT_MAX_PENDING, ShufflerStorage
from shuffler.trust import DEFAULT_MIN_BATCH_FLOOR

TOKEN_ENV = "LDP_SHUFFLER_TOKEN"
MIN_TOKEN_LENGTH = 16


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ldp-shuffler",
        description="The anonymizing shuffler between devices and the collector: it holds "
        "sealed reports until a campaign's batch is large enough, then forwards them in a "
        "random order without who sent them. The collector token is the environment variable "
        f"{TOKEN_ENV}.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    init_db = commands.add_parser("init-db", help="create the shuffler's database")
    init_db.add_argument("--db", required=True, help="the shuffler's SQLite database to create")
    init_db.set_defaults(handler=_init_db)
    credentials = commands.add_parser(
        "credentials", help="the app operator's device credentials (shuffler.credentials)"
    )
    actions = credentials.add_subparsers(dest="action", required=True, metavar="ACTION")
    keygen = actions.add_parser(
        "keygen", help="make a signing key (0600) and its verify key (KEY.pub) for serve"
    )
    keygen.add_argument("--key", required=True, help="where the signing key goes (never replaced)")
    keygen.set_defaults(handler=_keygen)
    issue = actions.add_parser("issue", help="print new per-install tokens, one a line")
    issue.add_argument("--key", required=True, help="the signing key keygen wrote")
    issue.add_argument("--count", type=_at_least_one, default=1, help="tokens to print (1)")
    issue.set_defaults(handler=_issue)
    for name, handler, text in (
        (
            "serve",
            _serve,
            "take sealed uploads over HTTP and forward them in shuffled batches (runs the "
            "forwarder beside the server and restarts it when it exits)",
        ),
        ("forward", _forward, "only forward waiting reports in shuffled batches (no server)"),
    ):
        sub = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        sub.add_argument(
            "--db", required=True, help="the shuffler's SQLite database (made by init-db)"
        )
        sub.add_argument("--collector", required=True, help="the collector's base URL")
        sub.add_argument(
            "--max-batch",
            type=_at_least_one,
            default=10_000,
            metavar="N",
            help="most reports forwarded in one batch (10000)",
        )
        sub.add_argument("--interval", type=float, default=0.2, help="seconds between rounds")
        sub.add_argument(
            "--max-wait",
            type=_seconds,
            default=None,
            metavar="SECONDS",
            help="collect up to --max-batch reports, forwarding at the latest this long after "
            "a campaign's oldest waiting report arrived (never fewer than min_batch); default: "
            "forward as soon as min_batch wait",
        )
        sub.add_argument(
            "--min-batch-floor",
            type=_at_least_two,
            default=DEFAULT_MIN_BATCH_FLOOR,
            metavar="N",
            help="never forward a batch of fewer than N reports, whatever min_batch the "
            f"collector's campaign document says ({DEFAULT_MIN_BATCH_FLOOR})",
        )
        sub.add_argument(
            "--max-age",
            type=_positive_seconds,
            default=DEFAULT_MAX_AGE,
            metavar="SECONDS",
            help="drop a report that waited this long for a batch (counted in /metrics as "
            f"ldp_shuffler_expired_reports_total; default {DEFAULT_MAX_AGE:.0f}: a week)",
        )
        sub.add_argument(
            "--max-request-bytes",
            type=_at_least_one,
            default=DEFAULT_MAX_REQUEST_BYTES,
            help="largest request body sent to the collector; a larger batch travels in parts "
            f"(default {DEFAULT_MAX_REQUEST_BYTES}; lowered by itself on a 413)",
        )
        sub.add_argument(
            "--allow-readable-db",
            action="store_true",
            help="serve a database other users may read (default: refuse; it holds the "
            "shuffler's digest key and the waiting envelopes)",
        )
        sub.add_argument(
            "--concurrency",
            type=_at_least_one,
            default=2,
            help="batches in flight to the collector (2)",
        )
        if name == "forward":
            sub.add_argument(
                "--exit-with-parent",
                action="store_true",
                help="stop when the process that started this one is gone (serve's child)",
            )
        if name == "serve":
            sub.add_argument(
                "--restart-delay",
                type=_seconds,
                default=1.0,
                metavar="SECONDS",
                help="wait before restarting an exited forwarder; doubles after each exit, up to "
                "30 s (1)",
            )
            sub.add_argument(
                "--credentials-key",
                metavar="PUB",
                default=None,
                help="take uploads only with a device token signed by this operator's key (the "
                ".pub file of 'credentials keygen'); default: from anyone",
            )
            sub.add_argument(
                "--quota",
                type=_at_least_one,
                default=DEFAULT_QUOTA,
                help="reports one credential may have waiting per campaign, so at most this many "
                f"of one device in a batch ({DEFAULT_QUOTA})",
            )
            sub.add_argument(
                "--max-pending",
                type=_at_least_one,
                default=DEFAULT_MAX_PENDING,
                help="most reports waiting per campaign; an upload beyond it is refused (503) "
                f"before it is acknowledged (default {DEFAULT_MAX_PENDING})",
            )
            sub.add_argument("--host", default="127.0.0.1", help="address to listen on")
            sub.add_argument("--port", type=int, default=8100, help="port (0: a free one; 8100)")
            sub.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
            sub.add_argument("--threads", type=int, default=4, help="threads per worker (4)")
            sub.add_argument(
                "--log-level", default="warning", help="gunicorn error log level (warning)"
            )
            sub.add_argument(
                "--cors-origin",
                action="append",
                default=[],
                type=cors_origin,
                metavar="ORIGIN",
                help="a web origin (scheme://host[:port]) whose pages may upload reports; "
                "repeatable (default: none, no CORS)",
            )
        sub.set_defaults(handler=handler)
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:  # also refuses nan and what is not a number
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0; got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0; got {text!r}")
    return value


def _at_least(minimum: int, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}; got {text!r}")
    return value


_at_least_one = functools.partial(_at_least, 1)
_at_least_two = functools.partial(_at_least, 2)  # a batch of one is not shuffled at all


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # an OSError: the reader of stdout left (``| head``), not a failure
        return closed_pipe()
    except (ValueError, LookupError, OSError, RuntimeError) as error:
        print(f"ldp-shuffler {args.command}: error: {error}", file=sys.stderr)
        return 2


def _init_db(args: argparse.Namespace) -> int:
    ShufflerStorage(args.db).close()
    print(f"shuffler database {args.db} is ready")
    return 0


def _keygen(args: argparse.Namespace) -> int:
    from shuffler.credentials import verify_key_text, write_signing_key

    verify_key = write_signing_key(args.key)
    print(f"signing key written to {args.key} (keep it secret); verify key in {args.key}.pub:")
    print(verify_key_text(verify_key))
    return 0


def _issue(args: argparse.Namespace) -> int:
    from shuffler.credentials import issue_token, load_signing_key

    key = load_signing_key(args.key)
    for _ in range(args.count):
        print(issue_token(key))
    return 0


def _token() -> str:
    token = os.environ.get(TOKEN_ENV, "")
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"set {TOKEN_ENV} to a secret of at least {MIN_TOKEN_LENGTH} characters")
    return token


def _forward(args: argparse.Namespace) -> int:
    from shuffler.forwarder import Forwarder

    check_private_database(args.db, allow_readable=args.allow_readable_db)
    logging.basicConfig(level=logging.INFO, format="ldp-shuffler forward: %(message)s")
    forwarder = Forwarder(
        args.db,
        args.collector,
        _token(),
        max_batch=args.max_batch,
        max_wait=args.max_wait,
        interval=args.interval,
        concurrency=args.concurrency,
        min_batch_floor=args.min_batch_floor,
        max_age=args.max_age,
        max_request_bytes=args.max_request_bytes,
    )
    if args.exit_with_parent:
        parent = os.getppid()
        threading.Thread(target=_stop_when_orphaned, args=(forwarder, parent), daemon=True).start()
    try:
        forwarder.run()
    finally:
        forwarder.close()
    return 0


def _stop_when_orphaned(forwarder: Any, parent: int) -> None:
    """Stop ``forwarder`` once ``serve`` (its parent) is gone, so a new ``serve`` never runs
    beside an orphaned forwarder."""
    while not forwarder.stopped.wait(1.0):
        if os.getppid() != parent:
            forwarder.stop()


def _serve(args: argparse.Namespace) -> int:
    _token()
    check_private_database(args.db, allow_readable=args.allow_readable_db)
    ShufflerStorage(args.db).close()  # a new database is created 0600 here
    from shuffler.app import create_app
    from shuffler.credentials import load_verifier
    from shuffler.supervisor import ForwarderSupervisor

    app = create_app(
        {
            "DB": args.db,
            "COLLECTOR": args.collector,
            "MAX_BATCH": args.max_batch,
            "MIN_BATCH_FLOOR": args.min_batch_floor,
            "VERIFIER": (
                None if args.credentials_key is None else load_verifier(args.credentials_key)
            ),
            "QUOTA": args.quota,
            "MAX_PENDING": args.max_pending,
            "CORS_ORIGINS": args.cors_origin,
        }
    )
    command = [sys.executable, "-m", "shuffler.cli", "forward", "--db", args.db]
    command += ["--collector", args.collector, "--max-batch", str(args.max_batch)]
    command += ["--interval", str(args.interval), "--concurrency", str(args.concurrency)]
    command += ["--min-batch-floor", str(args.min_batch_floor), "--exit-with-parent"]
    command += ["--max-age", str(args.max_age)]
    command += ["--max-request-bytes", str(args.max_request_bytes)]
    if args.allow_readable_db:
        command += ["--allow-readable-db"]
    if args.max_wait is not None:
        command += ["--max-wait", str(args.max_wait)]
    supervisor = ForwarderSupervisor(command, args.db, first_delay=args.restart_delay)
    supervisor.start()
    host = f"[{args.host}]" if ":" in args.host else args.host
    options: dict[str, Any] = {
        "bind": f"{host}:{args.port}",
        "workers": args.workers,
        "threads": args.threads,
        "worker_class": WORKER_CLASS,
        "logger_class": LOGGER_CLASS,
        "preload_app": True,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": args.log_level,
        "proc_name": "ldp-shuffler",
        "when_ready": functools.partial(_when_ready, supervisor=supervisor),
        "control_socket_disable": True,
    }
    try:
        GunicornApp(app, options).run()  # with metrics exact across workers
    finally:
        supervisor.stop()  # in the master only (workers unwind through here too)
    return 0


def _when_ready(server: Any, *, supervisor: Any) -> None:
    supervisor.stop_on_signals()
    _announce(server)


def _announce(server: Any) -> None:
    for listener in server.LISTENERS:
        host, port = listener.sock.getsockname()[:2]
        print(f"ldp-shuffler: serving http://{host}:{port}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
