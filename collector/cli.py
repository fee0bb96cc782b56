"""``ldp-collector``: serve the collector under gunicorn, initialise a database, create campaigns.

    ldp-collector init-db --db collector.db
    ldp-collector serve --db collector.db --host 127.0.0.1 --port 8000 --workers 2
    ldp-collector campaign create --file campaign.json --db collector.db
    ldp-collector campaign list|show|close --db collector.db [--name NAME]
    ldp-collector keys rotate --db collector.db
    ldp-collector export --db collector.db --campaign NAME --out DIR [--since DAY] [--until DAY]

``serve`` opens a database that ``init-db`` made (or creates one with ``--create``) and serves
it with gthread workers (``collector.server``). It needs the admin token in the environment
variable ``LDP_ADMIN_TOKEN`` and refuses to start without one. It prints ``ldp-collector:
serving http://HOST:PORT ...`` on stdout once the socket listens (``--port 0`` picks a free
port). The access log carries no client address, user agent or timestamp: only the request
line, status, size and duration; the error log carries no address either.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from client_sdk._extras import closed_pipe
from client_sdk._version import __version__
from collector import leases, retention
from collector.cli_checks import check_database_path, check_port_free, database_error_message
from collector.cors import cors_origin
from collector.dap import cli as dap_cli
from collector.dap.aggregator import DapProblem
from collector.dap.driver import DriveWorker
from collector.lifecycle import default_policy_warnings
from collector.server import LOGGER_CLASS, WORKER_CLASS, GunicornApp
from collector.settings import ENV_PREFIX, SETTINGS
from collector.storage import (
    AnyStoredCampaign,
    CampaignConflict,
    SecureAggregationCampaign,
    Storage,
    StoredDapCampaign,
)

ACCESS_LOG_FORMAT = '"%(r)s" %(s)s %(b)s %(M)sms'
"""Request line, status, response size, duration: deliberately no ``%(h)s`` (client address),
``%(a)s`` (user agent), ``%(t)s`` (time) or forwarded-for headers."""

MIN_ADMIN_TOKEN_LENGTH = 16
DEFAULT_THREADS = 4


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ldp-collector", description="The LDP telemetry collector (Flask + SQLite)."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the HTTP API under gunicorn")
    serve.add_argument(
        "--db", required=True, help="SQLite database (made by init-db, or by --create)"
    )
    serve.add_argument(
        "--create",
        action="store_true",
        help="create the database if it does not exist (default: refuse; run init-db first)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (0: a free one; default 8000)")
    serve.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    serve.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help=f"threads per gthread worker (default {DEFAULT_THREADS})",
    )
    serve.add_argument("--timeout", type=int, default=30, help="worker timeout in seconds")
    serve.add_argument(
        "--no-access-log", action="store_true", help="disable the (address-free) access log"
    )
    serve.add_argument("--log-level", default="warning", help="gunicorn error log level")
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        type=cors_origin,
        metavar="ORIGIN",
        help="a web origin (scheme://host[:port]) whose pages may fetch campaigns and upload "
        "reports; repeatable (default: none, no CORS)",
    )
    serve.add_argument(
        "--dap-interop",
        action="store_true",
        help="TESTS ONLY: serve the DAP interop test API (/internal/test/*), which provisions "
        "tasks without credentials (docs/dap.md, Interop); needs --dap-drive-interval above 0",
    )
    serve.add_argument(
        "--retention-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds between cleanups of raw reports past their campaign's retention_days, "
        f"run by one worker at a time (default {ENV_PREFIX}RETENTION_INTERVAL or 3600; 0: off)",
    )
    serve.add_argument(
        "--dap-drive-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds between runs of the DAP Leader's aggregation driver: every Leader task's "
        "pending reports are aggregated with its Helper, one worker at a time per task, a "
        "failing Helper retried with backoff (default "
        f"{ENV_PREFIX}DAP_DRIVE_INTERVAL or 2; 0: off, drive with `ldp-collector dap drive`)",
    )
    serve.set_defaults(handler=_serve)

    dap_cli.register(commands)

    init_db = commands.add_parser("init-db", help="create the database or apply migrations")
    init_db.add_argument("--db", required=True, help="the collector's SQLite database")
    init_db.set_defaults(handler=_init_db)

    keys = commands.add_parser("keys", help="the X25519 key pairs devices seal reports to")
    keys_commands = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (("list", "list the key pairs"), ("rotate", "make a new active pair")):
        sub = keys_commands.add_parser(action, help=text)
        sub.add_argument("--db", required=True, help="the collector's SQLite database")
        sub.set_defaults(handler=_keys)

    campaign = commands.add_parser("campaign", help="manage campaigns directly in the database")
    campaign_commands = campaign.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = campaign_commands.add_parser("create", help="create a campaign from a JSON file")
    create.add_argument("--file", required=True, help="campaign JSON document ('-': stdin)")
    create.add_argument("--db", required=True, help="the collector's SQLite database")
    create.set_defaults(handler=_campaign_create)
    listing = campaign_commands.add_parser("list", help="every campaign: mechanism, n, status")
    listing.add_argument("--db", required=True, help="the collector's SQLite database")
    listing.set_defaults(handler=_campaign_list)
    for action, text, handler in (
        ("show", "a campaign's document, reports per day and status", _campaign_show),
        ("close", "close a campaign to new reports (its estimates stay)", _campaign_close),
    ):
        sub = campaign_commands.add_parser(action, help=text)
        sub.add_argument("--db", required=True, help="the collector's SQLite database")
        sub.add_argument("--name", required=True, help="the campaign's name")
        sub.set_defaults(handler=handler)
    delete = campaign_commands.add_parser(
        "delete", help="delete a campaign (refused while it has reports, unless --with-reports)"
    )
    delete.add_argument("--db", required=True, help="the collector's SQLite database")
    delete.add_argument("--name", required=True, help="the campaign's name")
    delete.add_argument(
        "--with-reports",
        action="store_true",
        help="delete its stored reports (and their estimates) with it; says how many",
    )
    delete.set_defaults(handler=_campaign_delete)
    cleanup = campaign_commands.add_parser(
        "cleanup", help="delete raw reports older than their campaign's retention_days"
    )
    cleanup.add_argument("--db", required=True, help="the collector's SQLite database")
    cleanup.add_argument(
        "--today",
        default=None,
        metavar="DAY",
        help="the UTC date to count from (YYYY-MM-DD; default LDP_TODAY, else today)",
    )
    cleanup.set_defaults(handler=_campaign_cleanup)

    export = commands.add_parser(
        "export", help="export a campaign's reports to Parquet, partitioned by day"
    )
    export.add_argument("--db", required=True, help="the collector's SQLite database")
    export.add_argument("--campaign", required=True, help="the campaign's name")
    export.add_argument("--out", required=True, help="export directory (one per campaign and db)")
    export.add_argument("--since", default=None, metavar="DAY", help="first day (YYYY-MM-DD)")
    export.add_argument("--until", default=None, metavar="DAY", help="last day (YYYY-MM-DD)")
    export.set_defaults(handler=_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _check_arguments(args)
        return int(args.handler(args))
    except BrokenPipeError:  # an OSError: the reader of stdout left (``| head``), not a failure
        return closed_pipe()
    except sqlite3.Error as error:  # what the path checks cannot see: a damaged file, a full disk
        message = database_error_message("--db", getattr(args, "db", None), error)
        print(f"ldp-collector {args.command}: error: {message}", file=sys.stderr)
        return 2
    except DapProblem as error:
        print(f"ldp-collector {args.command}: error: {error.detail}", file=sys.stderr)
        return 2
    except (ValueError, LookupError, OSError, RuntimeError) as error:
        print(f"ldp-collector {args.command}: error: {error}", file=sys.stderr)
        return 2


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse a bad --db or a busy --port in one line naming the flag (``collector.cli_checks``)."""
    db = getattr(args, "db", None)
    if isinstance(db, str):
        creates = args.command in ("init-db", "serve") or getattr(args, "action", "") == "create"
        check_database_path(db, must_exist=not creates)
    if args.command == "serve" and 0 <= args.port <= 65535:
        check_port_free(args.host, args.port)


def _init_db(args: argparse.Namespace) -> int:
    from collector.keys import ensure_key

    with Storage(args.db) as storage:
        version = storage.migrate()
        key_id = ensure_key(storage)
    print(f"database {args.db} is at schema version {version} (active key {key_id})")
    return 0


def _keys(args: argparse.Namespace) -> int:
    from collector.keys import create_key

    with Storage(args.db, create=False) as storage:
        if args.action == "rotate":
            print(f"new active key {create_key(storage)} (older keys still open their reports)")
        for key_id, public, created, active in storage.list_keys():
            print(f"{key_id} {'active ' if active else 'retired'} {created} {public}")
    return 0


def _campaign_create(args: argparse.Namespace) -> int:
    if args.file == "-":
        text = sys.stdin.read()
    else:
        with open(args.file, encoding="utf-8") as handle:
            text = handle.read()
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{args.file} is not valid JSON: {error}") from None
    with Storage(args.db) as storage:
        try:
            # The body limit the collector will serve with (LDP_MAX_CONTENT_LENGTH).
            limit = SETTINGS["MAX_CONTENT_LENGTH"]
            max_body = limit[1](
                "MAX_CONTENT_LENGTH", os.environ.get("LDP_MAX_CONTENT_LENGTH", limit[0])
            )
            campaign, created = storage.create_campaign(document, max_body=max_body)
        except CampaignConflict as error:
            print(f"ldp-collector campaign create: conflict: {error}", file=sys.stderr)
            return 3
    print(json.dumps(campaign.document(), indent=2))
    print(
        f"campaign {campaign.name!r} {'created' if created else 'already exists (same content)'}",
        file=sys.stderr,
    )
    if isinstance(campaign, StoredDapCampaign):
        print(
            f"campaign {campaign.name!r} is a secure-aggregation campaign: devices fetch it "
            f"here and upload to its Leader {campaign.leader}",
            file=sys.stderr,
        )
        return 0
    for warning in default_policy_warnings(campaign):
        print(f"ldp-collector campaign create: warning: {warning}", file=sys.stderr)
    return 0


def _campaign_list(args: argparse.Namespace) -> int:
    with Storage(args.db, create=False) as storage:
        counts = storage.report_counts()
        rows = [_campaign_row(c, counts.get(c.name, 0)) for c in storage.list_all_campaigns()]
    header = ("name", "mechanism", "epsilon", "reports", "min_batch", "status")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _campaign_row(campaign: AnyStoredCampaign, reports: int) -> tuple[str, ...]:
    """A line of ``campaign list``: a secure-aggregation campaign's mechanism is ``dap:`` and
    its VDAF, its epsilon the Aggregators' ``dp`` (and ``local``'s grr), its min_batch the
    task's; its reports are at its Leader, never counted here."""
    if isinstance(campaign, StoredDapCampaign):
        dap = campaign.dap
        epsilon = str(dap["dp"])
        if campaign.local is not None:
            epsilon += f",local:{float(campaign.local['epsilon']):g}"
        mechanism, min_batch = f"dap:{dap['vdaf']['type']}", str(dap["min_batch_size"])
        return (campaign.name, mechanism, epsilon, "-", min_batch, campaign.status())
    return (
        campaign.name,
        str(campaign.config.get("mechanism")),
        f"{campaign.mechanism.privacy_epsilon:g}",
        str(reports),
        str(campaign.min_batch_size),
        campaign.status(),
    )


def _campaign_show(args: argparse.Namespace) -> int:
    with Storage(args.db, create=False) as storage:
        campaign = storage.get_any_campaign(args.name)
        days = storage.report_days(args.name)
    document = {
        **campaign.document(),
        "reports": sum(n for _, n in days),
        "reports_per_day": dict(days),
        "status": campaign.status(),
        "closed": campaign.closed_at,
    }
    if isinstance(campaign, StoredDapCampaign):  # its reports are the Leader's
        del document["reports"], document["reports_per_day"]
        document["note"] = SecureAggregationCampaign(
            campaign.name, campaign.leader, campaign.task_id
        ).args[0]
    print(json.dumps(document, indent=2))
    return 0


def _campaign_close(args: argparse.Namespace) -> int:
    with Storage(args.db, create=False) as storage:
        closed, changed = storage.close_campaign(args.name)
    state = "closed" if changed else "was already closed"
    print(
        f"campaign {args.name!r} {state} at {closed}: uploads are refused (410 campaign-closed); "
        "its reports and estimates stay"
    )
    return 0


def _campaign_delete(args: argparse.Namespace) -> int:
    with Storage(args.db, create=False) as storage:
        removed = storage.delete_campaign(args.name, with_reports=args.with_reports)
    print(f"campaign {args.name!r} deleted with its {removed} stored reports")
    return 0


def _campaign_cleanup(args: argparse.Namespace) -> int:
    today_text = args.today or os.environ.get(f"{ENV_PREFIX}TODAY")
    try:
        today = (
            datetime.date.fromisoformat(today_text)
            if today_text
            else datetime.datetime.now(datetime.timezone.utc).date()
        )
    except ValueError:
        raise ValueError(f"--today must be a date YYYY-MM-DD; got {today_text!r}") from None
    with Storage(args.db, create=False) as storage:
        deleted = storage.apply_retention(today)
    for name, count in deleted.items():
        print(f"campaign {name!r}: deleted {count} reports past its retention")
    if not deleted:
        print("no campaign has retention_days")
    return 0


def _export(args: argparse.Namespace) -> int:
    from collector.export import export_campaign  # pyarrow: the optional scale extra

    result = export_campaign(args.db, args.campaign, args.out, since=args.since, until=args.until)
    rate = result.exported / result.seconds if result.seconds > 0 else 0.0
    print(
        f"exported {result.exported} reports into {result.files} files "
        f"({result.skipped} already exported skipped; {result.total_rows} in {result.directory}; "
        f"{rate:,.0f} reports/s)"
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    token = os.environ.get(ENV_PREFIX + "ADMIN_TOKEN", "")
    if len(token) < MIN_ADMIN_TOKEN_LENGTH:
        print(
            f"ldp-collector serve: refusing to start: set {ENV_PREFIX}ADMIN_TOKEN to a secret of "
            f"at least {MIN_ADMIN_TOKEN_LENGTH} characters (e.g. `export {ENV_PREFIX}ADMIN_TOKEN="
            '$(python -c "import secrets; print(secrets.token_urlsafe(32))")`)',
            file=sys.stderr,
        )
        return 2
    for name in ("workers", "threads", "timeout"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1; got {getattr(args, name)}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in [0, 65535]; got {args.port}")
    for flag in ("retention_interval", "dap_drive_interval"):
        interval = getattr(args, flag)
        if interval is not None and not 0 <= interval < float("inf"):
            name = "--" + flag.replace("_", "-")
            raise ValueError(f"{name} must be >= 0 seconds; got {interval}")

    if not args.create and _is_new_database(args.db):
        raise ValueError(
            f"no collector database at {args.db}: create it with `ldp-collector init-db --db "
            f"{args.db}` (or pass --create); serve never creates one silently, so a lost "
            "database is noticed instead of replaced by an empty one"
        )

    from collector import create_app

    # Migrates once, in the master.
    settings: dict[str, Any] = {
        "DB": args.db,
        "ADMIN_TOKEN": token,
        "CORS_ORIGINS": args.cors_origin,
        "DAP_INTEROP": args.dap_interop,
    }
    if args.retention_interval is not None:
        settings["RETENTION_INTERVAL"] = args.retention_interval
    if args.dap_drive_interval is not None:
        settings["DAP_DRIVE_INTERVAL"] = args.dap_drive_interval
    app = create_app(settings)
    if args.dap_interop and not app.config["DAP_DRIVE_INTERVAL"]:
        raise ValueError(
            "--dap-interop needs the Leader's driver: --dap-drive-interval (or "
            f"{ENV_PREFIX}DAP_DRIVE_INTERVAL) must be above 0"
        )
    host = f"[{args.host}]" if ":" in args.host else args.host
    options: dict[str, Any] = {
        "bind": f"{host}:{args.port}",
        "workers": args.workers,
        "threads": args.threads,
        "worker_class": WORKER_CLASS,  # gthread: slow clients cannot stall it
        "logger_class": LOGGER_CLASS,  # no client address in any log line
        "timeout": args.timeout,
        "preload_app": True,
        "accesslog": None if args.no_access_log else "-",
        "access_log_format": ACCESS_LOG_FORMAT,
        "errorlog": "-",
        "loglevel": args.log_level,
        "proc_name": "ldp-collector",
        "when_ready": _announce(args),
        # The retention cleanup and the DAP driver: threads per worker, one running each task
        # at a time (database leases); never a thread in the master, which forks the workers
        # (collector.leases).
        "post_worker_init": leases.post_worker_init(
            app.config, [retention.RetentionWorker, DriveWorker]
        ),
        # gunicorn >= 25.1 opens an unauthenticated control socket at one fixed path per user:
        # the collector needs none, and two collectors on a host would take each other's.
        "control_socket_disable": True,
    }
    GunicornApp(app, options).run()
    return 0


def _is_new_database(path: str) -> bool:
    """No file, or an empty one (what ``sqlite3.connect`` leaves behind)."""
    try:
        return os.path.getsize(path) == 0
    except FileNotFoundError:
        return True


def _announce(args: argparse.Namespace) -> Any:
    def when_ready(server: Any) -> None:
        addresses = []
        for listener in server.LISTENERS:
            host, port = listener.sock.getsockname()[:2]
            addresses.append(f"http://{f'[{host}]' if ':' in host else host}:{port}")
        print(
            f"ldp-collector: serving {', '.join(addresses)} (workers {args.workers}, db {args.db})",
            flush=True,
        )

    return when_ready


if __name__ == "__main__":
    sys.exit(main())
