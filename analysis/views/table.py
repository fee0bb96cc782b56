"""The report's tables, written from column specs.

A :class:`Column` is a header and how a row's cell is written; :func:`table` writes one row per
record. :func:`number_table` is the common other shape: a label, then numbers, one row per
model. Both write the markup of :func:`html_table` (headers escaped, cells HTML).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from analysis.views.cells import fixed, fmt_number, interval, mark

__all__ = [
    "Column",
    "fixed_column",
    "flag_column",
    "html_table",
    "interval_column",
    "number_column",
    "number_table",
    "table",
    "text_column",
]


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: its header (plain text) and its cell of a row (HTML)."""

    header: str
    cell: Callable[[Any], str]


def html_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of already written cells under escaped headers."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def table(columns: Iterable[Column | None], rows: Iterable[Any]) -> str:
    """One row per record of ``rows``, one cell per column; a ``None`` column is left out (a
    column shown only with the truth, say)."""
    shown = [c for c in columns if c is not None]
    return html_table([c.header for c in shown], ([c.cell(row) for c in shown] for row in rows))


def number_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows of a label (HTML) followed by numbers (:func:`~analysis.views.cells.fmt_number`)."""
    return html_table(header, ([label, *map(fmt_number, numbers)] for label, *numbers in rows))


def text_column(header: str, key: Any) -> Column:
    """The field ``key`` as escaped text."""
    return Column(header, lambda row: html.escape(str(row[key])))


def number_column(header: str, key: Any, digits: int = 4) -> Column:
    """The field ``key`` with :func:`~analysis.views.cells.fmt_number`."""
    return Column(header, lambda row: fmt_number(row[key], digits))


def fixed_column(header: str, key: Any, digits: int = 4) -> Column:
    """The field ``key`` with :func:`~analysis.views.cells.fixed` decimals."""
    return Column(header, lambda row: fixed(row[key], digits))


def interval_column(header: str, low: Any = "ci_low", high: Any = "ci_high") -> Column:
    """The interval between the fields ``low`` and ``high``."""
    return Column(header, lambda row: interval(row[low], row[high]))


def flag_column(header: str, key: Any) -> Column:
    """The boolean field ``key`` as a yes/no mark."""
    return Column(header, lambda row: mark(row[key]))
