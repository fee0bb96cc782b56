"""The views of the ``range`` estimate kind (hierarchical histograms).

Report: the leaf frequencies with their band, a table of ranges and quantiles, the exact range
variances of both models. Dashboard: the consistent leaf frequencies with intervals, the
cumulative frequency and the quantiles.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis import plots
from analysis.streaming import json_safe, z_value
from analysis.views.cells import fmt_number, image_tag, note, percent
from analysis.views.dashboard import (
    ITEM_COLUMNS,
    DashboardView,
    Display,
    Document,
    item_chart,
    present,
    record_table,
    z_of,
)
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import (
    Column,
    frequency_columns,
    keyed_table,
    number_table,
    table,
    truth_column,
)

__all__ = ["DASHBOARD", "REPORT"]


# ---- the report ---------------------------------------------------------------------------------


def _query_ranges(k: int) -> list[tuple[int, int]]:
    quarter = max(1, k // 4)
    ranges = [(i * quarter, min(k, (i + 1) * quarter)) for i in range(4) if i * quarter < k]
    return [*ranges, (0, max(1, k // 2)), (0, k)]


def _range_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate

    z = z_value(estimate.confidence)
    labels = context.labels(estimate.k)
    ranges = []
    for lo, hi in _query_ranges(estimate.k):
        value, se = estimate.range(lo, hi)
        ranges.append(
            {
                "lo": lo,
                "hi": hi,
                "label": f"{labels[lo]} to {labels[hi - 1]}",
                "frequency": value,
                "std_error": se,
                "ci_low": value - z * se,
                "ci_high": value + z * se,
            }
        )
    quantiles = [
        {"q": q, "value": estimate.quantile(q), "label": labels[estimate.quantile(q)]}
        for q in (0.25, 0.5, 0.75, 0.9, 0.99)
    ]
    truth = None
    if context.truth is not None:
        counts = np.asarray(context.truth, dtype=float)
        truth = counts / counts.sum()
        for row in ranges:
            row["truth"] = float(truth[row["lo"] : row["hi"]].sum())
    f, se = estimate.frequencies, estimate.std_errors
    figures: Figures = {
        "leaves": png(
            8.0,
            3.6,
            lambda fig: plots.plot_band(
                fig.add_subplot(),
                f,
                f - z * se,
                f + z * se,
                truth=truth,
                confidence=estimate.confidence,
                title="Leaf frequencies (consistent)",
            ),
        )
    }
    exact, measured = central_gap(context)
    data = {
        "k": estimate.k,
        "branching": estimate.oracle.b,
        "height": estimate.oracle.height,
        "ranges": ranges,
        "quantiles": quantiles,
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _range_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    parts = [
        "<h2>1. Ranges and quantiles</h2>",
        image_tag(figures, "leaves", "leaf frequencies with their band"),
        table(
            [
                Column("range [lo, hi)", lambda row: f"[{row['lo']}, {row['hi']})"),
                Column.text("items", "label"),
                *frequency_columns(d["confidence"]),
                truth_column(d["ranges"], "truth"),
            ],
            d["ranges"],
        ),
        table(
            [
                Column("quantile", lambda q: percent(q["q"])),
                Column("item", lambda q: str(q["value"])),
                Column.text("label", "label"),
            ],
            d["quantiles"],
        ),
        note(
            f"A {d['branching']}-ary hierarchical histogram of height {d['height']} over "
            f"{d['k']} items, made consistent by least squares with the known total; range "
            "standard errors are exact (at the plug-in frequencies). A quantile is the smallest "
            "item whose estimated CDF reaches q."
        ),
    ]
    gap = d["gap"]
    average = gap["average_variance"]
    models = ("ldp", "central_flat", "central_hierarchical")
    parts += [
        "<h2>2. The central gap</h2>",
        number_table(
            ["range length", "LDP variance", "central flat Laplace", "central Laplace tree"],
            [
                *(
                    (fmt_number(row["length"]), *(row[m] for m in models))
                    for row in gap["by_length"]
                ),
                (f"average over {gap['ranges']} random ranges", *(average[m] for m in models)),
            ],
        ),
        note(
            f"Exact ({html.escape(gap['exact'])}). The local ranges have "
            f"{fmt_number(gap['variance_ratio_to_best_central'])} times the variance of the "
            "better central choice."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        mse = measured["range_mse"]
        parts.append(
            keyed_table(
                ["random ranges (measured)", "MSE", "expected"],
                mse,
                [
                    ("local", "ldp", "ldp_expected"),
                    ("central flat", "central_flat", "central_flat_expected"),
                    ("central tree", "central_hierarchical", "central_hierarchical_expected"),
                ],
            )
        )
    return parts


# ---- the dashboard ------------------------------------------------------------------------------


def _range_cdf(estimate: Any, k: int, confidence: Any) -> dict[str, Any] | None:
    """P[v <= r] for every item r with its normal interval, from an estimate whose ``cdf(r)``
    is ``(value, std_error)`` (``analysis.ranges.RangeEstimate``); else ``None``."""
    if not k or not callable(getattr(estimate, "cdf", None)):
        return None
    try:
        pairs = [estimate.cdf(r) for r in range(k)]
        values = [float(v) for v, _ in pairs]
        errors = [float(e) for _, e in pairs]
    except (TypeError, ValueError):
        return None
    z = z_of(confidence)
    return json_safe(
        {
            "type": "band-line",
            "label": "estimated P[v <= r]",
            "band_label": f"{round(100 * float(confidence))}% interval",
            "x": list(range(k)),
            "values": values,
            "low": [v - z * e for v, e in zip(values, errors, strict=True)],
            "high": [v + z * e for v, e in zip(values, errors, strict=True)],
            "range": None,
        }
    )


def _range(document: Document, estimate: Any) -> Display:
    """A hierarchical histogram: consistent leaf frequencies with intervals, the cumulative
    frequency, and quantiles."""
    items = document.get("items", [])
    quantiles = document.get("quantiles", [])
    sections = []
    cumulative = _range_cdf(estimate, len(items), document.get("confidence"))
    if cumulative is not None:
        sections.append(
            {
                "title": "Cumulative frequency",
                "hint": "Line: the estimated P[v <= r]; shaded: its confidence interval "
                "(exact range variance).",
                "chart": cumulative,
            }
        )
    if quantiles:
        sections.append(
            {
                "title": "Quantiles",
                "table": record_table(
                    present(["q", "value", "ci_low", "ci_high"], quantiles), quantiles
                ),
            }
        )
    notes = [f"Variant: {document['variant']}."] if document.get("variant") else []
    if document.get("postprocessing"):
        notes.append(f"Post-processing: {document['postprocessing']}.")
    return {
        "chart": item_chart("estimated frequency", items),
        "table": record_table(ITEM_COLUMNS, items),
        "sections": sections,
        "notes": notes,
    }


REPORT = ReportView("ranges", _range_build, _range_render)
DASHBOARD = DashboardView("range", "Hierarchical histogram and ranges", _range)
