"""The report's tables, written from column specs.

A :class:`Column` is a header and how a row's cell is written; :func:`table` writes one row per
record (a mapping: the column constructors read its fields, a missing one as ``None``).
:func:`number_table` is the common other shape: a label, then numbers, one row per model
(:func:`keyed_table` when the numbers are fields of one mapping). All write the markup of
:func:`html_table` (headers escaped, cells HTML).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from analysis.views.cells import fixed, fmt_number, interval, mark, percent

__all__ = [
    "Column",
    "frequency_columns",
    "html_table",
    "keyed_table",
    "measured_table",
    "number_table",
    "table",
    "truth_column",
]


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: its header (plain text) and its cell of a row (HTML)."""

    header: str
    cell: Callable[[Any], str]

    @classmethod
    def text(cls, header: str, key: Any) -> Column:
        """The field ``key`` as escaped text."""
        return cls(header, lambda row: html.escape(str(row.get(key))))

    @classmethod
    def number(cls, header: str, key: Any, digits: int = 4) -> Column:
        """The field ``key`` with :func:`~analysis.views.cells.fmt_number`."""
        return cls(header, lambda row: fmt_number(row.get(key), digits))

    @classmethod
    def numbers(cls, specs: Iterable[tuple[str, Any]]) -> list[Column]:
        """One :meth:`number` column per ``(header, key)``."""
        return [cls.number(header, key) for header, key in specs]

    @classmethod
    def fixed(cls, header: str, key: Any, digits: int = 4) -> Column:
        """The field ``key`` with :func:`~analysis.views.cells.fixed` decimals."""
        return cls(header, lambda row: fixed(row.get(key), digits))

    @classmethod
    def interval(cls, header: str, low: Any = "ci_low", high: Any = "ci_high") -> Column:
        """The interval between the fields ``low`` and ``high``."""
        return cls(header, lambda row: interval(row.get(low), row.get(high)))

    @classmethod
    def flag(cls, header: str, key: Any) -> Column:
        """The boolean field ``key`` as a yes/no mark."""
        return cls(header, lambda row: mark(bool(row.get(key))))


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


def keyed_table(
    header: Sequence[str], source: Mapping[str, Any], rows: Iterable[Sequence[str]]
) -> str:
    """A :func:`number_table` whose rows are ``(label, key, ...)``: the numbers are the fields
    ``key, ...`` of ``source`` (a gap document, say)."""
    return number_table(header, ((label, *(source[k] for k in keys)) for label, *keys in rows))


def measured_table(
    header: Sequence[str], measured: Mapping[str, Any], ldp: Sequence[str], central: str = ""
) -> str:
    """Measured errors against their expectation: the ``ldp`` row ``(label, key, expected key)``
    then the curator's Laplace and Gaussian rows (``central_laplace_mse``, ...; their labels end
    in ``central``)."""
    return keyed_table(
        header,
        measured,
        [
            ldp,
            (f"central Laplace{central}", "central_laplace_mse", "central_laplace_expected"),
            (f"central Gaussian{central}", "central_gaussian_mse", "central_gaussian_expected"),
        ],
    )


def frequency_columns(confidence: float) -> list[Column]:
    """An estimated frequency, its interval at ``confidence`` and its standard error (the
    fields ``frequency``, ``ci_low``, ``ci_high`` and ``std_error``)."""
    return [
        Column.fixed("frequency", "frequency"),
        Column.interval(f"{percent(confidence)} interval"),
        Column.fixed("std error", "std_error"),
    ]


def truth_column(rows: Iterable[Any], key: str = "true_frequency") -> Column | None:
    """The true frequency (simulations, the demo) when some row has the field ``key``."""
    return Column.fixed("truth", key) if any(key in row for row in rows) else None
