"""Overload protection for uploads: token buckets of reports per second, per worker process.

``LDP_RATE_LIMIT`` (reports per second, 0 = off, the default) refills the bucket; it holds at
most ``LDP_RATE_BURST`` reports (default: one full batch, ``LDP_MAX_BATCH``). An upload that
would take more reports than the bucket holds is answered ``429`` with ``Retry-After`` (the
seconds until enough have refilled) and stores nothing; the SDK's retry policy honours it.
Under gunicorn every worker has its own bucket, so the collector admits about ``workers`` times
the rate: set the per-worker rate accordingly.

Only well-formed reports of an upload to an existing campaign with its current ``config_id``
are charged (after validation): junk, unknown campaigns and stale configs cost nothing, so an
unauthenticated flood of them cannot make honest uploads wait.

``LDP_RATE_PER_BUCKET`` (0 = off) adds one bucket per client-chosen key (holding one batch,
``LDP_MAX_BATCH``), sent in the ``Ldp-Rate-Bucket`` header (for example a random key per app
install, or per tenant): one chatty client then waits alone, without the collector ever seeing
or keeping an address. The key is only held in memory as a keyed hash (a per-process random
key), at most ``MAX_TRACKED_BUCKETS`` of them, least recently used first out. A client that
rotates keys is still held by the global bucket; the per-bucket one is fairness, not a defence.
"""

from __future__ import annotations

import collections
import hashlib
import math
import secrets
import threading
import time
from collections.abc import Callable

RATE_BUCKET_HEADER = "Ldp-Rate-Bucket"
MAX_TRACKED_BUCKETS = 10_000
MAX_BUCKET_KEY_LENGTH = 128


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
        return self._charge(amount, take=True)

    def wait_for(self, amount: int) -> float:
        """The seconds until ``amount`` tokens are there (0: now), taking nothing."""
        return self._charge(amount, take=False)

    def _charge(self, amount: int, *, take: bool) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + max(0.0, now - self._last) * self.rate)
            self._last = now
            needed = min(float(amount), self.burst)
            if self._tokens >= needed:
                if take:
                    self._tokens -= needed
                return 0.0
            return (needed - self._tokens) / self.rate


class UploadLimiter:
    """The global bucket plus, optionally, one bucket per client key (``Ldp-Rate-Bucket``)
    holding ``per_bucket_burst`` reports (default: the global burst)."""

    def __init__(
        self,
        rate: float,
        burst: float,
        *,
        per_bucket: float = 0.0,
        per_bucket_burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.per_bucket = float(per_bucket)
        self.per_bucket_burst = float(burst if per_bucket_burst is None else per_bucket_burst)
        self._clock = clock
        self._global = TokenBucket(rate, burst, clock=clock)
        self._buckets: collections.OrderedDict[bytes, TokenBucket] = collections.OrderedDict()
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()

    def take(self, amount: int, key: str | None = None) -> float:
        """Charge ``amount`` reports to the client's bucket (if keyed), then to the global one;
        0 when admitted, else the seconds to wait (nothing is taken from the global bucket)."""
        if not (self.per_bucket > 0 and key):
            return self._global.take(amount)
        with self._lock:  # both buckets or neither: a refused upload costs its key nothing
            bucket = self._bucket(key)
            wait = bucket.wait_for(amount) or self._global.take(amount)
            if wait == 0:
                bucket.take(amount)
            return wait

    def _bucket(self, key: str) -> TokenBucket:
        digest = hashlib.blake2b(
            key[:MAX_BUCKET_KEY_LENGTH].encode("utf-8", "replace"), key=self._key, digest_size=16
        ).digest()
        bucket = self._buckets.get(digest)
        if bucket is None:
            bucket = TokenBucket(self.per_bucket, self.per_bucket_burst, clock=self._clock)
            self._buckets[digest] = bucket
            if len(self._buckets) > MAX_TRACKED_BUCKETS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(digest)
        return bucket
