"""The deployment's X25519 key pairs for sealed reports (PyNaCl sealed boxes; Bittau et al.,
"Prochlo", SOSP 2017): ``ldp-collector init-db`` makes the first, ``ldp-collector keys rotate``
a new active one; retired private keys stay, so envelopes sealed to them still open.

The private keys live in the collector's database file: protect it as the reports themselves.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence

from nacl.bindings import crypto_box_seal_open
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey

from client_sdk.sealing import MAX_SEALED_CHARS, key_id_of, parse_envelope
from collector.storage import Storage

__all__ = ["EnvelopeOpener", "active_key", "create_key", "ensure_key"]

_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_URLSAFE_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def create_key(storage: Storage) -> str:
    """A new key pair, now the active one; its key id."""
    private = PrivateKey.generate()
    public = bytes(private.public_key)
    key_id = key_id_of(public)
    storage.add_key(key_id, _b64(public), _b64(bytes(private)))
    return key_id


def ensure_key(storage: Storage) -> str:
    """The active key id, after creating the first key pair if there is none."""
    current = active_key(storage)
    return current[0] if current is not None else create_key(storage)


def active_key(storage: Storage) -> tuple[str, str] | None:
    """``(key_id, public key base64url)`` devices seal to, or ``None`` without keys."""
    for key_id, public, _created, active in reversed(storage.list_keys()):
        if active:
            return key_id, public
    return None


class EnvelopeOpener:
    """Opens envelopes with any of the deployment's private keys."""

    def __init__(self, private_keys: Mapping[str, str]) -> None:
        self._pairs: dict[str, tuple[bytes, bytes]] = {}
        for key_id, private in private_keys.items():
            secret = PrivateKey(_unb64(private))
            self._pairs[key_id] = (bytes(secret.public_key), bytes(secret))

    def open(self, envelope: object) -> bytes:
        """The plaintext; ``ValueError`` for a malformed, unknown-key or tampered envelope."""
        key_id, sealed = parse_envelope(envelope)
        pair = self._pairs.get(key_id)
        if pair is None:
            raise ValueError(f"no key pair with key_id {key_id}")
        try:
            return bytes(crypto_box_seal_open(sealed, pair[0], pair[1]))
        except CryptoError:
            raise ValueError(
                "the envelope does not open (tampered or sealed to another key)"
            ) from None

    def open_all(self, envelopes: Sequence[object]) -> tuple[list[bytes | None], dict[int, str]]:
        """The plaintext of each envelope (``None`` where it does not open) and the reasons by
        position, as :meth:`open` gives them.

        One tight pass for a shuffler's batch: an envelope that is not plainly well formed and
        openable is handed to :meth:`open`, whose check is the definition; so this pass only
        saves the work of the checks that pass, never accepts what :meth:`open` refuses.
        """
        pairs, table = self._pairs, _URLSAFE_TO_STANDARD
        plaintexts: list[bytes | None] = []
        reasons: dict[int, str] = {}
        for position, envelope in enumerate(envelopes):
            try:
                if type(envelope) is not dict or len(envelope) != 2:
                    raise ValueError
                sealed, pair = envelope["sealed"], pairs[envelope["key_id"]]
                if type(sealed) is not str or len(sealed) > MAX_SEALED_CHARS or "=" in sealed:
                    raise ValueError  # padded text: left to open()'s exact check
                text = sealed.encode("ascii")
                if text.translate(None, _BASE64URL) or len(text) % 4 == 1:
                    raise ValueError  # not base64url
                raw = binascii.a2b_base64(text.translate(table) + b"=" * (-len(text) % 4))
                plaintexts.append(bytes(crypto_box_seal_open(raw, pair[0], pair[1])))
            except (ValueError, KeyError, TypeError, CryptoError):
                try:
                    plaintexts.append(self.open(envelope))  # the exact check and its reason
                except ValueError as error:
                    plaintexts.append(None)
                    reasons[position] = str(error)
        return plaintexts, reasons
