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
    "ITEM_COLUMNS",
    "DashboardView",
    "Display",
    "Document",
    "interval_chart",
    "item_chart",
    "present",
    "record_table",
    "z_of",
]

Document = Mapping[str, Any]
Display = dict[str, Any]

ITEM_COLUMNS = ("value", "frequency", "std_error", "ci_low", "ci_high")


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
