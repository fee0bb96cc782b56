"""HTTP transport of the SDK: one ``requests.Session`` whose mounted adapter owns every retry.

Retries are configured in exactly one place, urllib3's ``Retry`` on the ``HTTPAdapter``:

* network errors (connect and read), ``429`` and ``5xx`` are retried with exponential backoff
  and jitter, honouring the server's ``Retry-After``;
* other ``4xx`` are never retried (they will not get better);
* POST is retried too (urllib3 does not by default, since POST is not idempotent in general:
  psf/requests#2975). Uploads here *are* idempotent, because every report carries the random id
  it was given at record time and the collector stores an id once (IETF DAP upload rules).
"""

from __future__ import annotations

import inspect
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 120
"""Longest ``Retry-After`` honoured, in seconds (where urllib3 supports a cap)."""


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
    return Retry(**options)


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
