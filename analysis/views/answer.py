"""The answer first: one plain sentence per estimate, said before the method.

A report document (``analysis.report``) answers a team's question in a table several sections
long; :func:`answer_sentences` says it in one sentence each: the items that are significant
(Bonferroni, ``analysis.heavy_hitters``) with their intervals, or each mean with its interval
and the campaign's unit. The sentences are plain text; :func:`answer_html` escapes them.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.views.cells import percent

__all__ = ["ANSWER_ITEMS", "answer_html", "answer_sentences", "campaign_unit", "plain_number"]

ANSWER_ITEMS = 5
"""How many items an answer names (the table has the rest)."""


def plain_number(value: float) -> str:
    """A number in four significant digits, without exponent for everyday magnitudes."""
    if value != 0 and (abs(value) < 1e-4 or abs(value) >= 1e7):
        return f"{value:.3e}"
    return f"{value:,.4g}" if abs(value) >= 1000 else f"{value:.4g}"


def _share(value: float) -> str:
    return f"{100 * value:.1f}%"


def campaign_unit(d: Mapping[str, Any]) -> str | None:
    """The campaign's ``unit`` when its document has one (top level or the mechanism's)."""
    for source in (d, d.get("mechanism") or {}):
        unit = source.get("unit") if isinstance(source, Mapping) else None
        if isinstance(unit, str) and unit.strip():
            return unit.strip()
    return None


def _items_sentence(items: Sequence[Mapping[str, Any]], level: str, what: str) -> str:
    significant = [item for item in items if item.get("significant")]
    if not significant:
        return (
            f"No {what} is significantly frequent yet: none of the {len(items)} examined passes "
            "the Bonferroni test (more reports narrow the intervals)."
        )
    named = [
        f"{item['value']} {_share(item['frequency'])}"
        + (
            f" [{_share(item['ci_low'])}, {_share(item['ci_high'])}]"
            if item.get("ci_low") is not None and item.get("ci_high") is not None
            else ""
        )
        for item in significant[:ANSWER_ITEMS]
    ]
    more = len(significant) - len(named)
    tail = f", and {more} more" if more > 0 else ""
    count = f"{len(significant)} {what}" + ("s are" if len(significant) != 1 else " is")
    return f"{count} significantly frequent ({level} intervals): {'; '.join(named)}{tail}."


def _mean_sentences(d: Mapping[str, Any], level: str) -> list[str]:
    unit = campaign_unit(d)
    suffix = f" {unit}" if unit else ""
    rows = d.get("coordinates") or []
    sentences = []
    for row in rows:
        label = row.get("label")
        name = f"The mean of {label}" if label and len(rows) > 1 else "The mean"
        sentences.append(
            f"{name} is {plain_number(row['mean'])}{suffix}, {level} interval "
            f"[{plain_number(row['ci_low'])}, {plain_number(row['ci_high'])}]{suffix}."
        )
    return sentences


def answer_sentences(d: Mapping[str, Any]) -> list[str]:
    """The report document ``d``'s answer, one sentence per estimate (empty for a kind whose
    answer is a whole table: a distribution, a marginal)."""
    level = percent(d.get("confidence", 0.95))
    kind = d.get("kind", "frequencies")
    n = d.get("n")
    prefix = [f"From {n:,} reports:"] if isinstance(n, int) else []
    if kind == "mean":
        return prefix + _mean_sentences(d, level)
    if kind in ("frequencies", "rappor"):
        return [*prefix, _items_sentence(d.get("items") or [], level, "item")]
    if kind in ("discovery", "sketch"):
        return [*prefix, _items_sentence(d.get("items") or [], level, "string")]
    return []


def answer_html(d: Mapping[str, Any]) -> list[str]:
    """:func:`answer_sentences` as the page's opening paragraph (nothing when there is none)."""
    sentences = answer_sentences(d)
    if not sentences:
        return []
    return [f'<p class="answer">{html.escape(" ".join(sentences))}</p>']
