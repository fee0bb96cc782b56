"""``ldp-shuffler serve --cors-origin``: a real shuffler (and the collector it reads campaigns
from) answers CORS for its one device route, the sealed upload, from the listed origins only,
with the method and headers that route needs (``Authorization`` for a device credential)."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from collector.cors import PREFLIGHT_MAX_AGE
from collector.process import CollectorProcess, entry_point
from shuffler.process import ShufflerProcess
from tests.shuffler.test_e2e import CAMPAIGN, seal_for

PAGE = "https://app.example"


@pytest.fixture(scope="module")
def shuffler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShufflerProcess]:
    root = tmp_path_factory.mktemp("shuffler-cors")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as collector:
        collector.create_campaign(CAMPAIGN)
        process = ShufflerProcess(
            root / "shuffler.db",
            collector.url,
            workers=1,
            log_dir=root,
            extra_args=["--cors-origin", PAGE],
        )
        with process:
            yield process


def _cors_headers(response: requests.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


def _url(shuffler: ShufflerProcess) -> str:
    return f"{shuffler.url}/v1/campaigns/{CAMPAIGN['name']}/reports"


def test_the_upload_preflight_names_its_method_and_headers(shuffler: ShufflerProcess) -> None:
    answer = requests.options(
        _url(shuffler),
        headers={
            "Origin": PAGE,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
        timeout=10,
    )
    assert answer.status_code == 204
    assert _cors_headers(answer) == {
        "Access-Control-Allow-Origin": PAGE,
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "Content-Type, Authorization",
        "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE),
    }
    assert answer.headers["Vary"] == "Origin"


def test_a_cross_origin_sealed_upload_is_accepted_and_readable(shuffler: ShufflerProcess) -> None:
    document = requests.get(
        f"{shuffler.collector}/v1/campaigns/{CAMPAIGN['name']}", timeout=10
    ).json()
    envelopes = seal_for(document, [0, 1, 2])
    body = {
        "config_id": document["config_id"],
        "reports": [{"id": secrets.token_hex(16), "payload": e} for e in envelopes],
    }
    answer = requests.post(_url(shuffler), json=body, headers={"Origin": PAGE}, timeout=30)
    assert answer.status_code == 200 and answer.json()["accepted"] == 3
    assert _cors_headers(answer) == {
        "Access-Control-Allow-Origin": PAGE,
        "Access-Control-Expose-Headers": "Retry-After",
    }
    stranger = requests.post(
        _url(shuffler), json=body, headers={"Origin": "https://evil.example"}, timeout=30
    )
    assert stranger.status_code == 200 and stranger.json()["duplicate"] == 3
    assert _cors_headers(stranger) == {}


def test_other_origins_methods_and_routes_get_no_cors(shuffler: ShufflerProcess) -> None:
    for origin, method, headers in [
        ("https://evil.example", "POST", "content-type"),
        (PAGE, "GET", ""),
        (PAGE, "POST", "content-type, cookie"),
    ]:
        asked = {"Origin": origin, "Access-Control-Request-Method": method}
        if headers:
            asked["Access-Control-Request-Headers"] = headers
        answer = requests.options(_url(shuffler), headers=asked, timeout=10)
        assert _cors_headers(answer) == {}, (origin, method, headers)
    for path in ("/healthz", "/readyz", "/metrics"):
        answer = requests.get(shuffler.url + path, headers={"Origin": PAGE}, timeout=10)
        assert answer.status_code == 200 and _cors_headers(answer) == {}, path


def test_serve_refuses_a_bad_origin_at_startup(tmp_path: Path) -> None:
    command = [*entry_point("ldp-shuffler", "shuffler.cli"), "serve", "--db", str(tmp_path / "s")]
    command += ["--collector", "http://127.0.0.1:9", "--cors-origin", "app.example"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "argument --cors-origin: origin 'app.example': the scheme must be http" in done.stderr
    assert not (tmp_path / "s").exists()
