"""``ldp-analyze rappor-decode``: decode RAPPOR reports in Google's file formats.

    ldp-analyze rappor-decode --params params.csv --reports reports.csv \\
        --candidates candidates.txt --format json

prints every candidate's estimate in the shape of ``ldp-analyze estimate`` (``n``, ``mechanism``,
``items`` of ``value``, ``frequency``, ``std_error`` and ``significant``), with a note that strings
outside the candidate list cannot be found. ``--counts`` reads ``sum_bits.py`` output instead of
reports. A malformed file exits with status 2 and one line naming the file, line and problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from analysis.commands._arguments import (
    add_alpha_argument,
    add_confidence_argument,
    add_format_argument,
)
from analysis.kinds.rappor.estimate import decode_files, format_table


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rappor-decode",
        help="estimate candidate-string frequencies from RAPPOR reports (Google's CSV formats)",
        description=(
            "Decode RAPPOR reports over a candidate list: debiased per-cohort bit counts, a "
            "non-negative LASSO to select candidates, least squares with standard errors, "
            "Bonferroni-corrected significance. Strings outside the candidate list cannot be "
            "found."
        ),
    )
    parser.add_argument("--params", required=True, help="CSV with header k,h,m,p,q,f")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--reports", help="CSV client,cohort,rappor (bit k-1 first)")
    source.add_argument("--counts", help="per-cohort counts CSV (sum_bits.py output)")
    parser.add_argument("--candidates", required=True, help="candidate strings, one per line")
    add_format_argument(parser, ("table", "json"))
    add_alpha_argument(
        parser, help="family-wise false-positive rate of the Bonferroni tests (default 0.05)"
    )
    add_confidence_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    estimate = decode_files(
        args.params,
        args.candidates,
        reports=args.reports,
        counts=args.counts,
        alpha=args.alpha,
        confidence=args.confidence,
    )
    if args.format == "json":
        json.dump(estimate.to_dict(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(estimate))
    return 0
