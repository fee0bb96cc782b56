"""Errors stay problem+json and private: gunicorn's own refusals, oversized chunked bodies and
a broken export stream, and no client address in any log line."""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.security.conftest import StartCollector, raw_request, upload

CAMPAIGN = {
    "name": "errs",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    "domain": ["a", "b"],
}

ODD_REQUESTS = {
    "space in the path": b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
    "control byte in the method": b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n",
    "lower-case method": b"get /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "space in a header name": b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
    "header without a colon": b"GET / HTTP/1.1\r\nHost x\r\n\r\n",
    "unknown HTTP version": b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    "not HTTP at all": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    "request line too long": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n",
    "header too long": b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n",
    "too many headers": b"GET / HTTP/1.1\r\n"
    + b"".join(b"X%d: y\r\n" % i for i in range(200))
    + b"\r\n",
    "bad chunk size": b"POST /v1/campaigns/errs/reports HTTP/1.1\r\nHost: x\r\n"
    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "unknown transfer coding": b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: rot13\r\n\r\n",
    "length and chunked": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "nul in the path": b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    "odd campaign name": b"GET /v1/campaigns/%2e%2e%2f%00 HTTP/1.1\r\nHost: x\r\n\r\n",
}
ADDRESS = re.compile(r"\b127\.0\.0\.1\b|ip=|::1|\[::ffff")


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = (line.partition(":") for line in lines[1:])
    headers = {name.strip().lower(): value.strip() for name, _, value in fields}
    return status, headers, body


def test_gunicorn_refusals_are_problem_json_and_logged_without_address(
    start_collector: StartCollector, tmp_path: Path
) -> None:
    collector = start_collector(workers=1, extra_args=["--log-level", "info"])
    collector.create_campaign(CAMPAIGN)
    for name, data in ODD_REQUESTS.items():
        raw = raw_request(collector.url, data)
        assert raw, name
        status, headers, body = parse_response(raw)
        assert 400 <= status < 600, (name, raw[:200])
        if headers.get("content-length"):
            body = body[: int(headers["content-length"])]
        assert headers["content-type"] == "application/problem+json", (name, raw[:300])
        document = json.loads(body)
        assert document["status"] == status, name
        assert (
            document["type"].startswith("urn:ldp-telemetry:problem:")
            or document["type"] == "about:blank"
        ), name
        assert b"<html" not in raw.lower(), name
    collector.stop()
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("collector-*.err"))
    assert "refused a request" in logs  # the refusals were logged...
    assert ADDRESS.search(logs) is None, ADDRESS.search(logs)  # ...without the client's address


def test_a_chunked_body_over_the_limit_is_413_and_stores_nothing(
    start_collector: StartCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_MAX_CONTENT_LENGTH", str(1 << 20))
    collector = start_collector(workers=1)
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    report = {"id": secrets.token_hex(16), "payload": 1}
    valid = json.dumps({"config_id": config_id, "reports": [report]}).encode()

    def body() -> Iterator[bytes]:  # a valid prefix, then 2 MiB of padding: no Content-Length
        yield valid
        for _ in range(32):
            yield b" " * (1 << 16)
        yield b"trailing garbage"

    response = requests.post(
        f"{collector.url}/v1/campaigns/errs/reports",
        data=body(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 413, response.text
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["type"].endswith("payload-too-large")
    with contextlib.closing(sqlite3.connect(collector.db)) as conn:
        assert conn.execute("SELECT count(*) FROM reports").fetchone()[0] == 0
    # Within the limit, chunked still works.
    small = requests.post(
        f"{collector.url}/v1/campaigns/errs/reports",
        data=iter([valid]),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert small.status_code == 200 and small.json()["accepted"] == 1


def test_an_export_that_fails_mid_way_ends_with_an_error_line(
    start_collector: StartCollector,
) -> None:
    collector = start_collector(workers=1)
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    for _ in range(12):
        batch = [{"id": secrets.token_hex(16), "payload": i % 2} for i in range(5000)]
        assert upload(collector, "errs", config_id, batch).status_code == 200
    with contextlib.closing(sqlite3.connect(collector.db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the main file
    size = Path(collector.db).stat().st_size

    with requests.get(
        f"{collector.url}/v1/campaigns/errs/reports?limit=60000",
        headers=collector.admin(),
        stream=True,
        timeout=30,
    ) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        first = json.loads(next(lines))
        assert set(first) == {"id", "payload"}
        with open(collector.db, "r+b") as handle:  # the disk loses the rest of the file
            handle.truncate(size // 8)
        rest = [json.loads(line) for line in lines]  # no ChunkedEncodingError: a clean end
    assert len(rest) < 59_999  # the failure did cut the stream...
    assert set(rest[-1]) == {"error"}  # ...and said so on its last line
    assert rest[-1]["error"]["status"] in (500, 503)
    assert all(set(line) == {"id", "payload"} for line in rest[:-1])
