"""The views of the ``fourier`` estimate kind (Fourier marginals of binary attributes).

Report: bars of every 1-way marginal and a heatmap of 2-way tables, with their bootstrap
intervals; the per-cell variance of each marginal size against the curator's tables.
Dashboard: the marginals' view of the ``multi`` kind.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis import plots
from analysis.kinds.multi.view import (
    attribute_labels,
    attributes_column,
    draw_heatmap,
    marginals_display,
)
from analysis.streaming import json_safe
from analysis.views.cells import fixed, image_tag, interval, note, percent
from analysis.views.dashboard import DashboardView
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import Column, table

__all__ = ["DASHBOARD", "REPORT"]


# ---- the report ---------------------------------------------------------------------------------


FOURIER_HEATMAPS = 8
"""2-way heatmaps drawn at most (every pair is in the table)."""


def _fourier_build(context: Context) -> tuple[dict[str, Any], Figures]:
    m, estimate = context.mechanism, context.estimate
    records = None if context.truth is None else m.check_tuples(context.truth)

    document = estimate.to_dict()  # its tables: every pair (of order >= 2), as `estimate` prints

    def entry(names: tuple[str, ...], numbers: Mapping[str, Any]) -> dict[str, Any]:
        indices = [m.names.index(name) for name in names]
        out: dict[str, Any] = {
            "attributes": list(names),
            "labels": [attribute_labels(m, a) for a in indices],
            **{key: numbers[key] for key in ("frequencies", "std_errors", "ci_low", "ci_high")},
        }
        if records is not None:
            cells = np.bincount(
                records[:, indices] @ (1 << np.arange(len(names) - 1, -1, -1)),
                minlength=1 << len(names),
            )
            out["truth"] = (cells.reshape((2,) * len(names)) / records.shape[0]).tolist()
        return out

    def one(name: str) -> dict[str, Any]:
        marginal = estimate.marginal(name)
        return entry(
            (name,),
            json_safe(
                {
                    "frequencies": marginal.frequencies,
                    "std_errors": marginal.std_errors,
                    "ci_low": marginal.ci_low,
                    "ci_high": marginal.ci_high,
                }
            ),
        )

    one_way = [one(name) for name in m.names]
    pairs = [entry(tuple(t["attributes"]), t) for t in document["tables"]] if m.order >= 2 else []
    figures: Figures = {}
    labels = [f"{e['attributes'][0]} = {e['labels'][0][1]}" for e in one_way]
    share = [e["frequencies"][1] for e in one_way]
    low = [_or_nan(e["ci_low"][1]) for e in one_way]  # None: no bootstrap (replicates=0)
    high = [_or_nan(e["ci_high"][1]) for e in one_way]
    truth = [e["truth"][1] for e in one_way] if records is not None else None

    def bars(figure: Any) -> None:
        ax = figure.add_subplot()
        plots.plot_frequencies(
            ax,
            labels,
            [("consistent", share, low, high)],
            truth=truth,
            confidence=estimate.confidence,
        )
        ax.set_title(
            f"One-way marginals, {round(100 * estimate.confidence, 4):g}% bootstrap intervals"
        )

    figures["one-way"] = png(min(max(7.0, 2.0 + 0.45 * len(labels)), 11.0), 4.0, bars)
    for index, pair in enumerate(pairs[:FOURIER_HEATMAPS]):
        figures[f"heatmap-{index}"] = png(
            5.2, 3.2, functools.partial(draw_heatmap, table=pair, intervals=True)
        )
    exact, measured = central_gap(context)
    data = {
        "d": m.d,
        "order": m.order,
        "coefficients": m.coefficients,
        "one_way": one_way,
        "tables": pairs,
        "intervals": document["intervals"],
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _cell(table: Mapping[str, Any], i: int, j: int | None = None) -> str:
    def pick(key: str) -> Any:
        value = table[key][i]
        return value if j is None else value[j]

    text = f"{pick('frequencies'):.4f}<br>{interval(pick('ci_low'), pick('ci_high'))}"
    if table.get("truth"):
        text += f" <span class='no'>({pick('truth'):.4f})</span>"
    return text


def _fourier_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    has_truth = any(e.get("truth") for e in d["one_way"])
    parts = [
        "<h2>1. Marginals</h2>",
        image_tag(figures, "one-way", "one-way marginals with their intervals"),
        table(
            [
                Column("attribute", lambda e: html.escape(e["attributes"][0])),
                Column("first value", lambda e: html.escape(str(e["labels"][0][0]))),
                Column("frequency", lambda e: _cell(e, 0)),
                Column("second value", lambda e: html.escape(str(e["labels"][0][1]))),
                Column("frequency", lambda e: _cell(e, 1)),
                Column("std error", lambda e: fixed(e["std_errors"][1])),
            ],
            d["one_way"],
        ),
    ]
    for index, entry in enumerate(d["tables"][:FOURIER_HEATMAPS]):
        a, b = entry["attributes"]
        parts.append(image_tag(figures, f"heatmap-{index}", f"heatmap of {a} by {b}"))
    if d["tables"]:
        cells = [
            Column(f"cell {i}{j}", functools.partial(_cell, i=i, j=j))
            for i in (0, 1)
            for j in (0, 1)
        ]
        parts.append(table([attributes_column("attributes"), *cells], d["tables"]))
    parts.append(
        note(
            f"Fourier marginals (Cormode, Kulkarni, Srivastava, SIGMOD 2018) of order {d['order']} "
            f"over {d['d']} binary attributes: each device reports one of {d['coefficients']} "
            "coefficients. Cells are made consistent (non-negative, summing to one, agreeing "
            f"across tables), each with its {percent(d['confidence'])} interval "
            f"({html.escape(str(d['intervals']))}); the standard errors are the exact ones of the "
            "unbiased cells. Cell ij: the first attribute's value i and the second's value j (0: "
            "its first label)"
            + ("; the truth in brackets." if has_truth else ".")
            + (
                f" Heatmaps of the first {FOURIER_HEATMAPS} pairs; the table has all."
                if len(d["tables"]) > FOURIER_HEATMAPS
                else ""
            )
        )
    )
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        table(
            [
                *Column.numbers(
                    [
                        ("marginal size", "size"),
                        ("marginals", "marginals"),
                        ("LDP cell variance", "ldp_cell_variance"),
                        ("central Laplace", "central_laplace_cell_variance"),
                    ]
                ),
                Column.text("its way", "central_laplace_way"),
                Column.number("central Gaussian", "central_gaussian_cell_variance"),
                Column.text("its way", "central_gaussian_way"),
                Column.number("ratio", "variance_ratio"),
            ],
            gap["sizes"],
        ),
        note(
            f"Exact: {html.escape(gap['exact'])}. The curator's ways: <i>tables</i> releases "
            f"every table of {gap['order']} attributes with noise calibrated to all "
            f"{gap['central_tables']} of them; <i>full</i> the table of all attributes; "
            f"<i>coefficients</i> the {gap['coefficients']} Fourier coefficients (Barak et al., "
            "PODS 2007). Ratio: the LDP cell variance over the best central Laplace one."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts += [
            table(
                Column.numbers(
                    [
                        ("marginal size (measured)", "size"),
                        ("LDP raw MSE", "ldp_raw_mse"),
                        ("expected", "ldp_expected"),
                        ("LDP consistent MSE", "ldp_consistent_mse"),
                        ("central Laplace MSE", "central_laplace_mse"),
                        ("expected", "central_laplace_expected"),
                        ("central Gaussian MSE", "central_gaussian_mse"),
                        ("expected", "central_gaussian_expected"),
                    ]
                ),
                measured["sizes"],
            ),
            note(html.escape(measured["note"])),
        ]
    else:
        parts.append(
            note("Both models measured: <code>ldp-analyze gap --simulate</code> or the truth.")
        )
    return parts


REPORT = ReportView("Fourier marginals", _fourier_build, _fourier_render)
DASHBOARD = DashboardView("marginals", "Marginals (Fourier coefficients)", marginals_display)
