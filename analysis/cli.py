"""``ldp-analyze``: one entry point, one module per subcommand (``analysis/commands/``).

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sqlite3
import sys
from collections.abc import Sequence

from analysis.commands._arguments import resolve_format
from client_sdk._extras import closed_pipe
from client_sdk._version import __version__
from collector.cli_checks import database_error_message

COMMAND_MODULES: tuple[str, ...] = (
    "analysis.commands.collect",
    "analysis.commands.dashboard",
    "analysis.commands.estimate",
    "analysis.commands.gap",
    "analysis.commands.rappor_decode",
    "analysis.commands.report",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ldp-analyze",
        description="Estimate, post-process, account for and report on LDP telemetry.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def check_arguments(args: argparse.Namespace) -> None:
    """A bad --db, --out, --json or busy --port is one line naming the flag, before any work
    (``collector.cli_checks``)."""
    from collector.cli_checks import check_database_path, check_output_path, check_port_free

    db = getattr(args, "db", None)
    for path in [db] if isinstance(db, str) else db or []:
        check_database_path(path, must_exist=True)
    for flag, name in (("--out", "out"), ("--json", "json_path")):
        path = getattr(args, name, None)
        if isinstance(path, str):
            check_output_path(path, flag=flag)
    port = getattr(args, "port", None)
    if (
        isinstance(port, int)
        and 0 <= port <= 65535
        and isinstance(getattr(args, "host", None), str)
    ):
        check_port_free(args.host, port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_format(args)
    try:
        check_arguments(args)
        return int(args.handler(args))
    except BrokenPipeError:  # an OSError: the reader of stdout left (``| head``), not a failure
        return closed_pipe()
    except sqlite3.Error as error:  # what the path checks cannot see: a damaged file, a full disk
        message = database_error_message("--db", getattr(args, "db", None), error)
        print(f"ldp-analyze {args.command}: error: {message}", file=sys.stderr)
        return 2
    except (ValueError, LookupError, OSError, RuntimeError) as error:
        print(f"ldp-analyze {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
