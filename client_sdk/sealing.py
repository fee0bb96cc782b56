"""Sealed reports for shuffled campaigns: the device encrypts each randomized payload to the
collector's X25519 public key with libsodium's sealed boxes (PyNaCl), so the shuffler in between
sees only ciphertext and cannot read or alter a report (Bittau et al., "Prochlo", SOSP 2017:
encode, shuffle, analyze; docs/shuffler.md, docs/math/central-and-shuffle.md).

An envelope is ``{"key_id": "<16 hex>", "sealed": "<base64url of the sealed box>"}``; its
plaintext is the payload's compact JSON, padded with spaces to a multiple of
:data:`PAD_BYTES` so that the envelopes of one campaign have the same size (the shuffler learns
nothing from a ciphertext's length; JSON ignores the trailing spaces). The key id says which of
the collector's key pairs opens it (old private keys are kept after a rotation).

The unit sealed is one report: every envelope has its own ephemeral key, so the collector cannot
tell which envelopes came from the same device (docs/shuffler.md, "What is sealed").
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ENVELOPE_FIELDS",
    "KEY_ID_PATTERN",
    "MAX_SEALED_CHARS",
    "PAD_BYTES",
    "check_envelope",
    "check_envelopes",
    "envelope_size",
    "key_id_of",
    "parse_envelope",
    "seal_payload",
    "seal_payloads",
]

ENVELOPE_FIELDS = frozenset({"key_id", "sealed"})
KEY_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
MAX_SEALED_CHARS = 64 * 1024
PAD_BYTES = 64
"""Plaintexts are padded to a multiple of this many bytes."""
SEAL_OVERHEAD = 48
"""A sealed box is its plaintext plus 48 bytes: the ephemeral public key (32) and the MAC (16)."""
_ENVELOPE_JSON_OVERHEAD = len('{"key_id":"","sealed":""}') + 16

_SEALED_PATTERN = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id_of(public_key: bytes) -> str:
    """The key id of a 32-byte X25519 public key: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def _padded(payload: Any) -> bytes:
    data = _compact(payload).encode("utf-8")
    return data + b" " * (-len(data) % PAD_BYTES)


def envelope_size(campaign: Mapping[str, Any]) -> int:
    """The length in bytes of the compact JSON ``{"key_id": ..., "sealed": ...}`` of the largest
    envelope of ``campaign`` (a campaign document: its ``mechanism`` config), from the
    mechanism's largest payload (``Mechanism.largest_wire_payload``; ``NotImplementedError``
    where a mechanism does not bound its payloads)."""
    from client_sdk.mechanisms import mechanism_from_config

    mechanism = mechanism_from_config(campaign["mechanism"])
    size = len(_padded(mechanism.largest_wire_payload())) + SEAL_OVERHEAD
    return -(-4 * size // 3) + _ENVELOPE_JSON_OVERHEAD


def seal_payloads(payloads: Sequence[Any], *, public_key: str, key_id: str) -> list[dict[str, str]]:
    """The envelopes of ``payloads``, each sealed on its own to ``public_key`` (base64url, as
    campaigns serve it).

    ``ValueError`` when the key does not match its id (a campaign document altered in transit).
    """
    from nacl.bindings import crypto_box_seal

    raw = _b64decode(public_key)
    if len(raw) != 32 or key_id_of(raw) != key_id:
        raise ValueError(f"public_key does not match key_id {key_id[:40]!r}")
    return [
        {"key_id": key_id, "sealed": _b64encode(crypto_box_seal(_padded(p), raw))} for p in payloads
    ]


def seal_payload(payload: Any, *, public_key: str, key_id: str) -> dict[str, str]:
    """The envelope of one payload (:func:`seal_payloads`)."""
    return seal_payloads([payload], public_key=public_key, key_id=key_id)[0]


def check_envelope(envelope: Any) -> tuple[str, str]:
    """``(key_id, sealed base64url text)`` of a well-formed envelope, without decoding it (what
    the shuffler checks); ``ValueError`` naming what is wrong."""
    if not isinstance(envelope, dict) or envelope.keys() != ENVELOPE_FIELDS:
        raise ValueError("an envelope is an object with exactly 'key_id' and 'sealed'")
    key_id, sealed = envelope["key_id"], envelope["sealed"]
    if not isinstance(key_id, str) or KEY_ID_PATTERN.fullmatch(key_id) is None:
        raise ValueError("key_id must be 16 lowercase hex characters")
    if not isinstance(sealed, str) or not 0 < len(sealed) <= MAX_SEALED_CHARS:
        raise ValueError(f"sealed must be a base64url string of at most {MAX_SEALED_CHARS} chars")
    if _SEALED_PATTERN.fullmatch(sealed) is None or len(sealed) % 4 == 1:
        raise ValueError("sealed is not valid base64url")
    return key_id, sealed


def check_envelopes(envelopes: Sequence[Any]) -> list[tuple[str, str]] | None:
    """:func:`check_envelope` of every envelope at once, or ``None`` if any of them is not
    plainly well formed (then check them one by one for the reasons; a padded sealed text,
    which devices never send, also takes that way).

    A few C-level passes instead of Python calls per envelope: the sealed texts are joined by
    newlines and the base64url alphabet deleted from the bytes; exactly the newlines must remain.
    """
    try:
        if not all(type(e) is dict and e.keys() == ENVELOPE_FIELDS for e in envelopes):
            return None
        key_ids = [e["key_id"] for e in envelopes]
        sealed = [e["sealed"] for e in envelopes]
        if not all(type(k) is str and KEY_ID_PATTERN.fullmatch(k) for k in set(key_ids)):
            return None
        if not all(0 < n <= MAX_SEALED_CHARS and n % 4 != 1 for n in set(map(len, sealed))):
            return None
        joined = ("\n".join(sealed) + "\n").encode("ascii")  # TypeError: not all strings
    except (TypeError, UnicodeEncodeError):  # an unhashable key id, a non-ASCII text
        return None
    if joined.translate(None, _BASE64URL) != b"\n" * len(sealed):
        return None
    return list(zip(key_ids, sealed, strict=True))


def parse_envelope(envelope: Any) -> tuple[str, bytes]:
    """``(key_id, sealed bytes)`` of an envelope; ``ValueError`` naming what is wrong."""
    key_id, sealed = check_envelope(envelope)
    return key_id, _b64decode(sealed)
