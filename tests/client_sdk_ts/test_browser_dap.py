"""A secure-aggregation campaign in headless system Chromium (docs/dap.md, "CORS: pages uploading
to the Leader"): a page served from one loopback origin loads dist/browser.js, records values
to a pinned DAP campaign (the bundle's ``dap`` chunk shards and seals them) and is left; its
``pagehide`` flush sends the queued Reports with ``fetch(..., {keepalive: true})`` to a real
Leader on another origin (``ldp-collector serve --cors-origin``; the upload's DAP media type
makes the browser send a preflight). The next page's ``flush()`` sends them again and the Leader
answers ``report_replayed``: delivered, counted once. The Leader and Helper aggregate and the
Collector's result (``analysis.dap_collect``) is the truth: at ``laplace:40`` each of the 8
noise draws is nonzero with probability < 2 exp(-20), so all vanish but with probability
< 3.4e-8 (a task without noise and without ``local`` is refused by the app's policy)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client_sdk_ts.test_browser_client import (  # noqa: F401 (page_server: a fixture)
    CHROMIUM,
    CHROMIUM_ARGS,
    PageServer,
    chunk_of,
    page_server,
    playwright_api,
)
from tests.client_sdk_ts.test_node_dap import HISTOGRAM, LABELS, collect, trusted
from tests.collector.dap.conftest import DapPair, DapServers, add_task
from tests.collector.dap.test_device import campaign_document
from tests.collector.test_cors_dap import start_cors_servers

pytestmark = pytest.mark.slow

SEED = "5a" * 32
VALUES = [LABELS[(i * i + 3 * i) % 4] for i in range(40)]


@pytest.fixture
def servers(page_server: PageServer, tmp_path: Path) -> Iterator[DapServers]:  # noqa: F811
    """A Leader opening its device routes to the page's origin, and a Helper."""
    pair = start_cors_servers(tmp_path, [page_server.origin])
    try:
        yield pair
    finally:
        pair.stop()


def stored_reports(pair: DapPair) -> int:
    """How many reports of the task the Leader has stored."""
    connection = sqlite3.connect(f"file:{pair.leader.db}?mode=ro", uri=True, timeout=10)
    try:
        row = connection.execute(
            "SELECT COUNT(*) FROM dap_reports WHERE task_id = ?", [pair.spec.task_id_text]
        ).fetchone()
    finally:
        connection.close()
    return int(row[0])


def test_a_page_records_leaves_and_its_reports_reach_the_leader(
    page_server: PageServer,  # noqa: F811
    servers: DapServers,
    tmp_path: Path,
) -> None:
    pair = add_task(servers, HISTOGRAM, min_batch_size=10, dp="laplace:40")
    document = campaign_document(pair, "web-crashes", domain=LABELS)
    job: dict[str, Any] = {
        "url": servers.leader.url,
        "name": document["name"],
        "document": json.dumps(document),
        "policy": {"trusted_aggregators": trusted(pair), "max_central_epsilon": 40.0},
        "values": VALUES,
        "seed": SEED,
    }
    errors: list[str] = []
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()  # one profile: the second page sees the IndexedDB
            page = context.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{page_server.origin}/")
            page.wait_for_function("document.getElementById('state').textContent === 'ready'")
            recorded = page.evaluate("job => window.recordDap(job)", job)
            assert recorded["pending"] == len(VALUES), recorded["status"]
            assert stored_reports(pair) == 0  # nothing is uploaded by record
            # Leaving the page: pagehide, and the keepalive upload outlives it.
            page.goto(f"{page_server.origin}/")
            deadline = time.monotonic() + 30
            while stored_reports(pair) < len(VALUES) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert stored_reports(pair) == len(VALUES), "the keepalive upload did not arrive"
            page.wait_for_function("document.getElementById('state').textContent === 'ready'")
            flushed = page.evaluate("job => window.flushDap(job)", job)
        finally:
            browser.close()
    assert errors == []
    # still queued after the keepalive (its answer is never read); the flush's copy is
    # answered report_replayed and counted as delivered, once
    assert flushed["pending"] == flushed["acknowledged"] == len(VALUES), flushed["status"]
    assert flushed["left"] == 0 and flushed["status"]["last_error"] is None
    assert flushed["status"]["dropped"] == {}
    assert stored_reports(pair) == len(VALUES)
    # the page fetched the entry, then the dap chunk when it met the document
    scripts = page_server.scripts()
    assert scripts[0] == "/browser.js", scripts
    assert "dap" in {chunk_of(path) for path in scripts[1:]}, scripts

    assert pair.drive() == {"aggregated": len(VALUES), "rejected": 0, "jobs": 1}
    result = collect(pair, document, tmp_path)
    assert result["campaign"] == "web-crashes" and result["report_count"] == len(VALUES)
    truth = [VALUES.count(label) for label in LABELS]
    assert result["estimate"] == truth  # noise zero but with probability < 3.4e-8
