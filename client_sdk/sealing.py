"""Sealed reports for shuffled campaigns: the device encrypts each randomized payload to the
collector's X25519 public key with libsodium's sealed boxes (PyNaCl), so the shuffler in between
sees only ciphertext and cannot read or alter a report (Bittau et al., "Prochlo", SOSP 2017:
encode, shuffle, analyze; docs/shuffler.md, docs/math/central-and-shuffle.md).

An envelope is ``{"key_id": "<16 hex>", "sealed": "<base64url of the sealed box>"}``; the key id
says which of the collector's key pairs opens it (old private keys are kept after a rotation).
Its plaintext is the compact JSON (UTF-8) of

    {"campaign": "<name>", "config_id": "<32 hex>", "nonce": "<32 hex>", "payload": <payload>}

padded with spaces to :func:`plaintext_size` of the campaign. The campaign and its config id
bind the report to the campaign it was made for (the collector refuses it anywhere else); the
nonce, 128 random bits drawn for this envelope, is what the collector stores it once by, so an
envelope replayed under other report ids, or after a restart, is a duplicate. The padding is to
the campaign's largest payload (``Mechanism.largest_wire_payload``, a function of the config
alone), so every envelope of one campaign has exactly :func:`envelope_size` bytes whatever the
value, the device's level or the noise: the shuffler learns nothing from a length (JSON ignores
the trailing spaces).

The unit sealed is one report: every envelope has its own ephemeral key, so the collector cannot
tell which envelopes came from the same device (docs/shuffler.md, "What is sealed").
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import json.scanner
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from client_sdk.mechanisms._wire import wire_length
from client_sdk.randomness import RandomSource, raw_words

if TYPE_CHECKING:
    from client_sdk.mechanisms import Mechanism

__all__ = [
    "ENVELOPE_FIELDS",
    "KEY_ID_PATTERN",
    "MAX_SEALED_CHARS",
    "NONCE_PATTERN",
    "PLAINTEXT_FIELDS",
    "SEAL_OVERHEAD",
    "SealedReport",
    "check_envelope",
    "check_envelopes",
    "envelope_size",
    "key_id_of",
    "open_plaintext",
    "parse_envelope",
    "plaintext_reader",
    "plaintext_size",
    "seal_payload",
    "seal_payloads",
]

ENVELOPE_FIELDS = frozenset({"key_id", "sealed"})
KEY_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
NONCE_PATTERN = re.compile(r"[0-9a-f]{32}")
PLAINTEXT_FIELDS = ("campaign", "config_id", "nonce", "payload")
"""The plaintext object's fields, in the order a device writes them."""
MAX_SEALED_CHARS = 64 * 1024
SEAL_OVERHEAD = 48
"""A sealed box is its plaintext plus 48 bytes: the ephemeral public key (32) and the MAC (16)."""

_SEALED_PATTERN = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_ENVELOPE_JSON_OVERHEAD = len('{"key_id":"","sealed":""}') + 16
_HEX = b"0123456789abcdef"
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id_of(public_key: bytes) -> str:
    """The key id of a 32-byte X25519 public key: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(public_key).hexdigest()[:16]


_BEFORE_PAYLOAD = '","payload":'


def _start(campaign: str, config_id: str) -> str:
    """The plaintext up to its nonce."""
    return f'{{"campaign":{_compact(campaign)},"config_id":{_compact(config_id)},"nonce":"'


def _header(campaign: str, config_id: str, nonce: str) -> str:
    """The plaintext up to its payload's text."""
    return _start(campaign, config_id) + nonce + _BEFORE_PAYLOAD


def plaintext_size(campaign: str, config_id: str, mechanism: Mechanism) -> int:
    """The bytes every plaintext of the campaign is padded to: its header, and the mechanism's
    largest payload (``Mechanism.largest_wire_payload``), and the closing brace."""
    header = _header(campaign, config_id, "0" * 32)
    return len(header.encode("utf-8")) + wire_length(mechanism.largest_wire_payload()) + 1


def envelope_size(campaign: Mapping[str, Any]) -> int:
    """The length in bytes of the compact JSON ``{"key_id": ..., "sealed": ...}`` of every
    envelope of ``campaign`` (a campaign document: its ``name``, ``config_id`` and
    ``mechanism`` config), a function of the document alone."""
    from client_sdk.mechanisms import mechanism_from_config

    mechanism = mechanism_from_config(campaign["mechanism"])
    size = plaintext_size(campaign["name"], campaign["config_id"], mechanism) + SEAL_OVERHEAD
    return -(-4 * size // 3) + _ENVELOPE_JSON_OVERHEAD


def _nonces(count: int, rng: RandomSource | None) -> list[str]:
    """``count`` nonces of 128 random bits in hex (``rng=None``: the OS CSPRNG)."""
    text = raw_words(rng, 2 * count).astype(">u8").tobytes().hex()
    return [text[32 * i : 32 * (i + 1)] for i in range(count)]


def seal_payloads(
    payloads: Sequence[Any],
    *,
    public_key: str,
    key_id: str,
    campaign: str,
    config_id: str,
    mechanism: Mechanism,
    rng: RandomSource | None = None,
) -> list[dict[str, str]]:
    """The envelopes of ``payloads`` (reports of ``mechanism`` for ``campaign`` under
    ``config_id``), each sealed on its own to ``public_key`` (base64url, as campaigns serve it)
    with a fresh nonce from ``rng`` (``None``: the OS CSPRNG).

    ``ValueError`` when the key does not match its id (a campaign document altered in transit),
    or when a payload is longer than the mechanism's bound (its length would tell it apart).
    """
    from nacl.bindings import crypto_box_seal

    raw = _b64decode(public_key)
    if len(raw) != 32 or key_id_of(raw) != key_id:
        raise ValueError(f"public_key does not match key_id {key_id[:40]!r}")
    size = plaintext_size(campaign, config_id, mechanism)
    envelopes = []
    for payload, nonce in zip(payloads, _nonces(len(payloads), rng), strict=True):
        data = (_header(campaign, config_id, nonce) + _compact(payload) + "}").encode("utf-8")
        if len(data) > size:
            raise ValueError(
                f"a {mechanism.name} payload of {len(data) - size} bytes more than the "
                "campaign's largest payload cannot be sealed (its size would single it out)"
            )
        sealed = crypto_box_seal(data + b" " * (size - len(data)), raw)
        envelopes.append({"key_id": key_id, "sealed": _b64encode(sealed)})
    return envelopes


def seal_payload(payload: Any, **kwargs: Any) -> dict[str, str]:
    """The envelope of one payload (:func:`seal_payloads`, same keywords)."""
    return seal_payloads([payload], **kwargs)[0]


class SealedReport(NamedTuple):
    """An opened plaintext's fields; ``text`` is the payload's JSON text when it was read off
    the plaintext as a device writes it (``None`` otherwise)."""

    campaign: str
    config_id: str
    nonce: str
    payload: Any
    text: str | None


def open_plaintext(plaintext: bytes) -> SealedReport:
    """The fields of an opened plaintext (module docstring); ``ValueError`` naming what is
    wrong. The payload's text comes with it for the usual plaintext (as a device writes it,
    read in a few C calls); any other JSON spelling of the same object goes through
    ``json.loads`` and has none."""
    try:
        text = plaintext.decode("utf-8").rstrip(" ")
    except UnicodeDecodeError:
        raise ValueError("the plaintext is not UTF-8") from None
    try:
        value, end = _scan_json(text, 0)
        if end != len(text):
            raise ValueError
    except (StopIteration, ValueError):
        try:
            value = json.loads(text)
        except ValueError:
            raise ValueError("the plaintext is not one JSON value") from None
    if not isinstance(value, dict) or value.keys() != set(PLAINTEXT_FIELDS):
        raise ValueError(
            "the plaintext must be an object with exactly " + ", ".join(PLAINTEXT_FIELDS)
        )
    campaign, config_id, nonce = value["campaign"], value["config_id"], value["nonce"]
    if not isinstance(campaign, str) or not isinstance(config_id, str):
        raise ValueError("the plaintext's campaign and config_id must be strings")
    if not isinstance(nonce, str) or NONCE_PATTERN.fullmatch(nonce) is None:
        raise ValueError("the plaintext's nonce must be 32 lowercase hex characters")
    header = _header(campaign, config_id, nonce)
    # A candidate only: the collector keeps it where the batch's one encoding confirms it
    # (collector.ingest._compact_all), and encodes the payload again elsewhere.
    payload_text = text[len(header) : -1] if text.startswith(header) else None
    return SealedReport(campaign, config_id, nonce, value["payload"], payload_text)


@functools.lru_cache(maxsize=256)
def plaintext_reader(campaign: str, config_id: str) -> Callable[[bytes], SealedReport]:
    """:func:`open_plaintext` for the plaintexts of one campaign and config: one written as a
    device writes it for them is read in a few C calls (its start compared, its nonce checked,
    its payload scanned alone, nothing else parsed); any other goes through
    :func:`open_plaintext`, which gives the same fields or the reason."""
    start = _start(campaign, config_id)
    if not start.isascii():  # (campaign names and config ids are ASCII; anything else: slowly)
        return open_plaintext
    at_nonce = len(start)
    at_payload = at_nonce + 32 + len(_BEFORE_PAYLOAD)

    def read(plaintext: bytes) -> SealedReport:
        try:
            text = plaintext.decode("utf-8").rstrip(" ")
            if (
                text.startswith(start)
                and text.startswith(_BEFORE_PAYLOAD, at_nonce + 32)
                and text.endswith("}")
                and not plaintext[at_nonce : at_nonce + 32].translate(None, _HEX)
            ):
                nonce = text[at_nonce : at_nonce + 32]  # (start is ASCII: bytes are characters)
                payload, end = _scan_json(text, at_payload)
                if end == len(text) - 1:
                    return SealedReport(campaign, config_id, nonce, payload, text[at_payload:-1])
        except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
            pass
        return open_plaintext(plaintext)

    return read


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
