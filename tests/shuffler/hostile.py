"""A hostile collector for the shuffler's tests: a small real HTTP server in front of a real
collector. It serves the shuffler's campaign lookups a tampered document (``tamper``), records
the size of every batch the shuffler forwards (and answers 200 itself, as a collector that
wants small batches would), and passes every other request through."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

from client_sdk.protocol import campaign_config_id

__all__ = ["HostileCollector", "recomputed"]


def recomputed(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with its ``config_id`` recomputed from its (tampered) content: a document
    that verifies, as a collector that cares to tamper consistently serves it."""
    return {
        **document,
        "config_id": campaign_config_id(
            mechanism=document["mechanism"],
            domain=document.get("domain"),
            policy=document.get("policy"),
            min_batch_size=document["min_batch_size"],
            shuffle=document.get("shuffle"),
        ),
    }


class HostileCollector:
    """``url`` serves ``tamper(real document)`` for ``GET /v1/campaigns/<name>`` and takes every
    batch (``batches``: their sizes, in arrival order); the rest goes to ``upstream``.
    ``authorizations``: the ``Authorization`` header of every GET (``None`` when absent)."""

    def __init__(self, upstream: str, tamper: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.upstream = upstream.rstrip("/")
        self.tamper = tamper
        self.batches: list[int] = []
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with owner._lock:
                    owner.authorizations.append(self.headers.get("Authorization"))
                upstream = requests.get(owner.upstream + self.path, timeout=10)
                body = upstream.content
                if upstream.status_code == 200 and self.path.count("/") == 3:
                    body = json.dumps(owner.tamper(upstream.json())).encode()
                content_type = upstream.headers.get("Content-Type", "application/json")
                self._answer(upstream.status_code, body, content_type)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with owner._lock:
                    owner.batches.append(len(body["reports"]))
                answer = {
                    "batch_id": body["batch_id"],
                    "accepted": len(body["reports"]),
                    "duplicate": 0,
                    "rejected": [],
                    "replayed": False,
                }
                self._answer(200, json.dumps(answer).encode(), "application/json")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def received(self) -> list[int]:
        with self._lock:
            return list(self.batches)

    def __enter__(self) -> HostileCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
