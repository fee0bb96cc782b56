"""Every kind of estimate's page in a real browser (the system's headless Chromium through
Playwright) against a real dashboard process: the numbers on the page are those of
``ldp-analyze estimate`` on the same database, the charts are drawn, and the console stays clean.
Screenshots go under ``reports/dashboard/`` (gitignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.dashboard.conftest import KIND_CAMPAIGNS, TOKEN, DashboardProcess
from tests.analysis.dashboard.test_browser import (
    ARTIFACTS,
    Page,
    _estimate_json,
    browser,
    table_values,
)

__all__ = ["browser"]  # the Chromium fixture, shared with test_browser

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dashboard(kinds_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    process = DashboardProcess(kinds_db, TOKEN, tmp_path_factory.mktemp("kinds-logs"))
    process.start(timeout=120)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def signed_in(browser: Any, dashboard: Any) -> Iterator[Page]:
    opened = Page(browser, dashboard.url)
    opened.sign_in(TOKEN)
    opened.page.wait_for_selector("#campaigns tbody tr")
    try:
        yield opened
    finally:
        opened.close()


def _open(page: Page, kind: str) -> Any:
    name = KIND_CAMPAIGNS[kind]["name"]
    page.errors.clear()
    page.page.goto(f"/campaigns/{name}")
    page.page.wait_for_selector("#estimate-table tbody tr")
    return page.page


def _numbers(rows: list[list[str]], columns: slice) -> list[list[float | None]]:
    return [[None if v == "–" else float(v) for v in row[columns]] for row in rows]


def _shot(page: Any, kind: str) -> None:
    shot = ARTIFACTS / "dashboard" / f"campaign-{kind}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


@pytest.mark.parametrize("kind", ["discovery", "sketch"])
def test_heavy_hitters_page(signed_in: Page, kinds_db: Path, kind: str) -> None:
    page = _open(signed_in, kind)
    expected = _estimate_json(str(kinds_db), KIND_CAMPAIGNS[kind]["name"])
    assert page.locator("#page").get_attribute("data-view") == "heavy-hitters"
    # The table holds the significant items; the rest are in a collapsed <details> below it.
    significant = [item for item in expected["items"] if item["significant"]]
    rest = [item for item in expected["items"] if not item["significant"]]
    assert significant
    rows = table_values(page, "#estimate-table")
    assert [r[0] for r in rows] == [item["value"] for item in significant]
    assert _numbers(rows, slice(1, 6)) == [
        [item[k] for k in ("frequency", "std_error", "ci_low", "ci_high", "z")]
        for item in significant
    ]
    assert [r[6] for r in rows] == ["yes"] * len(significant)
    hidden = table_values(page, "#estimate-sections details table.section-table")
    assert [r[0] for r in hidden] == [item["value"] for item in rest]
    if rest:
        assert not page.locator("#estimate-sections details table.section-table").is_visible()
    assert page.locator("#estimate-chart").is_visible()
    notes = page.locator("#estimate-notes").inner_text()
    assert f"{expected['detected']} significant" in notes
    if kind == "discovery":
        levels = table_values(page, "#estimate-sections section table.section-table")
        assert [int(r[0]) for r in levels] == [level["level"] for level in expected["levels"]]
        _shot(page, kind)
    assert signed_in.errors == []


def test_distribution_page(signed_in: Page, kinds_db: Path) -> None:
    page = _open(signed_in, "distribution")
    expected = _estimate_json(str(kinds_db), "load")
    assert page.locator("#page").get_attribute("data-view") == "distribution"
    rows = {r[0]: r[1:] for r in table_values(page, "#estimate-table")}
    mean = expected["mean"]
    assert _numbers([rows["mean"]], slice(0, 4)) == [
        [mean["value"], mean["std_error"], mean["ci_low"], mean["ci_high"]]
    ]
    for q in expected["quantiles"]:
        assert _numbers([rows[f"quantile {q['q']}"]], slice(0, 4)) == [
            [q["value"], None, q["ci_low"], q["ci_high"]]
        ]
    assert page.locator("#estimate-chart").is_visible()  # the CDF with its band
    assert "CDF" in page.locator("#estimate-hint").inner_text()
    histogram = table_values(page, "#estimate-sections table.section-table")
    assert _numbers(histogram, slice(1, 4)) == [
        [b["frequency"], b["ci_low"], b["ci_high"]] for b in expected["histogram"]
    ]
    assert page.locator("#section-chart-0").is_visible()
    _shot(page, "distribution")
    assert signed_in.errors == []


def test_range_page(signed_in: Page, kinds_db: Path) -> None:
    page = _open(signed_in, "range")
    expected = _estimate_json(str(kinds_db), "buckets")
    rows = table_values(page, "#estimate-table")
    assert _numbers(rows, slice(0, 5)) == [
        [i["value"], i["frequency"], i["std_error"], i["ci_low"], i["ci_high"]]
        for i in expected["items"]
    ]
    quantiles = table_values(page, "#estimate-sections table.section-table")
    assert _numbers(quantiles, slice(0, 2)) == [[q["q"], q["value"]] for q in expected["quantiles"]]
    assert page.locator("#estimate-chart").is_visible()
    assert page.locator("#section-chart-0").is_visible()  # the cumulative frequency
    _shot(page, "range")
    assert signed_in.errors == []


def test_marginals_page_has_a_heatmap(signed_in: Page, kinds_db: Path) -> None:
    page = _open(signed_in, "multi")
    expected = _estimate_json(str(kinds_db), "devices")
    assert page.locator("#page").get_attribute("data-view") == "marginals"
    rows = table_values(page, "#estimate-table")
    assert [r[:2] for r in rows] == [
        [m["attribute"], str(i["value"])] for m in expected["marginals"] for i in m["items"]
    ]
    cells = page.eval_on_selector_all(
        "#estimate-sections table.heatmap tbody tr",
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => Number(c.dataset.value)))",
    )
    assert cells == expected["tables"][0]["frequencies"]
    shades = page.eval_on_selector_all(
        "#estimate-sections table.heatmap td", "cells => cells.map(c => c.style.backgroundColor)"
    )
    assert len(set(shades)) > 1  # cells are shaded by their estimate
    _shot(page, "marginals")
    assert signed_in.errors == []


def test_fourier_marginals_page(signed_in: Page, kinds_db: Path) -> None:
    page = _open(signed_in, "fourier")
    expected = _estimate_json(str(kinds_db), "toggles")
    heatmaps = page.locator("#estimate-sections table.heatmap")
    assert heatmaps.count() == len(expected["tables"])
    cells = page.eval_on_selector_all(
        "#estimate-sections section:first-child table.heatmap tbody tr",
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => Number(c.dataset.value)))",
    )
    assert cells == expected["tables"][0]["frequencies"]
    assert page.locator("#estimate-chart").is_visible()
    assert signed_in.errors == []


def test_key_value_page(signed_in: Page, kinds_db: Path) -> None:
    page = _open(signed_in, "key-value")
    expected = _estimate_json(str(kinds_db), "settings")
    rows = table_values(page, "#estimate-table")
    assert _numbers(rows, slice(0, 9)) == [
        [
            k["key"],
            k["frequency"],
            k["frequency_std_error"],
            *k["frequency_ci"],
            k["mean"],
            k["mean_std_error"],
            *k["mean_ci"],
        ]
        for k in expected["keys"]
    ]
    assert page.locator("#estimate-chart").is_visible()
    assert page.locator("#section-chart-0").is_visible()
    assert signed_in.errors == []
