"""Plain-text tables of estimates (a leaf module): one number format and one set of interval
columns for every kind, so each ``ldp-analyze estimate`` table reads the same way.

Every row of an estimated quantity shows ``frequency`` (or ``mean``), ``std_error``,
``ci_low`` and ``ci_high``: the intervals each kind's document already carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["INTERVAL_COLUMNS", "aligned", "cell_table", "format_number", "interval_cells"]

INTERVAL_COLUMNS = ("frequency", "std_error", "ci_low", "ci_high")
"""The columns of an estimated frequency, in every table."""


def format_number(value: Any) -> str:
    """A cell: fixed 6 decimals, or 3 significant digits in scientific form below 0.001."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "-"
        return f"{value:.6f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    return str(value)


def interval_cells(
    item: Mapping[str, Any],
    fields: Sequence[str] = INTERVAL_COLUMNS,
) -> list[Any]:
    """The estimate, standard error and interval of ``item`` (its ``fields``, in order)."""
    return [item.get(field) for field in fields]


def aligned(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, indent: str = "") -> str:
    """Columns aligned under their headers (the first left, the others right), one line each."""
    cells = [[format_number(v) for v in row] for row in rows]
    widths = [
        max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    lines = []
    for row in [list(columns), *cells]:
        lines.append(
            indent
            + "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def cell_table(table: Mapping[str, Any]) -> str:
    """A marginal table's cells (``frequencies``, ``std_errors``, ``ci_low``, ``ci_high``:
    nested lists of one shape), one row per cell named by its indices."""
    import numpy as np

    frequencies = np.asarray(table["frequencies"], dtype=np.float64)
    parts = [
        frequencies,
        *(np.asarray(table[key], dtype=np.float64) for key in ("std_errors", "ci_low", "ci_high")),
    ]
    rows = [
        [",".join(map(str, cell)), *(float(part[cell]) for part in parts)]
        for cell in np.ndindex(frequencies.shape)
    ]
    return aligned(["cell", *INTERVAL_COLUMNS], rows, indent="  ")
