"""Real collector processes (``ldp-collector serve`` under gunicorn) for the security suite.

Every test here reproduces a finding of the hardening issue against a live process: a
deleted or replaced database, slow sockets, a junk flood, odd raw requests, oversized chunked
bodies, a broken export stream, impossible reports, and a fuzz run from the OpenAPI description.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from collector.process import CollectorProcess

StartCollector = Callable[..., CollectorProcess]


@pytest.fixture
def start_collector(tmp_path: Path) -> Iterator[StartCollector]:
    """Start collectors on ``tmp_path/collector.db`` (``start_collector(workers=1, ...)``);
    every one is stopped at the end of the test."""
    started: list[CollectorProcess] = []

    def start(**options: Any) -> CollectorProcess:
        options.setdefault("workers", 2)
        db = options.pop("db", tmp_path / "collector.db")
        process = CollectorProcess(db, log_dir=tmp_path, **options)
        started.append(process)
        return process.start()

    try:
        yield start
    finally:
        for process in started:
            process.stop()


def raw_request(url: str, data: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data`` on a fresh socket and read until the server closes (or ``timeout``)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received


def upload(
    collector: CollectorProcess,
    campaign: str,
    config_id: str,
    reports: list[dict[str, Any]],
    **kwargs: Any,
) -> requests.Response:
    return requests.post(
        f"{collector.url}/v1/campaigns/{campaign}/reports",
        json={"config_id": config_id, "reports": reports},
        timeout=30,
        **kwargs,
    )
