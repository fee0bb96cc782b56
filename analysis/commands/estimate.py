"""``ldp-analyze estimate``: a stored campaign's estimate with its error bars.

    ldp-analyze estimate --db collector.db --campaign app-launches --format json \\
        [--postprocess norm-sub] [--confidence 0.95] [--top 10]
    ldp-analyze estimate --db collector.db --campaign app-launches \\
        [--since 2026-11-01] [--until 2026-11-30] [--by day]
    ldp-analyze estimate --campaign app-launches --db shard-1.db --db shard-2.db \\
        --parquet lake/app-launches [--dask local:4 | --dask tcp://HOST:8786]

Reports are streamed from the database in chunks (``analysis.dataset.iter_report_chunks``) into
the mechanism's mergeable statistic, with a progress bar on stderr when it is a terminal and
the campaign is large. A campaign with fewer reports than its ``min_batch_size`` is refused
(exit status 2, one line naming the campaign, n and the minimum). Categorical campaigns print
``{"campaign", "n", "mechanism", "items": [{"value", "frequency", "std_error", "ci_low",
"ci_high"}], "postprocessing", ...}`` (docs/architecture.md); numeric campaigns print the mean
with its standard error. Frequencies list the ``--top N`` largest items (default 20), largest
first, each with its significance test (Bonferroni over every item, ``analysis.heavy_hitters``);
without ``--top``, a domain of at most 20 items is listed whole, in its own order.
Several ``--db``, any ``--parquet`` export or ``--dask`` merge the sources' statistics, each
report id counted once (docs/scale-out.md).
``--since DAY --until DAY`` keep the reports of those UTC days (inclusive; the collector stores
the day each report arrived); ``--by day`` prints one estimate per day with its standard errors
(a day below ``min_batch_size`` shows its n and no estimate). Both work over several sources
and on ``--dask`` too (each report once, in the day of its copy kept; docs/scale-out.md). The
options are spelled once in ``analysis.commands._arguments``.
Without ``--format`` the output is a table when stdout is a terminal and JSON when it is piped;
``--quiet`` turns off the progress bars (off anyway when stderr is not a terminal).
"""

from __future__ import annotations

import argparse
import csv
import inspect
import io
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from analysis.commands._arguments import (
    add_alpha_argument,
    add_format_argument,
    add_postprocess_arguments,
    add_source_arguments,
    add_top_argument,
    add_window_arguments,
    non_negative_int,
    top_of,
)
from analysis.commands._shards import add_shard_arguments, sources_of, uses_shards
from analysis.dataset import StoredCampaign, load_campaign
from analysis.documents import daily_series_document, frequency_document, mean_document
from analysis.estimation import DocumentedEstimate, MeanEstimate, json_safe
from analysis.loading import check_window, database_days, estimable_candidates, load_estimate
from analysis.postprocess import postprocess
from analysis.progress import add_quiet_argument, progress
from analysis.sharded import sharded_days, sharded_estimate
from analysis.text_tables import aligned, format_number

FORMATS = ("table", "json", "csv")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "estimate",
        help="a stored campaign's debiased estimate with standard errors and intervals",
        description=(
            "Stream a campaign's stored reports into its mechanism's statistic and print the "
            "debiased estimate with standard errors and confidence intervals."
        ),
    )
    add_source_arguments(parser, repeatable_db=True)
    add_shard_arguments(parser)
    add_format_argument(parser, FORMATS)
    add_postprocess_arguments(parser)
    add_top_argument(parser, where=" of a fixed domain")
    add_alpha_argument(
        parser,
        help="family-wise false-positive rate of the significance tests (default 0.05)",
    )
    add_window_arguments(parser)
    add_quiet_argument(parser)
    parser.add_argument(
        "--all",
        action="store_true",
        help="tables of discovered strings: every string tested, not only the significant ones",
    )
    parser.add_argument(
        "--by",
        choices=["day"],
        default=None,
        help="a series: one estimate per UTC day with its standard errors",
    )
    parser.add_argument(
        "--range",
        type=_range_argument,
        default=None,
        metavar="LO,HI",
        help="a range campaign (hierarchical): the frequency of the items LO <= v < HI",
    )
    parser.add_argument(
        "--quantiles",
        type=_quantiles_argument,
        default=None,
        metavar="Q,...",
        help="quantiles to report, each in (0, 1) (square_wave, hierarchical)",
    )
    parser.add_argument(
        "--marginal",
        type=_names_argument,
        default=None,
        metavar="A[,B[,C]]",
        help="a multi-attribute campaign (multi): the marginal of these attributes",
    )
    parser.add_argument(
        "--adversary-credentials",
        type=non_negative_int,
        default=0,
        metavar="A",
        help="a shuffled campaign's central guarantee assumes an adversary holds at most A "
        "device credentials (each batch then has at least size - A x quota honest reports; "
        "docs/shuffler.md, 'Credentials'); default 0",
    )
    parser.set_defaults(handler=run)


def _range_argument(text: str) -> tuple[int, int]:
    parts = text.split(",")
    try:
        lo, hi = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--range must be LO,HI (two integers); got {text!r}"
        ) from None
    return lo, hi


def _quantiles_argument(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--quantiles must be numbers in (0, 1); got {text!r}"
        ) from None
    if not all(0 < q < 1 for q in values):
        raise argparse.ArgumentTypeError(f"--quantiles must be numbers in (0, 1); got {text!r}")
    return values


def _names_argument(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(","))
    if not all(names) or len(names) > 3 or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"--marginal must be A, A,B or A,B,C (distinct attributes); got {text!r}"
        )
    return names


def query_answers(result: Any, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The answers to --range, --quantiles and --marginal from an estimate that offers them
    (``range``, ``quantile``/``quantile_interval``, ``marginal``); a ValueError otherwise."""
    answers: dict[str, Any] = {}
    wanted = [
        ("--range", getattr(args, "range", None), "range"),
        ("--quantiles", getattr(args, "quantiles", None), "quantile"),
        ("--marginal", getattr(args, "marginal", None), "marginal"),
    ]
    for option, value, method in wanted:
        if value is None:
            continue
        if not hasattr(result, method):
            raise ValueError(f"campaign {name!r}: {option} does not apply to its estimate")
        if method == "range":
            frequency, std_error = result.range(*value)
            answers["range"] = {
                "lo": value[0],
                "hi": value[1],
                "frequency": frequency,
                "std_error": std_error,
            }
        elif method == "quantile":
            rows = []
            for q in value:
                row: dict[str, Any] = {"q": q, "value": result.quantile(q)}
                if hasattr(result, "quantile_interval"):
                    row["ci_low"], row["ci_high"] = result.quantile_interval(q)
                rows.append(row)
            answers["quantiles"] = rows
        else:
            marginal = result.marginal(*value)
            answers["marginal"] = {
                "attributes": list(value),
                "frequencies": marginal.frequencies,
                "std_errors": marginal.std_errors,
            }
            if getattr(marginal, "ci_low", None) is not None:  # post-processed: bootstrap
                answers["marginal"].update(
                    ci_low=marginal.ci_low, ci_high=marginal.ci_high, method=marginal.method
                )
    return json_safe(answers)


def format_answers(answers: Mapping[str, Any]) -> str:
    lines = []
    if "range" in answers:
        r = answers["range"]
        lines.append(
            f"range [{r['lo']}, {r['hi']}): {format_number(r['frequency'])} "
            f"(std error {format_number(r['std_error'])})"
        )
    for row in answers.get("quantiles", []):
        interval = (
            f" [{format_number(row['ci_low'])}, {format_number(row['ci_high'])}]"
            if "ci_low" in row
            else ""
        )
        lines.append(f"quantile {row['q']:g}: {format_number(row['value'])}{interval}")
    if "marginal" in answers:
        m = answers["marginal"]
        lines.append(f"marginal of {', '.join(m['attributes'])}:")
        frequencies, std_errors = np.asarray(m["frequencies"]), np.asarray(m["std_errors"])
        low, high = m.get("ci_low"), m.get("ci_high")
        for cell in np.ndindex(frequencies.shape):  # a 2-way marginal: one line per cell
            label = ",".join(str(i) for i in cell)
            interval = (
                f" [{format_number(float(np.asarray(low)[cell]))}, "
                f"{format_number(float(np.asarray(high)[cell]))}]"
                if low is not None
                else ""
            )
            lines.append(
                f"  {label:>8} {format_number(float(frequencies[cell])):>12} "
                f"{format_number(float(std_errors[cell])):>12}{interval}"
            )
    return "".join(line + "\n" for line in lines)


def load_sharded_estimate(args: argparse.Namespace) -> tuple[StoredCampaign, Any]:
    """The raw estimate over every --db and --parquet source (in the --since/--until window),
    de-duplicated by report id and merged in this process or on --dask (``analysis.sharded``,
    docs/scale-out.md)."""
    if not 0 < args.confidence < 1:
        raise ValueError(f"--confidence must be in (0, 1); got {args.confidence!r}")
    return sharded_estimate(
        sources_of(args), confidence=args.confidence, candidates=estimable_candidates
    )


# ---- output ---------------------------------------------------------------------------------


def _item_columns(document: Mapping[str, Any]) -> list[str]:
    columns = ["value", "frequency", "std_error", "ci_low", "ci_high"]
    if "top" in document:
        columns.append("significant")
    return columns


def _rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    if "items" in document:
        columns = _item_columns(document)
        return columns, [[item.get(c) for c in columns] for item in document["items"]]
    columns = ["coordinate", "mean", "std_error", "ci_low", "ci_high"]
    values = [document[c] for c in ("mean", "std_error", "ci_low", "ci_high")]
    if not isinstance(values[0], list):
        return columns, [[0, *values]]
    return columns, [[i, *parts] for i, parts in enumerate(zip(*values, strict=True))]


def table_head(campaign: str, document: Mapping[str, Any]) -> str:
    """The first line of every estimate table: campaign, n, mechanism, epsilon, post-processing
    and the intervals' confidence."""
    mechanism = document.get("mechanism")
    mechanism = mechanism if isinstance(mechanism, dict) else {}
    head = (
        f"campaign {campaign}  n={document.get('n')}  "
        f"mechanism {mechanism.get('mechanism')} (epsilon {_epsilon(mechanism)})"
    )
    if isinstance(document.get("postprocessing"), str):
        head += f"  postprocessing {document['postprocessing']}"
    if isinstance(document.get("confidence"), float):
        head += f"  {round(100 * document['confidence'], 4):g}% intervals"
    return head


def _epsilon(config: Mapping[str, Any]) -> Any:
    """The config's ``epsilon``, else the mechanism's own per-report epsilon (RAPPOR's comes
    from f, p and q)."""
    if "epsilon" in config:
        return config["epsilon"]
    try:
        from client_sdk.mechanisms import mechanism_from_config

        return f"{mechanism_from_config(dict(config)).privacy_epsilon:.4g}"
    except (ValueError, TypeError, KeyError):
        return None


def format_table(document: Mapping[str, Any]) -> str:
    """A plain-text table for people: a header line, then aligned columns."""
    head = table_head(document["campaign"], document)
    columns, rows = _rows(document)
    lines = [head, aligned(columns, rows)]
    central = document.get("central")
    if central:
        lines.append(
            f"central: ({central['epsilon']:.4g}, {central['delta']:.3g})-DP over "
            f"{central['batches']} shuffled batches (smallest {central['smallest_batch']}), "
            f"assuming {central['assumption']}; otherwise each report's local epsilon "
            f"{central['local_epsilon']:.4g}"
        )
        lines.append(f"one report per device per batch: {central['one_report_per_device']}")
    if "top" in document and document["domain_size"] > len(document["items"]):
        lines.append(
            f"the {len(document['items'])} largest of {document['domain_size']} items "
            f"(--top {document['domain_size']} for every one)"
        )
    if "top" in document:
        lines.append(
            f"significant: raw estimate above z={document['bonferroni_z']:.3f} standard errors "
            f"(one-sided, alpha {document['alpha']}, Bonferroni over all "
            f"{document['domain_size']} items)"
        )
    return "\n".join(lines) + "\n"


def format_csv(document: Mapping[str, Any]) -> str:
    """CSV for machines: one header row, one row per item (or per coordinate of a mean)."""
    columns, rows = _rows(document)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else v for v in row])
    return out.getvalue()


def write_document(document: Mapping[str, Any], fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
    elif fmt == "table":
        sys.stdout.write(format_table(document))
    else:
        sys.stdout.write(format_csv(document))


def daily_series(args: argparse.Namespace) -> dict[str, Any]:
    """``--by day``: the estimate of each UTC day with reports (n only below the minimum)."""
    if args.postprocess != "base" or args.top is not None:
        raise ValueError("--by day gives raw estimates: --postprocess and --top do not apply")
    since, until = check_window(args.since, args.until)
    points: Iterable[tuple[str, int, Any]]
    if uses_shards(args):  # several sources: one pass, each report once (docs/scale-out.md)
        campaign, points = sharded_days(
            sources_of(args), confidence=args.confidence, candidates=estimable_candidates
        )
    else:
        campaign = load_campaign(args.db[0], args.campaign)
        points = database_days(
            args.db[0],
            campaign,
            confidence=args.confidence,
            chunk_size=args.chunk_size,
            since=since,
            until=until,
        )
    days = progress(points, desc=f"{campaign.name} by day", unit="day", quiet=args.quiet)
    return daily_series_document(
        campaign, days, since=since, until=until, confidence=args.confidence
    )


def series_rows(document: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """One row per (day, item) or (day, coordinate): day, n, value, estimate, std_error, ..."""
    columns = ["day", "n", "value", "estimate", "std_error", "ci_low", "ci_high"]
    rows: list[list[Any]] = []
    for entry in document["days"]:
        point = entry["estimate"]
        if point is None:
            rows.append([entry["day"], entry["n"], None, None, None, None, None])
        elif "items" in point:
            for item in point["items"]:
                numbers = [item[k] for k in ("frequency", "std_error", "ci_low", "ci_high")]
                rows.append([entry["day"], entry["n"], item["value"], *numbers])
        elif "mean" in point:
            parts = [point[k] for k in ("mean", "std_error", "ci_low", "ci_high")]
            if not isinstance(parts[0], list):
                parts = [[p] for p in parts]
            for i, values in enumerate(zip(*parts, strict=True)):
                rows.append([entry["day"], entry["n"], i, *values])
        else:
            raise ValueError("--by day prints tables of frequencies and means; use --format json")
    return columns, rows


def write_series(document: Mapping[str, Any], fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
        return
    columns, rows = series_rows(document)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(
                ["" if v is None else repr(v) if isinstance(v, float) else v for v in row]
            )
        sys.stdout.write(out.getvalue())
        return
    n = sum(int(entry["n"]) for entry in document["days"])
    head = (
        f"{table_head(document['campaign'], {**document, 'n': n})}  by day "
        f"(days below min_batch_size {document['min_batch_size']} show n only)"
    )
    sys.stdout.write(head + "\n" + aligned(columns, rows) + "\n")


def run(args: argparse.Namespace) -> int:
    if args.by == "day":
        write_series(daily_series(args), args.format)
        return 0
    if uses_shards(args):
        campaign, result = load_sharded_estimate(args)
    else:
        campaign, result = load_estimate(
            args.db[0],
            args.campaign,
            confidence=args.confidence,
            chunk_size=args.chunk_size,
            since=args.since,
            until=args.until,
            quiet=args.quiet,
        )
    if isinstance(result, DocumentedEstimate):
        if args.postprocess != "base" or args.top is not None:
            raise ValueError(
                f"campaign {campaign.name!r} ({campaign.config['mechanism']}): --postprocess "
                "and --top apply to frequency estimates of a fixed domain only"
            )
        answers = query_answers(result, args, campaign.name)
        if args.format == "table":
            asked = getattr(args, "quantiles", None)
            format_table: Any = result.format_table  # some kinds take what to show
            accepts = inspect.signature(format_table).parameters
            shown: dict[str, Any] = {"show_all": args.all} if "show_all" in accepts else {}
            if asked and "quantiles" in accepts:
                # the table's own quantile rows become the asked ones, shown once
                shown["quantiles"] = asked
                answers = {key: value for key, value in answers.items() if key != "quantiles"}
            sys.stdout.write(table_head(campaign.name, result.to_dict()) + "\n")
            sys.stdout.write(format_table(**shown).rstrip("\n") + "\n")
            if answers:
                sys.stdout.write(format_answers(answers))
        else:
            write_document(
                with_central(
                    {"campaign": campaign.name, **result.to_dict(), **answers}, args, campaign
                ),
                args.format,
            )
        return 0
    query_answers(result, args, campaign.name)  # refuses --range, --quantiles, --marginal here
    if isinstance(result, MeanEstimate):
        if args.postprocess != "base" or args.top is not None:
            raise ValueError(
                f"campaign {campaign.name!r} is numeric ({campaign.config['mechanism']}): "
                "--postprocess and --top apply to categorical campaigns only"
            )
        write_document(with_central(mean_document(campaign, result), args, campaign), args.format)
        return 0
    if args.postprocess != "base":
        result = postprocess(
            result, args.postprocess, campaign.mechanism, replicates=args.replicates, seed=args.seed
        )
    # A domain that fits in the default --top is shown whole, in its own order; otherwise (or
    # when --top is given) the N largest, largest first, each with its significance test.
    top: int | None = min(top_of(args), len(result.frequencies))
    if args.top is None and top == len(result.frequencies):
        top = None
    document = frequency_document(campaign, result, top=top, alpha=args.alpha)
    write_document(with_central(document, args, campaign), args.format)
    return 0


def with_central(
    document: dict[str, Any], args: argparse.Namespace, campaign: StoredCampaign
) -> dict[str, Any]:
    """A shuffled campaign's document with ``"central": {"epsilon", "delta", ...}``: the central
    guarantee of the batches the collector actually received (their real sizes, the smallest
    one binding), under its stated assumption (at least ``honest_reports`` honest reports in
    every batch, from the shuffler's credential quotas and ``--adversary-credentials``;
    ``client_sdk.amplification.credentialed_guarantee``), whether one report per device per
    batch was enforced, and the local epsilon each report carries (what holds when the
    assumption fails, or the shuffler colluded with the collector). The figure also assumes a
    shuffler that neither colludes with the collector nor injects reports: reports it drops
    only shrink the batches counted here, but injected ones would inflate them and understate
    epsilon (docs/shuffler.md, docs/math/central-and-shuffle.md).
    """
    if campaign.shuffle is None or uses_shards(args):
        return document
    from client_sdk.amplification import credentialed_guarantee
    from collector.storage import Storage

    with Storage(args.db[0], create=False) as storage:
        batches = storage.batch_credentials(campaign.name)
    central = credentialed_guarantee(
        float(campaign.config["epsilon"]),
        batches,
        float(campaign.shuffle["delta"]),
        adversary_credentials=getattr(args, "adversary_credentials", 0),
    )
    return {**document, "central": central}
