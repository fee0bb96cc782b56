"""``ldp-analyze dashboard``: the live dashboard over a collector database, under gunicorn.

    LDP_ADMIN_TOKEN=... ldp-analyze dashboard --db collector.db --host 127.0.0.1 --port 8050
    LDP_ADMIN_TOKEN=... ldp-analyze dashboard --db shard-1.db --db shard-2.db --parquet lake/x

The admin token comes from the environment variable ``LDP_ADMIN_TOKEN`` (never a flag, so it
stays out of the process list and shell history); without one of at least 16 characters the
command refuses to start. It prints ``ldp-analyze dashboard: serving http://HOST:PORT`` once the
socket listens (``--port 0`` picks a free port), and ``ldp-analyze dashboard: warm (...)`` once
every campaign has been aggregated in the background (``--no-warm`` skips it). One gunicorn
worker process with threads serves it: sign-in sessions and the per-campaign cache live in that
process (:mod:`analysis.dashboard`). ``--certfile``/``--keyfile`` serve HTTPS (then the session
cookie is ``Secure``). The database is only read, so the dashboard runs beside a live collector.
Several ``--db`` and any ``--parquet`` export are merged with each report id once, the sources
of a campaign agreeing on its ``config_id`` (:mod:`analysis.dashboard.sources`).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

from analysis.commands._arguments import add_db_argument, add_parquet_argument
from collector.server import GunicornApp

TOKEN_VARIABLE = "LDP_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 16
ACCESS_LOG_FORMAT = '"%(r)s" %(s)s %(b)s %(M)sms'
"""Request line, status, size, duration: no client address, user agent or time."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dashboard",
        help="a live dashboard of the campaigns in a collector database (web, sign-in)",
        description=(
            "Serve a live dashboard of a collector database's campaigns: estimates with their "
            f"intervals, reports per day, privacy and the gap to the central model. Sign in with "
            f"the admin token from the environment variable {TOKEN_VARIABLE}."
        ),
    )
    add_db_argument(parser)
    add_parquet_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8050, help="port (0: a free one; default 8050)")
    parser.add_argument("--threads", type=int, default=4, help="threads serving requests (4)")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the intervals (0.95)"
    )
    parser.add_argument(
        "--poll-seconds", type=float, default=2.0, help="how often pages refresh (default 2)"
    )
    parser.add_argument("--certfile", default=None, help="TLS certificate (serve HTTPS)")
    parser.add_argument("--keyfile", default=None, help="TLS private key (with --certfile)")
    parser.add_argument(
        "--no-warm",
        action="store_true",
        help="do not aggregate every campaign at start (first views then wait for it)",
    )
    parser.add_argument("--no-access-log", action="store_true", help="no access log")
    parser.add_argument("--log-level", default="warning", help="gunicorn error log level")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    token = os.environ.get(TOKEN_VARIABLE, "")
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"refusing to start: set the environment variable {TOKEN_VARIABLE} to the admin "
            f"token (at least {MIN_TOKEN_LENGTH} characters)"
        )
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in [0, 65535]; got {args.port}")
    if args.threads < 1:
        raise ValueError(f"--threads must be at least 1; got {args.threads}")
    if not args.poll_seconds > 0:
        raise ValueError(f"--poll-seconds must be positive; got {args.poll_seconds}")
    if (args.certfile is None) != (args.keyfile is None):
        raise ValueError("--certfile and --keyfile go together")
    if not args.db and not args.parquet:
        raise ValueError("give at least one source: --db PATH or --parquet DIR")
    for db in args.db:
        if not os.path.isfile(db):
            raise FileNotFoundError(f"--db: no collector database at {db}")

    from analysis.dashboard import create_app

    app = create_app(
        args.db,
        token,
        parquet=args.parquet,
        confidence=args.confidence,
        poll_seconds=args.poll_seconds,
    )
    sources = " ".join(app.extensions["ldp_dashboard"]["backend"].labels())
    host = f"[{args.host}]" if ":" in args.host else args.host
    scheme = "https" if args.certfile else "http"
    options: dict[str, Any] = {
        "bind": f"{host}:{args.port}",
        "workers": 1,
        "threads": args.threads,
        "worker_class": "gthread",
        "timeout": 60,
        "preload_app": True,
        "accesslog": None if args.no_access_log else "-",
        "access_log_format": ACCESS_LOG_FORMAT,
        "errorlog": "-",
        "loglevel": args.log_level,
        "proc_name": "ldp-dashboard",
        "when_ready": _announce(scheme, sources),
    }
    if not args.no_warm:
        options["post_worker_init"] = _warm(app)
    if args.certfile:
        options.update(certfile=args.certfile, keyfile=args.keyfile)
    GunicornApp(app, options, multiprocess_metrics=False).run()  # it serves no /metrics
    return 0


def _announce(scheme: str, sources: str) -> Any:
    def when_ready(server: Any) -> None:
        addresses = []
        for listener in server.LISTENERS:
            host, port = listener.sock.getsockname()[:2]
            addresses.append(f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}")
        print(f"ldp-analyze dashboard: serving {', '.join(addresses)} ({sources})", flush=True)

    return when_ready


def _warm(app: Any) -> Any:
    """A gunicorn hook: aggregate every campaign in a thread of the (one) worker process."""

    def post_worker_init(_worker: Any) -> None:
        backend = app.extensions["ldp_dashboard"]["backend"]

        def warm() -> None:
            start = time.perf_counter()
            try:
                campaigns, reports = backend.warm()
            except Exception as error:  # a bad database shows on the pages; keep serving
                print(f"ldp-analyze dashboard: warm-up failed: {error}", file=sys.stderr)
                return
            print(
                f"ldp-analyze dashboard: warm ({campaigns} campaigns, {reports} reports, "
                f"{time.perf_counter() - start:.1f} s)",
                flush=True,
            )

        threading.Thread(target=warm, name="ldp-dashboard-warm", daemon=True).start()

    return post_worker_init
