"""What the dashboard's views share (``analysis.dashboard.views``).

A view turns an ``ldp-analyze estimate --format json`` document (and, where the document alone
does not hold it, the estimate object it came from) into what the page draws: a ``chart`` (a
spec the page's script knows by its ``type``), a ``table`` (column names and rows of raw
numbers; the page formats them), further ``sections`` and ``notes``. Views read documents
defensively (``.get`` with defaults): a field a view does not know is left out, not an error.
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
    "with_formats",
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
    """Bars of ``items`` (``{"value", "frequency", "ci_low", "ci_high"}``) with whiskers."""
    return interval_chart(
        label,
        [item.get("value") for item in items],
        [item.get("frequency") for item in items],
        [item.get("ci_low") for item in items],
        [item.get("ci_high") for item in items],
    )


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


def _format_table(table: Any) -> None:
    if isinstance(table, dict) and "columns" in table and "rows" in table:
        columns = table["columns"]
        table["formats"] = [
            column_format(str(name), [row[i] for row in table["rows"] if i < len(row)])
            for i, name in enumerate(columns)
        ]


def with_formats(display: Display) -> Display:
    """``display`` with a ``formats`` list beside every table's columns (:func:`column_format`)."""
    _format_table(display.get("table"))
    for section in display.get("sections") or []:
        _format_table(section.get("table"))
    return display
