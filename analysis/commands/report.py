"""``ldp-analyze report``: one self-contained HTML page about a campaign (``analysis.report``).

    ldp-analyze report --db collector.db --campaign app-launches --out report.html \\
        [--postprocess norm-sub] [--delta 1e-6] [--json report.json | --format json] \\
        [--since YYYY-MM-DD] [--until YYYY-MM-DD]

writes the page (figures embedded as PNG data URIs; every estimate kind of
``analysis.kinds.KINDS`` has its own view: the frequencies, the mean, RAPPOR's candidates,
discovered items, marginal heatmaps (CALM and Fourier), histogram and CDF, ranges, keys) and,
with ``--json PATH``, the same numbers as JSON; ``--format json`` prints them on stdout instead of a
one-line summary. ``--since`` and ``--until`` keep the reports of those UTC days (inclusive).
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
    add_window_arguments,
)
from analysis.gap import DEFAULT_DELTA


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a campaign",
        description=(
            "Estimate a campaign, post-process it, compare it with the central model and account "
            "for its privacy, in one HTML page with embedded figures."
        ),
    )
    add_source_arguments(parser)
    parser.add_argument("--out", required=True, help="the HTML file to write")
    add_postprocess_arguments(parser, default="norm-sub")
    parser.add_argument("--top", type=int, default=20, help="items shown (default 20)")
    add_alpha_argument(parser, help="significance level (0.05)")
    add_central_arguments(
        parser,
        delta_help=f"delta of the Gaussian baseline, shuffle bound and accounting "
        f"({DEFAULT_DELTA:g})",
    )
    add_window_arguments(parser)
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

    if args.top < 1:
        raise ValueError(f"--top must be a positive integer; got {args.top!r}")
    if not 0 < args.delta < 1:
        raise ValueError(f"--delta must be in (0, 1); got {args.delta!r}")
    from analysis.kinds import KINDS

    stored = load_campaign(args.db, args.campaign)
    kind = stored.mechanism.estimate_kind
    if kind not in KINDS:
        raise ValueError(
            f"campaign {stored.name!r} uses {stored.mechanism.name!r} (estimate kind {kind!r}): "
            f"the report covers {', '.join(sorted(KINDS))}; use "
            "`ldp-analyze estimate` for its numbers"
        )
    campaign, raw = load_estimate(
        args.db,
        args.campaign,
        confidence=args.confidence,
        chunk_size=args.chunk_size,
        since=args.since,
        until=args.until,
    )
    batch_sizes = batch_credentials = None
    if campaign.shuffle is not None:
        from collector.storage import Storage

        with Storage(args.db, create=False) as storage:
            batch_sizes = storage.batch_sizes(campaign.name)
            batch_credentials = storage.batch_credentials(campaign.name)
    report = build_report(
        campaign,
        raw,
        method=args.postprocess,
        delta=args.delta,
        neighbouring=args.neighbouring,
        top=args.top,
        alpha=args.alpha,
        replicates=args.replicates,
        seed=args.seed,
        batch_sizes=batch_sizes,
        batch_credentials=batch_credentials,
    )
    page = render_html(report)
    _write(args.out, page)
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


def _write(path: str, text: str) -> None:
    """Write atomically: a partial page never replaces a good one."""
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)
