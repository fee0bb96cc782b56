"""Sealed-envelope vectors (docs/protocol.md, "The sealed envelope"): ``conformance/sealed.json``.

A device seals each payload with a fresh ephemeral X25519 key (libsodium's sealed box); the
vectors fix that key, so a port's envelope can be compared byte for byte. A sealed box is
``epk || crypto_box(plaintext, nonce = BLAKE2b-192(epk || pk), pk, esk)`` (libsodium's
``crypto_box_seal``); each case also names the words key its report nonce comes from
(two words of ``HmacWordSource``, as ``client_sdk.sealing`` draws it).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from client_sdk import sealing
from client_sdk.campaign import PROTOCOL_VERSION
from client_sdk.conformance.vectors import report_of
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.randomness import HmacWordSource

__all__ = ["SEALED_FILE", "build_sealed", "check_sealed", "seal_with_ephemeral"]

SEALED_FILE = Path(__file__).resolve().parents[2] / "conformance" / "sealed.json"

_CAMPAIGNS: list[tuple[str, dict[str, Any], Any]] = [
    ("app-theme", {"mechanism": "grr", "epsilon": 1.0, "k": 12}, 3),
    ("search-terms", {"mechanism": "cms", "epsilon": 4.0, "m": 64, "hashes": 4}, "home"),
    ("screen.sizes", {"mechanism": "oue", "epsilon": 1.0, "k": 12}, 11),
]
"""Campaign name, mechanism config and the value whose report each case seals."""


def _key(what: str) -> bytes:
    return hashlib.sha256(f"ldp-telemetry/conformance/sealed/{what}".encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def seal_with_ephemeral(plaintext: bytes, public_key: bytes, ephemeral_secret: bytes) -> bytes:
    """libsodium's sealed box of ``plaintext`` to ``public_key`` with a given ephemeral key."""
    from nacl.bindings import crypto_box, crypto_scalarmult_base

    ephemeral_public = crypto_scalarmult_base(ephemeral_secret)
    nonce = hashlib.blake2b(ephemeral_public + public_key, digest_size=24).digest()
    return ephemeral_public + crypto_box(plaintext, nonce, public_key, ephemeral_secret)


def build_sealed() -> dict[str, Any]:
    """The content of ``conformance/sealed.json``."""
    from nacl.bindings import crypto_scalarmult_base

    recipient_secret = _key("recipient")
    public_key = crypto_scalarmult_base(recipient_secret)
    key_id = sealing.key_id_of(public_key)
    cases = []
    for index, (name, config, payload_value) in enumerate(_CAMPAIGNS):
        mechanism = mechanism_from_config(config)
        canonical = mechanism.to_config()
        config_id = hashlib.sha256(name.encode()).hexdigest()[:32]  # any 32 hex digits
        payload = report_of(canonical, payload_value, _key(f"words/{index}"))
        nonce_key = _key(f"nonce/{index}")
        ephemeral = _key(f"ephemeral/{index}")
        (nonce,) = sealing._nonces(1, HmacWordSource(nonce_key))  # the device's own draw
        size = sealing.plaintext_size(name, config_id, mechanism)
        text = sealing._header(name, config_id, nonce) + sealing._compact(payload) + "}"
        plaintext = text.encode("utf-8")
        plaintext += b" " * (size - len(plaintext))
        sealed = seal_with_ephemeral(plaintext, public_key, ephemeral)
        envelope = {"key_id": key_id, "sealed": _b64(sealed)}
        assert len(json.dumps(envelope, separators=(",", ":"))) <= sealing.envelope_size(
            {"name": name, "config_id": config_id, "mechanism": canonical}
        )
        cases.append(
            {
                "campaign": name,
                "config_id": config_id,
                "config": canonical,
                "payload": payload,
                "nonce_words_key": nonce_key.hex(),
                "ephemeral_secret_key": ephemeral.hex(),
                "plaintext": plaintext.decode("utf-8"),
                "envelope": envelope,
            }
        )
    return {
        "protocol": PROTOCOL_VERSION,
        "recipient_secret_key": recipient_secret.hex(),
        "public_key": _b64(public_key),
        "key_id": key_id,
        "cases": cases,
    }


def check_sealed(path: Path = SEALED_FILE) -> list[str]:
    """The committed sealed vectors against this SDK: each envelope opens with the recipient's
    key to its plaintext, and rebuilding gives the same; the mismatches, named by case."""
    from nacl.bindings import crypto_box_seal_open, crypto_scalarmult_base
    from nacl.exceptions import CryptoError

    content = json.loads(path.read_text(encoding="utf-8"))
    expected = build_sealed()
    problems = []
    secret = bytes.fromhex(content["recipient_secret_key"])
    public = crypto_scalarmult_base(secret)
    for index, case in enumerate(content["cases"]):
        try:
            raw = base64.urlsafe_b64decode(case["envelope"]["sealed"] + "==")
            opened = crypto_box_seal_open(raw, public, secret).decode("utf-8")
        except (CryptoError, ValueError, UnicodeDecodeError):
            opened = None
        if opened != case["plaintext"]:
            problems.append(f"{path.name} case {index}: the envelope does not open to plaintext")
        if index >= len(expected["cases"]) or expected["cases"][index] != case:
            problems.append(f"{path.name} case {index}: differs from what this SDK seals")
    if len(expected["cases"]) != len(content["cases"]):
        problems.append(
            f"{path.name}: {len(content['cases'])} cases, expected {len(expected['cases'])}"
        )
    return problems
