"""Figures for reports: each ``plot_*`` draws on a given matplotlib Axes and returns it.

Figures are built with the object-oriented API on an Agg canvas (no pyplot, no global state,
no display needed) and exported as PNG bytes by :func:`figure_png`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "figure_png",
    "new_figure",
    "plain_name",
    "plot_error_comparison",
    "plot_error_curve",
    "plot_frequencies",
    "plot_privacy",
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


def _short(label: str, limit: int = 18) -> str:
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
            label="observed RMSE",
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
    ax.set_ylabel("standard error of one frequency")
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
