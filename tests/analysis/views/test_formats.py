"""The dashboard's one number format per column (``analysis.views.dashboard.column_format``)."""

from __future__ import annotations

from analysis.views.dashboard import column_format, with_formats


def test_a_frequency_column_is_one_percent_format_for_small_and_large_values() -> None:
    # The case: 6.904e-5 beside 0.0171 in one column.
    spec = column_format("frequency", [6.904e-5, 0.0171, 0.31])
    assert spec == {"style": "percent", "decimals": 4}  # 0.0069% .. 31.0000%
    assert column_format("ci_low", [-0.0123, 0.25])["style"] == "percent"


def test_counts_are_integers_and_text_is_text() -> None:
    assert column_format("reports", [1, 20, 3000]) == {"style": "integer", "decimals": 0}
    assert column_format("value", ["a", "b"])["style"] == "text"
    assert column_format("significant", [True, False])["style"] == "text"
    # A float column of whole numbers is still a float column (a mean of 2.0).
    assert column_format("mean", [2.0, 3.0])["style"] == "fixed"


def test_decimals_follow_the_smallest_magnitude() -> None:
    assert column_format("z", [1.2, 35.0, 0.5]) == {"style": "fixed", "decimals": 2}
    assert column_format("mean", [0.0171, 0.5])["decimals"] == 3
    assert column_format("mean", [1234.5, 20000.0])["decimals"] == 0


def test_a_column_spanning_many_decades_is_scientific_throughout() -> None:
    assert column_format("mean", [1e-9, 5.0]) == {"style": "scientific", "decimals": 3}
    assert column_format("mean", [2e8, 3e8])["style"] == "scientific"


def test_with_formats_annotates_the_table_and_the_sections() -> None:
    display = with_formats(
        {
            "table": {"columns": ["value", "frequency"], "rows": [["a", 0.5], ["b", 1e-4]]},
            "sections": [{"title": "t", "table": {"columns": ["level"], "rows": [[1]]}}],
        }
    )
    assert [f["style"] for f in display["table"]["formats"]] == ["text", "percent"]
    assert display["sections"][0]["table"]["formats"] == [{"style": "integer", "decimals": 0}]
