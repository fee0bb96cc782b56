"""One view per kind of estimate, chosen by the mechanism's ``estimate_kind``.

A view turns an ``ldp-analyze estimate --format json`` document (and, where the document alone
does not hold it, the estimate object it came from, such as a distribution's CDF band) into
what the page draws: a ``chart`` (a spec the page's script knows by its ``type``), a ``table``
(column names and rows of raw numbers; the page formats them), further ``sections`` (each a
title with a chart, a table or a ``heatmap``) and ``notes``. :data:`VIEWS` maps each
``estimate_kind`` of ``analysis.estimation.ESTIMATORS`` to its view, so a new kind is one more
entry here and, if it needs a new kind of chart, one more renderer in ``static/dashboard.js``.

Views read documents defensively (``.get`` with defaults): the estimate objects behind them
grow fields, and a field a view does not know is left out, not an error.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from analysis.estimation import json_safe

__all__ = ["VIEWS", "View", "interval_chart", "render"]

Document = Mapping[str, Any]
Display = dict[str, Any]

CDF_POINTS = 65
"""How many points of a distribution's CDF (with its band) the page draws, at most."""

ITEM_COLUMNS = ("value", "frequency", "std_error", "ci_low", "ci_high")


@dataclasses.dataclass(frozen=True)
class View:
    """How one kind of estimate is shown: ``build(document, estimate)`` (``estimate`` may be
    ``None``, as for a document read back from JSON)."""

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


def table(columns: Sequence[str], items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A table of ``items``' fields ``columns`` (a missing field is an empty cell)."""
    return {"columns": list(columns), "rows": [[item.get(c) for c in columns] for item in items]}


def _present(columns: Sequence[str], items: Sequence[Mapping[str, Any]]) -> list[str]:
    """``columns`` that at least one item has (the first always)."""
    return [c for i, c in enumerate(columns) if i == 0 or any(c in item for item in items)]


# ---- frequencies, means, RAPPOR -----------------------------------------------------------------


def _frequencies(document: Document, _estimate: Any) -> Display:
    """Categorical frequencies: one bar per item with its interval as a whisker."""
    items = document.get("items", [])
    columns = _present([*ITEM_COLUMNS, "z", "threshold", "significant"], items)
    return {
        "chart": item_chart("estimated frequency", items),
        "table": table(columns, items),
    }


def _mean(document: Document, _estimate: Any) -> Display:
    """A numeric campaign: the mean (one point per coordinate) with its interval."""
    columns = ["mean", "std_error", "ci_low", "ci_high"]
    values = [document.get(c) for c in columns]
    rows = (
        [[i, *parts] for i, parts in enumerate(zip(*values, strict=True))]
        if isinstance(values[0], list)
        else [[0, *values]]
    )
    mechanism = document.get("mechanism", {})
    return {
        "chart": interval_chart(
            "estimated mean",
            [f"coordinate {row[0]}" for row in rows] if len(rows) > 1 else ["mean"],
            [row[1] for row in rows],
            [row[3] for row in rows],
            [row[4] for row in rows],
            kind="interval-points",
            range=[mechanism.get("lower"), mechanism.get("upper")],
        ),
        "table": {"columns": ["coordinate", *columns], "rows": rows},
    }


def _rappor(document: Document, _estimate: Any) -> Display:
    """RAPPOR over a candidate list: the candidate table, significant ones charted."""
    items = document.get("items", [])
    shown = [item for item in items if item.get("significant")] or items
    return {
        "chart": item_chart("estimated frequency (significant candidates)", shown),
        "table": table([*ITEM_COLUMNS, "selected", "significant"], items),
        "notes": [document["note"]] if document.get("note") else [],
    }


# ---- heavy hitters: sketches against candidates, discovery --------------------------------------


def _heavy_hitters(document: Document, _estimate: Any) -> Display:
    """Discovered (or candidate) strings: the table with intervals and the significance test,
    the significant ones charted; PEM/SFP's per-level usage as a second table."""
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
    sections = []
    if levels:
        sections.append(
            {
                "title": "Reports and candidates per level",
                "table": table(
                    _present(["level", "bits", "reports", "candidates", "kept"], levels), levels
                ),
            }
        )
    return {
        "chart": item_chart("estimated frequency (significant strings)", shown),
        "table": table(_present([*ITEM_COLUMNS, "z", "significant"], items), items),
        "sections": sections,
        "notes": notes,
    }


# ---- distributions (square wave), ranges (hierarchical) -----------------------------------------


def _cdf_band(estimate: Any) -> dict[str, Any] | None:
    """The estimated CDF with its bootstrap band at up to :data:`CDF_POINTS` points, from an
    estimate with ``cdf``, ``cdf_interval``, ``lower`` and ``upper``; else ``None``."""
    if not all(hasattr(estimate, a) for a in ("cdf", "cdf_interval", "lower", "upper")):
        return None
    bins = int(np.size(getattr(estimate, "histogram", ()))) or 32
    points = min(CDF_POINTS, 2 * bins + 1)
    xs = np.linspace(float(estimate.lower), float(estimate.upper), points)
    bands = [estimate.cdf_interval(float(x)) for x in xs]
    return json_safe(  # type: ignore[no-any-return]
        {
            "type": "band-line",
            "label": "estimated CDF P[X <= x]",
            "band_label": "bootstrap interval",
            "x": [float(x) for x in xs],
            "values": [estimate.cdf(float(x)) for x in xs],
            "low": [band[0] for band in bands],
            "high": [band[1] for band in bands],
            "range": [0.0, 1.0],
        }
    )


def _bucket(row: Mapping[str, Any]) -> str:
    return f"[{row.get('low', 0):.4g}, {row.get('high', 0):.4g})"


def _distribution(document: Document, estimate: Any) -> Display:
    """A distribution: the CDF with its band, the histogram with intervals, quantiles, mean."""
    histogram = document.get("histogram", [])
    quantiles = document.get("quantiles", [])
    mean = document.get("mean") or {}
    buckets = [{"bucket": _bucket(row), **row} for row in histogram]
    histogram_chart = interval_chart(
        "estimated frequency per bucket",
        [b["bucket"] for b in buckets],
        [b.get("frequency") for b in buckets],
        [b.get("ci_low") for b in buckets],
        [b.get("ci_high") for b in buckets],
    )
    cdf = _cdf_band(estimate)
    summary = ([{"statistic": "mean", **mean}] if mean else []) + [
        {"statistic": f"quantile {q.get('q')}", **q} for q in quantiles
    ]
    sections: list[dict[str, Any]] = []
    if cdf is not None:  # the CDF leads; the histogram follows as a section
        sections.append(
            {
                "title": "Histogram",
                "hint": "Bars: bucket frequencies; whiskers: bootstrap intervals.",
                "chart": histogram_chart,
                "table": table(["bucket", "frequency", "ci_low", "ci_high"], buckets),
            }
        )
    notes = []
    if document.get("bootstrap_replicates"):
        notes.append(
            f"Intervals: percentile bootstrap over {document['bootstrap_replicates']} "
            f"replicates ({document.get('postprocessing', 'ems').upper()})."
        )
    return {
        "chart": cdf or histogram_chart,
        "table": table(["statistic", "value", "std_error", "ci_low", "ci_high"], summary),
        "sections": sections,
        "notes": notes,
    }


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
    z = _z(confidence)
    return json_safe(  # type: ignore[no-any-return]
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
                "table": table(_present(["q", "value", "ci_low", "ci_high"], quantiles), quantiles),
            }
        )
    notes = [f"Variant: {document['variant']}."] if document.get("variant") else []
    if document.get("postprocessing"):
        notes.append(f"Post-processing: {document['postprocessing']}.")
    return {
        "chart": item_chart("estimated frequency", items),
        "table": table(ITEM_COLUMNS, items),
        "sections": sections,
        "notes": notes,
    }


# ---- marginals (multi), key-value (pckv) --------------------------------------------------------


def _marginals(document: Document, _estimate: Any) -> Display:
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
        heatmap = _heatmap(entry, document.get("confidence"))
        if heatmap is not None:
            names = ", ".join(map(str, entry.get("attributes", [])))
            sections.append({"title": f"Marginal of {names}", "heatmap": heatmap})
    notes = [f"Intervals: {document['intervals']}."] if document.get("intervals") else []
    return {
        "chart": chart,
        "table": table(["attribute", "value", "frequency", "std_error", "ci_low", "ci_high"], rows),
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
    z = _z(confidence)
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
    return json_safe(cells)  # type: ignore[no-any-return]


def _heatmap(entry: Mapping[str, Any], confidence: Any) -> dict[str, Any] | None:
    arrays = _arrays(entry, confidence)
    if arrays is None or arrays["frequencies"].ndim < 2:
        return None
    shape = arrays["frequencies"].shape
    flat = {key: array.reshape(shape[0], -1).tolist() for key, array in arrays.items()}
    attributes = [str(a) for a in entry.get("attributes", [])]
    return json_safe(  # type: ignore[no-any-return]
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


def _z(confidence: Any) -> float:
    from analysis.estimation import z_value

    return float(z_value(float(confidence))) if isinstance(confidence, float) else math.nan


def _pair(value: Any, i: int) -> Any:
    return value[i] if isinstance(value, (list, tuple)) and len(value) > i else None


def _key_value(document: Document, _estimate: Any) -> Display:
    """Key-value pairs: each key's frequency and the mean of its values, both with intervals."""
    keys = document.get("keys", [])
    rows = [
        {
            "key": entry.get("key"),
            "frequency": entry.get("frequency"),
            "frequency_std_error": entry.get("frequency_std_error"),
            "frequency_ci_low": _pair(entry.get("frequency_ci"), 0),
            "frequency_ci_high": _pair(entry.get("frequency_ci"), 1),
            "mean": entry.get("mean"),
            "mean_std_error": entry.get("mean_std_error"),
            "mean_ci_low": _pair(entry.get("mean_ci"), 0),
            "mean_ci_high": _pair(entry.get("mean_ci"), 1),
        }
        for entry in keys
    ]
    labels = [f"key {r['key']}" for r in rows]
    means = interval_chart(
        "estimated mean of the key's values",
        labels,
        [r["mean"] for r in rows],
        [r["mean_ci_low"] for r in rows],
        [r["mean_ci_high"] for r in rows],
        kind="interval-points",
        range=[-1.0, 1.0],
    )
    return {
        "chart": interval_chart(
            "estimated frequency of the key",
            labels,
            [r["frequency"] for r in rows],
            [r["frequency_ci_low"] for r in rows],
            [r["frequency_ci_high"] for r in rows],
        ),
        "table": table(list(rows[0]) if rows else ["key"], rows),
        "sections": [
            {
                "title": "Mean value per key",
                "hint": "Points: estimated means on [-1, 1]; whiskers: confidence intervals.",
                "chart": means,
            }
        ],
        "notes": [str(note) for note in document.get("notes", [])],
    }


VIEWS: dict[str, View] = {
    "frequencies": View("frequencies", "Categorical frequencies", _frequencies),
    "mean": View("mean", "Mean", _mean),
    "rappor": View("rappor", "RAPPOR candidates", _rappor),
    "sketch": View("heavy-hitters", "Frequent strings (count sketch)", _heavy_hitters),
    "discovery": View("heavy-hitters", "Discovered frequent strings", _heavy_hitters),
    "distribution": View("distribution", "Distribution", _distribution),
    "range": View("range", "Hierarchical histogram and ranges", _range),
    "multi": View("marginals", "Marginals", _marginals),
    "fourier": View("marginals", "Marginals (Fourier coefficients)", _marginals),
    "key-value": View("key-value", "Key-value pairs", _key_value),
}
"""The view of each ``Mechanism.estimate_kind``."""


def render(kind: str, document: Document, estimate: Any = None) -> Display:
    """The view of an estimate document of ``kind``:
    ``{"view", "title", "chart", "table", "sections", "notes"}``."""
    view = VIEWS.get(kind)
    if view is None:
        raise ValueError(f"no dashboard view for estimates of kind {kind!r}")
    return {
        "view": view.name,
        "title": view.title,
        "sections": [],
        "notes": [],
        **view.build(document, estimate),
    }
