"""``ldp-collector serve --cors-origin``: a real collector (gunicorn, real HTTP) answers CORS for
the device routes only (the campaign document and report uploads), for the listed origins only,
with exactly the method and headers each route needs; the origins are checked at startup."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from collector import create_app
from collector.cors import PREFLIGHT_MAX_AGE, check_origin
from collector.process import CollectorProcess
from tests.collector.conftest import ADMIN_TOKEN, CAMPAIGN

PAGE = "https://app.example"
OTHER_PAGE = "http://localhost:5173"
STRANGER = "https://evil.example"


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("cors")
    process = CollectorProcess(
        root / "collector.db",
        workers=1,
        # The second spelling shows the flag is repeatable and that origins are normalized
        # (a browser sends the default port as nothing).
        extra_args=["--cors-origin", PAGE, "--cors-origin", "HTTP://LocalHost:5173"],
    )
    with process:
        process.create_campaign(CAMPAIGN)
        yield process


def _cors_headers(response: requests.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


def _preflight(url: str, origin: str, method: str, headers: str | None = None) -> requests.Response:
    asked = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers is not None:
        asked["Access-Control-Request-Headers"] = headers
    return requests.options(url, headers=asked, timeout=10)


def _reports_url(collector: CollectorProcess) -> str:
    return f"{collector.url}/v1/campaigns/{CAMPAIGN['name']}/reports"


def test_a_listed_origin_gets_the_preflight_of_the_upload(collector: CollectorProcess) -> None:
    for origin in (PAGE, OTHER_PAGE):
        answer = _preflight(_reports_url(collector), origin, "POST", "content-type")
        assert answer.status_code == 204
        assert _cors_headers(answer) == {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "POST",
            "Access-Control-Allow-Headers": "Content-Type",
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE),
        }
        assert answer.headers["Vary"] == "Origin"
        assert answer.content == b""


def test_the_campaign_document_is_readable_cross_origin(collector: CollectorProcess) -> None:
    url = f"{collector.url}/v1/campaigns/{CAMPAIGN['name']}"
    answer = requests.get(url, headers={"Origin": PAGE}, timeout=10)
    assert answer.status_code == 200 and answer.json()["name"] == CAMPAIGN["name"]
    assert answer.headers["Access-Control-Allow-Origin"] == PAGE
    assert answer.headers["Vary"] == "Origin"
    preflight = _preflight(url, PAGE, "GET")
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET"
    assert "Access-Control-Allow-Headers" not in preflight.headers  # the GET needs none


def test_a_cross_origin_upload_is_stored_and_its_answer_readable(
    collector: CollectorProcess,
) -> None:
    document = requests.get(f"{collector.url}/v1/campaigns/{CAMPAIGN['name']}", timeout=10).json()
    reports = [{"id": secrets.token_hex(16), "payload": i % 5} for i in range(3)]
    answer = requests.post(
        _reports_url(collector),
        json={"config_id": document["config_id"], "reports": reports},
        headers={"Origin": PAGE},
        timeout=10,
    )
    assert answer.status_code == 200 and answer.json()["accepted"] == 3
    assert _cors_headers(answer) == {
        "Access-Control-Allow-Origin": PAGE,
        "Access-Control-Expose-Headers": "Retry-After",
    }
    assert answer.headers["Vary"] == "Origin"
    # Errors too, so that the page can read the problem document.
    stale = requests.post(
        _reports_url(collector),
        json={"config_id": "0" * 32, "reports": reports},
        headers={"Origin": PAGE},
        timeout=10,
    )
    assert stale.status_code == 409
    assert stale.headers["Content-Type"] == "application/problem+json"
    assert stale.headers["Access-Control-Allow-Origin"] == PAGE


def test_an_origin_not_listed_gets_no_cors_header(collector: CollectorProcess) -> None:
    preflight = _preflight(_reports_url(collector), STRANGER, "POST", "content-type")
    assert _cors_headers(preflight) == {}
    # A prefix, another port or scheme of a listed origin is another origin.
    for near in (PAGE + ".evil.example", "https://app.example:8443", "http://app.example"):
        assert _cors_headers(_preflight(_reports_url(collector), near, "POST")) == {}
    upload = requests.post(
        _reports_url(collector),
        json={"config_id": "0" * 32, "reports": []},
        headers={"Origin": STRANGER},
        timeout=10,
    )
    assert _cors_headers(upload) == {}
    assert upload.headers["Vary"] == "Origin"  # the answer depends on the origin


def test_a_preflight_for_more_than_the_route_needs_is_refused(
    collector: CollectorProcess,
) -> None:
    url = _reports_url(collector)
    for method, headers in [
        ("POST", "content-type, x-debug"),
        ("PUT", None),
        ("DELETE", None),
        ("POST", "authorization"),  # the collector's uploads take no credential
    ]:
        assert _cors_headers(_preflight(url, PAGE, method, headers)) == {}, (method, headers)


def test_admin_routes_and_the_rest_never_answer_cors(collector: CollectorProcess) -> None:
    name = CAMPAIGN["name"]
    admin = {"Authorization": f"Bearer {collector.token}", "Origin": PAGE}
    # GET .../reports is the admin export, at the upload's path.
    assert _cors_headers(_preflight(_reports_url(collector), PAGE, "GET", "authorization")) == {}
    assert _cors_headers(_preflight(f"{collector.url}/v1/campaigns", PAGE, "POST")) == {}
    for path in (f"/v1/campaigns/{name}/estimate", f"/v1/campaigns/{name}/reports"):
        assert _cors_headers(_preflight(collector.url + path, PAGE, "GET")) == {}
        answer = requests.get(collector.url + path, headers=admin, timeout=10)
        assert answer.status_code in (200, 422), (path, answer.status_code)
        assert _cors_headers(answer) == {}
        assert "Vary" not in answer.headers or "Origin" not in answer.headers["Vary"]
    created = requests.post(
        f"{collector.url}/v1/campaigns", json=CAMPAIGN, headers=admin, timeout=10
    )
    assert created.status_code == 200 and _cors_headers(created) == {}
    for path in ("/v1/campaigns", "/metrics", "/healthz", "/readyz", "/openapi.json"):
        answer = requests.get(collector.url + path, headers={"Origin": PAGE}, timeout=10)
        assert answer.status_code == 200 and _cors_headers(answer) == {}, path
        assert _cors_headers(_preflight(collector.url + path, PAGE, "GET")) == {}, path


def test_without_the_flag_there_is_no_cors(tmp_path: Path) -> None:
    app = create_app({"DB": str(tmp_path / "c.db"), "ADMIN_TOKEN": ADMIN_TOKEN, "TESTING": True})
    with app.test_client() as client:
        answer = client.options(
            "/v1/campaigns/x/reports",
            headers={"Origin": PAGE, "Access-Control-Request-Method": "POST"},
        )
        posted = client.post("/v1/campaigns/x/reports", json={}, headers={"Origin": PAGE})
    for response in (answer, posted):
        assert not [k for k, _ in response.headers.items() if k.lower().startswith("access-")]
        assert "Origin" not in response.headers.get("Vary", "")


@pytest.mark.parametrize(
    ("value", "origin"),
    [
        ("https://app.example", "https://app.example"),
        ("https://App.Example:443", "https://app.example"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("HTTP://127.0.0.1:80", "http://127.0.0.1"),
        ("https://[::1]:8443", "https://[::1]:8443"),
    ],
)
def test_origins_are_normalized_as_browsers_send_them(value: str, origin: str) -> None:
    assert check_origin(value) == origin


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("https://app.example/", "no path"),
        ("https://app.example/app", "no path"),
        ("https://app.example?x=1", "no path, query"),
        ("ftp://app.example", "http or https"),
        ("app.example", "http or https"),
        ("*", "http or https"),
        ("https://*.example", "wildcards"),
        ("https://", "needs a host"),
        ("https://user@app.example", "no user name"),
        ("https://app.example:99999", "out of range"),
        ("https://app.example:http", "Port"),
        ("null", "http or https"),
    ],
)
def test_a_bad_origin_is_refused_naming_the_flag_and_the_value(value: str, why: str) -> None:
    with pytest.raises(ValueError, match="--cors-origin") as refused:
        check_origin(value)
    assert repr(value) in str(refused.value) and why in str(refused.value)


def test_serve_refuses_a_bad_origin_at_startup(tmp_path: Path) -> None:
    """The real command line: exit status 2 and one line naming the flag and the value, before
    anything is served or created."""
    command: list[Any] = [*CollectorProcess.command(), "serve", "--db", tmp_path / "c.db"]
    done = subprocess.run(
        [*map(str, command), "--create", "--port", "0", "--cors-origin", "https://app.example/x"],
        capture_output=True,
        text=True,
        env={"LDP_ADMIN_TOKEN": ADMIN_TOKEN, "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "argument --cors-origin: origin 'https://app.example/x': no path" in done.stderr
    assert not (tmp_path / "c.db").exists()
