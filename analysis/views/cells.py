"""The cells of the report's HTML: numbers, intervals, marks, notes and embedded figures.

Every string a cell takes from a campaign (a label, a note) is escaped by the caller or here
(:func:`fmt_number` of a non-number); the returned strings are HTML.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DASH",
    "fixed",
    "fmt_number",
    "fmt_users",
    "image_tag",
    "interval",
    "mark",
    "note",
    "percent",
    "percentile",
    "share",
]

DASH = "&ndash;"
"""What a cell shows for a missing number."""


def fmt_number(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits (scientific when very small or large), an
    integer with thousands separators; ``None`` is a dash."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"
    return html.escape(str(value))


def fixed(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` decimals (columns of frequencies line up); a dash for ``None``
    or a non-finite float."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    return f"{value:.{digits}f}"


def interval(low: Any, high: Any, digits: int = 4) -> str:
    """``[low, high]`` with :func:`fixed` bounds; a dash when either is missing."""
    if low is None or high is None:
        return DASH
    return f"[{fixed(low, digits)}, {fixed(high, digits)}]"


def fmt_users(value: Any) -> str:
    """A number of users, rounded up to a whole user."""
    return DASH if value is None else f"{math.ceil(value):,}"


def percent(confidence: float) -> str:
    """A confidence level as the tables' headers write it: ``0.95`` -> ``95%``."""
    return f"{round(100 * confidence, 4):g}%"


def percentile(q: float) -> str:
    """A quantile's name: ``0.9`` -> ``90th percentile``."""
    return f"{round(100 * q, 4):g}th percentile"


def share(value: float | None) -> str:
    """A share with one decimal: ``0.1234`` -> ``12.3%``."""
    return DASH if value is None else f"{100 * value:.1f}%"


def mark(flag: bool) -> str:
    """``yes`` in the page's green or ``no`` in grey."""
    word = "yes" if flag else "no"
    return f"<span class='{word}'>{word}</span>"


def note(text: str) -> str:
    """A paragraph of explanation under a table (``text`` is HTML)."""
    return f'<p class="note">{text}</p>'


def image_tag(figures: Mapping[str, bytes], name: str, alt: str) -> str:
    """The figure ``name`` embedded as a PNG data URI (the page needs no other file)."""
    encoded = base64.b64encode(figures[name]).decode("ascii")
    return f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'
