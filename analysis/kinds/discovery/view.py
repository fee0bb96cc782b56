"""The views of the ``discovery`` estimate kind (PEM, SFP: strings found without a candidate
list), and the heavy-hitter renderers the ``sketch`` kind shares.

Report: the discovered strings with their intervals and significance, the detection thresholds
of both models and, with the truth, recall and precision of the local decoder beside the
central selection mechanisms at the same epsilon. Dashboard: the table with intervals and the
significance test, the significant strings charted, the per-level usage.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

from analysis import plots
from analysis.views.cells import fixed, fmt_number, image_tag, note
from analysis.views.dashboard import (
    ITEM_COLUMNS,
    DashboardView,
    Display,
    Document,
    item_chart,
    present,
    record_table,
)
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import (
    Column,
    frequency_columns,
    html_table,
    keyed_table,
    table,
    truth_column,
)

__all__ = ["DASHBOARD", "REPORT", "heavy_build", "heavy_hitters_display", "heavy_render"]


# ---- the report ---------------------------------------------------------------------------------


def heavy_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    items = [item.to_dict() for item in estimate.items[: context.top]]
    truth_counts: Mapping[str, int] | None = context.truth
    if truth_counts is not None:
        for item in items:
            item["true_frequency"] = truth_counts.get(item["value"], 0) / estimate.n
    exact, measured = central_gap(context)
    data = {
        "items": items,
        "detected": len(estimate.significant),
        "examined": estimate.examined,
        "alpha": estimate.alpha,
        "critical_z": estimate.critical_z,
        "method": estimate.method,
        "levels": list(estimate.levels),
        "unconfirmed": list(estimate.unconfirmed),
        "nothing_discovered": None if estimate.outlook is None else estimate.outlook.to_dict(),
        "gap": exact,
        "measured_gap": measured,
    }
    figures: Figures = {}
    if items:
        height = 1.6 + 0.28 * len(items)
        figures["items"] = png(
            8.0,
            min(height, 9.0),
            lambda f: plots.plot_items(
                f.add_subplot(),
                [i["value"] for i in items],
                [i["frequency"] for i in items],
                [i["ci_low"] if i["ci_low"] is not None else math.nan for i in items],
                [i["ci_high"] if i["ci_high"] is not None else math.nan for i in items],
                significant=[i["significant"] for i in items],
                truth=None if truth_counts is None else [i["true_frequency"] for i in items],
                confidence=estimate.confidence,
            ),
        )
    if measured is not None:

        def draw(figure: Any) -> None:
            left, right = figure.subplots(1, 2)
            top = measured["top_k"]
            plots.plot_recall(
                left,
                {"local": top["local"], **top["central"]},
                title=f"Which are the top {top['k']}?",
            )
            above = measured["above_threshold"]
            plots.plot_recall(
                right,
                {"local": above["local"], **above["central"]},
                title=f"Which exceed {above['threshold']:.4f}?",
            )

        figures["recall"] = png(10.0, 4.2, draw)
    return data, figures


def heavy_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    parts = ["<h2>1. Discovered items</h2>"]
    if "items" in figures:
        parts.append(image_tag(figures, "items", "discovered items with their intervals"))
    test = (
        f"An item is <span class='yes'>significant</span> when its z exceeds "
        f"{d['critical_z']:.3f}: Bonferroni over the {d['examined']} strings examined at "
        f"alpha = {d['alpha']}, so the expected number of false discoveries is at most "
        f"{d['alpha']}."
        if d["critical_z"] is not None
        else "No string was assembled, so none was tested."
    )
    parts.append(note(f"{html.escape(d['method'])}. {test} {d['detected']} detected."))
    if d.get("nothing_discovered"):
        parts.append(note(html.escape(d["nothing_discovered"]["note"])))
    columns = [
        Column.text("value", "value"),
        *frequency_columns(d["confidence"]),
        Column.number("z", "z", 3),
        Column.flag("significant", "significant"),
        truth_column(d["items"]),
    ]
    significant = [item for item in d["items"] if item.get("significant")]
    rest = [item for item in d["items"] if not item.get("significant")]
    if significant:
        parts.append(table(columns, significant))
    if rest:
        parts.append(
            "<details><summary>"
            f"{len(rest)} examined but not significant (their intervals include noise-level "
            "frequencies)</summary>" + table(columns, rest) + "</details>"
            if significant
            else table(columns, rest)
        )
    if d["levels"]:
        parts.append(
            table(
                [
                    Column.text("level", "level"),
                    *(Column.number(key, key) for key in ("reports", "candidates", "kept")),
                ],
                d["levels"],
            )
        )
    if d["unconfirmed"]:
        parts.append(
            f"<details><summary>{len(d['unconfirmed'])} assembled but not confirmed</summary>"
            + note(", ".join(html.escape(str(v)) for v in d["unconfirmed"]))
            + "</details>"
        )
    gap = d["gap"]
    detection = gap["detection"]
    parts += [
        "<h2>2. The central gap</h2>",
        keyed_table(
            ["model", "smallest frequency called significant"],
            detection,
            [
                ("local (this decoder)", "local_frequency"),
                ("central curator, Laplace histogram", "central_laplace_frequency"),
            ],
        ),
        note(
            f"Exact, at the same epsilon = {d['epsilon']:g} and the same Bonferroni rule over "
            f"{detection['candidates']} candidates (alpha = {detection['alpha']}). Local: "
            f"{html.escape(detection['local_note'])}. The curator adds Laplace noise of scale "
            "Delta_1/epsilon to the true counts."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        top, above = measured["top_k"], measured["above_threshold"]
        rows = [["local (this decoder)", *_recall_cells(top["local"]), "&ndash;"]]
        for name, result in top["central"].items():
            rows.append(
                [
                    html.escape(plots.plain_name(name)),
                    *_recall_cells(result),
                    fmt_number(result["recall_bound"]),
                ]
            )
        parts += [
            image_tag(figures, "recall", "recall and precision of both models"),
            f"<h3>Which are the top {top['k']}? (measured against the truth)</h3>",
            html_table(
                ["model", "answered", "recall", "precision", "exact lower bound on recall"],
                rows,
            ),
            f"<h3>Which exceed {above['threshold']:.4f}?</h3>",
            html_table(
                ["model", "answered", "recall", "precision"],
                [
                    ["local (this decoder)", *_recall_cells(above["local"])],
                    *(
                        [html.escape(plots.plain_name(name)), *_recall_cells(result)]
                        for name, result in above["central"].items()
                    ),
                ],
            ),
            note(
                "The central answers run on the true counts with the exact samplers of "
                "analysis.selection at the same epsilon in all (k peeling rounds at epsilon/k; "
                "the sparse vector with cutoff k), averaged over "
                f"{top['central']['exponential_mechanism']['runs']} runs. "
                f"The local decoder made {measured['local_false_discoveries']} false "
                "discoveries (expected at most "
                f"{measured['local_expected_false_discoveries_at_most']})."
            ),
        ]
    else:
        parts.append(
            note(
                "Recall and precision need the truth: see <code>ldp-analyze gap --simulate</code> "
                "or a report made with the true counts (the demo)."
            )
        )
    return parts


def _recall_cells(result: Mapping[str, Any]) -> list[str]:
    answered = result["answered"]
    return [
        fmt_number(answered if isinstance(answered, int) else float(answered), 3),
        fixed(result["recall"], 3),
        fixed(result["precision"], 3),
    ]


# ---- the dashboard ------------------------------------------------------------------------------


def heavy_hitters_display(document: Document, _estimate: Any) -> Display:
    """Discovered (or candidate) strings: the significant ones in the table (with intervals and
    the significance test) and the chart, the rest in a collapsed section (all of them when
    none is significant); PEM/SFP's per-level usage as a further table."""
    items = document.get("items", [])
    shown = [item for item in items if item.get("significant")] or items
    notes = []
    if document.get("method"):
        notes.append(f"Method: {document['method']}.")
    if "detected" in document:
        critical = document.get("critical_z")
        test = f" (|z| above {critical:.3f}" if isinstance(critical, float) else " ("
        test += f", {document.get('correction', 'no')} correction at alpha {document.get('alpha')})"
        notes.append(
            f"{document['detected']} significant of {document.get('examined', len(items))} "
            f"examined{test}."
        )
    outlook = document.get("nothing_discovered")
    if isinstance(outlook, dict) and outlook.get("note"):
        notes.append(str(outlook["note"]))
    unconfirmed = document.get("unconfirmed") or []
    if unconfirmed:
        notes.append(
            f"{len(unconfirmed)} strings were assembled but not confirmed: "
            + ", ".join(map(str, unconfirmed[:10]))
            + (" …" if len(unconfirmed) > 10 else "")
        )
    levels = document.get("levels") or []
    columns = present([*ITEM_COLUMNS, "z", "significant"], items)
    rest = [item for item in items if not item.get("significant")] if shown is not items else []
    sections = []
    if rest:
        sections.append(
            {
                "title": f"{len(rest)} examined but not significant",
                "collapsed": True,
                "table": record_table(columns, rest),
            }
        )
    if levels:
        sections.append(
            {
                "title": "Reports and candidates per level",
                "table": record_table(
                    present(["level", "bits", "reports", "candidates", "kept"], levels), levels
                ),
            }
        )
    return {
        "chart": item_chart("estimated frequency (significant strings)", shown),
        "table": record_table(columns, shown),
        "sections": sections,
        "notes": notes,
    }


REPORT = ReportView("heavy hitters", heavy_build, heavy_render)
DASHBOARD = DashboardView("heavy-hitters", "Discovered frequent strings", heavy_hitters_display)
