"""The views of the ``mean`` estimate kind (numeric means, scalar or vector).

Report: the mean of each coordinate with its interval on the input range; the variance of the
mean against the curator's noisy sum. Dashboard: one point per coordinate with its interval.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis import plots
from analysis.views.answer import campaign_unit
from analysis.views.cells import fmt_number, image_tag, note, percent
from analysis.views.dashboard import DashboardView, Display, Document, interval_chart
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import Column, measured_table, number_table, table

__all__ = ["DASHBOARD", "REPORT"]


# ---- the report ---------------------------------------------------------------------------------


def _listed(value: Any) -> list[Any]:
    return list(np.atleast_1d(np.asarray(value, dtype=float)).tolist())


def _mean_build(context: Context) -> tuple[dict[str, Any], Figures]:
    m, estimate = context.mechanism, context.estimate
    means, ses = _listed(estimate.mean), _listed(estimate.std_errors)
    lows, highs = _listed(estimate.ci_low), _listed(estimate.ci_high)
    worst = _listed(estimate.worst_case_std_errors)
    counts = [int(c) for c in np.atleast_1d(estimate.count)]
    labels = ["mean"] if len(means) == 1 else [f"coordinate {i}" for i in range(len(means))]
    coordinates = [
        {
            "coordinate": i,
            "label": labels[i],
            "mean": means[i],
            "std_error": ses[i],
            "ci_low": lows[i],
            "ci_high": highs[i],
            "worst_case_std_error": worst[i],
            "count": counts[i],
        }
        for i in range(len(means))
    ]
    exact, measured = central_gap(context)
    truth = None
    if measured is not None:
        truth = _listed(measured["true_mean"])
        for row, value in zip(coordinates, truth, strict=True):
            row["truth"] = value
    lower, upper = getattr(m, "lower", None), getattr(m, "upper", None)
    if lower is None and getattr(m, "clip_norm", None) is not None:
        lower, upper = -float(m.clip_norm), float(m.clip_norm)
    bounds = None if lower is None or upper is None else (float(lower), float(upper))
    figures: Figures = {
        "mean": png(
            7.5,
            1.9 + 0.35 * len(means),
            lambda f: plots.plot_means(
                f.add_subplot(),
                labels,
                means,
                lows,
                highs,
                bounds=bounds,
                truth=truth,
                confidence=estimate.confidence,
                unit=campaign_unit(context.campaign.metadata),
            ),
        ),
        "gap": png(
            7.0,
            4.0,
            lambda f: plots.plot_error_comparison(
                f.add_subplot(),
                {
                    "ldp": float(np.max(ses)),
                    "central_laplace": exact["central_laplace_std_error"],
                    "central_gaussian": exact["central_gaussian_std_error"],
                },
                ylabel="standard error of the mean",
            ),
        ),
    }
    data = {
        "coordinates": coordinates,
        "dim": len(means),
        "bounds": list(bounds) if bounds else None,
        "variance_method": estimate.variance_method,
        "mean": estimate.mean,
        "std_error": estimate.std_errors,
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _mean_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    level = percent(d["confidence"])
    has_truth = any("truth" in row for row in d["coordinates"])
    unit = campaign_unit(d)
    coordinates = table(
        [
            Column.text("", "label"),
            Column.number(f"mean ({unit})" if unit else "mean", "mean"),
            Column(
                f"{level} interval",
                lambda row: f"[{fmt_number(row['ci_low'])}, {fmt_number(row['ci_high'])}]",
            ),
            *Column.numbers(
                [
                    ("std error", "std_error"),
                    ("worst-case std error", "worst_case_std_error"),
                    ("reports carrying it", "count"),
                ]
            ),
            Column.number("truth", "truth") if has_truth else None,
        ],
        d["coordinates"],
    )
    bounds = d.get("bounds")
    gap = d["gap"]
    method = (
        "the sample variance of the reports' unbiased estimates (no knowledge of the values "
        "needed; conservative for a fixed population)"
        if d["variance_method"] == "empirical"
        else "the worst case of the mechanism's exact variance (one report leaves no sample "
        "variance)"
    )
    largest = max(c["std_error"] for c in d["coordinates"])
    parts = [
        "<h2>1. The mean</h2>",
        image_tag(figures, "mean", "the estimated mean with its interval"),
        coordinates,
        note(
            "The unbiased mean of the values clipped to the mechanism's input set"
            + (f" [{fmt_number(bounds[0])}, {fmt_number(bounds[1])}]" if bounds else "")
            + f" over n = {fmt_number(d['n'])} reports; standard errors from {method}; normal "
            f"{level} intervals."
        ),
        "<h2>2. The central gap</h2>",
        image_tag(figures, "gap", "local versus central standard errors of the mean"),
        number_table(
            ["model (per coordinate)", "variance of the mean", "standard error"],
            [
                (
                    "LDP, worst-case value",
                    gap["ldp_variance_worst_case"],
                    gap["ldp_std_error_worst_case"],
                ),
                (
                    "LDP, value at the centre",
                    gap["ldp_variance_at_center"],
                    math.sqrt(gap["ldp_variance_at_center"]),
                ),
                ("LDP, this campaign (estimated)", largest**2, largest),
                (
                    f"central Laplace (L1 sensitivity {fmt_number(gap['l1_sensitivity'])})",
                    gap["central_laplace_variance"],
                    gap["central_laplace_std_error"],
                ),
                (
                    f"central analytic Gaussian (L2 sensitivity "
                    f"{fmt_number(gap['l2_sensitivity'])})",
                    gap["central_gaussian_variance"],
                    gap["central_gaussian_std_error"],
                ),
            ],
        ),
        note(
            f"Exact: {html.escape(gap['exact'])}. At epsilon = {d['epsilon']:g} the local mean "
            f"has up to {fmt_number(gap['variance_ratio'])} times the variance of a trusted "
            "curator adding Laplace noise to the true sum."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            measured_table(
                ["measured against the truth", "squared error", "expected"],
                measured,
                ("LDP (these reports)", "ldp_squared_error", "ldp_expected"),
                " (mean over runs)",
            )
        )
    return parts


# ---- the dashboard ------------------------------------------------------------------------------


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
            y_title="mean",
            unit_axis="y",
        ),
        "table": {"columns": ["coordinate", *columns], "rows": rows, "unit_columns": columns},
    }


REPORT = ReportView("mean", _mean_build, _mean_render)
DASHBOARD = DashboardView("mean", "Mean", _mean)
