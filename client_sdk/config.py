"""Canonical JSON and content ids for configs, shared by the SDK and the collector.

A campaign's id is the SHA-256 of its canonical JSON (sorted keys, no whitespace, UTF-8,
finite numbers only), so a client and the server compute the same id from the same content and
can never silently disagree on parameters (docs/architecture.md).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, compact separators, no NaN or infinity."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def config_id(obj: Any) -> str:
    """32 hex characters of SHA-256 over :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:32]
