"""Sign-in with the admin token, server-side sessions, and CSRF tokens.

* The token is typed into a login form (``POST``) and compared in constant time
  (``hmac.compare_digest``); it never appears in a URL, a cookie or a page.
* A successful sign-in creates a random session id (256 bits) kept in this process's memory with
  its own CSRF token; the browser gets only the id, in an ``HttpOnly``, ``SameSite=Strict``
  cookie, ``Secure`` when the request came over HTTPS. Sign-out deletes the session on the
  server, so a copied cookie stops working at once. Sessions expire after
  :data:`SESSION_IDLE_SECONDS` without a request and :data:`SESSION_MAX_SECONDS` in all. The
  dashboard runs as one process (threads), so one in-memory table serves every request; a
  restart signs everyone out.
* Every state-changing form (sign-in, sign-out) carries a CSRF token that must match: for
  sign-in a random value also set in a short-lived ``SameSite=Strict`` cookie (double submit),
  for sign-out the session's own token. ``SameSite=Strict`` alone already keeps other sites'
  forms from sending the session cookie; the token covers browsers that do not honour it.
* Failed sign-ins are limited to :data:`MAX_FAILURES` a minute per process (then 429), which
  bounds online guessing without tracking clients.
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import secrets
import threading
import time
from collections.abc import Callable

from flask import Request
from werkzeug.wrappers import Response

__all__ = [
    "LOGIN_CSRF_COOKIE",
    "SESSION_COOKIE",
    "LoginThrottle",
    "Session",
    "SessionStore",
    "set_cookie",
    "tokens_equal",
]

SESSION_COOKIE = "ldp_dashboard_session"
LOGIN_CSRF_COOKIE = "ldp_dashboard_login"
SESSION_IDLE_SECONDS = 60 * 60
SESSION_MAX_SECONDS = 12 * 60 * 60
LOGIN_FORM_SECONDS = 15 * 60
MAX_FAILURES = 10
"""Failed sign-ins allowed per minute (per process) before sign-in answers 429."""


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets (as UTF-8 bytes)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    """An ``HttpOnly``, ``SameSite=Strict`` cookie, ``Secure`` over HTTPS."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        secure=request.is_secure,
        httponly=True,
        samesite="Strict",
    )


@dataclasses.dataclass
class Session:
    csrf: str
    created: float
    seen: float


class SessionStore:
    """Signed-in sessions of this process, by random id."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def create(self) -> tuple[str, Session]:
        now = self._clock()
        session_id = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(32), created=now, seen=now)
        with self._lock:
            self._expire(now)
            self._sessions[session_id] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of that id (its idle clock reset), or ``None``."""
        if not session_id:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > SESSION_IDLE_SECONDS or now - session.created > (
                SESSION_MAX_SECONDS
            ):
                del self._sessions[session_id]
                return None
            session.seen = now
            return session

    def delete(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _expire(self, now: float) -> None:
        stale = [
            key
            for key, s in self._sessions.items()
            if now - s.seen > SESSION_IDLE_SECONDS or now - s.created > SESSION_MAX_SECONDS
        ]
        for key in stale:
            del self._sessions[key]


class LoginThrottle:
    """At most :data:`MAX_FAILURES` failed sign-ins in any 60 s window (per process)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._failures: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self._clock = clock

    def _trim(self, now: float) -> None:
        while self._failures and now - self._failures[0] > 60.0:
            self._failures.popleft()

    def blocked(self) -> bool:
        with self._lock:
            self._trim(self._clock())
            return len(self._failures) >= MAX_FAILURES

    def failed(self) -> None:
        with self._lock:
            now = self._clock()
            self._trim(now)
            self._failures.append(now)
