"""What the dashboard's views share (``analysis.dashboard.views``).

A view turns an ``ldp-analyze estimate --format json`` document (and, where the document alone
does not hold it, the estimate object it came from) into what the page draws: a ``chart`` (a
spec the page's script knows by its ``type``), a ``table`` (column names and rows of raw
numbers; the page formats them), further ``sections`` and ``notes``. Views read documents
defensively (``.get`` with defaults): a field a view does not know is left out, not an error.

Numbers in the campaign's own ``unit`` (a mean, a quantile, a CDF's x axis) are marked by the
view: a chart's ``unit_axis`` (``"x"`` or ``"y"``, titled ``x_title``/``y_title``) and a table's
``unit_columns``; :func:`with_formats` writes the unit into those axis titles and column headers
and never shows those columns as percentages. The per-day ``trend`` chart is
:func:`trend_chart`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from analysis.streaming import z_value

__all__ = [
    "FREQUENCY_COLUMNS",
    "ITEM_COLUMNS",
    "DashboardView",
    "Display",
    "Document",
    "column_format",
    "interval_chart",
    "item_chart",
    "present",
    "record_table",
    "trend_chart",
    "with_formats",
    "with_unit",
    "z_of",
]

Document = Mapping[str, Any]
Display = dict[str, Any]

ITEM_COLUMNS = ("value", "frequency", "std_error", "ci_low", "ci_high")

FREQUENCY_COLUMNS = frozenset(
    {"frequency", "raw_frequency", "true_frequency", "std_error", "ci_low", "ci_high"}
)
"""Columns of frequencies (shares of the reports): the page shows them as percentages."""

_MAX_DECIMALS = 6
TREND_ITEMS = 5
"""How many items a frequency campaign's trend follows (the largest estimates overall)."""


@dataclasses.dataclass(frozen=True)
class DashboardView:
    """How the dashboard shows one kind of estimate: ``build(document, estimate)``
    (``estimate`` may be ``None``, as for a document read back from JSON)."""

    name: str
    title: str
    build: Callable[[Document, Any], Display]


def interval_chart(
    label: str,
    labels: Sequence[Any],
    values: Sequence[Any],
    low: Sequence[Any],
    high: Sequence[Any],
    *,
    kind: str = "interval-bars",
    **extra: Any,
) -> dict[str, Any]:
    """A chart of estimates with their intervals as whiskers (bars or points)."""
    return {
        "type": kind,
        "label": label,
        "labels": [str(v) for v in labels],
        "values": list(values),
        "low": list(low),
        "high": list(high),
        **extra,
    }


def item_chart(label: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Bars of ``items`` (``{"value", "frequency", "ci_low", "ci_high"}``) with whiskers, the
    axis in percent of the reports."""
    return interval_chart(
        label,
        [item.get("value") for item in items],
        [item.get("frequency") for item in items],
        [item.get("ci_low") for item in items],
        [item.get("ci_high") for item in items],
        percent=True,
        y_title="share of reports",
    )


def _series(
    label: str, days: Sequence[Mapping[str, Any]], pick: Callable[[Any], Sequence[Any] | None]
) -> dict[str, Any]:
    """One line of a trend: ``pick(day's estimate) -> (value, ci_low, ci_high)`` per day
    (``None`` on a day without an estimate: a gap in the line)."""
    picked = [pick(day["estimate"]) if day.get("estimate") else None for day in days]
    return {
        "label": label,
        "values": [p[0] if p else None for p in picked],
        "low": [p[1] if p else None for p in picked],
        "high": [p[2] if p else None for p in picked],
    }


def _item_of(value: Any) -> Callable[[Any], Sequence[Any] | None]:
    def pick(point: Mapping[str, Any]) -> Sequence[Any] | None:
        for item in point.get("items") or []:
            if item.get("value") == value:
                return item.get("frequency"), item.get("ci_low"), item.get("ci_high")
        return None

    return pick


def _coordinate(i: int | None) -> Callable[[Any], Sequence[Any] | None]:
    def pick(point: Mapping[str, Any]) -> Sequence[Any] | None:
        parts = [point.get(k) for k in ("mean", "ci_low", "ci_high")]
        return parts if i is None else [p[i] if isinstance(p, list) else None for p in parts]

    return pick


def trend_chart(
    series: Document, document: Document, *, top: int = TREND_ITEMS
) -> dict[str, Any] | None:
    """The per-day chart of a ``--by day`` series document (``analysis.documents
    .daily_series_document``): for frequencies the ``top`` items largest in the whole
    campaign's ``document``, for a mean each coordinate (up to ``top``), every day with its
    interval. ``None`` for other kinds of estimate."""
    days = list(series.get("days") or [])
    spec: dict[str, Any] = {
        "type": "trend",
        "labels": [day.get("day") for day in days],
        "n": [day.get("n") for day in days],
        "x_title": "day (UTC)",
    }
    if "items" in document:
        ranked = sorted(document["items"], key=lambda item: -float(item.get("frequency") or 0.0))[
            :top
        ]
        values = [item.get("value") for item in ranked]
        lines = [_series(str(value), days, _item_of(value)) for value in values]
        return {**spec, "series": lines, "percent": True, "y_title": "share of reports"}
    if "mean" in document:
        mean = document["mean"]
        if isinstance(mean, list):
            lines = [
                _series(f"coordinate {i}", days, _coordinate(i)) for i in range(min(top, len(mean)))
            ]
        else:
            lines = [_series("mean", days, _coordinate(None))]
        return {**spec, "series": lines, "y_title": "mean", "unit_axis": "y"}
    return None


def record_table(columns: Sequence[str], items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A table of ``items``' fields ``columns`` (a missing field is an empty cell)."""
    return {"columns": list(columns), "rows": [[item.get(c) for c in columns] for item in items]}


def present(columns: Sequence[str], items: Sequence[Mapping[str, Any]]) -> list[str]:
    """``columns`` that at least one item has (the first always)."""
    return [c for i, c in enumerate(columns) if i == 0 or any(c in item for item in items)]


def z_of(confidence: Any) -> float:
    """The normal quantile of a document's ``confidence`` (NaN when it has none)."""
    return float(z_value(float(confidence))) if isinstance(confidence, float) else math.nan


def column_format(name: str, values: Sequence[Any]) -> dict[str, Any]:
    """How the page writes every number of one column, chosen from the column's range so that
    a column never mixes styles (no ``6.904e-5`` beside ``0.0171``).

    ``style`` is ``text`` (no number), ``integer``, ``percent`` (a column of frequencies, see
    :data:`FREQUENCY_COLUMNS`), ``fixed`` or ``scientific`` (magnitudes spanning more than six
    decades, or beyond 1e7); ``decimals`` gives the smallest non-zero magnitude two significant
    digits.
    """
    numbers = [
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]
    if not numbers:
        return {"style": "text", "decimals": 0}
    percent = name in FREQUENCY_COLUMNS
    if percent:
        numbers = [100 * v for v in numbers]
    elif all(float(v).is_integer() for v in numbers) and all(
        isinstance(v, int) for v in values if isinstance(v, (int, float))
    ):
        return {"style": "integer", "decimals": 0}
    sizes = [abs(v) for v in numbers if v != 0]
    if not sizes:
        return {"style": "percent" if percent else "fixed", "decimals": 1}
    smallest, largest = min(sizes), max(sizes)
    if not percent and (largest >= 1e7 or largest / smallest > 1e6):
        return {"style": "scientific", "decimals": 3}
    decimals = max(0, min(_MAX_DECIMALS, 1 - math.floor(math.log10(smallest))))
    if largest >= 1000:
        decimals = min(decimals, 1)
    return {"style": "percent" if percent else "fixed", "decimals": decimals}


def _format_table(table: Any, unit: str | None) -> None:
    if isinstance(table, dict) and "columns" in table and "rows" in table:
        columns = table["columns"]
        in_unit = set(table.get("unit_columns") or ())
        # A column in the campaign's unit is never a share, whatever its name (ci_low of a mean).
        table["formats"] = [
            column_format(
                "" if name in in_unit else str(name),
                [row[i] for row in table["rows"] if i < len(row)],
            )
            for i, name in enumerate(columns)
        ]
        if unit:
            table["columns"] = [f"{c} ({unit})" if c in in_unit else c for c in columns]


def with_unit(chart: Any, unit: str | None) -> Any:
    """``chart`` with ``unit`` in the title of its ``unit_axis`` (nothing without a unit)."""
    if isinstance(chart, dict) and unit and chart.get("unit_axis") in ("x", "y"):
        key = f"{chart['unit_axis']}_title"
        chart[key] = f"{chart.get(key) or 'value'} ({unit})"
    return chart


def with_formats(display: Display, unit: str | None = None) -> Display:
    """``display`` with a ``formats`` list beside every table's columns (:func:`column_format`)
    and the campaign's ``unit`` on the axes and columns the view marked (:func:`with_unit`)."""
    _format_table(display.get("table"), unit)
    with_unit(display.get("chart"), unit)
    for section in display.get("sections") or []:
        _format_table(section.get("table"), unit)
        with_unit(section.get("chart"), unit)
    return display
