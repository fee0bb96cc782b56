"""A connection whose request has arrived is served, even when the worker's loop was held up
past the connection's idle deadline (a real ``ldp-collector serve``, raw sockets).

gunicorn's ``gthread`` loop closes a new or kept-alive connection once it has been idle for
``keepalive`` seconds (2 by default), judged by the clock alone. The loop also closes finished
connections gracefully, lingering up to 2 s for the client's FIN: a client that keeps such a
socket open (a pooled keep-alive connection, a slow client under load) holds the loop that long.
A request sent meanwhile on another connection was then closed unread, and the client got a
connection reset instead of an answer (seen under load in tests/shuffler/test_e2e.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from collector.process import CollectorProcess


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("idle")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as process:
        yield process


def _connect(collector: CollectorProcess) -> socket.socket:
    host, port = collector.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (``ConnectionResetError`` if it resets)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_sent_while_the_loop_lingers_on_another_close_is_answered(
    collector: CollectorProcess,
) -> None:
    waiting = _connect(collector)  # accepted now; its request comes later
    lingering = _connect(collector)
    try:
        time.sleep(0.3)  # both accepted: `waiting`'s 2 s idle deadline runs from here
        # A "Connection: close" request whose client never closes: the loop lingers up to
        # 2 s in the graceful close, waiting for a FIN that does not come.
        lingering.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.3)
        waiting.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _answer(waiting)  # old worker: ConnectionResetError once the loop resumes
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    finally:
        waiting.close()
        lingering.close()
