"""``ldp-analyze report``: one self-contained HTML page about a campaign (``analysis.report``).

    ldp-analyze report --db collector.db --campaign app-launches --out report.html \\
        [--postprocess norm-sub] [--delta 1e-6] [--json report.json | --format json] \\
        [--since YYYY-MM-DD] [--until YYYY-MM-DD]

writes the page (figures embedded as PNG data URIs; every estimate kind of
``analysis.kinds.KINDS`` has its own view: the frequencies, the mean, RAPPOR's candidates,
discovered items, marginal heatmaps (CALM and Fourier), histogram and CDF, ranges, keys) and,
with ``--json PATH``, the same numbers as JSON; ``--format json`` prints them on stdout instead of a
one-line summary. ``--since`` and ``--until`` keep the reports of those UTC days (inclusive).
``--db`` (repeated), ``--parquet`` and ``--dask`` read the campaign from several sources, each
report once, as ``estimate`` does (docs/scale-out.md). The shared flags mean what they mean in
``estimate``: ``--postprocess`` defaults to ``base``, ``--format`` to the one-line summary at a
terminal and JSON when stdout is piped, ``--quiet`` turns off the progress bar on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from analysis.commands._arguments import (
    add_alpha_argument,
    add_central_arguments,
    add_format_argument,
    add_postprocess_arguments,
    add_source_arguments,
    add_top_argument,
    add_window_arguments,
    top_of,
)
from analysis.commands._shards import add_shard_arguments, uses_shards
from analysis.gap import DEFAULT_DELTA
from analysis.progress import add_quiet_argument, progress


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a campaign",
        description=(
            "Estimate a campaign, post-process it, compare it with the central model and account "
            "for its privacy, in one HTML page with embedded figures."
        ),
    )
    add_source_arguments(parser, repeatable_db=True)
    add_shard_arguments(parser)
    parser.add_argument("--out", required=True, help="the HTML file to write")
    add_postprocess_arguments(parser)
    add_top_argument(parser, where=" in the tables and figures")
    add_alpha_argument(parser, help="significance level (0.05)")
    add_central_arguments(
        parser,
        delta_help=f"delta of the Gaussian baseline, shuffle bound and accounting "
        f"({DEFAULT_DELTA:g})",
    )
    add_window_arguments(parser)
    add_quiet_argument(parser)
    parser.add_argument("--json", dest="json_path", help="also write the numbers as JSON here")
    add_format_argument(
        parser,
        ("text", "json"),
        help="what to print on stdout: a one-line summary (text) or the numbers (json)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: matplotlib and the accounting load only when a report is
    # made, so `ldp-analyze --help` and the other commands stay quick.
    from analysis.dataset import load_campaign
    from analysis.loading import load_estimate
    from analysis.report import build_report, render_html

    if not 0 < args.delta < 1:
        raise ValueError(f"--delta must be in (0, 1); got {args.delta!r}")
    if not args.db and not args.parquet:
        raise ValueError("give at least one source: --db PATH or --parquet DIR")
    stored = load_campaign(args.db[0], args.campaign) if args.db else None
    if stored is not None:
        _check_reported(stored)
    with progress(desc=f"report {args.campaign}", total=3, unit="step", quiet=args.quiet) as bar:
        bar.set_postfix_str("estimate")
        if uses_shards(args):  # several sources: each report once (docs/scale-out.md)
            from analysis.commands.estimate import load_sharded_estimate

            campaign, raw = load_sharded_estimate(args)
            _check_reported(campaign)
        else:
            campaign, raw = load_estimate(
                args.db[0],
                args.campaign,
                confidence=args.confidence,
                chunk_size=args.chunk_size,
                since=args.since,
                until=args.until,
                quiet=args.quiet,
            )
        bar.update()
        batch_sizes = batch_credentials = None
        if campaign.shuffle is not None and not uses_shards(args):  # batches: one database
            from collector.storage import Storage

            with Storage(args.db[0], create=False) as storage:
                batch_sizes = storage.batch_sizes(campaign.name)
                batch_credentials = storage.batch_credentials(campaign.name)
        bar.set_postfix_str("figures")
        report = build_report(
            campaign,
            raw,
            method=args.postprocess,
            delta=args.delta,
            neighbouring=args.neighbouring,
            top=top_of(args),
            alpha=args.alpha,
            replicates=args.replicates,
            seed=args.seed,
            batch_sizes=batch_sizes,
            batch_credentials=batch_credentials,
        )
        bar.update()
        bar.set_postfix_str("page")
        page = render_html(report)
        _write(args.out, page)
        bar.update()
    if args.json_path:
        _write(args.json_path, report.to_json())
    if args.format == "json":
        sys.stdout.write(report.to_json())
    else:
        significant = report.data.get("significant_items", report.data.get("detected"))
        sys.stdout.write(
            f"wrote {args.out}: campaign {campaign.name!r}, n={raw.n}, "
            f"{len(report.figures)} figures"
            + (f", {significant} significant items" if significant is not None else "")
            + (f"; numbers in {args.json_path}" if args.json_path else "")
            + "\n"
        )
    return 0


def _check_reported(stored: Any) -> None:
    """A ValueError for a campaign whose estimate kind has no report view."""
    from analysis.kinds import KINDS

    kind = stored.mechanism.estimate_kind
    if kind not in KINDS:
        raise ValueError(
            f"campaign {stored.name!r} uses {stored.mechanism.name!r} (estimate kind {kind!r}): "
            f"the report covers {', '.join(sorted(KINDS))}; use "
            "`ldp-analyze estimate` for its numbers"
        )


def _write(path: str, text: str) -> None:
    """Write atomically: a partial page never replaces a good one."""
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)
