"""Overload protection for uploads: a token bucket of reports per second, per worker process.

``LDP_RATE_LIMIT`` (reports per second, 0 = off, the default) refills the bucket; it holds at
most ``LDP_RATE_BURST`` reports (default: one full batch, ``LDP_MAX_BATCH``). An upload that
would take more reports than the bucket holds is answered ``429`` with ``Retry-After`` (the
seconds until enough have refilled) and stores nothing; the SDK's retry policy honours it.
Under gunicorn every worker has its own bucket, so the collector admits about ``workers`` times
the rate: set the per-worker rate accordingly.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class TokenBucket:
    """A thread-safe token bucket; ``clock`` returns seconds (monotonic; injectable for tests)."""

    def __init__(
        self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a positive number; got {rate!r}")
        if not (math.isfinite(burst) and burst >= 1):
            raise ValueError(f"burst must be at least 1; got {burst!r}")
        self.rate = float(rate)
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def take(self, amount: int) -> float:
        """Take ``amount`` tokens and return 0, or take nothing and return the seconds to wait.

        An amount above the burst can never be admitted whole; it waits for a full bucket (the
        caller's batch cap keeps amounts at or below the burst by default).
        """
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + max(0.0, now - self._last) * self.rate)
            self._last = now
            needed = min(float(amount), self.burst)
            if self._tokens >= needed:
                self._tokens -= needed
                return 0.0
            return (needed - self._tokens) / self.rate
