"""The views of the ``key-value`` estimate kind (PCKV).

Report: per key the frequency and the mean with their intervals; the central per-key count and
mean. Dashboard: each key's frequency and the mean of its values, both with intervals.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis import plots
from analysis.views.cells import fmt_number, image_tag, interval, note, percent
from analysis.views.dashboard import DashboardView, Display, Document, interval_chart, record_table
from analysis.views.report import Context, Figures, ReportView, central_gap, png
from analysis.views.table import Column, number_table, table

__all__ = ["DASHBOARD", "REPORT"]


# ---- the report ---------------------------------------------------------------------------------


def _key_value_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    document = estimate.to_dict()
    k = estimate.frequencies.size
    labels = context.labels(k)
    keys = document["keys"]
    for entry in keys:
        entry["label"] = labels[entry["key"]]
    truth = None
    if context.truth is not None:
        counts, sums = np.zeros(k), np.zeros(k)
        for record in context.truth:
            for key, value in record.items():
                counts[key] += 1
                sums[key] += value
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        truth = (counts / estimate.n, means)
        for entry in keys:
            entry["true_frequency"] = float(truth[0][entry["key"]])
            entry["true_mean"] = float(truth[1][entry["key"]])

    def draw(figure: Any) -> None:
        plots.plot_key_values(
            figure.subplots(1, 2),
            labels,
            (
                estimate.frequencies,
                [e["frequency_ci"][0] for e in keys],
                [e["frequency_ci"][1] for e in keys],
            ),
            (estimate.means, [e["mean_ci"][0] for e in keys], [e["mean_ci"][1] for e in keys]),
            truth=truth,
        )

    figures = {"keys": png(11.0, 3.8, draw)}
    exact, measured = central_gap(context)
    data = {"keys": keys, "notes": document["notes"], "gap": exact, "measured_gap": measured}
    return data, figures


def _key_value_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    level = percent(d["confidence"])
    has_truth = any("true_frequency" in e for e in d["keys"])
    gap = d["gap"]
    parts = [
        "<h2>1. Keys: frequency and mean</h2>",
        image_tag(figures, "keys", "per key frequency and mean with intervals"),
        table(
            [
                Column.text("key", "label"),
                Column.fixed("frequency", "frequency"),
                Column(f"{level} interval", lambda e: interval(*e["frequency_ci"])),
                Column.fixed("mean", "mean"),
                Column(f"{level} interval", lambda e: interval(*e["mean_ci"])),
                *(
                    [
                        Column.fixed("true frequency", "true_frequency"),
                        Column.fixed("true mean", "true_mean"),
                    ]
                    if has_truth
                    else []
                ),
            ],
            d["keys"],
        ),
        note(
            "PCKV (Gu et al., USENIX Security 2020): frequencies with their exact standard errors, "
            "means with delta-method standard errors."
        ),
        *(note(html.escape(text)) for text in d.get("notes", ())),
        "<h2>2. The central gap</h2>",
        number_table(
            ["one key's frequency", "variance"],
            [
                ("LDP (a key nobody holds)", gap["frequency"]["ldp_variance_at_zero"]),
                ("central Laplace (half the budget)", gap["frequency"]["central_laplace_variance"]),
            ],
        ),
        note(
            f"Exact: {html.escape(gap['exact'])}. The curator's mean of a key is its noisy sum "
            f"over its noisy count, each with Laplace noise of scale "
            f"{fmt_number(gap['mean']['central_laplace_scale'])} (variance about "
            f"{html.escape(gap['mean']['central_laplace_variance_formula'])})."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        f, m = measured["frequency"], measured["mean"]
        parts.append(
            number_table(
                ["measured against the truth", "local", "central Laplace"],
                [
                    ("frequency MSE", f["ldp_mse"], f["central_laplace_mse"]),
                    (f"mean MSE ({m['keys']} keys held)", m["ldp_mse"], m["central_laplace_mse"]),
                ],
            )
        )
    return parts


# ---- the dashboard ------------------------------------------------------------------------------


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
        "table": record_table(list(rows[0]) if rows else ["key"], rows),
        "sections": [
            {
                "title": "Mean value per key",
                "hint": "Points: estimated means on [-1, 1]; whiskers: confidence intervals.",
                "chart": means,
            }
        ],
        "notes": [str(text) for text in document.get("notes", [])],
    }


REPORT = ReportView("key-value", _key_value_build, _key_value_render)
DASHBOARD = DashboardView("key-value", "Key-value pairs", _key_value)
