"""Device credentials for the shuffler: who may upload, metered per install, never what.

The shuffle's central guarantee counts the honest reports in a batch. Without credentials anyone
can upload (the collector's key is public, so anyone can seal), and ``min_batch - 1`` made-up
reports isolate the next device's report: the n-1 attack on mixes (Serjantov, Dingledine,
Syverson, "From a trickle to a flood: active attacks on several mix types", Information Hiding
2002), the shuffle model's Sybil limit. The standard mitigation, built here: the app operator
issues a credential per install; the shuffler verifies it on each upload (it learns which
install sends, the envelope stays sealed), and admits at most ``quota`` waiting reports per
credential and campaign, so a batch holds at most ``quota`` reports of any one credential
(``shuffler.storage``, ``holders``).

The verifier is pluggable (:class:`CredentialVerifier`: a token in, a stable credential id out).
The default, :class:`SignedTokenVerifier`, checks per-install tokens signed by the operator with
Ed25519 (PyNaCl, libsodium's ``crypto_sign``; nothing hand-rolled): a token is ``ldp1.`` and the
base64url of the signed message ``TOKEN_CONTEXT || install id (16 random bytes)``.

    ldp-shuffler credentials keygen --key operator.key     # writes the key 0600, prints the
                                                           # verify key (also operator.key.pub)
    ldp-shuffler credentials issue --key operator.key --count 3   # one token a line
    ldp-shuffler serve ... --credentials-key operator.key.pub     # uploads need a token
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path
from typing import Protocol, runtime_checkable

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

__all__ = [
    "DEFAULT_QUOTA",
    "CredentialVerifier",
    "InvalidCredential",
    "SignedTokenVerifier",
    "issue_token",
    "load_signing_key",
    "load_verifier",
    "write_signing_key",
]

DEFAULT_QUOTA = 1
"""Reports one credential may have waiting per campaign: one, so a batch holds at most one
report of each install and the shuffled guarantee's one-report-per-device assumption holds."""

TOKEN_PREFIX = "ldp1."
TOKEN_CONTEXT = b"ldp-telemetry shuffler credential v1\x00"
"""Signed before the install id, so a signature the operator's key makes for anything else is
never a credential."""
INSTALL_ID_BYTES = 16
MAX_TOKEN_LENGTH = 256


class InvalidCredential(ValueError):
    """A missing, malformed or badly signed credential (the message never echoes the token)."""


@runtime_checkable
class CredentialVerifier(Protocol):
    """Checks a device's credential: the bearer token of its upload in, the credential's stable
    id out (the same for every upload of one install); :class:`InvalidCredential` otherwise."""

    def verify(self, token: str) -> bytes: ...


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SignedTokenVerifier:
    """Per-install tokens signed by the operator's Ed25519 key (module docstring)."""

    def __init__(self, verify_key: VerifyKey) -> None:
        self.verify_key = verify_key

    def verify(self, token: str) -> bytes:
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            raise InvalidCredential(f"a credential is a token starting with {TOKEN_PREFIX!r}")
        if len(token) > MAX_TOKEN_LENGTH:
            raise InvalidCredential(f"a credential token has at most {MAX_TOKEN_LENGTH} characters")
        try:
            signed = _b64decode(token[len(TOKEN_PREFIX) :])
            message = self.verify_key.verify(signed)
        except (ValueError, binascii.Error, BadSignatureError):
            raise InvalidCredential("the credential token is not signed by this operator") from None
        if len(message) != len(TOKEN_CONTEXT) + INSTALL_ID_BYTES or not message.startswith(
            TOKEN_CONTEXT
        ):
            raise InvalidCredential("the credential token is not a per-install credential")
        return message[len(TOKEN_CONTEXT) :]


def issue_token(signing_key: SigningKey, install_id: bytes | None = None) -> str:
    """A credential for one install (a random 16-byte install id unless given)."""
    install = secrets.token_bytes(INSTALL_ID_BYTES) if install_id is None else install_id
    if len(install) != INSTALL_ID_BYTES:
        raise ValueError(f"install_id must be {INSTALL_ID_BYTES} bytes; got {len(install)}")
    return TOKEN_PREFIX + _b64encode(bytes(signing_key.sign(TOKEN_CONTEXT + install)))


def write_signing_key(path: str | os.PathLike[str]) -> VerifyKey:
    """Make a new signing key at ``path`` (0600, never overwritten) and its verify key at
    ``path.pub``; the verify key."""
    key = SigningKey.generate()
    target = Path(path)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(_b64encode(bytes(key)) + "\n")
    Path(f"{target}.pub").write_text(_b64encode(bytes(key.verify_key)) + "\n")
    return key.verify_key


def _read_key(path: str | os.PathLike[str], what: str) -> bytes:
    text = Path(path).read_text().strip()
    try:
        raw = _b64decode(text)
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != 32:
        raise ValueError(f"{path} does not hold an Ed25519 {what} (32 bytes, base64url)")
    return raw


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """The operator's signing key written by :func:`write_signing_key`."""
    return SigningKey(_read_key(path, "signing key"))


def load_verifier(path: str | os.PathLike[str]) -> SignedTokenVerifier:
    """The verifier of tokens signed by the key whose verify key is at ``path``."""
    return SignedTokenVerifier(VerifyKey(_read_key(path, "verify key")))


def verify_key_text(verify_key: VerifyKey) -> str:
    """The verify key as written in ``.pub`` files."""
    return _b64encode(bytes(verify_key))
