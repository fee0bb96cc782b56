"""The dashboard in a real browser: headless Chromium (the system's) driven by Playwright, against
a real collector process and a real dashboard process (both gunicorn) on loopback ports.

The screenshot of the campaign page is saved under ``reports/dashboard/`` (gitignored) as a test
artifact, or under ``LDP_TEST_ARTIFACTS`` when set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis.views.dashboard import column_format
from collector.process import CollectorProcess, entry_point
from tests.analysis.dashboard.conftest import (
    COLORS,
    LATENCY,
    SMALL,
    TOKEN,
    DashboardProcess,
    store,
    upload,
    wire_reports,
)

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(
    os.environ.get("LDP_TEST_ARTIFACTS", Path(__file__).resolve().parents[3] / "reports")
)

pytestmark = pytest.mark.slow

if not os.path.exists(CHROMIUM) and not os.environ.get("CI"):
    pytest.skip(
        f"no system Chromium at {CHROMIUM} (`apt-get install chromium`)", allow_module_level=True
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Page:
    """A fresh browser context and page that records console errors and page errors."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.context = browser.new_context(
            base_url=base_url, viewport={"width": 1200, "height": 900}
        )
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.set_default_timeout(20_000)

    def sign_in(self, token: str) -> None:
        self.page.goto("/login")
        self.page.fill("#token", token)
        self.page.click("button[type=submit]")

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def page(browser: Any, servers: tuple[CollectorProcess, DashboardProcess]) -> Iterator[Page]:
    opened = Page(browser, servers[1].url)
    try:
        yield opened
    finally:
        opened.close()


def table_values(page: Any, selector: str) -> list[list[str]]:
    """Each row's cells: the exact number (data-value) where there is one, else the text."""
    return page.eval_on_selector_all(
        f"{selector} tbody tr",
        "rows => rows.map(r => [...r.cells].map(c => c.dataset.value ?? c.textContent))",
    )


def test_sign_in_is_refused_with_a_wrong_token(page: Page) -> None:
    page.sign_in(TOKEN + "-wrong")
    assert page.page.locator("#login-error").inner_text() == "Wrong admin token."
    assert page.page.url.endswith("/login")
    assert not [c for c in page.context.cookies() if c["name"] == "ldp_dashboard_session"]
    page.page.goto("/")
    assert page.page.url.endswith("/login")  # still signed out
    assert TOKEN not in page.page.content()


def test_campaign_list(page: Page) -> None:
    page.sign_in(TOKEN)
    page.page.wait_for_selector("#campaigns tbody tr[data-campaign='small']")
    rows = {row[0]: row for row in table_values(page.page, "#campaigns")}
    assert set(rows) == {"colors", "latency", "small"}
    # n, reports per day, status and estimate lead; the mechanism and epsilon follow.
    assert [rows["colors"][i] for i in (1, 6, 7)] == ["3000", "grr", "2"]
    assert [rows["latency"][i] for i in (1, 6, 7)] == ["600", "duchi", "1"]
    assert rows["small"][1] == "30"
    assert rows["small"][2] == "–"  # below min_batch_size: nothing but n
    assert rows["small"][3] == rows["colors"][3] == "open"  # the campaign takes reports
    assert rows["small"][4] == "withheld (30 of 1,000)"  # its estimate: below min_batch_size
    assert rows["colors"][4] == "released"
    cookie = next(c for c in page.context.cookies() if c["name"] == "ldp_dashboard_session")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert TOKEN not in page.page.content()
    page.page.click("text=Sign out")
    page.page.wait_for_url("**/login")
    page.page.goto("/")
    assert page.page.url.endswith("/login")
    assert page.errors == []


def _estimate_json(db: str, campaign: str) -> dict[str, Any]:
    result = subprocess.run(
        [
            *entry_point("ldp-analyze", "analysis.cli"),
            "estimate",
            "--db",
            db,
            "--campaign",
            campaign,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(result.stdout)


def test_campaign_page_matches_the_estimate_command(
    page: Page, servers: tuple[CollectorProcess, DashboardProcess]
) -> None:
    collector, _ = servers
    page.sign_in(TOKEN)
    page.page.goto("/campaigns/colors")
    page.page.wait_for_selector("#estimate-table tbody tr")
    expected = _estimate_json(collector.db, "colors")
    assert page.page.locator("#n").inner_text() == f"{expected['n']:,}"
    rows = table_values(page.page, "#estimate-table")
    assert [r[0] for r in rows] == COLORS["domain"]
    for row, item in zip(rows, expected["items"], strict=True):
        shown = [float(v) for v in row[1:]]
        wanted = [item[k] for k in ("frequency", "std_error", "ci_low", "ci_high")]
        assert shown == pytest.approx(wanted, rel=1e-12, abs=1e-15)
    # The printed figures are the same numbers as percentages, in the column's one format.
    texts = page.page.eval_on_selector_all(
        "#estimate-table tbody tr td:nth-child(2)", "cells => cells.map(c => c.textContent)"
    )
    decimals = column_format("frequency", [i["frequency"] for i in expected["items"]])["decimals"]
    assert texts == [f"{100 * item['frequency']:.{decimals}f}%" for item in expected["items"]]
    assert page.page.locator("#estimate-chart").is_visible()
    assert page.page.locator("#series-chart").is_visible()
    assert page.page.locator("#gap-table tr[data-key='variance_ratio']").count() == 1
    assert (
        page.page.locator("#privacy-table tr[data-key='epsilon_per_report'] td").inner_text() == "2"
    )

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard" / "campaign-colors.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert page.errors == []


def test_numeric_and_withheld_pages(page: Page) -> None:
    page.sign_in(TOKEN)
    page.page.goto("/campaigns/latency")
    page.page.wait_for_selector("#estimate-table tbody tr")
    assert page.page.locator("#page").get_attribute("data-view") == "mean"
    page.page.goto("/campaigns/small")
    page.page.wait_for_selector("#withheld:not([hidden])")
    assert page.page.locator("#released").is_hidden()
    assert page.page.locator("#n").inner_text() == "30"
    assert page.page.locator("#estimate-table tbody tr").count() == 0
    assert page.errors == []


def test_reports_posted_during_the_test_appear_within_seconds(
    page: Page, servers: tuple[CollectorProcess, DashboardProcess]
) -> None:
    collector, _ = servers
    page.sign_in(TOKEN)
    page.page.goto("/campaigns/colors")
    page.page.wait_for_selector("#estimate-table tbody tr")
    before = int(page.page.locator("#page").get_attribute("data-n") or 0)
    added = wire_reports(COLORS["mechanism"], 500, seed=99)
    upload(collector, "colors", added)
    posted = time.monotonic()
    # A selector wait: the page's CSP forbids the eval that wait_for_function needs.
    page.page.wait_for_selector(f"#page[data-n='{before + 500}']", timeout=10_000)
    latency = time.monotonic() - posted
    assert page.page.locator("#n").inner_text() == f"{before + 500:,}"
    expected = _estimate_json(collector.db, "colors")
    rows = table_values(page.page, "#estimate-table")
    assert [float(r[1]) for r in rows] == pytest.approx(
        [item["frequency"] for item in expected["items"]], rel=1e-12
    )
    assert latency < 10  # the poll runs every second here; generous for a loaded machine
    assert page.errors == []


def test_chromium_is_the_system_browser() -> None:
    assert shutil.which("chromium") or os.path.exists(CHROMIUM)


CUT_TABLES = """tables => tables.filter(t => {
  const box = t.parentElement;
  const right = t.getBoundingClientRect().right;
  const scrolls = box.classList.contains("scroll")
    && getComputedStyle(box).overflowX === "auto"
    && box.getBoundingClientRect().right <= window.innerWidth + 1;
  return t.offsetParent !== null && right > window.innerWidth + 1 && !scrolls;
}).map(t => t.id || t.className)"""
"""The visible tables wider than the viewport whose container does not scroll (cut)."""


@pytest.mark.parametrize("width", [400, 1280])
def test_overview_and_campaign_pages_fit_the_viewport(page: Page, width: int) -> None:
    page.page.set_viewport_size({"width": width, "height": 900})
    page.sign_in(TOKEN)
    page.page.wait_for_selector("#campaigns tbody tr[data-campaign='colors']")
    rows = {row[0]: row for row in table_values(page.page, "#campaigns")}
    assert rows["colors"][4] == "released" and int(rows["colors"][1]) >= 3000
    assert page.page.eval_on_selector_all("table.data", CUT_TABLES) == []
    for name in ("colors", "latency"):
        page.page.goto(f"/campaigns/{name}")
        page.page.wait_for_selector("#estimate-table tbody tr")
        page.page.wait_for_selector("#privacy-table tr[data-key='policy']")
        assert page.page.eval_on_selector_all("table.data", CUT_TABLES) == [], name
        # The page itself never scrolls sideways: wide tables scroll in their own box.
        widths = page.page.eval_on_selector_all(
            "html", "h => [h[0].scrollWidth, window.innerWidth]"
        )
        assert widths[0] <= widths[1], (name, widths)
        policy = page.page.locator("#privacy-table tr[data-key='policy'] td").inner_text()
        assert "{" not in policy and '"' not in policy, policy  # fields, not raw JSON
    assert page.errors == []


# ---- the overview and the trend, over several days -----------------------------------------------

DAYS = ["2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01"]
TIMED = {**LATENCY, "name": "timed", "unit": "ms", "description": "time to first frame"}
WIDE = {**COLORS, "name": "screens-of-the-settings-area-visited-per-session-by-new-users"}


@pytest.fixture(scope="module")
def days_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardProcess]:
    """A real dashboard over a database with reports on each of :data:`DAYS` (every day above
    ``min_batch_size``), a numeric campaign with a unit, a long name and a withheld campaign."""
    root = tmp_path_factory.mktemp("days")
    db = root / "collector.db"
    for i, day in enumerate(DAYS):
        store(db, COLORS, 300 + 50 * i, seed=60 + i, day=day)
        store(db, TIMED, 200, seed=70 + i, day=day)
        store(db, WIDE, 150, seed=80 + i, day=day)
    store(db, SMALL, 40, seed=90)
    dashboard = DashboardProcess(db, TOKEN, root)
    dashboard.start(timeout=60)
    try:
        yield dashboard
    finally:
        dashboard.stop()


@pytest.fixture
def days_page(browser: Any, days_dashboard: DashboardProcess) -> Iterator[Page]:
    opened = Page(browser, days_dashboard.url)
    try:
        yield opened
    finally:
        opened.close()


def _fits(page: Any, where: str) -> None:
    """No visible table cut, and the page itself never scrolls sideways."""
    assert page.eval_on_selector_all("table.data", CUT_TABLES) == [], where
    widths = page.eval_on_selector_all("html", "h => [h[0].scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], (where, widths)


@pytest.mark.parametrize("width", [400, 1280])
def test_overview_shows_every_campaigns_n_reports_per_day_and_status(
    days_page: Page, width: int
) -> None:
    page = days_page.page
    page.set_viewport_size({"width": width, "height": 900})
    days_page.sign_in(TOKEN)
    page.wait_for_selector("#campaigns tbody tr[data-campaign='small']")
    rows = {row[0]: row for row in table_values(page, "#campaigns")}
    assert set(rows) == {"colors", "timed", WIDE["name"], "small"}
    assert rows["colors"][1] == str(sum(300 + 50 * i for i in range(len(DAYS))))
    assert float(rows["timed"][2]) == 200.0  # reports per day
    assert {row[3] for row in rows.values()} == {"open"}
    assert rows["small"][4] == "withheld (40 of 1,000)" and rows["colors"][4] == "released"
    # At any width the figures a team looks for first are in view without scrolling.
    visible = page.eval_on_selector_all(
        "#campaigns thead th",
        "hs => hs.filter(h => h.getBoundingClientRect().right <= window.innerWidth)"
        ".map(h => h.textContent)",
    )
    assert visible[:3] == ["campaign", "n", "reports per day"], visible
    # A sparkline of reports per day for each released campaign, one point per day.
    lines = page.eval_on_selector_all(
        "#campaigns tbody tr",
        "rows => rows.map(r => [r.dataset.campaign,"
        " r.querySelector('svg.sparkline polyline')?.getAttribute('points') ?? null])",
    )
    points = {name: line for name, line in lines}
    assert points["small"] is None
    for name in ("colors", "timed", WIDE["name"]):
        assert len(points[name].split()) == len(DAYS), name
    _fits(page, "overview")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard" / f"overview-{width}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    page.goto("/campaigns/colors")
    page.wait_for_selector(f"#page[data-trend-points='{len(DAYS)}']")
    page.screenshot(path=str(shot.with_name(f"trend-colors-{width}.png")), full_page=True)
    assert days_page.errors == []


@pytest.mark.parametrize("width", [400, 1280])
def test_trend_has_one_point_per_day_and_the_unit_on_its_axes(days_page: Page, width: int) -> None:
    page = days_page.page
    page.set_viewport_size({"width": width, "height": 900})
    days_page.sign_in(TOKEN)
    expected = {"colors": "share of reports", "timed": "mean (ms)", WIDE["name"]: None}
    for name, y_title in expected.items():
        page.goto(f"/campaigns/{name}")
        page.wait_for_selector(f"#page[data-trend-points='{len(DAYS)}']")
        assert page.locator("#trend").is_visible() and page.locator("#trend-chart").is_visible()
        trend = page.locator("#trend-chart")
        assert trend.get_attribute("data-x-title") == "day (UTC)"
        if y_title:
            assert trend.get_attribute("data-y-title") == y_title
        assert page.locator("#campaign-status").inner_text() == "open"
        assert page.locator("#estimate-status").inner_text() == "released"
        _fits(page, name)
    # The numeric campaign's unit: on its facts, its estimate's axis and its table's header.
    page.goto("/campaigns/timed")
    page.wait_for_selector("#estimate-table tbody tr")
    assert page.locator("#unit").inner_text() == "ms"
    assert page.locator("#description").inner_text() == "time to first frame"
    assert page.locator("#estimate-chart").get_attribute("data-y-title") == "mean (ms)"
    headers = page.eval_on_selector_all(
        "#estimate-table thead th", "hs => hs.map(h => h.textContent)"
    )
    assert headers == ["coordinate", "mean (ms)", "std_error (ms)", "ci_low (ms)", "ci_high (ms)"]
    assert page.locator("#series-chart").get_attribute("data-y-title") == "reports"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard" / f"campaign-timed-{width}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    # Withheld: no trend, only n.
    page.goto("/campaigns/small")
    page.wait_for_selector("#withheld:not([hidden])")
    assert page.locator("#trend").is_hidden()
    assert page.locator("#estimate-status").inner_text() == "withheld"
    assert days_page.errors == []
