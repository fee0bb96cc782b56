"""The shared cells and tables of the report (analysis.views.cells, analysis.views.table): the
markup every kind's view writes through them."""

from __future__ import annotations

import math

import pytest

from analysis.views.cells import fixed, fmt_number, interval, mark, percent, percentile, share
from analysis.views.table import (
    Column,
    frequency_columns,
    html_table,
    keyed_table,
    measured_table,
    number_table,
    table,
    truth_column,
)

ROWS = [
    {"value": "<b>", "frequency": 0.25, "ci_low": 0.2, "ci_high": 0.3, "std_error": 0.025,
     "z": 10.0, "significant": True, "true_frequency": 0.24},
    {"value": "b", "frequency": 0.01, "ci_low": None, "ci_high": 0.05, "std_error": 0.02,
     "z": 0.5, "significant": False},
]  # fmt: skip


def test_a_table_of_column_specs_is_the_hand_written_markup() -> None:
    written = table(
        [
            Column.text("value", "value"),
            *frequency_columns(0.95),
            Column.number("z", "z", 3),
            Column.flag("significant", "significant"),
            truth_column(ROWS),
        ],
        ROWS,
    )
    by_hand = html_table(
        ["value", "frequency", "95% interval", "std error", "z", "significant", "truth"],
        [
            ["&lt;b&gt;", "0.2500", "[0.2000, 0.3000]", "0.0250", "10", mark(True), "0.2400"],
            ["b", "0.0100", "&ndash;", "0.0200", "0.500", mark(False), "&ndash;"],
        ],
    )
    assert written == by_hand
    assert by_hand.startswith("<table><thead><tr><th>value</th>")
    assert "<td><span class='yes'>yes</span></td>" in by_hand


def test_a_none_column_is_left_out() -> None:
    assert truth_column([{"frequency": 0.1}]) is None
    written = table([Column.fixed("frequency", "frequency"), None], [{"frequency": 0.1}])
    assert written == html_table(["frequency"], [["0.1000"]])


def test_number_and_keyed_tables() -> None:
    gap = {"ldp_mse": 2.5e-5, "ldp_expected": 2.4e-5, "central_laplace_mse": 1.0e-7,
           "central_laplace_expected": 1.1e-7, "central_gaussian_mse": 3.0,
           "central_gaussian_expected": 12345678.0}  # fmt: skip
    header = ["model", "MSE", "expected"]
    rows = [
        ["LDP", "2.500e-05", "2.400e-05"],
        ["central Laplace (runs)", "1.000e-07", "1.100e-07"],
        ["central Gaussian (runs)", "3", "1.235e+07"],
    ]
    assert number_table(header, [("LDP", 2.5e-5, 2.4e-5)]) == html_table(header, rows[:1])
    keyed = keyed_table(header, gap, [("LDP", "ldp_mse", "ldp_expected")])
    assert keyed == html_table(header, rows[:1])
    measured = measured_table(header, gap, ("LDP", "ldp_mse", "ldp_expected"), " (runs)")
    assert measured == html_table(header, rows)
    assert number_table(header, [("curator", None, 1)]) == html_table(
        header, [["curator", "&ndash;", "1"]]
    )


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (fixed(0.123456), "0.1235"),
        (fixed(math.nan), "&ndash;"),
        (fixed(None), "&ndash;"),
        (interval(0.1, None), "&ndash;"),
        (interval(-0.01, 0.02, 2), "[-0.01, 0.02]"),
        (fmt_number(12345), "12,345"),
        (fmt_number(0.5), "0.5000"),
        (fmt_number("<x>"), "&lt;x&gt;"),
        (percent(0.95), "95%"),
        (percent(0.999), "99.9%"),
        (percentile(0.9), "90th percentile"),
        (share(0.1234), "12.3%"),
        (share(None), "&ndash;"),
    ],
)
def test_cells(written: str, expected: str) -> None:
    assert written == expected
