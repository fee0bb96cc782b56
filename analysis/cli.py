"""``ldp-analyze``: one entry point, one module per subcommand (``analysis/commands/``).

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
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
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except (ValueError, LookupError, OSError) as error:
        print(f"ldp-analyze {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
