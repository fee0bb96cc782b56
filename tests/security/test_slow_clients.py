"""Slow clients cannot stall the collector: idle sockets held open leave health probes and
uploads answered (gunicorn's sync workers answered none for ~30 s with two such sockets)."""

from __future__ import annotations

import contextlib
import socket
import time

import requests

from tests.security.conftest import StartCollector

PROBES = 20
HALF_REQUEST = (
    b"POST /v1/campaigns/x/reports HTTP/1.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 99\r\n\r\n{"
)


def probe_successes(url: str, attempts: int = 1) -> int:
    """How many of ``PROBES`` health probes are answered within a second, each given
    ``attempts`` tries (a worker that gunicorn restarts under load can drop one connection)."""
    answered = 0
    for _ in range(PROBES):
        for _ in range(attempts):
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{url}/healthz", timeout=1).status_code == 200:
                    answered += 1
                    break
    return answered


def open_sockets(url: str, count: int, prefix: bytes) -> list[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)))
        if prefix:
            sock.sendall(prefix)
        sockets.append(sock)
    time.sleep(0.5)  # let the workers accept them
    return sockets


def test_idle_sockets_do_not_stop_health_probes(start_collector: StartCollector) -> None:
    collector = start_collector(workers=2)
    idle = open_sockets(collector.url, 4, b"")  # connected, never send a byte
    try:
        assert probe_successes(collector.url) == PROBES
    finally:
        for sock in idle:
            sock.close()


def test_slow_request_senders_below_the_thread_count_do_not_stop_probes(
    start_collector: StartCollector,
) -> None:
    collector = start_collector(workers=2)
    # Half a request each, then silence: each holds one thread (4 per worker), so 3 cannot
    # take all of a worker's, wherever they land. More than the threads is a job for the
    # buffering proxy in front (docs/collector.md, "Operations").
    slow = open_sockets(collector.url, 3, HALF_REQUEST)
    try:
        assert probe_successes(collector.url) == PROBES
    finally:
        for sock in slow:
            sock.close()


def test_a_stalled_body_is_answered_408_and_frees_its_thread(
    start_collector: StartCollector,
) -> None:
    collector = start_collector(workers=2, extra_args=["--timeout", "2"])
    # As many half requests as there are threads (2 workers x 4): each times out after 2 s.
    slow = open_sockets(collector.url, 8, HALF_REQUEST)
    try:
        for sock in slow:
            sock.settimeout(10)
            answer = b""
            with contextlib.suppress(TimeoutError):
                while b"\r\n\r\n" not in answer and (chunk := sock.recv(4096)):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"application/problem+json" in answer
        # Held threads answered 0 of 20 probes for ~30 s before the fix; freed ones answer all.
        assert probe_successes(collector.url, attempts=3) == PROBES
    finally:
        for sock in slow:
            sock.close()
