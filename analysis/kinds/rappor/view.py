"""The views of the ``rappor`` estimate kind (RAPPOR decoded against a candidate list).

Report: the candidates with their intervals, the LASSO's selection and significance, the
Bloom-bit mass the candidates explain; a candidate's variance against the curator's
histogram. Dashboard: the candidate table, the significant candidates charted.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

from analysis import plots
from analysis.views.cells import fmt_number, image_tag, note, share
from analysis.views.dashboard import (
    ITEM_COLUMNS,
    DashboardView,
    Display,
    Document,
    item_chart,
    record_table,
)
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import (
    Column,
    frequency_columns,
    html_table,
    keyed_table,
    measured_table,
    table,
    truth_column,
)

__all__ = ["DASHBOARD", "REPORT"]


# ---- the report ---------------------------------------------------------------------------------


def _rappor_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    document = estimate.to_dict()
    ranked = sorted(document["items"], key=lambda item: -item["frequency"])
    items = ranked[: context.top]
    truth_counts: Mapping[str, int] | None = context.truth
    if truth_counts is not None:
        for item in items:
            item["true_frequency"] = truth_counts.get(item["value"], 0) / estimate.n
    figures: Figures = {}
    if items:
        figures["items"] = png(
            8.0,
            min(1.6 + 0.28 * len(items), 9.0),
            lambda f: plots.plot_items(
                f.add_subplot(),
                [i["value"] for i in items],
                [i["frequency"] for i in items],
                [math.nan if i["ci_low"] is None else i["ci_low"] for i in items],
                [math.nan if i["ci_high"] is None else i["ci_high"] for i in items],
                significant=[i["significant"] for i in items],
                truth=None if truth_counts is None else [i["true_frequency"] for i in items],
                confidence=estimate.confidence,
                title="Candidates",
            ),
        )
    exact, measured = central_gap(context)
    figures["gap"] = png(
        7.0,
        4.0,
        lambda f: plots.plot_error_comparison(
            f.add_subplot(),
            {
                "ldp": exact["ldp_std_error_lone_candidate"],
                "central_laplace": exact["central_laplace_std_error"],
                "central_gaussian": exact["central_gaussian_std_error"],
            },
            observed=None
            if measured is None
            else {
                "ldp": math.sqrt(measured["ldp_mse"]),
                "central_laplace": math.sqrt(measured["central_laplace_mse"]),
                "central_gaussian": math.sqrt(measured["central_gaussian_mse"]),
            },
        ),
    )
    data = {
        "items": items,
        "candidates": len(document["items"]),
        "selected": int(sum(item["selected"] for item in document["items"])),
        **{
            key: document[key]
            for key in (
                "decoder",
                "alpha",
                "critical_z",
                "lasso_penalty",
                "detected",
                "explained_fraction",
                "reported_fraction",
                "note",
            )
        },
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _rappor_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    parts = ["<h2>1. Candidate strings</h2>"]
    if "items" in figures:
        parts.append(image_tag(figures, "items", "candidate frequencies with their intervals"))
    explained = d["explained_fraction"]
    parts += [
        table(
            [
                Column.text("candidate", "value"),
                *frequency_columns(d["confidence"]),
                Column.flag("selected", "selected"),
                Column.flag("significant", "significant"),
                truth_column(d["items"]),
            ],
            d["items"],
        ),
        note(
            f"{html.escape(d['decoder'])} (Erlingsson, Pihur, Korolova, CCS 2014). The LASSO "
            f"selected {d['selected']} of {d['candidates']} candidates; a candidate is "
            f"<span class='yes'>significant</span> when its z exceeds {d['critical_z']:.3f} "
            f"(Bonferroni over the {d['candidates']} candidates at alpha = {d['alpha']}): "
            f"{d['detected']} are. Shown: the {len(d['items'])} largest estimates."
        ),
        html_table(
            ["share of the estimated Bloom-bit mass", "point estimate"],
            [
                ["explained by the selected candidates", share(explained)],
                ["explained by the significant candidates", share(d["reported_fraction"])],
                [
                    "unexplained (strings outside the list, noise)",
                    share(None if explained is None else 1.0 - explained),
                ],
            ],
        ),
        note(html.escape(d["note"])),
    ]
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        image_tag(figures, "gap", "local versus central standard errors of a candidate"),
        keyed_table(
            ["model", "variance of one candidate's frequency", "standard error"],
            gap,
            [
                (
                    "LDP, a lone candidate nobody holds",
                    "ldp_variance_lone_candidate",
                    "ldp_std_error_lone_candidate",
                ),
                (
                    "central Laplace (candidate histogram)",
                    "central_laplace_variance",
                    "central_laplace_std_error",
                ),
                (
                    "central analytic Gaussian",
                    "central_gaussian_variance",
                    "central_gaussian_std_error",
                ),
            ],
        ),
        note(
            f"Exact: {html.escape(gap['exact'])}; at the one-report epsilon_1 = "
            f"{fmt_number(gap['epsilon_one'])} (any number of reports of one value reveal at "
            f"most epsilon_inf = {fmt_number(gap['epsilon_inf'])}). The decoder's own standard "
            "errors in the table above include shared bits and the cohort assignment. Ratio: "
            f"{fmt_number(gap['variance_ratio'])}."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            measured_table(
                ["measured against the truth", "MSE per candidate", "expected"],
                measured,
                ("LDP (these reports)", "ldp_mse", "ldp_reported_variance"),
            )
        )
    return parts


# ---- the dashboard ------------------------------------------------------------------------------


def _rappor(document: Document, _estimate: Any) -> Display:
    """RAPPOR over a candidate list: the candidate table, significant ones charted."""
    items = document.get("items", [])
    shown = [item for item in items if item.get("significant")] or items
    return {
        "chart": item_chart("estimated frequency (significant candidates)", shown),
        "table": record_table([*ITEM_COLUMNS, "selected", "significant"], items),
        "notes": [document["note"]] if document.get("note") else [],
    }


REPORT = ReportView("RAPPOR candidates", _rappor_build, _rappor_render)
DASHBOARD = DashboardView("rappor", "RAPPOR candidates", _rappor)
