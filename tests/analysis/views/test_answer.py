"""The report's opening answer (``analysis.views.answer``)."""

from __future__ import annotations

from typing import Any

from analysis.views.answer import answer_html, answer_sentences


def _item(value: str, frequency: float, significant: bool) -> dict[str, Any]:
    return {
        "value": value,
        "frequency": frequency,
        "ci_low": frequency - 0.01,
        "ci_high": frequency + 0.01,
        "significant": significant,
    }


def test_heavy_hitters_name_only_the_significant_items_with_intervals() -> None:
    d = {
        "kind": "discovery",
        "n": 20000,
        "confidence": 0.95,
        "items": [_item("sneaaxpy", 0.02, False), _item("shoes", 0.12, True)],
    }
    assert answer_sentences(d) == [
        "From 20,000 reports:",
        "1 string is significantly frequent (95% intervals): shoes 12.0% [11.0%, 13.0%].",
    ]


def test_more_than_five_significant_items_are_counted_not_listed() -> None:
    items = [_item(f"v{i}", 0.1, True) for i in range(7)]
    (_, sentence) = answer_sentences({"kind": "frequencies", "n": 10, "items": items})
    assert sentence.startswith("7 items are significantly frequent")
    assert "v4 10.0%" in sentence and "v5" not in sentence
    assert sentence.endswith(", and 2 more.")


def test_nothing_significant_is_said_plainly() -> None:
    d = {"kind": "sketch", "n": 50, "items": [_item("x", 0.01, False)]}
    assert "No string is significantly frequent yet" in answer_sentences(d)[1]


def test_a_mean_has_its_interval_and_the_campaign_unit() -> None:
    row = {"label": "x", "mean": 212.345, "ci_low": 200.0, "ci_high": 224.69}
    d: dict[str, Any] = {"kind": "mean", "n": 600, "coordinates": [row], "unit": "ms"}
    assert answer_sentences(d)[1] == "The mean is 212.3 ms, 95% interval [200, 224.7] ms."
    del d["unit"]  # no unit recorded: no unit said
    assert answer_sentences(d)[1] == "The mean is 212.3, 95% interval [200, 224.7]."
    d["mechanism"] = {"mechanism": "duchi", "unit": "seconds"}
    assert answer_sentences(d)[1].endswith("[200, 224.7] seconds.")


def test_kinds_without_a_one_line_answer_say_nothing_and_html_is_escaped() -> None:
    assert answer_sentences({"kind": "multi", "n": 5}) == []
    assert answer_html({"kind": "multi"}) == []
    (html,) = answer_html({"kind": "discovery", "n": 9, "items": [_item("<b>", 0.5, True)]})
    assert "&lt;b&gt;" in html and "<b>" not in html
