"""HTTP transport of the SDK: one ``requests.Session`` whose mounted adapter owns every retry.

Retries are configured in exactly one place, urllib3's ``Retry`` on the ``HTTPAdapter``:

* network errors (connect and read), ``408``, ``429`` and ``5xx`` are retried with exponential
  backoff and jitter, honouring the server's ``Retry-After``;
* other ``4xx`` are never retried (they will not get better);
* a wait (backoff or ``Retry-After``) that would end past the flush deadline is not waited:
  the request gives up with :class:`DeadlineExceeded`, which says how long the server asked
  to wait, so the client can schedule its next flush no earlier;
* POST is retried too (urllib3 does not by default, since POST is not idempotent in general:
  psf/requests#2975). Uploads here *are* idempotent, because every report carries the random id
  it was given at record time and the collector stores an id once (IETF DAP upload rules).
"""

from __future__ import annotations

import inspect
import time
from types import TracebackType
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import MaxRetryError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 120
"""Longest ``Retry-After`` honoured, in seconds (where urllib3 supports a cap)."""


class DeadlineExceeded(TimeoutError):
    """A retry not attempted because its wait would pass the flush deadline.

    ``retry_after`` is the server's ``Retry-After`` in seconds, when it sent one.
    """

    def __init__(self, wait: float, retry_after: float | None) -> None:
        super().__init__(f"waiting {wait:.3g} s would pass the flush deadline")
        self.retry_after = retry_after


def retry_after_of(error: BaseException) -> float | None:
    """The ``Retry-After`` (seconds) behind a request that gave up at the deadline, if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DeadlineExceeded):
            return current.retry_after
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
            continue
        nested = current.args[0] if current.args else None
        current = nested if isinstance(nested, BaseException) else current.__cause__
    return None


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header (seconds or an HTTP date) in seconds from now; ``None`` if
    absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(Retry().parse_retry_after(value)))
    except Exception:  # urllib3's InvalidHeader, or a date it cannot read
        return None


class DeadlineRetry(Retry):
    """urllib3's ``Retry`` that gives up instead of waiting past a deadline.

    ``deadline`` is a ``time.monotonic()`` reading (``None``: no deadline). A retry whose wait
    (backoff or ``Retry-After``) would end after it raises ``MaxRetryError`` at once, so one
    ``flush`` cannot block for many minutes on a collector that keeps answering 503.
    """

    def __init__(self, *args: Any, deadline: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def new(self, **kwargs: Any) -> DeadlineRetry:
        kwargs.setdefault("deadline", self.deadline)
        return super().new(**kwargs)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> DeadlineRetry:
        following = super().increment(method, url, response, error, _pool, _stacktrace)
        if self.deadline is not None:
            wait = following.get_backoff_time()
            retry_after = None
            if response is not None:
                retry_after = following.get_retry_after(response)
                wait = max(wait, retry_after or 0.0)
            if time.monotonic() + wait > self.deadline:
                reason = DeadlineExceeded(wait, retry_after)
                raise MaxRetryError(_pool, url, reason)  # type: ignore[arg-type]
        return following


def set_deadline(session: requests.Session, deadline: float | None) -> None:
    """Give every retrying adapter of ``session`` this deadline (a monotonic time)."""
    for adapter in session.adapters.values():
        retry = getattr(adapter, "max_retries", None)
        if isinstance(retry, DeadlineRetry):
            adapter.max_retries = retry.new(deadline=deadline)  # type: ignore[attr-defined]


def make_retry(*, retries: int = 5, backoff_factor: float = 0.25, jitter: float = 0.25) -> Retry:
    """The retry policy: ``retries`` attempts after the first, backoff ``factor * 2**n`` (capped
    at 30 s) plus up to ``jitter`` seconds, ``Retry-After`` honoured."""
    options: dict[str, Any] = {
        "total": retries,
        "connect": retries,
        "read": retries,
        "status": retries,
        "other": 0,
        "redirect": 0,
        "allowed_methods": None,  # every method, POST included (uploads are idempotent)
        "status_forcelist": RETRY_STATUSES,
        "backoff_factor": backoff_factor,
        "backoff_max": 30,
        "backoff_jitter": jitter,
        "respect_retry_after_header": True,
        "raise_on_status": False,  # hand back the last response once retries are exhausted
    }
    if "retry_after_max" in inspect.signature(Retry.__init__).parameters:
        options["retry_after_max"] = MAX_RETRY_AFTER
    return DeadlineRetry(**options)


def make_session(
    *,
    retries: int = 5,
    backoff_factor: float = 0.25,
    jitter: float = 0.25,
    user_agent: str = "ldp-telemetry-sdk",
) -> requests.Session:
    """A session with the retry policy mounted for http and https."""
    session = requests.Session()
    adapter = HTTPAdapter(
        max_retries=make_retry(retries=retries, backoff_factor=backoff_factor, jitter=jitter)
    )
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    # A constant agent: the SDK version is not worth a fingerprint of the device.
    session.headers["User-Agent"] = user_agent
    return session
