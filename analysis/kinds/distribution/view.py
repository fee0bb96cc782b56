"""The views of the ``distribution`` estimate kind (square wave: a numeric distribution).

Report: the histogram and the CDF with their bands, the quantiles; the central histogram
measured in simulation. Dashboard: the CDF with its band, the histogram with intervals, the
quantiles and the mean.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis import plots
from analysis.streaming import json_safe
from analysis.views.answer import campaign_unit
from analysis.views.cells import image_tag, note, percent, percentile
from analysis.views.dashboard import DashboardView, Display, Document, interval_chart, record_table
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import Column, keyed_table, number_table, table

__all__ = ["DASHBOARD", "REPORT"]


# ---- the report ---------------------------------------------------------------------------------


CDF_POINTS = 201


def _distribution_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    document = estimate.to_dict()
    x = np.linspace(estimate.lower, estimate.upper, CDF_POINTS)
    cdf = np.array([estimate.cdf(float(v)) for v in x])
    band = np.array([estimate.cdf_interval(float(v)) for v in x])
    truth_hist = truth_cdf = None
    unit = campaign_unit(context.campaign.metadata)
    if context.truth is not None:
        values = np.clip(np.asarray(context.truth, dtype=float), estimate.lower, estimate.upper)
        truth_hist = np.histogram(values, bins=estimate.bin_edges)[0] / values.size
        truth_cdf = np.searchsorted(np.sort(values), x, side="right") / values.size
    figures: Figures = {
        "histogram": png(
            7.5,
            3.8,
            lambda f: plots.plot_histogram(
                f.add_subplot(),
                estimate.bin_edges,
                estimate.histogram,
                estimate.histogram_low,
                estimate.histogram_high,
                truth=truth_hist,
                confidence=estimate.confidence,
                unit=unit,
            ),
        ),
        "cdf": png(
            7.5,
            3.8,
            lambda f: plots.plot_cdf(
                f.add_subplot(),
                x,
                cdf,
                band[:, 0],
                band[:, 1],
                truth=truth_cdf,
                quantiles=[(q["q"], q["value"]) for q in document["quantiles"]],
                confidence=estimate.confidence,
                unit=unit,
            ),
        ),
    }
    exact, measured = central_gap(context)
    data = {
        "mean": document["mean"],
        "quantiles": document["quantiles"],
        "histogram": document["histogram"],
        "bootstrap_replicates": document["bootstrap_replicates"],
        "lower": estimate.lower,
        "upper": estimate.upper,
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _distribution_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    level = percent(d["confidence"])
    statistics = [{**d["mean"], "name": "mean"}] + [
        {**q, "name": percentile(q["q"])} for q in d["quantiles"]
    ]
    parts = [
        "<h2>1. The distribution</h2>",
        image_tag(figures, "histogram", "histogram with its band"),
        image_tag(figures, "cdf", "cumulative distribution with its band"),
        table(
            [
                Column("statistic", lambda row: row["name"]),
                Column.fixed("estimate", "value"),
                Column.interval(f"{level} interval"),
            ],
            statistics,
        ),
        table(
            [
                Column("bucket", lambda b: f"[{b['low']:.4g}, {b['high']:.4g})"),
                Column.fixed("share", "frequency"),
                Column.interval(f"{level} band"),
            ],
            d["histogram"],
        ),
        note(
            "EMS (EM with smoothing) through the mechanism's exact channel; the bands are "
            f"percentile intervals of {d['bootstrap_replicates']} parametric bootstrap refits "
            "(sampling error only, not the smoothing bias); the mean is the unbiased closed form."
        ),
    ]
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        keyed_table(
            ["central curator (Laplace histogram)", "variance"],
            gap,
            [
                ("one bucket of the report", "central_laplace_bucket_variance"),
                ("the CDF at its worst edge", "central_laplace_cdf_variance_max"),
            ],
        ),
        note(f"Exact for the curator ({html.escape(gap['exact'])})."),
    ]
    measured = d.get("measured_gap")
    if measured:
        distance, buckets = measured["wasserstein_1"], measured["bucket_mse"]
        parts.append(
            number_table(
                ["measured against the truth", "local (EMS)", "central Laplace"],
                [
                    (
                        "Wasserstein-1 distance of the CDFs",
                        distance["ldp"],
                        distance["central_laplace"],
                    ),
                    ("bucket mean squared error", buckets["ldp"], buckets["central_laplace"]),
                    *(
                        (
                            f"{percentile(q['q'])}: absolute error",
                            q["ldp_abs_error"],
                            q["central_laplace_mean_abs_error"],
                        )
                        for q in measured["quantiles"]
                    ),
                ],
            )
        )
    else:
        parts.append(
            note(
                "EMS has no closed form: <code>ldp-analyze gap --simulate</code> "
                "measures both models."
            )
        )
    return parts


# ---- the dashboard ------------------------------------------------------------------------------


def _cdf_band(estimate: Any) -> dict[str, Any] | None:
    """The estimated CDF with its bootstrap band at up to :data:`CDF_POINTS` points, from an
    estimate with ``cdf``, ``cdf_interval``, ``lower`` and ``upper``; else ``None``."""
    if not all(hasattr(estimate, a) for a in ("cdf", "cdf_interval", "lower", "upper")):
        return None
    bins = int(np.size(getattr(estimate, "histogram", ()))) or 32
    points = min(CDF_POINTS, 2 * bins + 1)
    xs = np.linspace(float(estimate.lower), float(estimate.upper), points)
    bands = [estimate.cdf_interval(float(x)) for x in xs]
    return json_safe(
        {
            "type": "band-line",
            "label": "estimated CDF P[X <= x]",
            "band_label": "bootstrap interval",
            "x": [float(x) for x in xs],
            "values": [estimate.cdf(float(x)) for x in xs],
            "low": [band[0] for band in bands],
            "high": [band[1] for band in bands],
            "range": [0.0, 1.0],
            "x_title": "value",
            "y_title": "P[X <= x]",
            "unit_axis": "x",
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
        percent=True,
        x_title="bucket",
        y_title="share of reports",
        unit_axis="x",
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
                "table": record_table(["bucket", "frequency", "ci_low", "ci_high"], buckets),
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
        "table": {
            **record_table(["statistic", "value", "std_error", "ci_low", "ci_high"], summary),
            "unit_columns": ["value", "std_error", "ci_low", "ci_high"],
        },
        "sections": sections,
        "notes": notes,
    }


REPORT = ReportView("distribution", _distribution_build, _distribution_render)
DASHBOARD = DashboardView("distribution", "Distribution", _distribution)
