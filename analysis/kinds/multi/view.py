"""The views of the ``multi`` estimate kind (CALM / SMP / SPL marginals), and the marginal
renderers the ``fourier`` kind shares.

Report: a heatmap of every 2-way table (bars of every 1-way marginal otherwise) and the
per-cell variance against the curator's. Dashboard: every one-way marginal as bars with
whiskers and each table of two or more attributes as a heatmap.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis import plots
from analysis.streaming import json_safe, z_value
from analysis.views.cells import image_tag, note
from analysis.views.dashboard import (
    DashboardView,
    Display,
    Document,
    interval_chart,
    record_table,
    z_of,
)
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import Column, html_table, table

__all__ = [
    "DASHBOARD",
    "REPORT",
    "attribute_labels",
    "attributes_column",
    "draw_heatmap",
    "marginals_display",
]


# ---- the report ---------------------------------------------------------------------------------


def attribute_labels(m: Any, index: int) -> list[str]:
    """The labels of attribute ``index`` of a marginal mechanism (``0 .. k-1`` unnamed)."""
    _, k, labels = m.attributes[index]
    return list(labels) if labels is not None else [str(v) for v in range(k)]


def _multi_build(context: Context) -> tuple[dict[str, Any], Figures]:
    m, estimate = context.mechanism, context.estimate
    tables: list[dict[str, Any]] = []
    marginals: list[dict[str, Any]] = []
    figures: Figures = {}
    for unit in m.units:
        names = [m.names[a] for a in unit]
        marginal = estimate.marginal(*names)
        entry: dict[str, Any] = {
            "attributes": names,
            "labels": [attribute_labels(m, a) for a in unit],
            "frequencies": np.asarray(marginal.frequencies).tolist(),
            "std_errors": np.asarray(marginal.std_errors).tolist(),
        }
        if context.truth is not None:
            records = np.asarray(context.truth, dtype=np.int64)
            shape = [m.ks[a] for a in unit]
            cells = np.bincount(
                np.ravel_multi_index(records[:, list(unit)].T, shape), minlength=int(np.prod(shape))
            )
            entry["truth"] = (cells.reshape(shape) / records.shape[0]).tolist()
        (tables if len(unit) == 2 else marginals).append(entry)
    z = float(z_value(estimate.confidence))
    for index, entry in enumerate(tables[:8]):
        rows, columns = entry["labels"]
        width, height = 6.0 + 0.25 * len(columns), 2.2 + 0.3 * len(rows)
        figures[f"heatmap-{index}"] = png(
            min(width, 11.0), min(height, 9.0), functools.partial(draw_heatmap, table=entry)
        )
    for index, marginal in enumerate(marginals[:8]):
        figures[f"marginal-{index}"] = png(
            7.0, 3.4, functools.partial(_marginal_bars, marginal=marginal, z=z)
        )
    exact, measured = central_gap(context)
    data = {
        "protocol": m.protocol,
        "tables": tables,
        "marginals": marginals,
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def draw_heatmap(figure: Any, *, table: Mapping[str, Any], intervals: bool = False) -> None:
    """A 2-way table as a heatmap (with its intervals in the cells when ``intervals``)."""
    plots.plot_heatmap(
        figure.add_subplot(),
        table["frequencies"],
        table["labels"][0],
        table["labels"][1],
        row_name=table["attributes"][0],
        column_name=table["attributes"][1],
        intervals=(
            (table["ci_low"], table["ci_high"])
            if intervals and None not in np.ravel(table["ci_low"])
            else None
        ),
    )


def _marginal_bars(figure: Any, *, marginal: Mapping[str, Any], z: float) -> None:
    f = np.asarray(marginal["frequencies"], dtype=float)
    se = np.asarray(marginal["std_errors"], dtype=float)
    ax = figure.add_subplot()
    plots.plot_frequencies(
        ax,
        marginal["labels"][0],
        [("raw (unbiased)", f, f - z * se, f + z * se)],
        truth=marginal.get("truth"),
    )
    ax.set_title(plots.drawable(f"Marginal of {marginal['attributes'][0]}"))


def attributes_column(header: str) -> Column:
    """A table's attributes, comma-separated."""
    return Column(header, lambda t: html.escape(", ".join(t["attributes"])))


def _multi_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    parts = ["<h2>1. Marginals</h2>"]
    for index, entry in enumerate(d["tables"]):
        a, b = entry["attributes"]
        if f"heatmap-{index}" in figures:
            parts.append(image_tag(figures, f"heatmap-{index}", f"heatmap of {a} by {b}"))
        rows, columns = entry["labels"]
        truth = entry.get("truth")
        body = [
            [html.escape(rows[i])]
            + [
                f"{entry['frequencies'][i][j]:.4f} &plusmn; {entry['std_errors'][i][j]:.4f}"
                + (f" <span class='no'>({truth[i][j]:.4f})</span>" if truth else "")
                for j in range(len(columns))
            ]
            for i in range(len(rows))
        ]
        parts.append(html_table([f"{a} \\ {b}", *columns], body))
    for index, marginal in enumerate(d["marginals"]):
        if f"marginal-{index}" in figures:
            parts.append(
                image_tag(figures, f"marginal-{index}", f"marginal of {marginal['attributes'][0]}")
            )
        truth = marginal.get("truth")
        cells = zip(
            marginal["labels"][0], marginal["frequencies"], marginal["std_errors"], strict=True
        )
        one_way = [
            {"value": label, "frequency": f, "std_error": se, "truth": truth[i] if truth else None}
            for i, (label, f, se) in enumerate(cells)
        ]
        parts.append(
            table(
                [
                    Column.text("value", "value"),
                    Column.fixed("frequency", "frequency"),
                    Column.fixed("std error", "std_error"),
                    Column.fixed("truth", "truth") if truth else None,
                ],
                one_way,
            )
        )
    parts.append(
        note(
            f"Protocol {html.escape(d['protocol'])}. Cells &plusmn; one standard error (exact, of "
            "the raw unbiased cells; the tables shown are made consistent)"
            + (", the truth in brackets" if any(t.get("truth") for t in d["tables"]) else "")
            + "; 1-way bars with their intervals."
        )
    )
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        table(
            [
                attributes_column("table"),
                *Column.numbers(
                    [
                        ("cells", "cells"),
                        ("LDP cell variance", "ldp_cell_variance"),
                        ("central Laplace", "central_laplace_cell_variance"),
                        ("central Gaussian", "central_gaussian_cell_variance"),
                        ("ratio", "variance_ratio"),
                    ]
                ),
            ],
            gap["tables"],
        ),
        note(
            f"Exact: {html.escape(gap['exact'])}. The curator releases the same tables from the "
            "true records with noise calibrated to all of them at once."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            table(
                [
                    attributes_column("table (measured)"),
                    *Column.numbers(
                        [
                            ("LDP MSE", "ldp_mse"),
                            ("LDP expected", "ldp_expected"),
                            ("central Laplace MSE", "central_laplace_mse"),
                            ("expected", "central_laplace_expected"),
                            ("central Gaussian MSE", "central_gaussian_mse"),
                            ("expected", "central_gaussian_expected"),
                        ]
                    ),
                ],
                measured["tables"],
            )
        )
        parts.append(note(html.escape(measured["note"])))
    return parts


# ---- the dashboard ------------------------------------------------------------------------------


def marginals_display(document: Document, _estimate: Any) -> Display:
    """Several attributes: every one-way marginal as bars with whiskers (or, when the estimate
    has none, every cell of its tables), and each estimated table of two or more attributes as
    a heatmap (more than two: the first attribute by the rest flattened)."""
    rows: list[dict[str, Any]] = []
    for marginal in document.get("marginals", []):
        attribute = marginal.get("attribute")
        for item in marginal.get("items", []):
            rows.append(
                {"attribute": attribute, **item, "label": f"{attribute}={item.get('value')}"}
            )
    tables = [entry for entry in document.get("tables", []) if isinstance(entry, Mapping)]
    if not rows:
        rows = [cell for entry in tables for cell in _cells(entry, document.get("confidence"))]
    chart = interval_chart(
        "estimated frequency" + (" (one-way marginals)" if document.get("marginals") else ""),
        [r["label"] for r in rows],
        [r.get("frequency") for r in rows],
        [r.get("ci_low") for r in rows],
        [r.get("ci_high") for r in rows],
    )
    sections = []
    for entry in tables:
        heatmap = _heatmap_display(entry, document.get("confidence"))
        if heatmap is not None:
            names = ", ".join(map(str, entry.get("attributes", [])))
            sections.append({"title": f"Marginal of {names}", "heatmap": heatmap})
    notes = [f"Intervals: {document['intervals']}."] if document.get("intervals") else []
    return {
        "chart": chart,
        "table": record_table(
            ["attribute", "value", "frequency", "std_error", "ci_low", "ci_high"], rows
        ),
        "sections": sections,
        "notes": notes,
    }


def _arrays(entry: Mapping[str, Any], confidence: Any) -> dict[str, np.ndarray] | None:
    """A table's frequencies, standard errors and interval bounds as arrays of one shape (the
    table's own bounds where it has them, else normal intervals; missing errors are NaN)."""
    frequencies = np.asarray(entry.get("frequencies", []), dtype=np.float64)
    if frequencies.ndim < 1 or frequencies.size == 0:
        return None

    def shaped(key: str) -> np.ndarray | None:
        value = entry.get(key)
        array = None if value is None else np.asarray(value, dtype=np.float64)
        return array if array is not None and array.shape == frequencies.shape else None

    errors = shaped("std_errors")
    errors = np.full(frequencies.shape, np.nan) if errors is None else errors
    z = z_of(confidence)
    low, high = shaped("ci_low"), shaped("ci_high")
    return {
        "frequencies": frequencies,
        "std_errors": errors,
        "ci_low": frequencies - z * errors if low is None else low,
        "ci_high": frequencies + z * errors if high is None else high,
    }


def _cells(entry: Mapping[str, Any], confidence: Any) -> list[dict[str, Any]]:
    arrays = _arrays(entry, confidence)
    if arrays is None:
        return []
    names = ",".join(map(str, entry.get("attributes", [])))
    cells = []
    for index in np.ndindex(*arrays["frequencies"].shape):
        value = ",".join(map(str, index))
        cell = {key: float(array[index]) for key, array in arrays.items()}
        cells.append(
            {
                "attribute": names,
                "value": value,
                "frequency": cell["frequencies"],
                "std_error": cell["std_errors"],
                "ci_low": cell["ci_low"],
                "ci_high": cell["ci_high"],
                "label": f"{names}={value}",
            }
        )
    return json_safe(cells)


def _heatmap_display(entry: Mapping[str, Any], confidence: Any) -> dict[str, Any] | None:
    arrays = _arrays(entry, confidence)
    if arrays is None or arrays["frequencies"].ndim < 2:
        return None
    shape = arrays["frequencies"].shape
    flat = {key: array.reshape(shape[0], -1).tolist() for key, array in arrays.items()}
    attributes = [str(a) for a in entry.get("attributes", [])]
    return json_safe(
        {
            "row_name": attributes[0] if attributes else "row",
            "column_name": ",".join(attributes[1:]) or "column",
            "rows": [str(i) for i in range(shape[0])],
            "columns": [",".join(map(str, index)) for index in np.ndindex(*shape[1:])],
            "values": flat["frequencies"],
            "std_errors": flat["std_errors"],
            "ci_low": flat["ci_low"],
            "ci_high": flat["ci_high"],
        }
    )


REPORT = ReportView("marginals", _multi_build, _multi_render)
DASHBOARD = DashboardView("marginals", "Marginals", marginals_display)
