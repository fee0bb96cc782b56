"""How ``ldp-collector serve`` runs gunicorn: the worker class, its error pages and its logs.

* **Workers survive slow clients.** gunicorn's ``sync`` worker reads one connection at a time,
  so two idle sockets held open by a client stall every other request (health probes included)
  until the timeout. :class:`ProblemWorker` is gunicorn's threaded worker (``gthread``): new,
  idle and keep-alive connections wait in a selector without holding a thread (closed after
  ``keepalive`` seconds of silence, unless a request arrived while the loop was busy), and
  ``--threads`` requests are served at once per process.
  A client that sends half a request does hold a thread until it finishes or times out: in
  production, put a buffering reverse proxy in front (docs/collector.md, "Operations").
* **Errors stay problem+json.** Requests that gunicorn itself refuses before the app sees them
  (a bad request line, method or header name, a too-long line or header, a bad chunk) were
  answered with gunicorn's HTML page; :meth:`ProblemWorker.handle_error` answers the same
  status as an RFC 9457 problem document instead.
* **No client address in any log.** gunicorn logs ``Invalid request from ip=...`` at warning
  level; the override logs the error without it, and :class:`PrivateLogger` removes anything
  that looks like an IP address from every error and access log line as a second guard.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import json
import logging
import os
import re
import select
import selectors
import socket
import time
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from gunicorn.http import errors
from gunicorn.workers.gthread import TConn, ThreadWorker

from client_sdk.protocol import problem_type

__all__ = ["LOGGER_CLASS", "WORKER_CLASS", "PrivateLogger", "ProblemWorker", "redact_addresses"]

WORKER_CLASS = "collector.server.ProblemWorker"
LOGGER_CLASS = "collector.server.PrivateLogger"

# gunicorn's parser errors -> (status, reason phrase); anything else is the app's fault (500).
_ErrorKinds = type[BaseException] | tuple[type[BaseException], ...]
_CLIENT_ERRORS: tuple[tuple[_ErrorKinds, int, str], ...] = (
    (errors.LimitRequestLine, 414, "URI Too Long"),
    (errors.LimitRequestHeaders, 431, "Request Header Fields Too Large"),
    (errors.ExpectationFailed, 417, "Expectation Failed"),
    (errors.UnsupportedTransferCoding, 501, "Not Implemented"),
    (errors.ForbiddenProxyRequest, 403, "Forbidden"),
    (errors.ConfigurationProblem, 500, "Internal Server Error"),
    (
        (
            errors.InvalidRequestLine,
            errors.InvalidRequestMethod,
            errors.InvalidHTTPVersion,
            errors.InvalidHeader,
            errors.InvalidHeaderName,
            errors.InvalidProxyLine,
            errors.InvalidSchemeHeaders,
            errors.ObsoleteFolding,
            errors.InvalidChunkSize,
            errors.ChunkMissingTerminator,
            errors.InvalidChunkExtension,
            errors.InvalidH2CPreface,
        ),
        400,
        "Bad Request",
    ),
)
_SLUGS = {400: "malformed-request", 414: "malformed-request", 431: "malformed-request"}


def classify(error: BaseException) -> tuple[int, str]:
    """The status and reason phrase gunicorn's own handler would answer for ``error``."""
    for kinds, status, reason in _CLIENT_ERRORS:
        if isinstance(error, kinds):
            return status, reason
    return 500, "Internal Server Error"


def problem_bytes(status: int, reason: str, detail: str) -> bytes:
    """A complete ``Connection: close`` HTTP/1.1 response carrying a problem document."""
    slug = _SLUGS.get(status) or ("internal-error" if status == 500 else None)
    body = json.dumps(
        {
            "type": problem_type(slug) if slug else "about:blank",
            "title": reason,
            "status": status,
            "detail": detail,
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/problem+json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _detail(error: BaseException, status: int) -> str:
    if status == 500:
        return "an internal error occurred"
    # The parser's message names the offending part; bound it and keep it printable.
    text = str(error).encode("ascii", "backslashreplace").decode("ascii")
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"gunicorn refused the request: {text}"


class ProblemWorker(ThreadWorker):
    """gunicorn's ``gthread`` worker whose own error responses are problem+json, logged
    without the client's address."""

    def accept(self, listener: socket.socket) -> None:
        """Accept a connection and park it in the poller until its first bytes arrive.

        gunicorn's ``gthread`` hands a new connection to a thread at once, and the thread
        waits up to 5 s for data: a few idle sockets then hold every thread of a worker. Here
        a new connection waits as a deferred one does (gunicorn's own pending path, closed
        after ``keepalive`` seconds of silence) and takes a thread only once readable.
        """
        if not hasattr(self, "pending_conns"):  # another gunicorn: its own behaviour
            super().accept(listener)
            return
        try:
            client_sock, client_addr = listener.accept()
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        client_sock.setblocking(False)
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())
        conn.timeout = time.monotonic() + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(
            client_sock,
            selectors.EVENT_READ,
            functools.partial(self.on_pending_socket_readable, conn),
        )

    def murder_pending(self) -> None:
        """Close new connections idle past ``keepalive``, but serve those whose request has
        arrived (see :meth:`_serve_arrived`)."""
        if hasattr(self, "pending_conns"):
            self._serve_arrived(self.pending_conns, self.on_pending_socket_readable)
        super().murder_pending()

    def murder_keepalived(self, force: bool = False) -> None:
        """Close kept-alive connections idle past ``keepalive``, but serve those whose next
        request has arrived (see :meth:`_serve_arrived`)."""
        if not force and hasattr(self, "keepalived_conns"):  # another gunicorn: its own
            self._serve_arrived(self.keepalived_conns, self.on_client_socket_readable)
        super().murder_keepalived(force)

    @staticmethod
    def _serve_arrived(conns: Any, on_readable: Any) -> None:
        """Hand each connection past its idle deadline that is readable to a thread.

        gunicorn judges idleness by the clock alone, but its loop can be held up past the
        deadline (a graceful close lingers up to 2 s for the client's FIN; a loaded machine):
        a request that arrived meanwhile was closed unread, and the client saw a reset.
        """
        now = time.monotonic()
        expired = list(itertools.takewhile(lambda conn: conn.timeout <= now, conns))
        for conn in expired:
            poll = select.poll()
            try:
                poll.register(conn.sock, select.POLLIN)
                readable = bool(poll.poll(0))
            except (OSError, ValueError):
                continue  # already closed: gunicorn's murder forgets it
            if readable:  # data, or the client's FIN: either way a thread reads it
                on_readable(conn, conn.sock)

    def handle_request(self, req: Any, conn: Any) -> Any:
        """Serve one request with a socket timeout of ``--timeout`` seconds per read or write.

        gunicorn's threads read a request body with no timeout: a client that sends half a body
        and waits held its thread for as long as it kept the socket open. With the timeout, the
        read fails after ``--timeout`` seconds of silence and the app answers 408.
        """
        conn.sock.settimeout(self.cfg.timeout)
        try:
            return super().handle_request(req, conn)
        finally:
            with contextlib.suppress(OSError):
                conn.sock.settimeout(None)

    def handle_error(self, req: Any, client: socket.socket, addr: Any, exc: BaseException) -> None:
        status, reason = classify(exc)
        if status == 500:
            self.log.exception("error handling a request")
        else:
            self.log.info("refused a request with %s: %s", status, type(exc).__name__)
        try:
            client.sendall(problem_bytes(status, reason, _detail(exc, status)))
        except OSError:
            self.log.debug("failed to send an error response")


_IPV4 = r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])"
_IPV6 = r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"
_ADDRESS = re.compile(f"{_IPV4}|{_IPV6}")


def redact_addresses(text: str) -> str:
    """``text`` with every IPv4 or IPv6 address replaced by ``<address>``."""
    return _ADDRESS.sub("<address>", text)


class _RedactAddresses(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_addresses(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


class PrivateLogger(Logger):
    """gunicorn's logger with IP addresses removed from every error and access log line."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            if not any(isinstance(f, _RedactAddresses) for f in log.filters):
                log.addFilter(_RedactAddresses())


class GunicornApp(BaseApplication):
    """gunicorn run programmatically on an already built app (``BaseApplication``): the
    collector's ``serve``, the shuffler's and the analysis dashboard.

    ``multiprocess_metrics`` (default): Prometheus metrics exact across workers
    (``collector.metrics``): :meth:`run` makes a fresh private folder for the workers' metric
    files, gunicorn's ``child_exit`` hook drops a dead worker's live gauges, and the folder is
    removed when the server stops.
    """

    def __init__(
        self, app: Any, options: dict[str, Any], *, multiprocess_metrics: bool = True
    ) -> None:
        self._app = app
        self._options = dict(options)
        self._metrics = multiprocess_metrics
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            if key == "control_socket_disable" and key not in self.cfg.settings:
                continue  # an older gunicorn has no control socket to disable
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self._app

    def run(self) -> None:
        if not self._metrics:
            super().run()
            return
        from collector import metrics

        folder = metrics.multiprocess_folder()
        given = self.cfg.child_exit

        def child_exit(server: Any, worker: Any) -> None:
            metrics.worker_exited(worker.pid)
            given(server, worker)

        self.cfg.set("child_exit", child_exit)
        master = os.getpid()
        try:
            super().run()
        finally:
            # gunicorn's master ends with SystemExit; so does each worker, forked inside run(),
            # whose exit must leave the folder to the others.
            if os.getpid() == master:
                metrics.remove_folder(folder)
