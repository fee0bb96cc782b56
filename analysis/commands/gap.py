"""``ldp-analyze gap``: what the local model costs against a central curator, for every estimate.

    ldp-analyze gap --mechanism '{"mechanism": "oue", "epsilon": 1, "k": 100}' --n 100000 \\
        [--delta 1e-6] [--neighbouring replace|add-remove] [--target-std 0.001] \\
        [--central-epsilon 1] --format json
    ldp-analyze gap --mechanism '{"mechanism": "pem", "epsilon": 4, "max_length": 4}' \\
        --n 20000 --simulate zipf:1.1 [--top 10] [--threshold 0.01] [--vocabulary 1000] \\
        [--repetitions 10] [--seed 0]
    ldp-analyze gap --db collector.db --campaign app-launches

For frequency oracles it prints the per-item variance of the LDP frequency estimate
(``ldp_variance``), of the central Laplace and analytic Gaussian histograms
(``central_laplace_variance``, ``central_gaussian_variance``), their ratio (``variance_ratio``,
the price of locality), the users each model needs to match the other, the central guarantee of
the same reports behind a shuffler (``shuffle_epsilon``: Feldman, McMillan, Talwar 2021,
``null`` with a reason when its condition fails, and the tighter ``shuffle_epsilon_numerical``)
and ``shuffled_column``: local-only, shuffled and curator collection at the same central
(epsilon, delta) (``--central-epsilon``, default the mechanism's epsilon; a stored shuffled
campaign uses the batch sizes it received), and ``trust_models``: the same question, n and central
epsilon collected locally, shuffled, by secure aggregation (a DAP task whose two aggregators each
add discrete Laplace noise) and by the trusted curator, side by side. Other estimate kinds
(means, RAPPOR candidates, heavy hitters, marginals of CALM and Fourier campaigns, key-value,
distributions, ranges) print their own comparison (each kind's ``gap.py`` through
``analysis.kinds.KINDS``).

``--simulate FAMILY[:PARAMETER]`` (``zipf``, default exponent 1.1; ``uniform``; ``lognormal`` for
numbers) draws a population of n users, perturbs it with the mechanism (numpy's generator seeded
by ``--seed``: a simulation), estimates with the mechanism's own estimator and adds both models'
errors measured against the known truth under ``"simulation"``; for heavy hitters, the recall
and precision of the local decoder beside the central selection mechanisms at the same epsilon.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import Any

from analysis.commands._arguments import (
    add_central_arguments,
    add_database_arguments,
    add_format_argument,
    add_top_argument,
    top_of,
)
from analysis.dataset import count_reports, load_campaign
from analysis.gap import (
    DEFAULT_DELTA,
    GapOptions,
    kind_gap,
    parse_simulation,
    simulated_kind_gap,
    users_needed,
)
from analysis.progress import add_quiet_argument, progress
from analysis.streaming import json_safe
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gap",
        help="the utility gap between this LDP mechanism and the central model",
        description=(
            "Compare the LDP estimate's error with a trusted curator's at the same epsilon "
            "(frequencies, means, RAPPOR, heavy hitters, marginals, key-value, distributions, "
            "ranges), and give "
            "the shuffle-model guarantee of the same reports; for frequencies, the local, "
            "shuffled and secure-aggregation (DAP) models side by side. Take the mechanism and n "
            "from --mechanism/--n or from a stored campaign; --simulate measures both models on "
            "a simulated population."
        ),
    )
    parser.add_argument("--mechanism", help="a mechanism config as JSON")
    parser.add_argument("--n", type=int, help="number of users (reports)")
    add_database_arguments(parser, required=False, repeatable=True)
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
    parser.add_argument(
        "--central-epsilon",
        type=float,
        default=None,
        help="central target of the shuffled column (default: the mechanism's epsilon)",
    )
    parser.add_argument(
        "--simulate",
        metavar="FAMILY[:PARAMETER]",
        default=None,
        help="measure both models on a simulated population: zipf[:S] (default S 1.1), uniform, "
        "lognormal[:SIGMA] (numbers)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulation (default 0)")
    add_top_argument(parser, where=": heavy hitters, the k of the top-k question")
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="heavy hitters: the frequency T of 'which items exceed T' (default: the k-th true "
        "frequency)",
    )
    parser.add_argument(
        "--vocabulary",
        type=int,
        default=1000,
        help="heavy hitters: distinct strings of the simulated population (1000)",
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=10,
        help="runs of each randomized central mechanism averaged in a simulation (10)",
    )
    add_format_argument(parser, ("table", "json"))
    add_quiet_argument(parser)
    parser.set_defaults(handler=run)


def gap_document(args: argparse.Namespace) -> dict[str, Any]:
    """The figures ``gap`` prints, from the parsed arguments (ValueError on bad input)."""
    from_db = bool(args.db) or args.campaign is not None
    if from_db and (args.mechanism is not None or args.n is not None):
        raise ValueError("give either --mechanism and --n, or --db and --campaign, not both")
    db = _one_database(args)
    if from_db:
        if db is None or args.campaign is None:
            raise ValueError("--db and --campaign go together")
        campaign = load_campaign(db, args.campaign)
        mechanism = campaign.mechanism
        n = count_reports(db, args.campaign)
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
    batch_sizes, delta = None, args.delta
    if db is not None and campaign.shuffle is not None:
        from collector.storage import Storage

        with Storage(db, create=False) as storage:
            batch_sizes = tuple(storage.batch_sizes(args.campaign)) or None
        delta = float(campaign.shuffle["delta"])  # the campaign's central target
    options = _options(args, batch_sizes, delta)
    if from_db and campaign.domain and mechanism.tests_candidates:
        # a sketch is estimated against the campaign's candidates: Bonferroni over those
        # (a discovery campaign has no domain)
        options = dataclasses.replace(options, vocabulary=max(2, len(campaign.domain)))
    document: dict[str, Any] = {}
    if from_db:
        document["campaign"] = args.campaign
    if args.simulate is not None:
        if from_db:
            raise ValueError("--simulate draws its own population: give --mechanism and --n")
        simulation = parse_simulation(args.simulate)
        with progress(desc=f"simulating {n} devices", total=1, quiet=args.quiet) as bar:
            document.update(simulated_kind_gap(mechanism, n, simulation, options, seed=args.seed))
            bar.update()
    else:
        document.update(kind_gap(mechanism, n, options))
    if args.target_std is not None:
        if not isinstance(mechanism, FrequencyOracle):
            raise ValueError("--target-std applies to frequency oracles")
        document["users_needed"] = users_needed(
            mechanism, args.target_std, delta=args.delta, neighbouring=args.neighbouring
        )
    return json_safe(document)


def _one_database(args: argparse.Namespace) -> str | None:
    """The one --db of ``gap`` (it reads a campaign's n and shuffled batches), or None."""
    if len(args.db) > 1:
        raise ValueError(
            f"gap reads one database (its n and shuffled batches); got {len(args.db)} --db"
        )
    return str(args.db[0]) if args.db else None


def _options(
    args: argparse.Namespace, batch_sizes: tuple[int, ...] | None, delta: float
) -> GapOptions:
    for name in ("vocabulary", "repetitions"):
        value = getattr(args, name)
        if value < 1 or (name == "vocabulary" and value < 2):
            raise ValueError(f"--{name} must be a positive integer; got {value!r}")
    if args.threshold is not None and not 0 < args.threshold < 1:
        raise ValueError(f"--threshold must be a frequency in (0, 1); got {args.threshold!r}")
    if args.central_epsilon is not None and not 0 < args.central_epsilon <= 40:
        raise ValueError(f"--central-epsilon must be in (0, 40]; got {args.central_epsilon!r}")
    return GapOptions(
        delta=delta,
        neighbouring=args.neighbouring,
        top=top_of(args),
        threshold=args.threshold,
        vocabulary=args.vocabulary,
        repetitions=args.repetitions,
        central_epsilon=args.central_epsilon,
        batch_sizes=batch_sizes,
    )


def format_table(document: Mapping[str, Any]) -> str:
    """Aligned ``name  value`` lines for people (nested figures as ``a.b.c``; lists of records
    by position, ``a.0.b``)."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            if prefix.rpartition(".")[2] in ("mechanism", "shuffled_best_oracle"):
                rows.append((prefix, json.dumps(value, sort_keys=True)))
                return
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
            for index, inner in enumerate(value):
                walk(f"{prefix}.{index}", inner)
        elif isinstance(value, list):
            rows.append((prefix, ", ".join(_text(v) for v in value)))
        else:
            rows.append((prefix, _text(value)))

    walk("", document)
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
