"""``ldp-analyze gap``: what the local model costs against a central curator.

    ldp-analyze gap --mechanism '{"mechanism": "oue", "epsilon": 1, "k": 100}' --n 100000 \\
        [--delta 1e-6] [--neighbouring replace|add-remove] [--target-std 0.001] --format json
    ldp-analyze gap --db collector.db --campaign app-launches

prints the per-item variance of the LDP frequency estimate (``ldp_variance``), of the central
Laplace and analytic Gaussian histograms (``central_laplace_variance``,
``central_gaussian_variance``), their ratio (``variance_ratio``, the price of locality), the
users each model needs to match the other, and the central guarantee of the same reports behind
a shuffler (``shuffle_epsilon``: Feldman, McMillan, Talwar 2021, ``null`` with a reason when
its condition fails, and the tighter ``shuffle_epsilon_numerical``). See ``analysis.gap``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from analysis.commands._arguments import (
    add_central_arguments,
    add_database_arguments,
    add_format_argument,
)
from analysis.commands.estimate import json_safe
from analysis.dataset import count_reports, load_campaign
from analysis.gap import DEFAULT_DELTA, users_needed, utility_gap
from client_sdk.mechanisms import mechanism_from_config


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gap",
        help="the utility gap between this LDP mechanism and the central model",
        description=(
            "Compare the LDP frequency-estimate variance with central Laplace and Gaussian "
            "histograms at the same epsilon, and give the shuffle-model guarantee of the same "
            "reports. Take the mechanism and n from --mechanism/--n or from a stored campaign."
        ),
    )
    parser.add_argument("--mechanism", help="a mechanism config as JSON")
    parser.add_argument("--n", type=int, help="number of users (reports)")
    add_database_arguments(parser, required=False)
    add_central_arguments(
        parser,
        delta_help=f"delta of the Gaussian baseline and the shuffle bound (default "
        f"{DEFAULT_DELTA:g})",
    )
    parser.add_argument(
        "--target-std",
        type=float,
        default=None,
        help="also give the users each model needs for this standard deviation on a frequency",
    )
    add_format_argument(parser, ("json", "table"))
    parser.set_defaults(handler=run)


def gap_document(args: argparse.Namespace) -> dict[str, Any]:
    """The figures ``gap`` prints, from the parsed arguments (ValueError on bad input)."""
    from_db = args.db is not None or args.campaign is not None
    if from_db and (args.mechanism is not None or args.n is not None):
        raise ValueError("give either --mechanism and --n, or --db and --campaign, not both")
    if from_db:
        if args.db is None or args.campaign is None:
            raise ValueError("--db and --campaign go together")
        campaign = load_campaign(args.db, args.campaign)
        mechanism = campaign.mechanism
        n = count_reports(args.db, args.campaign)
        if n < 1:
            raise ValueError(f"campaign {args.campaign!r} has no reports yet")
    else:
        if args.mechanism is None or args.n is None:
            raise ValueError("give --mechanism and --n (or --db and --campaign)")
        try:
            config = json.loads(args.mechanism)
        except json.JSONDecodeError as error:
            raise ValueError(f"--mechanism is not valid JSON: {error}") from error
        mechanism = mechanism_from_config(config)
        n = args.n
    if not 0 < args.delta < 1:
        raise ValueError(f"--delta must be in (0, 1); got {args.delta!r}")
    document: dict[str, Any] = {}
    if from_db:
        document["campaign"] = args.campaign
    document.update(
        utility_gap(mechanism, n, delta=args.delta, neighbouring=args.neighbouring).to_dict()
    )
    if args.target_std is not None:
        document["users_needed"] = users_needed(
            mechanism, args.target_std, delta=args.delta, neighbouring=args.neighbouring
        )
    return json_safe(document)  # type: ignore[no-any-return]


def format_table(document: Mapping[str, Any]) -> str:
    """Aligned ``name  value`` lines for people."""
    rows: list[tuple[str, str]] = []
    for key, value in document.items():
        if isinstance(value, Mapping):
            if key == "mechanism":
                rows.append((key, json.dumps(value, sort_keys=True)))
                continue
            rows.extend((f"{key}.{k}", _text(v)) for k, v in value.items())
        else:
            rows.append((key, _text(value)))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name.ljust(width)}  {text}\n" for name, text in rows)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def run(args: argparse.Namespace) -> int:
    document = gap_document(args)
    if args.format == "json":
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(format_table(document))
    return 0
