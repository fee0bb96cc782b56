"""Sealed reports for shuffled campaigns: the device encrypts each randomized payload to the
collector's X25519 public key with libsodium's sealed boxes (PyNaCl), so the shuffler in between
sees only ciphertext and cannot read or alter a report (Bittau et al., "Prochlo", SOSP 2017:
encode, shuffle, analyze; docs/math/central-and-shuffle.md).

An envelope is ``{"key_id": "<16 hex>", "sealed": "<base64url of the sealed box>"}``; its
plaintext is the payload's compact JSON. The key id says which of the collector's key pairs
opens it (old private keys are kept after a rotation).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

__all__ = ["ENVELOPE_FIELDS", "KEY_ID_PATTERN", "key_id_of", "parse_envelope", "seal_payload"]

ENVELOPE_FIELDS = frozenset({"key_id", "sealed"})
KEY_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
MAX_SEALED_CHARS = 64 * 1024

_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id_of(public_key: bytes) -> str:
    """The key id of a 32-byte X25519 public key: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def seal_payload(payload: Any, *, public_key: str, key_id: str) -> dict[str, str]:
    """The envelope of one payload, sealed to ``public_key`` (base64url, as campaigns serve it).

    ``ValueError`` when the key does not match its id (a campaign document altered in transit).
    """
    from nacl.public import PublicKey, SealedBox

    raw = _b64decode(public_key)
    if len(raw) != 32 or key_id_of(raw) != key_id:
        raise ValueError(f"public_key does not match key_id {key_id[:40]!r}")
    sealed = SealedBox(PublicKey(raw)).encrypt(_compact(payload).encode("utf-8"))
    return {"key_id": key_id, "sealed": _b64encode(bytes(sealed))}


def parse_envelope(envelope: Any) -> tuple[str, bytes]:
    """``(key_id, sealed bytes)`` of an envelope; ``ValueError`` naming what is wrong."""
    if not isinstance(envelope, dict) or envelope.keys() != ENVELOPE_FIELDS:
        raise ValueError("an envelope is an object with exactly 'key_id' and 'sealed'")
    key_id, sealed = envelope["key_id"], envelope["sealed"]
    if not isinstance(key_id, str) or KEY_ID_PATTERN.fullmatch(key_id) is None:
        raise ValueError("key_id must be 16 lowercase hex characters")
    if not isinstance(sealed, str) or not 0 < len(sealed) <= MAX_SEALED_CHARS:
        raise ValueError(f"sealed must be a base64url string of at most {MAX_SEALED_CHARS} chars")
    try:
        return key_id, _b64decode(sealed)
    except ValueError:
        raise ValueError("sealed is not valid base64url") from None
