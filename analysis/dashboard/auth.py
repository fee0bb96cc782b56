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
* Failed sign-ins are throttled per client, so that nobody can lock the admin out
  (:class:`LoginThrottle`): at most :data:`MAX_FAILURES` wrong tokens a minute from one client
  address (an IPv6 address by its /64), then that address answers 429, and at most
  :data:`MAX_FAILURES_ALL` a minute from all addresses together (a ceiling on online guessing
  however many addresses an attacker has). A browser that has signed in before carries a
  *trusted-browser* cookie (OWASP's "device cookie": a random id and its HMAC under a key derived
  from the admin token, so it survives restarts and dies with the token) and is throttled by its
  own count of wrong tokens only: what others fill, at its address or anywhere, does not hold it
  back. A correct token is therefore never refused because of someone else's wrong ones, while a
  client that is throttled learns nothing from a guess (429 whether right or wrong: letting a
  right token through there would give it unlimited guesses). Every sign-in compares both the
  token and the form's CSRF token (``hmac.compare_digest``) before looking at the throttle, so
  every path does the same work. Behind a reverse proxy every client has the proxy's address:
  then the per-address count is one count, and the trusted-browser cookie is what keeps the admin
  in.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from collections.abc import Callable

from flask import Request
from werkzeug.wrappers import Response

__all__ = [
    "LOGIN_CSRF_COOKIE",
    "SESSION_COOKIE",
    "TRUSTED_BROWSER_COOKIE",
    "LoginThrottle",
    "Session",
    "SessionStore",
    "client_key",
    "new_trusted_browser",
    "set_cookie",
    "tokens_equal",
    "trusted_browser",
]

SESSION_COOKIE = "ldp_dashboard_session"
LOGIN_CSRF_COOKIE = "ldp_dashboard_login"
SESSION_IDLE_SECONDS = 60 * 60
SESSION_MAX_SECONDS = 12 * 60 * 60
LOGIN_FORM_SECONDS = 15 * 60
TRUSTED_BROWSER_COOKIE = "ldp_dashboard_browser"
TRUSTED_BROWSER_SECONDS = 90 * 24 * 60 * 60
MAX_FAILURES = 10
"""Wrong tokens allowed per minute from one client (an address, or a trusted browser)."""
MAX_FAILURES_ALL = 300
"""Wrong tokens allowed per minute from all addresses together (trusted browsers aside)."""
THROTTLE_SECONDS = 60.0


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets (as UTF-8 bytes)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def client_key(address: str | None) -> str:
    """The throttle's key of a remote address: the address itself, an IPv6 one by its /64 (what
    one host usually holds)."""
    try:
        parsed = ipaddress.ip_address(address or "")
    except ValueError:
        return f"address:{address}"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return f"address:{parsed.ipv4_mapped}"
        return f"address:{ipaddress.IPv6Network((parsed, 64), strict=False)}"
    return f"address:{parsed}"


def _browser_mac(admin_token: str, browser_id: str) -> str:
    key = hmac.new(admin_token.encode("utf-8"), b"ldp-dashboard trusted browser", hashlib.sha256)
    return hmac.new(key.digest(), browser_id.encode("ascii"), hashlib.sha256).hexdigest()


def new_trusted_browser(admin_token: str) -> str:
    """A trusted-browser cookie value for a browser that just signed in: ``id.mac``."""
    browser_id = secrets.token_urlsafe(16)
    return f"{browser_id}.{_browser_mac(admin_token, browser_id)}"


def trusted_browser(cookie: str | None, admin_token: str) -> str | None:
    """The browser id of a valid trusted-browser cookie (made by :func:`new_trusted_browser`
    under this admin token), else ``None``."""
    browser_id, _, mac = (cookie or "").partition(".")
    if not browser_id or not browser_id.isascii() or not mac:
        return None
    valid = hmac.compare_digest(
        mac.encode("ascii", "replace"), _browser_mac(admin_token, browser_id).encode("ascii")
    )
    return browser_id if valid else None


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
    """Wrong tokens in the last :data:`THROTTLE_SECONDS`, per client and in all (module
    docstring). A client is a :func:`client_key` or, for a trusted browser, ``browser:<id>``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._failures: dict[str, collections.deque[float]] = {}
        self._all: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self._clock = clock

    @staticmethod
    def _key(address: str, browser: str | None) -> str:
        return f"browser:{browser}" if browser is not None else address

    def _trim(self, now: float) -> None:
        while self._all and now - self._all[0] > THROTTLE_SECONDS:
            self._all.popleft()
        for key in list(self._failures):
            times = self._failures[key]
            while times and now - times[0] > THROTTLE_SECONDS:
                times.popleft()
            if not times:
                del self._failures[key]  # the table holds only clients with recent failures

    def blocked(self, address: str, browser: str | None = None) -> bool:
        """Whether sign-in from ``address`` (a :func:`client_key`), or from the trusted browser
        ``browser``, is throttled now."""
        with self._lock:
            self._trim(self._clock())
            mine = len(self._failures.get(self._key(address, browser), ()))
            if browser is not None:
                return mine >= MAX_FAILURES
            return mine >= MAX_FAILURES or len(self._all) >= MAX_FAILURES_ALL

    def failed(self, address: str, browser: str | None = None) -> None:
        """Count a wrong token from that client (a trusted browser's own count only)."""
        with self._lock:
            now = self._clock()
            self._trim(now)
            self._failures.setdefault(self._key(address, browser), collections.deque()).append(now)
            if browser is None:
                self._all.append(now)
