"""HPKE (RFC 9180) base mode for DAP: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM.

DAP seals each input share to its Aggregator and each aggregate share to the Collector with
``SealBase(pk, info, aad, pt)`` (draft-ietf-ppm-dap-18, "Upload Request" and "Aggregate Share
Encryption"). The primitives come from pyhpke (over pyca/cryptography): ``cryptography``'s own
HPKE API (``hazmat.primitives.hpke.Suite``, version 50) takes ``info`` but no AAD, which DAP
binds every ciphertext to. Only this one suite, the one every DAP implementation must support,
is accepted; anything else is refused by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyhpke import AEADId, CipherSuite, KDFId, KEMId
from pyhpke.exceptions import PyHPKEError

__all__ = [
    "AEAD_AES_128_GCM",
    "KDF_HKDF_SHA256",
    "KEM_X25519_HKDF_SHA256",
    "HpkeError",
    "HpkeKeyPair",
    "check_suite",
    "generate_key_pair",
    "open_base",
    "seal_base",
]

# RFC 9180, Section 7: the codepoints of the suite.
KEM_X25519_HKDF_SHA256 = 0x0020
KDF_HKDF_SHA256 = 0x0001
AEAD_AES_128_GCM = 0x0001

X25519_KEY_SIZE = 32

_SUITE = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)


class HpkeError(ValueError):
    """A key, suite or ciphertext HPKE cannot use: the message names the field."""


@dataclass(frozen=True)
class HpkeKeyPair:
    """An X25519 key pair: ``public_key`` goes into an ``HpkeConfig``, ``private_key`` stays."""

    public_key: bytes
    private_key: bytes

    def __repr__(self) -> str:  # never print the secret
        return f"HpkeKeyPair(public_key={self.public_key.hex()})"


def check_suite(kem_id: int, kdf_id: int, aead_id: int) -> None:
    """Refuse any suite but X25519/HKDF-SHA256/AES-128-GCM, naming the field that differs."""
    for name, got, want in (
        ("kem_id", kem_id, KEM_X25519_HKDF_SHA256),
        ("kdf_id", kdf_id, KDF_HKDF_SHA256),
        ("aead_id", aead_id, AEAD_AES_128_GCM),
    ):
        if got != want:
            raise HpkeError(f"unsupported HPKE {name} {got:#06x}: only {want:#06x} is supported")


def _check_key(name: str, key: bytes) -> None:
    if len(key) != X25519_KEY_SIZE:
        raise HpkeError(f"{name} has {len(key)} bytes, an X25519 key has {X25519_KEY_SIZE}")


def generate_key_pair(ikm: bytes | None = None) -> HpkeKeyPair:
    """A key pair by ``DeriveKeyPair(ikm)`` (RFC 9180, Section 7.1.3); ikm from the OS CSPRNG."""
    if ikm is None:
        ikm = os.urandom(X25519_KEY_SIZE)
    pair = _SUITE.kem.derive_key_pair(ikm)
    return HpkeKeyPair(
        public_key=pair.public_key.to_public_bytes(),
        private_key=pair.private_key.to_private_bytes(),
    )


def seal_base(
    public_key: bytes,
    info: bytes,
    aad: bytes,
    plaintext: bytes,
    *,
    ephemeral_ikm: bytes | None = None,
) -> tuple[bytes, bytes]:
    """``SealBase`` (RFC 9180, Section 6.1): ``(enc, ciphertext)`` for the holder of ``public_key``.

    ``ephemeral_ikm`` fixes the ephemeral key (tests against the RFC's vectors only); by default
    the ephemeral key is drawn from the OS CSPRNG.
    """
    _check_key("public_key", public_key)
    try:
        pk = _SUITE.kem.deserialize_public_key(public_key)
        eks = None if ephemeral_ikm is None else _SUITE.kem.derive_key_pair(ephemeral_ikm)
        enc, sender = _SUITE.create_sender_context(pk, info, eks=eks)
        return enc, sender.seal(plaintext, aad)
    except (PyHPKEError, ValueError) as exc:
        raise HpkeError(f"cannot seal to public_key {public_key.hex()}: {exc}") from exc


def open_base(private_key: bytes, enc: bytes, info: bytes, aad: bytes, ciphertext: bytes) -> bytes:
    """``OpenBase`` (RFC 9180, Section 6.1); ``HpkeError`` if the key, info or AAD do not match."""
    _check_key("private_key", private_key)
    _check_key("enc", enc)
    try:
        sk = _SUITE.kem.deserialize_private_key(private_key)
        recipient = _SUITE.create_recipient_context(enc, sk, info)
        return recipient.open(ciphertext, aad)
    except (PyHPKEError, ValueError) as exc:
        raise HpkeError(
            f"cannot open the ciphertext (enc {enc.hex()}): wrong key, info or AAD, "
            f"or the ciphertext was altered ({type(exc).__name__})"
        ) from exc
