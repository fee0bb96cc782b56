"""Request-scoped helpers of the web layer: the storage handle on ``flask.g``, admin
authentication, and strict JSON bodies."""

from __future__ import annotations

import contextlib
import datetime
import functools
import hmac
import json
import math
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from flask import Flask, current_app, g, request
from gunicorn.http.errors import ParseException
from werkzeug.exceptions import ClientDisconnected

from collector.dbguard import check_identity
from collector.problems import Problem
from collector.storage import Storage, StorageBusy

F = TypeVar("F", bound=Callable[..., Any])

JSON_MEDIA_TYPE = "application/json"


def storage_opener() -> Callable[[], Storage]:
    """A function opening new connections to the app's database, usable outside the request
    (a streamed response outlives it); the caller closes what it opens."""
    return functools.partial(
        Storage,
        current_app.config["DB"],
        busy_timeout=current_app.config["BUSY_TIMEOUT"],
        synchronous=current_app.config["SYNCHRONOUS"],
        create=False,
    )


def ensure_same_database() -> None:
    """Raise ``DatabaseReplaced`` (answered 503) if the database file was deleted or replaced
    since the app opened it (``collector.dbguard``)."""
    check_identity(current_app.config["DB"], current_app.extensions["ldp_db_identity"])


def get_storage() -> Storage:
    """This request's storage, on ``flask.g``, after checking that the database file is still
    the one the app opened (a deleted or replaced file answers 503, never an acknowledgment).

    The connection behind it is kept open per worker thread and reused across requests:
    closing the last connection to a WAL database checkpoints and deletes the WAL (an fsync
    or two), which would otherwise cost every request ~10 ms. Keyed by process id, so a forked
    gunicorn worker never inherits its master's connection.
    """
    if "storage" not in g:
        ensure_same_database()
        local = current_app.extensions["ldp_storage"]
        storage = getattr(local, "storage", None)
        if storage is None or local.pid != os.getpid():
            storage = Storage(
                current_app.config["DB"],
                busy_timeout=current_app.config["BUSY_TIMEOUT"],
                synchronous=current_app.config["SYNCHRONOUS"],
                create=False,
                check_same_thread=False,  # closed by close_storages, maybe from another thread
            )
            local.storage, local.pid = storage, os.getpid()
            current_app.extensions["ldp_storage_opened"].append(storage.conn)
        g.storage = storage
    return cast(Storage, g.storage)


def release_storage(_error: BaseException | None = None) -> None:
    """Teardown: detach the storage from ``g`` (the thread keeps the connection open)."""
    storage = g.pop("storage", None)
    if storage is not None and storage.db.conn.in_transaction:
        storage.db.conn.execute("ROLLBACK")  # never leave a transaction open across requests


@contextlib.contextmanager
def write_turn() -> Iterator[None]:
    """Take this worker's turn to write: one thread per process waits on SQLite's lock.

    gthread workers run several requests at once; left to SQLite's busy handler (a sleep and
    poll, unfair under contention), 2 workers x 4 threads of uploads overran the busy timeout
    on a loaded host and answered 503. A process-local lock queues a worker's writers instead,
    so only ``workers`` connections ever contend for the database; it is bounded by the same
    ``LDP_BUSY_TIMEOUT`` (``StorageBusy``, answered 503 with Retry-After).
    """
    lock = current_app.extensions["ldp_write_lock"]
    if not lock.acquire(timeout=current_app.config["BUSY_TIMEOUT"]):
        raise StorageBusy("another upload of this worker held the write turn too long")
    try:
        yield
    finally:
        lock.release()


def init_app(app: Flask) -> None:
    app.extensions["ldp_write_lock"] = threading.Lock()
    app.extensions["ldp_storage"] = threading.local()
    opened: list[sqlite3.Connection] = []
    app.extensions["ldp_storage_opened"] = opened
    app.teardown_appcontext(release_storage)
    # Close the per-thread connections explicitly when the app goes away (a connection left to
    # the garbage collector is a ResourceWarning, and its WAL is not checkpointed cleanly).
    weakref.finalize(app, _close_all, opened)


def close_storages(app: Flask) -> None:
    """Close every per-thread connection the app opened (servers shutting down, tests)."""
    _close_all(app.extensions["ldp_storage_opened"])
    app.extensions["ldp_storage"] = threading.local()


def _close_all(connections: list[sqlite3.Connection]) -> None:
    while connections:
        connection = connections.pop()
        with contextlib.suppress(sqlite3.Error):
            connection.close()


def require_admin(view: F) -> F:
    """Refuse the request with 401 unless it carries ``Authorization: Bearer <LDP_ADMIN_TOKEN>``.

    The token is compared in constant time (``hmac.compare_digest``). Without a configured
    token every admin request is refused.
    """
    return _require_token(view, "ADMIN_TOKEN", "admin")


def require_shuffler(view: F) -> F:
    """As :func:`require_admin`, for the shuffler's ``LDP_SHUFFLER_TOKEN``."""
    return _require_token(view, "SHUFFLER_TOKEN", "shuffler")


def _require_token(view: F, setting: str, role: str) -> F:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        expected = current_app.config.get(setting)
        challenge = 'Bearer realm="ldp-collector"'
        header = request.headers.get("Authorization", "")
        scheme, _, presented = header.partition(" ")
        if not expected:
            raise Problem(
                401,
                "unauthorized",
                f"the {role} API is disabled: the collector has no LDP_{setting}",
                headers={"WWW-Authenticate": challenge},
            )
        if scheme.lower() != "bearer" or not presented.strip():
            raise Problem(
                401,
                "unauthorized",
                f"this route needs 'Authorization: Bearer <{role} token>'",
                headers={"WWW-Authenticate": challenge},
            )
        if not hmac.compare_digest(presented.strip().encode(), expected.encode()):
            raise Problem(
                401,
                "unauthorized",
                f"the {role} token is not valid",
                headers={"WWW-Authenticate": challenge + ', error="invalid_token"'},
            )
        return view(*args, **kwargs)

    return cast(F, wrapped)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:40]} is out of range")
    return number


def read_json() -> Any:
    """The request body as strict JSON (``application/json``, UTF-8, finite numbers).

    415 for another media type, 413 (raised by werkzeug) above ``MAX_CONTENT_LENGTH``, 400 for
    anything that does not parse.
    """
    if request.mimetype != JSON_MEDIA_TYPE:
        raise Problem(
            415,
            "unsupported-media-type",
            f"Content-Type must be {JSON_MEDIA_TYPE}; got {request.mimetype or 'none'!r}",
        )
    charset = request.mimetype_params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise Problem(415, "unsupported-media-type", f"charset must be utf-8; got {charset!r}")
    raw = _read_body()
    try:
        return json.loads(
            raw.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except UnicodeDecodeError:
        raise Problem(400, "malformed-request", "the body is not valid UTF-8") from None
    except RecursionError:
        raise Problem(400, "malformed-request", "the body is nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, huge integers, NaN/Infinity
        raise Problem(400, "malformed-request", f"the body is not valid JSON: {error}") from None


def _read_body() -> bytes:
    """The raw body, refused with 413 above ``MAX_CONTENT_LENGTH`` whatever its framing.

    With a ``Content-Length``, werkzeug refuses an oversized body before reading it. A chunked
    body has no length, and werkzeug then silently cuts it at the limit (a valid prefix would be
    accepted): read one byte past the limit from the raw stream instead, and refuse if it came.
    """
    try:
        return _read_limited()
    except (OSError, ClientDisconnected):  # the socket timed out (collector.server)
        raise Problem(408, "request-timeout", "the request body did not arrive in time") from None
    except ParseException as error:  # gunicorn's chunked-body reader: a bad chunk is the client's
        raise Problem(
            400, "malformed-request", f"the request body is malformed ({type(error).__name__})"
        ) from None


def _read_limited() -> bytes:
    if request.content_length is not None:
        return request.get_data(cache=False)
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    stream = request.environ["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(1 << 16, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise Problem(
            413,
            "payload-too-large",
            f"request body larger than {limit} bytes (MAX_CONTENT_LENGTH)",
            max_content_length=limit,
        )
    return b"".join(chunks)


def today() -> datetime.date:
    """The UTC date that expiry and retention go by (``LDP_TODAY`` overrides it in drills)."""
    override = current_app.config.get("TODAY")
    if override:
        return datetime.date.fromisoformat(override)
    return datetime.datetime.now(datetime.timezone.utc).date()


def query_int(name: str, default: int, *, minimum: int, maximum: int) -> int:
    """An integer query parameter in ``[minimum, maximum]``; 400 naming it otherwise."""
    text = request.args.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise Problem(400, "malformed-request", f"{name} must be an integer; got {text[:40]!r}")
    value = int(text)
    if not minimum <= value <= maximum:
        raise Problem(
            400, "malformed-request", f"{name} must be in [{minimum}, {maximum}]; got {value}"
        )
    return value
