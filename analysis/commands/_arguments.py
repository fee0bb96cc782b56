"""Argument definitions shared by the ``ldp-analyze`` commands: one spelling of each option.

Each ``add_*`` function adds one option (or one group of options that always go together) with
its type, default and help; a command module calls the ones it takes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from analysis.gap import DEFAULT_DELTA, NEIGHBOURING
from analysis.postprocess import ALIASES, DEFAULT_REPLICATES, METHODS

DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05
DEFAULT_CHUNK_SIZE = 50_000
DEFAULT_POSTPROCESS = "base"
DEFAULT_TOP = 20


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {text!r}")
    return value


def add_database_arguments(
    parser: argparse.ArgumentParser, *, required: bool = True, repeatable: bool = False
) -> None:
    """--db and --campaign: a campaign stored in a collector database.

    ``repeatable``: ``--db`` may be given several times (shards, a list; docs/scale-out.md), or
    not at all when other sources are given.
    """
    if repeatable:
        add_db_argument(parser)
    else:
        parser.add_argument(
            "--db",
            required=required,
            help="the collector's SQLite database" + ("" if required else " (with --campaign)"),
        )
    parser.add_argument(
        "--campaign",
        required=required,
        help="the campaign's name" if required else "take the mechanism and n from this campaign",
    )


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """--db PATH, repeatable (a list, empty when not given): one spelling in every command that
    reads stored reports (shards of a campaign: docs/scale-out.md)."""
    parser.add_argument(
        "--db",
        action="append",
        default=[],
        metavar="PATH",
        help="a collector's SQLite database (read only); repeat for several shards",
    )


def add_parquet_argument(parser: argparse.ArgumentParser) -> None:
    """--parquet DIR, repeatable (a list, empty when not given)."""
    parser.add_argument(
        "--parquet",
        action="append",
        default=[],
        metavar="DIR",
        help="a Parquet export (ldp-collector export); repeat for several, with or without --db",
    )


def add_confidence_argument(parser: argparse.ArgumentParser) -> None:
    """--confidence of the intervals."""
    parser.add_argument(
        "--confidence",
        type=float,
        default=DEFAULT_CONFIDENCE,
        help=f"confidence of the intervals ({DEFAULT_CONFIDENCE:g})",
    )


def add_source_arguments(parser: argparse.ArgumentParser, *, repeatable_db: bool = False) -> None:
    """--db, --campaign, --confidence, --chunk-size: a stored campaign, read in chunks."""
    add_database_arguments(parser, repeatable=repeatable_db)
    add_confidence_argument(parser)
    parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=DEFAULT_CHUNK_SIZE,
        help=f"reports read from the database at a time (default {DEFAULT_CHUNK_SIZE})",
    )


def add_postprocess_arguments(parser: argparse.ArgumentParser) -> None:
    """--postprocess, --replicates, --seed: consistency post-processing and its bootstrap.

    One default in every command, ``base``: the raw unbiased estimate, whose intervals are
    exact; a post-processing method trades a bias for a smaller error and is asked for.
    """
    parser.add_argument(
        "--postprocess",
        choices=[*METHODS, *ALIASES],
        metavar="{" + ",".join(METHODS) + "}",  # em and ibu are accepted names of mle
        default=DEFAULT_POSTPROCESS,
        help=f"consistency post-processing (default {DEFAULT_POSTPROCESS}: the raw unbiased "
        "estimate, exact intervals; norm-sub, mle, ...: smaller error, a bias)",
    )
    parser.add_argument(
        "--replicates",
        type=non_negative_int,
        default=DEFAULT_REPLICATES,
        help=f"bootstrap replicates for post-processed intervals (default {DEFAULT_REPLICATES}; "
        "0: none)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")


def add_format_argument(
    parser: argparse.ArgumentParser, choices: Sequence[str], *, help: str | None = None
) -> None:
    """--format, one of ``choices``, the first being the one for people (a table, or a line).

    One meaning in every command: without --format, the first choice when stdout is a terminal
    and ``json`` when it is piped or redirected (:func:`resolve_format`).
    """
    if "json" not in choices:
        raise ValueError(f"--format choices must include json; got {list(choices)}")
    parser.add_argument(
        "--format",
        choices=list(choices),
        default=None,
        help=(help or "output format")
        + f" (default: {choices[0]} when stdout is a terminal, json when it is piped)",
    )
    parser.set_defaults(format_choices=tuple(choices))


def resolve_format(args: argparse.Namespace, *, terminal: bool | None = None) -> None:
    """Fill in a --format not given: the people's format at a terminal, json otherwise."""
    choices = getattr(args, "format_choices", None)
    if choices is None or getattr(args, "format", None) is not None:
        return
    if terminal is None:
        try:
            terminal = sys.stdout.isatty()
        except (AttributeError, ValueError):
            terminal = False
    args.format = choices[0] if terminal else "json"


def add_top_argument(parser: argparse.ArgumentParser, *, where: str = "") -> None:
    """--top N: one meaning in every command, show (or ask about) the N largest items.

    Stored as None when not given (so a command can tell it was not asked for); read it with
    :func:`top_of`. The significance test of each shown item is separate: Bonferroni over every
    item of the domain at ``--alpha``, whatever N.
    """
    parser.add_argument(
        "--top",
        type=int,
        default=None,
        metavar="N",
        help=f"the N largest items, largest first (default {DEFAULT_TOP}){where}; each shown "
        "item's significance is tested over every item (Bonferroni, --alpha)",
    )


def top_of(args: argparse.Namespace) -> int:
    """The --top of ``args``: the N given, else :data:`DEFAULT_TOP` (a ValueError naming it
    when N < 1)."""
    top = getattr(args, "top", None)
    if top is None:
        return DEFAULT_TOP
    if top < 1:
        raise ValueError(f"--top must be a positive integer; got {top!r}")
    return int(top)


def add_alpha_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """--alpha: the family-wise false-positive rate of significance tests."""
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help=help)


def add_central_arguments(parser: argparse.ArgumentParser, *, delta_help: str) -> None:
    """--delta and --neighbouring: how the central baselines are taken."""
    parser.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=delta_help)
    parser.add_argument(
        "--neighbouring",
        choices=NEIGHBOURING,
        default="replace",
        help="central neighbouring relation: one user changes value (default) or is added/removed",
    )


def add_window_arguments(parser: argparse.ArgumentParser) -> None:
    """--since and --until: the UTC days of the reports read (inclusive)."""
    parser.add_argument(
        "--since", default=None, metavar="YYYY-MM-DD", help="first UTC day of reports (inclusive)"
    )
    parser.add_argument(
        "--until", default=None, metavar="YYYY-MM-DD", help="last UTC day of reports (inclusive)"
    )
