"""Report views of the estimate kinds beyond frequencies (``analysis.report``).

One view per ``Mechanism.estimate_kind`` (:data:`VIEWS`): what the page shows of the estimate
and of its central gap (``analysis.gap.kind_gap``, and with the truth
``analysis.gap.measured_kind_gap``):

- ``discovery`` / ``sketch``: the discovered strings with their intervals and significance;
  the detection thresholds of both models; with the truth, recall and precision of the local
  decoder beside the central selection mechanisms at the same epsilon;
- ``multi``: a heatmap of every 2-way table (bars of every 1-way marginal otherwise); the
  per-cell variance against the curator's;
- ``distribution``: the histogram with its band and the CDF with its band, the quantiles; the
  central histogram measured in simulation;
- ``range``: the leaf frequencies with their band, a table of ranges and quantiles; the exact
  range variances of both models;
- ``key-value``: per key the frequency and the mean with their intervals; the central per-key
  count and mean;
- ``fourier``: bars of every 1-way marginal and a heatmap of 2-way tables, with their bootstrap
  intervals; the per-cell variance of each marginal size against the curator's tables;
- ``mean``: the mean of each coordinate with its interval on the input range; the variance of
  the mean against the curator's noisy sum;
- ``rappor``: the candidates with their intervals, the LASSO's selection and significance, the
  Bloom-bit mass the candidates explain; a candidate's variance against the curator's
  histogram.

Each view has ``build(context) -> (data, figures)`` and ``render(data, figures) -> html``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from analysis import plots, report_common
from analysis.dataset import StoredCampaign
from analysis.estimation import json_safe
from analysis.gap import GapOptions, kind_gap, measured_kind_gap

__all__ = ["VIEWS", "build_kind_report", "render_kind_html"]

Figures = dict[str, bytes]


@dataclasses.dataclass(frozen=True)
class Context:
    """What a view builds from."""

    campaign: StoredCampaign
    estimate: Any
    truth: Any
    options: GapOptions
    top: int
    seed: int

    @property
    def mechanism(self) -> Any:
        return self.campaign.mechanism

    def labels(self, k: int) -> list[str]:
        domain = self.campaign.domain
        return list(domain) if domain and len(domain) == k else [str(v) for v in range(k)]


@dataclasses.dataclass(frozen=True)
class View:
    title: str
    build: Callable[[Context], tuple[dict[str, Any], Figures]]
    render: Callable[[Mapping[str, Any], Mapping[str, bytes]], list[str]]


def _png(width: float, height: float, draw: Callable[[Any], Any]) -> bytes:
    figure = plots.new_figure(width, height)
    draw(figure)
    return plots.figure_png(figure)


def _gap(context: Context) -> tuple[dict[str, Any], dict[str, Any] | None]:
    exact = kind_gap(context.mechanism, context.estimate.n, context.options)
    measured = None
    if context.truth is not None:
        measured = measured_kind_gap(
            context.mechanism, context.estimate, context.truth, context.options, seed=context.seed
        )
    return exact, measured


# ---- helpers for the HTML ------------------------------------------------------------------


def _note(text: str) -> str:
    return f'<p class="note">{text}</p>'


def _measured_table(
    header: list[str], measured: dict[str, Any], rows: list[tuple[str, str, str]]
) -> str:
    """A measured-against-expected table: one row a model, ``(label, measured key, expected
    key)`` of the gap document's ``measured`` part."""
    fmt = report_common.fmt_number
    return report_common.html_table(
        header,
        [[label, fmt(measured[value]), fmt(measured[expected])] for label, value, expected in rows],
    )


def _interval(low: Any, high: Any, digits: int = 4) -> str:
    if low is None or high is None:
        return "&ndash;"
    return f"[{_fixed(low, digits)}, {_fixed(high, digits)}]"


def _fixed(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "&ndash;"
    return f"{value:.{digits}f}"


def _mark(flag: bool) -> str:
    return f"<span class='{'yes' if flag else 'no'}'>{'yes' if flag else 'no'}</span>"


# ---- heavy hitters ---------------------------------------------------------------------------


def _heavy_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    items = [item.to_dict() for item in estimate.items[: context.top]]
    truth_counts: Mapping[str, int] | None = context.truth
    if truth_counts is not None:
        for item in items:
            item["true_frequency"] = truth_counts.get(item["value"], 0) / estimate.n
    exact, measured = _gap(context)
    data = {
        "items": items,
        "detected": len(estimate.significant),
        "examined": estimate.examined,
        "alpha": estimate.alpha,
        "critical_z": estimate.critical_z,
        "method": estimate.method,
        "levels": list(estimate.levels),
        "unconfirmed": list(estimate.unconfirmed),
        "nothing_discovered": None if estimate.outlook is None else estimate.outlook.to_dict(),
        "gap": exact,
        "measured_gap": measured,
    }
    figures: Figures = {}
    if items:
        height = 1.6 + 0.28 * len(items)
        figures["items"] = _png(
            8.0,
            min(height, 9.0),
            lambda f: plots.plot_items(
                f.add_subplot(),
                [i["value"] for i in items],
                [i["frequency"] for i in items],
                [i["ci_low"] if i["ci_low"] is not None else math.nan for i in items],
                [i["ci_high"] if i["ci_high"] is not None else math.nan for i in items],
                significant=[i["significant"] for i in items],
                truth=None if truth_counts is None else [i["true_frequency"] for i in items],
                confidence=estimate.confidence,
            ),
        )
    if measured is not None:

        def draw(figure: Any) -> None:
            left, right = figure.subplots(1, 2)
            top = measured["top_k"]
            plots.plot_recall(
                left,
                {"local": top["local"], **top["central"]},
                title=f"Which are the top {top['k']}?",
            )
            above = measured["above_threshold"]
            plots.plot_recall(
                right,
                {"local": above["local"], **above["central"]},
                title=f"Which exceed {above['threshold']:.4f}?",
            )

        figures["recall"] = _png(10.0, 4.2, draw)
    return data, figures


def _heavy_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    has_truth = any("true_frequency" in item for item in d["items"])
    parts = ["<h2>1. Discovered items</h2>"]
    if "items" in figures:
        parts.append(r.image_tag(figures, "items", "discovered items with their intervals"))
    test = (
        f"An item is <span class='yes'>significant</span> when its z exceeds "
        f"{d['critical_z']:.3f}: Bonferroni over the {d['examined']} strings examined at "
        f"alpha = {d['alpha']}, so the expected number of false discoveries is at most "
        f"{d['alpha']}."
        if d["critical_z"] is not None
        else "No string was assembled, so none was tested."
    )
    parts.append(_note(f"{html.escape(d['method'])}. {test} {d['detected']} detected."))
    if d.get("nothing_discovered"):
        parts.append(_note(html.escape(d["nothing_discovered"]["note"])))
    header = ["value", "frequency", f"{percent} interval", "std error", "z", "significant"]
    if has_truth:
        header.append("truth")
    rows = []
    for item in d["items"]:
        row = [
            html.escape(str(item["value"])),
            _fixed(item["frequency"]),
            _interval(item["ci_low"], item["ci_high"]),
            _fixed(item["std_error"]),
            r.fmt_number(item["z"], 3),
            _mark(item["significant"]),
        ]
        if has_truth:
            row.append(_fixed(item["true_frequency"]))
        rows.append(row)
    parts.append(r.html_table(header, rows))
    if d["levels"]:
        parts.append(
            r.html_table(
                ["level", "reports", "candidates", "kept"],
                [
                    [
                        html.escape(str(level.get("level"))),
                        r.fmt_number(level.get("reports")),
                        r.fmt_number(level.get("candidates")),
                        r.fmt_number(level.get("kept")),
                    ]
                    for level in d["levels"]
                ],
            )
        )
    if d["unconfirmed"]:
        parts.append(
            _note("Not confirmed: " + ", ".join(html.escape(str(v)) for v in d["unconfirmed"]))
        )
    gap = d["gap"]
    detection = gap["detection"]
    parts += [
        "<h2>2. The central gap</h2>",
        r.html_table(
            ["model", "smallest frequency called significant"],
            [
                ["local (this decoder)", r.fmt_number(detection["local_frequency"])],
                [
                    "central curator, Laplace histogram",
                    r.fmt_number(detection["central_laplace_frequency"]),
                ],
            ],
        ),
        _note(
            f"Exact, at the same epsilon = {d['epsilon']:g} and the same Bonferroni rule over "
            f"{detection['candidates']} candidates (alpha = {detection['alpha']}). Local: "
            f"{html.escape(detection['local_note'])}. The curator adds Laplace noise of scale "
            "Delta_1/epsilon to the true counts."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        top, above = measured["top_k"], measured["above_threshold"]
        rows = [["local (this decoder)", *_recall_cells(top["local"]), "&ndash;"]]
        for name, result in top["central"].items():
            rows.append(
                [
                    html.escape(plots.plain_name(name)),
                    *_recall_cells(result),
                    r.fmt_number(result["recall_bound"]),
                ]
            )
        parts += [
            r.image_tag(figures, "recall", "recall and precision of both models"),
            f"<h3>Which are the top {top['k']}? (measured against the truth)</h3>",
            r.html_table(
                ["model", "answered", "recall", "precision", "exact lower bound on recall"],
                rows,
            ),
            f"<h3>Which exceed {above['threshold']:.4f}?</h3>",
            r.html_table(
                ["model", "answered", "recall", "precision"],
                [
                    ["local (this decoder)", *_recall_cells(above["local"])],
                    *(
                        [html.escape(plots.plain_name(name)), *_recall_cells(result)]
                        for name, result in above["central"].items()
                    ),
                ],
            ),
            _note(
                "The central answers run on the true counts with the exact samplers of "
                "analysis.selection at the same epsilon in all (k peeling rounds at epsilon/k; "
                "the sparse vector with cutoff k), averaged over "
                f"{top['central']['exponential_mechanism']['runs']} runs. "
                f"The local decoder made {measured['local_false_discoveries']} false "
                "discoveries (expected at most "
                f"{measured['local_expected_false_discoveries_at_most']})."
            ),
        ]
    else:
        parts.append(
            _note(
                "Recall and precision need the truth: see <code>ldp-analyze gap --simulate</code> "
                "or a report made with the true counts (the demo)."
            )
        )
    return parts


def _recall_cells(result: Mapping[str, Any]) -> list[str]:
    r = report_common
    answered = result["answered"]
    return [
        r.fmt_number(answered if isinstance(answered, int) else float(answered), 3),
        _fixed(result["recall"], 3),
        _fixed(result["precision"], 3),
    ]


# ---- marginals -------------------------------------------------------------------------------


def _attribute_labels(m: Any, index: int) -> list[str]:
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
            "labels": [_attribute_labels(m, a) for a in unit],
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
    z = _z(estimate)
    for index, table in enumerate(tables[:8]):
        rows, columns = table["labels"]
        width, height = 6.0 + 0.25 * len(columns), 2.2 + 0.3 * len(rows)
        figures[f"heatmap-{index}"] = _png(
            min(width, 11.0), min(height, 9.0), functools.partial(_heatmap, table=table)
        )
    for index, marginal in enumerate(marginals[:8]):
        figures[f"marginal-{index}"] = _png(
            7.0, 3.4, functools.partial(_marginal_bars, marginal=marginal, z=z)
        )
    exact, measured = _gap(context)
    data = {
        "protocol": m.protocol,
        "tables": tables,
        "marginals": marginals,
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _z(estimate: Any) -> float:
    from analysis.streaming import z_value

    return float(z_value(estimate.confidence))


def _heatmap(figure: Any, *, table: Mapping[str, Any], intervals: bool = False) -> None:
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


def _multi_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    r = report_common
    parts = ["<h2>1. Marginals</h2>"]
    for index, table in enumerate(d["tables"]):
        a, b = table["attributes"]
        if f"heatmap-{index}" in figures:
            parts.append(r.image_tag(figures, f"heatmap-{index}", f"heatmap of {a} by {b}"))
        rows, columns = table["labels"]
        truth = table.get("truth")
        body = [
            [html.escape(rows[i])]
            + [
                f"{table['frequencies'][i][j]:.4f} &plusmn; {table['std_errors'][i][j]:.4f}"
                + (f" <span class='no'>({truth[i][j]:.4f})</span>" if truth else "")
                for j in range(len(columns))
            ]
            for i in range(len(rows))
        ]
        parts.append(r.html_table([f"{a} \\ {b}", *columns], body))
    for index, marginal in enumerate(d["marginals"]):
        if f"marginal-{index}" in figures:
            parts.append(
                r.image_tag(
                    figures, f"marginal-{index}", f"marginal of {marginal['attributes'][0]}"
                )
            )
        truth = marginal.get("truth")
        header = ["value", "frequency", "std error", *(["truth"] if truth else [])]
        rows_1 = [
            [html.escape(str(label)), _fixed(f), _fixed(se), *([_fixed(truth[i])] if truth else [])]
            for i, (label, f, se) in enumerate(
                zip(
                    marginal["labels"][0],
                    marginal["frequencies"],
                    marginal["std_errors"],
                    strict=True,
                )
            )
        ]
        parts.append(r.html_table(header, rows_1))
    parts.append(
        _note(
            f"Protocol {html.escape(d['protocol'])}. Cells &plusmn; one standard error (exact, of "
            "the raw unbiased cells; the tables shown are made consistent)"
            + (", the truth in brackets" if any(t.get("truth") for t in d["tables"]) else "")
            + "; 1-way bars with their intervals."
        )
    )
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        r.html_table(
            ["table", "cells", "LDP cell variance", "central Laplace", "central Gaussian", "ratio"],
            [
                [
                    html.escape(", ".join(t["attributes"])),
                    r.fmt_number(t["cells"]),
                    r.fmt_number(t["ldp_cell_variance"]),
                    r.fmt_number(t["central_laplace_cell_variance"]),
                    r.fmt_number(t["central_gaussian_cell_variance"]),
                    r.fmt_number(t["variance_ratio"]),
                ]
                for t in gap["tables"]
            ],
        ),
        _note(
            f"Exact: {html.escape(gap['exact'])}. The curator releases the same tables from the "
            "true records with noise calibrated to all of them at once."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            r.html_table(
                [
                    "table (measured)",
                    "LDP MSE",
                    "LDP expected",
                    "central Laplace MSE",
                    "expected",
                    "central Gaussian MSE",
                    "expected",
                ],
                [
                    [
                        html.escape(", ".join(t["attributes"])),
                        r.fmt_number(t["ldp_mse"]),
                        r.fmt_number(t["ldp_expected"]),
                        r.fmt_number(t["central_laplace_mse"]),
                        r.fmt_number(t["central_laplace_expected"]),
                        r.fmt_number(t["central_gaussian_mse"]),
                        r.fmt_number(t["central_gaussian_expected"]),
                    ]
                    for t in measured["tables"]
                ],
            )
        )
        parts.append(_note(html.escape(measured["note"])))
    return parts


# ---- distributions ---------------------------------------------------------------------------

CDF_POINTS = 201


def _distribution_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    document = estimate.to_dict()
    x = np.linspace(estimate.lower, estimate.upper, CDF_POINTS)
    cdf = np.array([estimate.cdf(float(v)) for v in x])
    band = np.array([estimate.cdf_interval(float(v)) for v in x])
    truth_hist = truth_cdf = None
    if context.truth is not None:
        values = np.clip(np.asarray(context.truth, dtype=float), estimate.lower, estimate.upper)
        truth_hist = np.histogram(values, bins=estimate.bin_edges)[0] / values.size
        truth_cdf = np.searchsorted(np.sort(values), x, side="right") / values.size
    figures: Figures = {
        "histogram": _png(
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
            ),
        ),
        "cdf": _png(
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
            ),
        ),
    }
    exact, measured = _gap(context)
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
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    mean = d["mean"]
    parts = [
        "<h2>1. The distribution</h2>",
        r.image_tag(figures, "histogram", "histogram with its band"),
        r.image_tag(figures, "cdf", "cumulative distribution with its band"),
        r.html_table(
            ["statistic", "estimate", f"{percent} interval"],
            [["mean", _fixed(mean["value"]), _interval(mean["ci_low"], mean["ci_high"])]]
            + [
                [
                    f"{round(100 * q['q'], 4):g}th percentile",
                    _fixed(q["value"]),
                    _interval(q["ci_low"], q["ci_high"]),
                ]
                for q in d["quantiles"]
            ],
        ),
        r.html_table(
            ["bucket", "share", f"{percent} band"],
            [
                [
                    f"[{b['low']:.4g}, {b['high']:.4g})",
                    _fixed(b["frequency"]),
                    _interval(b["ci_low"], b["ci_high"]),
                ]
                for b in d["histogram"]
            ],
        ),
        _note(
            "EMS (EM with smoothing) through the mechanism's exact channel; the bands are "
            f"percentile intervals of {d['bootstrap_replicates']} parametric bootstrap refits "
            "(sampling error only, not the smoothing bias); the mean is the unbiased closed form."
        ),
    ]
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        r.html_table(
            ["central curator (Laplace histogram)", "variance"],
            [
                ["one bucket of the report", r.fmt_number(gap["central_laplace_bucket_variance"])],
                [
                    "the CDF at its worst edge",
                    r.fmt_number(gap["central_laplace_cdf_variance_max"]),
                ],
            ],
        ),
        _note(f"Exact for the curator ({html.escape(gap['exact'])})."),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            r.html_table(
                ["measured against the truth", "local (EMS)", "central Laplace"],
                [
                    [
                        "Wasserstein-1 distance of the CDFs",
                        r.fmt_number(measured["wasserstein_1"]["ldp"]),
                        r.fmt_number(measured["wasserstein_1"]["central_laplace"]),
                    ],
                    [
                        "bucket mean squared error",
                        r.fmt_number(measured["bucket_mse"]["ldp"]),
                        r.fmt_number(measured["bucket_mse"]["central_laplace"]),
                    ],
                    *(
                        [
                            f"{round(100 * q['q'], 4):g}th percentile: absolute error",
                            r.fmt_number(q["ldp_abs_error"]),
                            r.fmt_number(q["central_laplace_mean_abs_error"]),
                        ]
                        for q in measured["quantiles"]
                    ),
                ],
            )
        )
    else:
        parts.append(
            _note(
                "EMS has no closed form: <code>ldp-analyze gap --simulate</code> "
                "measures both models."
            )
        )
    return parts


# ---- ranges ----------------------------------------------------------------------------------


def _query_ranges(k: int) -> list[tuple[int, int]]:
    quarter = max(1, k // 4)
    ranges = [(i * quarter, min(k, (i + 1) * quarter)) for i in range(4) if i * quarter < k]
    return [*ranges, (0, max(1, k // 2)), (0, k)]


def _range_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    from analysis.streaming import z_value

    z = z_value(estimate.confidence)
    labels = context.labels(estimate.k)
    ranges = []
    for lo, hi in _query_ranges(estimate.k):
        value, se = estimate.range(lo, hi)
        ranges.append(
            {
                "lo": lo,
                "hi": hi,
                "label": f"{labels[lo]} to {labels[hi - 1]}",
                "frequency": value,
                "std_error": se,
                "ci_low": value - z * se,
                "ci_high": value + z * se,
            }
        )
    quantiles = [
        {"q": q, "value": estimate.quantile(q), "label": labels[estimate.quantile(q)]}
        for q in (0.25, 0.5, 0.75, 0.9, 0.99)
    ]
    truth = None
    if context.truth is not None:
        counts = np.asarray(context.truth, dtype=float)
        truth = counts / counts.sum()
        for row in ranges:
            row["truth"] = float(truth[row["lo"] : row["hi"]].sum())
    f, se = estimate.frequencies, estimate.std_errors
    figures: Figures = {
        "leaves": _png(
            8.0,
            3.6,
            lambda fig: plots.plot_band(
                fig.add_subplot(),
                f,
                f - z * se,
                f + z * se,
                truth=truth,
                confidence=estimate.confidence,
                title="Leaf frequencies (consistent)",
            ),
        )
    }
    exact, measured = _gap(context)
    data = {
        "k": estimate.k,
        "branching": estimate.oracle.b,
        "height": estimate.oracle.height,
        "ranges": ranges,
        "quantiles": quantiles,
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _range_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    has_truth = any("truth" in row for row in d["ranges"])
    header = ["range [lo, hi)", "items", "frequency", f"{percent} interval", "std error"]
    if has_truth:
        header.append("truth")
    rows = []
    for row in d["ranges"]:
        cells = [
            f"[{row['lo']}, {row['hi']})",
            html.escape(row["label"]),
            _fixed(row["frequency"]),
            _interval(row["ci_low"], row["ci_high"]),
            _fixed(row["std_error"]),
        ]
        if has_truth:
            cells.append(_fixed(row["truth"]))
        rows.append(cells)
    parts = [
        "<h2>1. Ranges and quantiles</h2>",
        r.image_tag(figures, "leaves", "leaf frequencies with their band"),
        r.html_table(header, rows),
        r.html_table(
            ["quantile", "item", "label"],
            [
                [f"{round(100 * q['q'], 4):g}%", str(q["value"]), html.escape(q["label"])]
                for q in d["quantiles"]
            ],
        ),
        _note(
            f"A {d['branching']}-ary hierarchical histogram of height {d['height']} over "
            f"{d['k']} items, made consistent by least squares with the known total; range "
            "standard errors are exact (at the plug-in frequencies). A quantile is the smallest "
            "item whose estimated CDF reaches q."
        ),
    ]
    gap = d["gap"]
    average = gap["average_variance"]
    parts += [
        "<h2>2. The central gap</h2>",
        r.html_table(
            ["range length", "LDP variance", "central flat Laplace", "central Laplace tree"],
            [
                [
                    r.fmt_number(row["length"]),
                    r.fmt_number(row["ldp"]),
                    r.fmt_number(row["central_flat"]),
                    r.fmt_number(row["central_hierarchical"]),
                ]
                for row in gap["by_length"]
            ]
            + [
                [
                    f"average over {gap['ranges']} random ranges",
                    r.fmt_number(average["ldp"]),
                    r.fmt_number(average["central_flat"]),
                    r.fmt_number(average["central_hierarchical"]),
                ]
            ],
        ),
        _note(
            f"Exact ({html.escape(gap['exact'])}). The local ranges have "
            f"{r.fmt_number(gap['variance_ratio_to_best_central'])} times the variance of the "
            "better central choice."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        mse = measured["range_mse"]
        parts.append(
            _measured_table(
                ["random ranges (measured)", "MSE", "expected"],
                mse,
                [
                    ("local", "ldp", "ldp_expected"),
                    ("central flat", "central_flat", "central_flat_expected"),
                    ("central tree", "central_hierarchical", "central_hierarchical_expected"),
                ],
            )
        )
    return parts


# ---- key-value -------------------------------------------------------------------------------


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

    figures = {"keys": _png(11.0, 3.8, draw)}
    exact, measured = _gap(context)
    data = {"keys": keys, "notes": document["notes"], "gap": exact, "measured_gap": measured}
    return data, figures


def _key_value_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    has_truth = any("true_frequency" in e for e in d["keys"])
    header = ["key", "frequency", f"{percent} interval", "mean", f"{percent} interval"]
    if has_truth:
        header += ["true frequency", "true mean"]
    rows = []
    for e in d["keys"]:
        row = [
            html.escape(str(e["label"])),
            _fixed(e["frequency"]),
            _interval(*e["frequency_ci"]),
            _fixed(e["mean"]),
            _interval(*e["mean_ci"]),
        ]
        if has_truth:
            row += [_fixed(e["true_frequency"]), _fixed(e.get("true_mean"))]
        rows.append(row)
    gap = d["gap"]
    parts = [
        "<h2>1. Keys: frequency and mean</h2>",
        r.image_tag(figures, "keys", "per key frequency and mean with intervals"),
        r.html_table(header, rows),
        _note(
            "PCKV (Gu et al., USENIX Security 2020): frequencies with their exact standard errors, "
            "means with delta-method standard errors."
        ),
        *(_note(html.escape(note)) for note in d.get("notes", ())),
        "<h2>2. The central gap</h2>",
        r.html_table(
            ["one key's frequency", "variance"],
            [
                [
                    "LDP (a key nobody holds)",
                    r.fmt_number(gap["frequency"]["ldp_variance_at_zero"]),
                ],
                [
                    "central Laplace (half the budget)",
                    r.fmt_number(gap["frequency"]["central_laplace_variance"]),
                ],
            ],
        ),
        _note(
            f"Exact: {html.escape(gap['exact'])}. The curator's mean of a key is its noisy sum "
            f"over its noisy count, each with Laplace noise of scale "
            f"{r.fmt_number(gap['mean']['central_laplace_scale'])} (variance about "
            f"{html.escape(gap['mean']['central_laplace_variance_formula'])})."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        f, m = measured["frequency"], measured["mean"]
        parts.append(
            r.html_table(
                ["measured against the truth", "local", "central Laplace"],
                [
                    [
                        "frequency MSE",
                        r.fmt_number(f["ldp_mse"]),
                        r.fmt_number(f["central_laplace_mse"]),
                    ],
                    [
                        f"mean MSE ({m['keys']} keys held)",
                        r.fmt_number(m["ldp_mse"]),
                        r.fmt_number(m["central_laplace_mse"]),
                    ],
                ],
            )
        )
    return parts


# ---- Fourier marginals -------------------------------------------------------------------------

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
            "labels": [_attribute_labels(m, a) for a in indices],
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

    figures["one-way"] = _png(min(max(7.0, 2.0 + 0.45 * len(labels)), 11.0), 4.0, bars)
    for index, table in enumerate(pairs[:FOURIER_HEATMAPS]):
        figures[f"heatmap-{index}"] = _png(
            5.2, 3.2, functools.partial(_heatmap, table=table, intervals=True)
        )
    exact, measured = _gap(context)
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

    text = f"{pick('frequencies'):.4f}<br>{_interval(pick('ci_low'), pick('ci_high'))}"
    if table.get("truth"):
        text += f" <span class='no'>({pick('truth'):.4f})</span>"
    return text


def _fourier_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    has_truth = any(e.get("truth") for e in d["one_way"])
    parts = [
        "<h2>1. Marginals</h2>",
        r.image_tag(figures, "one-way", "one-way marginals with their intervals"),
        r.html_table(
            ["attribute", "first value", "frequency", "second value", "frequency", "std error"],
            [
                [
                    html.escape(e["attributes"][0]),
                    html.escape(str(e["labels"][0][0])),
                    _cell(e, 0),
                    html.escape(str(e["labels"][0][1])),
                    _cell(e, 1),
                    _fixed(e["std_errors"][1]),
                ]
                for e in d["one_way"]
            ],
        ),
    ]
    for index, table in enumerate(d["tables"][:FOURIER_HEATMAPS]):
        a, b = table["attributes"]
        parts.append(r.image_tag(figures, f"heatmap-{index}", f"heatmap of {a} by {b}"))
    if d["tables"]:
        header = ["attributes"] + [f"cell {i}{j}" for i in (0, 1) for j in (0, 1)]
        parts.append(
            r.html_table(
                header,
                [
                    [html.escape(", ".join(t["attributes"]))]
                    + [_cell(t, i, j) for i in (0, 1) for j in (0, 1)]
                    for t in d["tables"]
                ],
            )
        )
    parts.append(
        _note(
            f"Fourier marginals (Cormode, Kulkarni, Srivastava, SIGMOD 2018) of order {d['order']} "
            f"over {d['d']} binary attributes: each device reports one of {d['coefficients']} "
            "coefficients. Cells are made consistent (non-negative, summing to one, agreeing "
            f"across tables), each with its {percent} interval ({html.escape(str(d['intervals']))})"
            "; the standard errors are the exact ones of the unbiased cells. Cell ij: the first "
            "attribute's value i and the second's value j (0: its first label)"
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
        r.html_table(
            [
                "marginal size",
                "marginals",
                "LDP cell variance",
                "central Laplace",
                "its way",
                "central Gaussian",
                "its way",
                "ratio",
            ],
            [
                [
                    r.fmt_number(s["size"]),
                    r.fmt_number(s["marginals"]),
                    r.fmt_number(s["ldp_cell_variance"]),
                    r.fmt_number(s["central_laplace_cell_variance"]),
                    html.escape(s["central_laplace_way"]),
                    r.fmt_number(s["central_gaussian_cell_variance"]),
                    html.escape(s["central_gaussian_way"]),
                    r.fmt_number(s["variance_ratio"]),
                ]
                for s in gap["sizes"]
            ],
        ),
        _note(
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
            r.html_table(
                [
                    "marginal size (measured)",
                    "LDP raw MSE",
                    "expected",
                    "LDP consistent MSE",
                    "central Laplace MSE",
                    "expected",
                    "central Gaussian MSE",
                    "expected",
                ],
                [
                    [
                        r.fmt_number(s["size"]),
                        r.fmt_number(s["ldp_raw_mse"]),
                        r.fmt_number(s["ldp_expected"]),
                        r.fmt_number(s["ldp_consistent_mse"]),
                        r.fmt_number(s["central_laplace_mse"]),
                        r.fmt_number(s["central_laplace_expected"]),
                        r.fmt_number(s["central_gaussian_mse"]),
                        r.fmt_number(s["central_gaussian_expected"]),
                    ]
                    for s in measured["sizes"]
                ],
            ),
            _note(html.escape(measured["note"])),
        ]
    else:
        parts.append(
            _note("Both models measured: <code>ldp-analyze gap --simulate</code> or the truth.")
        )
    return parts


# ---- means ------------------------------------------------------------------------------------


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
    exact, measured = _gap(context)
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
        "mean": _png(
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
            ),
        ),
        "gap": _png(
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
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    has_truth = any("truth" in row for row in d["coordinates"])
    header = [
        "",
        "mean",
        f"{percent} interval",
        "std error",
        "worst-case std error",
        "reports carrying it",
    ] + (["truth"] if has_truth else [])
    rows = [
        [
            html.escape(row["label"]),
            r.fmt_number(row["mean"]),
            f"[{r.fmt_number(row['ci_low'])}, {r.fmt_number(row['ci_high'])}]",
            r.fmt_number(row["std_error"]),
            r.fmt_number(row["worst_case_std_error"]),
            r.fmt_number(row["count"]),
            *([r.fmt_number(row.get("truth"))] if has_truth else []),
        ]
        for row in d["coordinates"]
    ]
    bounds = d.get("bounds")
    gap = d["gap"]
    method = (
        "the sample variance of the reports' unbiased estimates (no knowledge of the values "
        "needed; conservative for a fixed population)"
        if d["variance_method"] == "empirical"
        else "the worst case of the mechanism's exact variance (one report leaves no sample "
        "variance)"
    )
    parts = [
        "<h2>1. The mean</h2>",
        r.image_tag(figures, "mean", "the estimated mean with its interval"),
        r.html_table(header, rows),
        _note(
            "The unbiased mean of the values clipped to the mechanism's input set"
            + (f" [{r.fmt_number(bounds[0])}, {r.fmt_number(bounds[1])}]" if bounds else "")
            + f" over n = {r.fmt_number(d['n'])} reports; standard errors from {method}; normal "
            f"{percent} intervals."
        ),
        "<h2>2. The central gap</h2>",
        r.image_tag(figures, "gap", "local versus central standard errors of the mean"),
        r.html_table(
            ["model (per coordinate)", "variance of the mean", "standard error"],
            [
                [
                    "LDP, worst-case value",
                    r.fmt_number(gap["ldp_variance_worst_case"]),
                    r.fmt_number(gap["ldp_std_error_worst_case"]),
                ],
                [
                    "LDP, value at the centre",
                    r.fmt_number(gap["ldp_variance_at_center"]),
                    r.fmt_number(math.sqrt(gap["ldp_variance_at_center"])),
                ],
                [
                    "LDP, this campaign (estimated)",
                    r.fmt_number(max(c["std_error"] for c in d["coordinates"]) ** 2),
                    r.fmt_number(max(c["std_error"] for c in d["coordinates"])),
                ],
                [
                    f"central Laplace (L1 sensitivity {r.fmt_number(gap['l1_sensitivity'])})",
                    r.fmt_number(gap["central_laplace_variance"]),
                    r.fmt_number(gap["central_laplace_std_error"]),
                ],
                [
                    f"central analytic Gaussian (L2 sensitivity "
                    f"{r.fmt_number(gap['l2_sensitivity'])})",
                    r.fmt_number(gap["central_gaussian_variance"]),
                    r.fmt_number(gap["central_gaussian_std_error"]),
                ],
            ],
        ),
        _note(
            f"Exact: {html.escape(gap['exact'])}. At epsilon = {d['epsilon']:g} the local mean "
            f"has up to {r.fmt_number(gap['variance_ratio'])} times the variance of a trusted "
            "curator adding Laplace noise to the true sum."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            _measured_table(
                ["measured against the truth", "squared error", "expected"],
                measured,
                [
                    ("LDP (these reports)", "ldp_squared_error", "ldp_expected"),
                    (
                        "central Laplace (mean over runs)",
                        "central_laplace_mse",
                        "central_laplace_expected",
                    ),
                    (
                        "central Gaussian (mean over runs)",
                        "central_gaussian_mse",
                        "central_gaussian_expected",
                    ),
                ],
            )
        )
    return parts


# ---- RAPPOR ------------------------------------------------------------------------------------


def _rappor_build(context: Context) -> tuple[dict[str, Any], Figures]:
    estimate = context.estimate
    document = estimate.to_dict()
    ranked = sorted(document["items"], key=lambda item: -item["frequency"])
    items = ranked[: context.top]
    truth_counts: Mapping[str, int] | None = context.truth
    if truth_counts is not None:
        for item in items:
            item["true_frequency"] = truth_counts.get(item["value"], 0) / estimate.n
    figures: Figures = {}
    if items:
        figures["items"] = _png(
            8.0,
            min(1.6 + 0.28 * len(items), 9.0),
            lambda f: plots.plot_items(
                f.add_subplot(),
                [i["value"] for i in items],
                [i["frequency"] for i in items],
                [math.nan if i["ci_low"] is None else i["ci_low"] for i in items],
                [math.nan if i["ci_high"] is None else i["ci_high"] for i in items],
                significant=[i["significant"] for i in items],
                truth=None if truth_counts is None else [i["true_frequency"] for i in items],
                confidence=estimate.confidence,
                title="Candidates",
            ),
        )
    exact, measured = _gap(context)
    figures["gap"] = _png(
        7.0,
        4.0,
        lambda f: plots.plot_error_comparison(
            f.add_subplot(),
            {
                "ldp": exact["ldp_std_error_lone_candidate"],
                "central_laplace": exact["central_laplace_std_error"],
                "central_gaussian": exact["central_gaussian_std_error"],
            },
            observed=None
            if measured is None
            else {
                "ldp": math.sqrt(measured["ldp_mse"]),
                "central_laplace": math.sqrt(measured["central_laplace_mse"]),
                "central_gaussian": math.sqrt(measured["central_gaussian_mse"]),
            },
        ),
    )
    data = {
        "items": items,
        "candidates": len(document["items"]),
        "selected": int(sum(item["selected"] for item in document["items"])),
        **{
            key: document[key]
            for key in (
                "decoder",
                "alpha",
                "critical_z",
                "lasso_penalty",
                "detected",
                "explained_fraction",
                "reported_fraction",
                "note",
            )
        },
        "gap": exact,
        "measured_gap": measured,
    }
    return data, figures


def _rappor_render(d: Mapping[str, Any], figures: Mapping[str, bytes]) -> list[str]:
    r = report_common
    percent = f"{round(100 * d['confidence'], 4):g}%"
    has_truth = any("true_frequency" in item for item in d["items"])
    header = [
        "candidate",
        "frequency",
        f"{percent} interval",
        "std error",
        "selected",
        "significant",
    ] + (["truth"] if has_truth else [])
    rows = [
        [
            html.escape(str(item["value"])),
            _fixed(item["frequency"]),
            _interval(item["ci_low"], item["ci_high"]),
            _fixed(item["std_error"]),
            _mark(item["selected"]),
            _mark(item["significant"]),
            *([_fixed(item["true_frequency"])] if has_truth else []),
        ]
        for item in d["items"]
    ]
    parts = ["<h2>1. Candidate strings</h2>"]
    if "items" in figures:
        parts.append(r.image_tag(figures, "items", "candidate frequencies with their intervals"))
    parts += [
        r.html_table(header, rows),
        _note(
            f"{html.escape(d['decoder'])} (Erlingsson, Pihur, Korolova, CCS 2014). The LASSO "
            f"selected {d['selected']} of {d['candidates']} candidates; a candidate is "
            f"<span class='yes'>significant</span> when its z exceeds {d['critical_z']:.3f} "
            f"(Bonferroni over the {d['candidates']} candidates at alpha = {d['alpha']}): "
            f"{d['detected']} are. Shown: the {len(d['items'])} largest estimates."
        ),
        r.html_table(
            ["share of the estimated Bloom-bit mass", "point estimate"],
            [
                ["explained by the selected candidates", _percent(d["explained_fraction"])],
                ["explained by the significant candidates", _percent(d["reported_fraction"])],
                [
                    "unexplained (strings outside the list, noise)",
                    _percent(
                        None if d["explained_fraction"] is None else 1.0 - d["explained_fraction"]
                    ),
                ],
            ],
        ),
        _note(html.escape(d["note"])),
    ]
    gap = d["gap"]
    parts += [
        "<h2>2. The central gap</h2>",
        r.image_tag(figures, "gap", "local versus central standard errors of a candidate"),
        r.html_table(
            ["model", "variance of one candidate's frequency", "standard error"],
            [
                [
                    "LDP, a lone candidate nobody holds",
                    r.fmt_number(gap["ldp_variance_lone_candidate"]),
                    r.fmt_number(gap["ldp_std_error_lone_candidate"]),
                ],
                [
                    "central Laplace (candidate histogram)",
                    r.fmt_number(gap["central_laplace_variance"]),
                    r.fmt_number(gap["central_laplace_std_error"]),
                ],
                [
                    "central analytic Gaussian",
                    r.fmt_number(gap["central_gaussian_variance"]),
                    r.fmt_number(gap["central_gaussian_std_error"]),
                ],
            ],
        ),
        _note(
            f"Exact: {html.escape(gap['exact'])}; at the one-report epsilon_1 = "
            f"{r.fmt_number(gap['epsilon_one'])} (any number of reports of one value reveal at "
            f"most epsilon_inf = {r.fmt_number(gap['epsilon_inf'])}). The decoder's own standard "
            "errors in the table above include shared bits and the cohort assignment. Ratio: "
            f"{r.fmt_number(gap['variance_ratio'])}."
        ),
    ]
    measured = d.get("measured_gap")
    if measured:
        parts.append(
            _measured_table(
                ["measured against the truth", "MSE per candidate", "expected"],
                measured,
                [
                    ("LDP (these reports)", "ldp_mse", "ldp_reported_variance"),
                    ("central Laplace", "central_laplace_mse", "central_laplace_expected"),
                    ("central Gaussian", "central_gaussian_mse", "central_gaussian_expected"),
                ],
            )
        )
    return parts


def _percent(value: float | None) -> str:
    return "&ndash;" if value is None else f"{100 * value:.1f}%"


VIEWS: dict[str, View] = {
    "discovery": View("heavy hitters", _heavy_build, _heavy_render),
    "sketch": View("heavy hitters (sketch)", _heavy_build, _heavy_render),
    "multi": View("marginals", _multi_build, _multi_render),
    "distribution": View("distribution", _distribution_build, _distribution_render),
    "range": View("ranges", _range_build, _range_render),
    "key-value": View("key-value", _key_value_build, _key_value_render),
    "fourier": View("Fourier marginals", _fourier_build, _fourier_render),
    "mean": View("mean", _mean_build, _mean_render),
    "rappor": View("RAPPOR candidates", _rappor_build, _rappor_render),
}
"""The report view of each estimate kind beyond frequencies."""


def build_kind_report(
    campaign: StoredCampaign,
    estimate: Any,
    *,
    delta: float,
    neighbouring: str,
    top: int,
    seed: int,
    truth: Any = None,
    batch_sizes: Sequence[int] | None = None,
    batch_credentials: Sequence[tuple[int, int | None, int | None]] | None = None,
) -> Any:
    """The report of a campaign whose estimate kind is in :data:`VIEWS`."""
    report = report_common
    mechanism = campaign.mechanism
    kind = mechanism.estimate_kind
    if kind not in VIEWS:
        raise ValueError(
            f"campaign {campaign.name!r} uses {mechanism.name!r} (estimate kind {kind!r}): the "
            f"report covers frequencies and {', '.join(sorted(VIEWS))}; use "
            "`ldp-analyze estimate` for its numbers"
        )
    options = GapOptions(delta=delta, neighbouring=neighbouring, top=min(top, 20))
    if mechanism.tests_candidates:  # Bonferroni over the strings the decoder examined
        options = dataclasses.replace(options, vocabulary=max(2, int(estimate.examined)))
    context = Context(campaign, estimate, truth, options, top, seed)
    data, figures = VIEWS[kind].build(context)
    privacy = report.privacy_section(
        mechanism, delta=delta, reports_per_device=report.reports_per_device_of(campaign.policy)
    )
    figures["privacy"] = report.privacy_figure(privacy)
    document = json_safe(
        {
            "campaign": campaign.name,
            "kind": kind,
            "config_id": campaign.config_id,
            "mechanism": campaign.config,
            "created": campaign.created,
            "min_batch_size": campaign.min_batch_size,
            "n": estimate.n,
            "epsilon": mechanism.privacy_epsilon,
            "confidence": getattr(estimate, "confidence", 0.95),
            **data,
            "central": report.central_section(campaign, batch_sizes, batch_credentials),
            "privacy": privacy,
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    return report.Report(data=document, figures=figures)


def render_kind_html(report: Any) -> str:
    """The page of a report built by :func:`build_kind_report`."""
    helpers = report_common
    d = report.data
    view = VIEWS[d["kind"]]
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>LDP report: {esc(d['campaign'])}</title><style>{helpers.STYLE}</style>"
        "</head><body>",
        f"<h1>Campaign <code>{esc(d['campaign'])}</code>: {esc(view.title)}</h1>",
        f'<p class="meta">mechanism <code>{esc(json.dumps(d["mechanism"], sort_keys=True))}'
        f"</code> &middot; config id <code>{esc(str(d['config_id']))}</code> &middot; n = "
        f"{helpers.fmt_number(d['n'])} reports &middot; created {esc(str(d['created']))} &middot; "
        f"generated {esc(str(d['generated']))}</p>",
    ]
    parts += view.render(d, report.figures)
    parts += helpers.central_html(d.get("central"))
    parts += helpers.privacy_html(d, report.figures, number=3)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
