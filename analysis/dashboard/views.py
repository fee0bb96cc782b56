"""One view per kind of estimate, chosen by the shape of its estimate document.

A view turns an ``ldp-analyze estimate --format json`` document into what the page draws: a
``chart`` (a spec the page's script knows by its ``type``) and a ``table`` (column names and
rows of raw numbers; the page formats them). :data:`VIEWS` is tried in order and the first view
whose ``matches`` accepts the document wins, so a new kind (heavy hitters, marginals,
distributions) is one more :class:`View` and, if it needs a new kind of chart, one more renderer
in ``static/dashboard.js``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["VIEWS", "View", "render"]

Document = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class View:
    """A kind of estimate: which documents it draws, and how."""

    name: str
    title: str
    matches: Callable[[Document], bool]
    build: Callable[[Document], dict[str, Any]]


def _is_rappor(document: Document) -> bool:
    return "items" in document and "detected" in document


def _is_frequencies(document: Document) -> bool:
    return "items" in document and not _is_rappor(document)


def _is_mean(document: Document) -> bool:
    return "mean" in document


def _frequencies(document: Document) -> dict[str, Any]:
    """Categorical frequencies: one bar per item with its interval as a whisker."""
    items = document["items"]
    return {
        "chart": {
            "type": "interval-bars",
            "label": "estimated frequency",
            "labels": [item["value"] for item in items],
            "values": [item["frequency"] for item in items],
            "low": [item["ci_low"] for item in items],
            "high": [item["ci_high"] for item in items],
        },
        "table": {
            "columns": ["value", "frequency", "std_error", "ci_low", "ci_high"],
            "rows": [
                [
                    item["value"],
                    item["frequency"],
                    item["std_error"],
                    item["ci_low"],
                    item["ci_high"],
                ]
                for item in items
            ],
        },
    }


def _mean(document: Document) -> dict[str, Any]:
    """A numeric campaign: the mean (one point per coordinate) with its interval."""
    columns = ["mean", "std_error", "ci_low", "ci_high"]
    values = [document[c] for c in columns]
    rows = (
        [[i, *parts] for i, parts in enumerate(zip(*values, strict=True))]
        if isinstance(values[0], list)
        else [[0, *values]]
    )
    mechanism = document.get("mechanism", {})
    return {
        "chart": {
            "type": "interval-points",
            "label": "estimated mean",
            "labels": [f"coordinate {row[0]}" for row in rows] if len(rows) > 1 else ["mean"],
            "values": [row[1] for row in rows],
            "low": [row[3] for row in rows],
            "high": [row[4] for row in rows],
            "range": [mechanism.get("lower"), mechanism.get("upper")],
        },
        "table": {"columns": ["coordinate", *columns], "rows": rows},
    }


def _rappor(document: Document) -> dict[str, Any]:
    """RAPPOR over a candidate list: the candidate table, significant ones charted."""
    items = document["items"]
    shown = [item for item in items if item["significant"]] or items
    return {
        "chart": {
            "type": "interval-bars",
            "label": "estimated frequency (significant candidates)",
            "labels": [item["value"] for item in shown],
            "values": [item["frequency"] for item in shown],
            "low": [item["ci_low"] for item in shown],
            "high": [item["ci_high"] for item in shown],
        },
        "table": {
            "columns": [
                "value",
                "frequency",
                "std_error",
                "ci_low",
                "ci_high",
                "selected",
                "significant",
            ],
            "rows": [
                [
                    item["value"],
                    item["frequency"],
                    item["std_error"],
                    item["ci_low"],
                    item["ci_high"],
                    item["selected"],
                    item["significant"],
                ]
                for item in items
            ],
        },
        "notes": [document["note"]] if document.get("note") else [],
    }


VIEWS: tuple[View, ...] = (
    View("rappor", "RAPPOR candidates", _is_rappor, _rappor),
    View("frequencies", "Categorical frequencies", _is_frequencies, _frequencies),
    View("mean", "Mean", _is_mean, _mean),
)


def render(document: Document) -> dict[str, Any]:
    """The view of an estimate document: ``{"view", "title", "chart", "table", "notes"}``."""
    for view in VIEWS:
        if view.matches(document):
            return {"view": view.name, "title": view.title, "notes": [], **view.build(document)}
    raise ValueError(f"no dashboard view for an estimate with fields {sorted(document)}")
