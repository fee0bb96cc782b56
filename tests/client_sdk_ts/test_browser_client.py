"""The browser bundle (client_sdk_ts/dist/browser.js) in headless system Chromium: a page served
from one origin records values with IndexedDB storage and flushes them to a real collector on
another origin (CORS: ``ldp-collector serve --cors-origin``); the estimate from the stored
reports matches the truth within its error bars. The bundle is an entry and chunks under
dist/browser/ loaded when a campaign first needs them: a categorical campaign's page fetches the
entry and the categorical chunk, nothing else."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.process import CollectorProcess
from tests.client_sdk_ts.conftest import start_collector
from tests.client_sdk_ts.test_node_client import check_estimate, population

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
HERE = Path(__file__).parent
DEVICES = 3000

pytestmark = pytest.mark.slow

if not os.path.exists(CHROMIUM) and not os.environ.get("CI"):
    pytest.skip(
        f"no system Chromium at {CHROMIUM} (`apt-get install chromium`)", allow_module_level=True
    )


#: The two browser builds: the entry with per-mechanism chunks, and the single module.
BUILDS = ("browser.js", "browser-full.js")


def collector_has_cors() -> bool:
    help_text = subprocess.run(
        [*CollectorProcess.command(), "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    return "--cors-origin" in help_text


class PageServer:
    """The page at ``/`` and the built ``dist/`` as a directory (``/browser.js`` and its chunks
    under ``/browser/``), recording the paths the page fetched."""

    def __init__(self, origin: str, fetched: list[str]) -> None:
        self.origin = origin
        self.fetched = fetched

    def scripts(self) -> list[str]:
        """The JavaScript files fetched so far, in order."""
        return [path for path in self.fetched if path.endswith(".js")]


@pytest.fixture
def page_server(ts_build: Path) -> Iterator[PageServer]:
    """A small HTTP server for the page and the bundle, on a free loopback port."""
    fetched: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            if self.path in ("/", "/full"):
                entry = (HERE / "page.html", "text/html")
                body = entry[0].read_bytes()
                if self.path == "/full":  # the same page on the single-module build
                    body = body.replace(b'from "/browser.js"', b'from "/browser-full.js"')
            else:
                file = (ts_build / self.path.lstrip("/")).resolve()
                inside = file.is_relative_to(ts_build.resolve() / "browser") or file in (
                    (ts_build / name).resolve() for name in BUILDS
                )
                if not (inside and file.suffix == ".js" and file.is_file()):
                    self.send_error(404)
                    return
                entry = (file, "text/javascript")
                body = entry[0].read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", entry[1])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield PageServer(f"http://127.0.0.1:{server.server_address[1]}", fetched)
    finally:
        server.shutdown()
        server.server_close()


def chunk_of(path: str) -> str:
    """The chunk a fetched path is (``/browser/categorical-HASH.js`` -> ``categorical``)."""
    return path.removeprefix("/browser/").rsplit("-", 1)[0]


@pytest.mark.parametrize("build", BUILDS)
def test_browser_bundle_records_and_flushes_across_origins(
    ts_campaign: dict[str, Any], page_server: PageServer, tmp_path: Path, build: str
) -> None:
    """The page records and flushes through the chunked bundle (``/``) and through the
    single-module build (``/full``, dist/browser-full.js, which fetches nothing else)."""
    page_origin = page_server.origin
    if not collector_has_cors():
        pytest.skip(
            "ldp-collector serve has no --cors-origin flag yet (helper count's branch adds it): "
            "a page on another origin cannot upload without it"
        )
    collector = start_collector(tmp_path, ["--cors-origin", page_origin])
    try:
        served = collector.create_campaign(ts_campaign)
        values, truth = population(ts_campaign, DEVICES)
        job = {
            "url": collector.url,
            "campaign": served["name"],
            "values": values,
            "seed": "3c" * 32,
            "chunk": 250,
        }
        errors: list[str] = []
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto(f"{page_origin}/" if build == "browser.js" else f"{page_origin}/full")
                page.wait_for_function("document.getElementById('state').textContent === 'ready'")
                outcome = page.evaluate("job => window.runDevice(job)", job)
            finally:
                browser.close()
        assert errors == []
        assert outcome["pending"] == DEVICES, outcome["status"]
        assert outcome["acknowledged"] == DEVICES, outcome["status"]
        assert outcome["left"] == 0 and outcome["status"]["last_error"] is None
        storage = {"kind": "indexeddb:ldp-test", "persistent": True, "error": None}
        assert outcome["status"]["storage"] == storage
        check_estimate(collector.db, ts_campaign, truth, DEVICES)
        # a page recording one categorical campaign fetches the entry and one chunk, no other
        scripts = page_server.scripts()
        if build == "browser-full.js":
            assert scripts == ["/browser-full.js"], scripts
        elif ts_campaign["mechanism"]["mechanism"] == "grr":
            assert scripts[0] == "/browser.js" and len(scripts) == 2, scripts
            assert chunk_of(scripts[1]) == "categorical", scripts
    finally:
        collector.stop()


@pytest.mark.parametrize(
    ("config", "value", "chunks"),
    [
        ({"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 10.0}, 5, ["bounded"]),
        # dbitflip and rappor are a chunk of their own, apart from the oracles
        (
            {"mechanism": "dbitflip", "epsilon": 1.0, "k": 8, "d": 2, "memoize": False},
            5,
            ["rappor-dbitflip"],
        ),
        # hierarchical's chunk carries its own copy of the oracles it builds its levels from, so
        # it loads no other chunk (perturbing needs the device's keyed source, which the client
        # passes: here it is only built)
        (
            {"mechanism": "hierarchical", "epsilon": 2.0, "k": 12},
            None,
            ["fourier-hierarchical"],
        ),
    ],
    ids=["duchi", "dbitflip", "hierarchical"],
)
def test_browser_bundle_loads_a_group_when_first_needed(
    page_server: PageServer, config: dict[str, Any], value: int | None, chunks: list[str]
) -> None:
    """``mechanismFromConfig`` of the browser bundle builds the mechanisms of loaded groups only;
    ``loadMechanism`` loads the config's chunk (and what it imports), no other."""
    errors: list[str] = []
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{page_server.origin}/")
            page.wait_for_function("document.getElementById('state').textContent === 'ready'")
            before = list(page_server.scripts())
            job = {"config": config, "value": value}
            outcome = page.evaluate("job => window.loadOne(job)", job)
        finally:
            browser.close()
    assert errors == []
    assert before == ["/browser.js"], before
    assert "its code is not loaded in this bundle yet" in outcome["before"]
    assert outcome["after"] == config["mechanism"]
    assert outcome["wire"] == (None if value is None else 1)
    loaded = sorted(chunk_of(path) for path in page_server.scripts()[1:])
    assert loaded == chunks, page_server.scripts()


def test_browser_sealing_chunk_seals_what_the_collector_opens(
    page_server: PageServer, ts_build: Path
) -> None:
    """The sealing chunk, loaded on its own with what it borrows from the entry, seals a payload
    that the collector's private key opens (libsodium's sealed box, padded to the campaign's
    size)."""
    nacl_public = pytest.importorskip("nacl.public")
    secret = nacl_public.PrivateKey(bytes(range(32)))
    public = bytes(secret.public_key)
    key_id = hashlib.sha256(public).hexdigest()[:16]
    meta = json.loads((ts_build / "browser-meta.json").read_text())
    job = {
        "chunk": "/" + meta["chunks"]["sealing"]["file"],
        "publicKey": base64.urlsafe_b64encode(public).rstrip(b"=").decode(),
        "keyId": key_id,
    }
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{page_server.origin}/")
            page.wait_for_function("document.getElementById('state').textContent === 'ready'")
            envelope = page.evaluate("job => window.sealOne(job)", job)
        finally:
            browser.close()
    sealed = base64.urlsafe_b64decode(envelope["sealed"] + "=" * (-len(envelope["sealed"]) % 4))
    plaintext = nacl_public.SealedBox(secret).decrypt(sealed)
    assert envelope["key_id"] == key_id and len(plaintext) == 200
    assert json.loads(plaintext)["payload"] == [1, 0, 1]
