"""Figures for reports: each ``plot_*`` draws on a given matplotlib Axes and returns it.

Figures are built with the object-oriented API on an Agg canvas (no pyplot, no global state,
no display needed) and exported as PNG bytes by :func:`figure_png`.
"""

from __future__ import annotations

import functools
import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib import font_manager, ft2font
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "drawable",
    "figure_png",
    "new_figure",
    "plain_name",
    "plot_band",
    "plot_cdf",
    "plot_error_comparison",
    "plot_error_curve",
    "plot_frequencies",
    "plot_heatmap",
    "plot_histogram",
    "plot_items",
    "plot_key_values",
    "plot_means",
    "plot_privacy",
    "plot_recall",
]

COLOURS = {
    "raw": "#4C72B0",
    "post": "#DD8452",
    "truth": "#222222",
    "ldp": "#C44E52",
    "central_laplace": "#55A868",
    "central_gaussian": "#8172B3",
    "shuffle": "#937860",
}


PLAIN_NAMES = {
    "raw (unbiased)": "unbiased estimate",
    "base": "unbiased estimate",
    "base-pos": "negatives set to zero (base-pos)",
    "norm": "shifted to sum to one (norm)",
    "norm-sub": "clipped and rescaled to sum to one (norm-sub)",
    "norm-mul": "rescaled to sum to one (norm-mul)",
    "norm-cut": "smallest cut to sum to one (norm-cut)",
    "mle": "maximum likelihood (mle)",
    "ldp": "local DP (this campaign)",
    "central_laplace": "central curator, Laplace",
    "central_gaussian": "central curator, Gaussian",
    "shuffle": "shuffled reports",
    "exact": "exact (privacy-loss distribution)",
    "basic": "basic composition (sum)",
    "advanced": "advanced composition (Dwork, Rothblum, Vadhan)",
    "kov": "optimal homogeneous (Kairouz, Oh, Viswanath)",
    "rdp": "Renyi DP bound",
    "local": "local DP (this campaign)",
    "exponential_mechanism": "central: exponential mechanism (peeling)",
    "permute_and_flip": "central: permute-and-flip (peeling)",
    "report_noisy_max": "central: report noisy max (peeling)",
    "sparse_vector": "central: sparse vector",
    "gaussian_top_k": "central: Gaussian noisy max (one shot)",
    "central_flat": "central curator, flat Laplace",
    "central_hierarchical": "central curator, Laplace tree",
}
"""Legend and axis names in plain words (a figure is read by people who do not know the codes)."""


def plain_name(name: str) -> str:
    """The plain name of a series (``PLAIN_NAMES``), else the name with spaces for ``_``."""
    return PLAIN_NAMES.get(name, name.replace("_", " "))


def new_figure(width: float = 8.0, height: float = 4.2) -> Figure:
    """A figure on an Agg canvas, with constrained layout."""
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def figure_png(figure: Figure, *, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


@functools.cache
def _covered() -> frozenset[int]:
    """The code points the figures' font can draw."""
    path = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"))
    return frozenset(ft2font.FT2Font(path).get_charmap())


def drawable(label: str) -> str:
    """``label`` with each character the font cannot draw written as ``\\u+XXXX`` (strings from
    devices may hold any code point; the tables beside the figures show them as they are)."""
    covered = _covered()
    return "".join(c if ord(c) in covered else f"\\u+{ord(c):04X}" for c in label)


def axis_label(name: str, unit: str | None) -> str:
    """An axis title with the campaign's unit, ``value (ms)`` (``name`` alone without one)."""
    return f"{name} ({drawable(unit)})" if unit else name


def _short(label: str, limit: int = 18) -> str:
    label = drawable(label)
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def plot_frequencies(
    ax: Axes,
    labels: Sequence[str],
    series: Sequence[tuple[str, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]],
    *,
    truth: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> Axes:
    """Grouped bars of estimated frequencies with their intervals, one group per item.

    ``series`` holds ``(name, frequencies, ci_low, ci_high)`` for each estimate (raw,
    post-processed...), all over the same ``labels``; ``truth`` adds the true frequencies.
    """
    count = len(labels)
    positions = np.arange(count)
    width = 0.8 / max(1, len(series))
    palette = [COLOURS["raw"], COLOURS["post"], "#64B5CD", "#CCB974"]
    for index, (name, freq, low, high) in enumerate(series):
        f = np.asarray(freq, dtype=float)
        lower = f - np.asarray(low, dtype=float)
        upper = np.asarray(high, dtype=float) - f
        offset = (index - (len(series) - 1) / 2) * width
        errors = np.vstack([np.nan_to_num(lower), np.nan_to_num(upper)])
        ax.bar(
            positions + offset,
            f,
            width,
            yerr=errors,
            capsize=2,
            label=plain_name(name),
            color=palette[index % len(palette)],
            error_kw={"elinewidth": 0.8},
        )
    if truth is not None:
        # A hollow diamond: a horizontal tick would read as an error bar's cap.
        ax.scatter(
            positions,
            np.asarray(truth, dtype=float),
            marker="D",
            s=36,
            zorder=4,
            facecolors="white",
            edgecolors=COLOURS["truth"],
            linewidths=1.4,
            label="true frequency",
        )
    ax.axhline(0.0, color="#999999", linewidth=0.6)
    names = [_short(str(label)) for label in labels]
    # Horizontal while the names fit side by side; slanted (anchored at their end) when not.
    crowded = count > 12 or sum(len(name) for name in names) > 90
    ax.set_xticks(
        positions,
        names,
        rotation=45 if crowded else 0,
        ha="right" if crowded else "center",
        rotation_mode="anchor" if crowded else "default",
        fontsize=8,
    )
    ax.set_ylabel("frequency")
    ax.set_title(f"Top {count} items, {round(100 * confidence, 4):g}% intervals")
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    return ax


def plot_error_comparison(
    ax: Axes,
    expected: Mapping[str, float],
    *,
    observed: Mapping[str, float] | None = None,
    ylabel: str = "standard error of one frequency",
    observed_label: str = "observed RMSE",
) -> Axes:
    """Per-item standard errors of the models side by side (log scale).

    ``expected`` maps a model name (``ldp``, ``central_laplace``, ``central_gaussian``) to its
    standard error; ``observed`` adds measured root mean squared errors (simulations).
    """
    names = list(expected)
    positions = np.arange(len(names))
    colours = [COLOURS.get(name, "#777777") for name in names]
    ax.bar(
        positions,
        [expected[name] for name in names],
        0.6,
        color=colours,
        label="exact standard error (bar)",
    )
    if observed:
        points = [(i, observed[name]) for i, name in enumerate(names) if name in observed]
        ax.scatter(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="D",
            color="black",
            zorder=3,
            label=observed_label,
        )
        ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    for position, name in zip(positions, names, strict=True):
        # Above the bar and its observed point, so the number never covers the marker.
        top = max(expected[name], (observed or {}).get(name, 0.0))
        ax.annotate(
            f"{expected[name]:.2e}",
            (position, top),
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.margins(y=0.15)
    ax.set_yscale("log")
    ax.set_xticks(positions, [plain_name(name) for name in names], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title("Local versus central error at this n and epsilon")
    return ax


def plot_error_curve(ax: Axes, curve: Mapping[str, npt.ArrayLike], *, marked_n: int) -> Axes:
    """Standard error of one frequency against n for each model, this campaign's n marked."""
    n = np.asarray(curve["n"], dtype=float)
    for name in ("ldp", "central_laplace", "central_gaussian"):
        if name in curve:
            ax.plot(
                n,
                np.asarray(curve[name], dtype=float),
                label=plain_name(name),
                color=COLOURS[name],
                linewidth=1.8,
            )
    ax.axvline(marked_n, color="#444444", linestyle="--", linewidth=1.0)
    ax.annotate(
        f"this campaign: n={marked_n:,}",
        xy=(marked_n, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(4, -12),
        textcoords="offset points",
        fontsize=8,
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("users n")
    ax.set_ylabel("standard error of one frequency")
    ax.set_title("Error against n: LDP falls as 1/sqrt(n), central as 1/n")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
    ax.legend(fontsize=8)
    return ax


def plot_privacy(
    ax: Axes,
    reports: npt.ArrayLike,
    curves: Mapping[str, Sequence[float | None]],
    *,
    delta: float,
    marked: int | None = None,
) -> Axes:
    """A device's epsilon (at ``delta``) against its number of reports, by accounting method."""
    t = np.asarray(reports, dtype=float)
    styles: dict[str, Any] = {
        "exact": "-",
        "basic": ":",
        "advanced": "--",
        "kov": "-.",
        "rdp": (0, (3, 1, 1, 1)),
    }
    for name, values in curves.items():
        y = np.array([np.nan if v is None else float(v) for v in values])
        ax.plot(
            t,
            y,
            linestyle=styles.get(name, "-"),
            linewidth=2.0 if name == "exact" else 1.2,
            label=plain_name(name),
        )
    if marked is not None:
        ax.axvline(marked, color="#444444", linestyle="--", linewidth=1.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("reports per device")
    ax.set_ylabel(f"epsilon at delta={delta:g}")
    ax.set_title("A device's privacy over repeated reports")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
    ax.legend(fontsize=8)
    return ax


def _truth_marker(ax: Axes, x: npt.ArrayLike, y: npt.ArrayLike, *, horizontal: bool) -> None:
    """The truth as hollow diamonds (a horizontal tick would read as an error bar's cap)."""
    xs, ys = (y, x) if horizontal else (x, y)
    ax.scatter(
        np.asarray(xs, dtype=float),
        np.asarray(ys, dtype=float),
        marker="D",
        s=30,
        zorder=4,
        facecolors="white",
        edgecolors=COLOURS["truth"],
        linewidths=1.3,
        label="truth",
    )


def plot_items(
    ax: Axes,
    labels: Sequence[str],
    frequencies: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    *,
    significant: Sequence[bool] | None = None,
    truth: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    title: str = "Discovered items",
) -> Axes:
    """Horizontal bars of item frequencies with intervals, most frequent at the top (string
    labels of any length read horizontally); significant items in full colour."""
    f = np.asarray(frequencies, dtype=float)
    positions = np.arange(f.size)[::-1]
    marks = list(significant) if significant is not None else [True] * f.size
    colours = [COLOURS["raw"] if mark else "#B8C4D9" for mark in marks]
    errors = np.vstack(
        [np.nan_to_num(f - np.asarray(low, dtype=float)), np.nan_to_num(np.asarray(high) - f)]
    )
    ax.barh(
        positions,
        f,
        0.7,
        xerr=np.maximum(errors, 0.0),
        color=colours,
        capsize=2,
        error_kw={"elinewidth": 0.8},
        label="estimate (pale: not significant)",
    )
    if truth is not None:
        _truth_marker(ax, positions, truth, horizontal=True)
    ax.axvline(0.0, color="#999999", linewidth=0.6)
    ax.set_yticks(positions, [_short(str(label), 28) for label in labels], fontsize=8)
    ax.set_xlabel("frequency")
    ax.set_title(f"{title}, {round(100 * confidence, 4):g}% intervals")
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    return ax


def plot_heatmap(
    ax: Axes,
    table: npt.ArrayLike,
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    *,
    row_name: str,
    column_name: str,
    intervals: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> Axes:
    """A 2-way marginal as a heatmap, each cell annotated with its frequency while they fit
    (and with its interval ``intervals = (low, high)`` below it while at most 36 cells)."""
    cells = np.asarray(table, dtype=float)
    image = ax.imshow(cells, cmap="Blues", aspect="auto", vmin=0.0)
    ax.figure.colorbar(image, ax=ax, label="frequency", shrink=0.85)
    rows, columns = cells.shape
    low = high = None
    if intervals is not None and rows * columns <= 36:
        low, high = (np.asarray(v, dtype=float).reshape(cells.shape) for v in intervals)
    if rows * columns <= 144:
        threshold = 0.6 * (np.nanmax(cells) if cells.size else 0.0)
        for i in range(rows):
            for j in range(columns):
                text = f"{cells[i, j]:.3f}"
                if low is not None and high is not None and np.isfinite(low[i, j]):
                    text += f"\n[{low[i, j]:.3f}, {high[i, j]:.3f}]"
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if cells[i, j] > threshold else "#222222",
                )
    crowded = columns > 10 or sum(len(str(c)) for c in column_labels) > 60
    ax.set_xticks(
        np.arange(columns),
        [_short(str(c), 12) for c in column_labels],
        rotation=45 if crowded else 0,
        ha="right" if crowded else "center",
        rotation_mode="anchor" if crowded else "default",
        fontsize=8,
    )
    ax.set_yticks(np.arange(rows), [_short(str(r), 14) for r in row_labels], fontsize=8)
    ax.set_xlabel(drawable(column_name))
    ax.set_ylabel(drawable(row_name))
    ax.set_title(drawable(f"Marginal of {row_name} and {column_name}"))
    return ax


def plot_histogram(
    ax: Axes,
    edges: npt.ArrayLike,
    shares: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    *,
    truth: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    unit: str | None = None,
) -> Axes:
    """Bucket shares as a step line with their interval band shaded behind it (bars would hide
    the band where they overlap it)."""
    e = np.asarray(edges, dtype=float)

    def steps(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
        v = np.asarray(values, dtype=float)
        return np.append(v, v[-1])

    lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)):
        ax.fill_between(
            e,
            steps(lo),
            steps(hi),
            step="post",
            color=COLOURS["raw"],
            alpha=0.22,
            linewidth=0,
            label=f"{round(100 * confidence, 4):g}% band",
        )
    ax.step(e, steps(shares), where="post", color=COLOURS["raw"], linewidth=1.8, label="estimate")
    if truth is not None:
        ax.step(
            e,
            steps(truth),
            where="post",
            color=COLOURS["truth"],
            linestyle="--",
            linewidth=1.1,
            label="truth",
        )
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel(axis_label("value", unit))
    ax.set_ylabel("share of users")
    ax.set_title("Histogram")
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    return ax


def plot_cdf(
    ax: Axes,
    x: npt.ArrayLike,
    cdf: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    *,
    truth: npt.ArrayLike | None = None,
    quantiles: Sequence[tuple[float, float]] = (),
    confidence: float = 0.95,
    unit: str | None = None,
) -> Axes:
    """The estimated CDF with its band, the truth and the marked quantiles."""
    xs = np.asarray(x, dtype=float)
    ax.plot(xs, np.asarray(cdf, dtype=float), color=COLOURS["raw"], linewidth=1.8, label="estimate")
    ax.fill_between(
        xs,
        np.asarray(low, dtype=float),
        np.asarray(high, dtype=float),
        color=COLOURS["raw"],
        alpha=0.2,
        label=f"{round(100 * confidence, 4):g}% band",
    )
    if truth is not None:
        ax.plot(
            xs,
            np.asarray(truth, dtype=float),
            color=COLOURS["truth"],
            linestyle="--",
            linewidth=1.0,
            label="truth",
        )
    for q, value in quantiles:
        ax.plot([value], [q], marker="o", color=COLOURS["post"], zorder=4)
        ax.annotate(
            f"p{round(100 * q):d}",
            (value, q),
            xytext=(5, -10),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(axis_label("value", unit))
    ax.set_ylabel("P[X <= x]")
    ax.set_title("Cumulative distribution")
    ax.grid(True, linewidth=0.4, alpha=0.6)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    return ax


def plot_band(
    ax: Axes,
    values: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    *,
    truth: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    xlabel: str = "item",
    title: str = "Leaf frequencies",
) -> Axes:
    """Frequencies over an ordered domain as a line with its interval band."""
    v = np.asarray(values, dtype=float)
    x = np.arange(v.size)
    ax.plot(x, v, color=COLOURS["raw"], linewidth=1.2, label="estimate")
    ax.fill_between(
        x,
        np.asarray(low, dtype=float),
        np.asarray(high, dtype=float),
        color=COLOURS["raw"],
        alpha=0.2,
        label=f"{round(100 * confidence, 4):g}% band",
    )
    if truth is not None:
        ax.plot(
            x,
            np.asarray(truth, dtype=float),
            color=COLOURS["truth"],
            linestyle="--",
            linewidth=1.0,
            label="truth",
        )
    ax.axhline(0.0, color="#999999", linewidth=0.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("frequency")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    return ax


def plot_key_values(
    axes: Sequence[Axes],
    keys: Sequence[str],
    frequency: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    mean: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    *,
    truth: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> None:
    """Two panels over the keys: frequency and mean, each (value, ci_low, ci_high)."""
    positions = np.arange(len(keys))
    for ax, (name, (value, low, high)), index in zip(
        axes, (("frequency", frequency), ("mean value", mean)), (0, 1), strict=True
    ):
        v = np.asarray(value, dtype=float)
        errors = np.vstack([v - np.asarray(low, dtype=float), np.asarray(high, dtype=float) - v])
        ax.errorbar(
            positions,
            v,
            yerr=np.maximum(np.nan_to_num(errors), 0.0),
            fmt="o",
            color=COLOURS["raw"],
            capsize=3,
            markersize=4,
            label="estimate",
        )
        if truth is not None:
            _truth_marker(ax, positions, truth[index], horizontal=False)
        ax.axhline(0.0, color="#999999", linewidth=0.6)
        crowded = len(keys) > 16
        ax.set_xticks(
            positions,
            [_short(str(k), 10) for k in keys],
            fontsize=8,
            rotation=45 if crowded else 0,
            ha="right" if crowded else "center",
            rotation_mode="anchor" if crowded else "default",
        )
        ax.set_xlabel("key")
        ax.set_ylabel(name)
        ax.set_title(f"Per key: {name}")
        ax.legend(fontsize=8, loc="upper right", framealpha=0.9)


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def plot_recall(ax: Axes, rows: Mapping[str, Mapping[str, float | None]], *, title: str) -> Axes:
    """Recall and precision of each model (name -> {"recall", "precision"}), side by side."""
    names = list(rows)
    positions = np.arange(len(names))
    for offset, measure, colour in (
        (-0.2, "recall", COLOURS["raw"]),
        (0.2, "precision", COLOURS["post"]),
    ):
        values = [_or_nan(rows[n].get(measure)) for n in names]
        ax.bar(positions + offset, values, 0.4, color=colour, label=measure)
    ax.set_ylim(0.0, 1.3)  # room above the bars for the legend
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    wrapped = [textwrap.fill(plain_name(n), 14) for n in names]
    ax.set_xticks(positions, wrapped, fontsize=7)
    ax.set_ylabel("share")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper right", ncols=2, framealpha=0.9)
    return ax


def plot_means(
    ax: Axes,
    labels: Sequence[str],
    means: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    truth: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    unit: str | None = None,
) -> Axes:
    """Estimated means (one row per coordinate) with their intervals, on the input range
    (the axis in the campaign's ``unit`` when it has one)."""
    m = np.asarray(means, dtype=float)
    positions = np.arange(m.size)[::-1]
    errors = np.vstack(
        [np.maximum(m - np.asarray(low, dtype=float), 0.0), np.maximum(np.asarray(high) - m, 0.0)]
    )
    ax.errorbar(
        m,
        positions,
        xerr=errors,
        fmt="o",
        color=COLOURS["raw"],
        capsize=4,
        label=f"estimated mean, {round(100 * confidence, 4):g}% interval",
    )
    if truth is not None:
        _truth_marker(ax, positions, truth, horizontal=True)
    if bounds is not None:
        for bound in bounds:
            ax.axvline(bound, color="#999999", linewidth=0.8, linestyle="--")
        span = bounds[1] - bounds[0]
        ax.set_xlim(bounds[0] - 0.05 * span, bounds[1] + 0.05 * span)
    ax.set_yticks(positions, [_short(str(label), 28) for label in labels], fontsize=8)
    ax.set_ylim(-0.8, m.size - 0.2)
    name = axis_label("value", unit)
    ax.set_xlabel(f"{name} (dashed: the input range)" if bounds is not None else name)
    ax.set_title("Estimated mean")
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    return ax
