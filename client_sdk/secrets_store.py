"""The device secret, and everything memoized that is derived from it.

Memoization (RAPPOR's permanent randomized response, Erlingsson, Pihur, Korolova, CCS 2014;
Microsoft's memoized dBitFlip and 1BitMean, Ding, Kulkarni, Yekhanin, NeurIPS 2017) needs the
device to give the *same* permanent response every time it reports the same value. Storing those
responses would write a function of the raw value to disk; instead they are recomputed from
HMAC-SHA256 under a device-local secret, as Chrome did (docs/math/memoization.md). Only the
secret is stored: 32 bytes from the OS CSPRNG, in a file of mode 0600 under the client's
``state_dir``, created once and atomically, never sent anywhere. Mechanisms receive the
derivations as a keyed source (:class:`DeviceKeys`) and never import this module.

Derivations are domain-separated and versioned. Every memoized stream is keyed by
HMAC-SHA256(secret, message) with

    message = len-prefixed("ldp-telemetry/memo/v1") || len-prefixed(scope)
              || len-prefixed(label) || index (8 bytes, big-endian)

where ``scope`` names the campaign configuration (its config id), ``label`` the kind of memoized
draw (``"value"``, ``"dbitflip/pattern"``...) and ``index`` the value (or the bucket) it belongs
to; the words of the stream are :class:`~client_sdk.randomness.HmacWordSource` blocks under that
key. The ledger's memo key (which distinct values a device has already paid for, see
``client_sdk.budget``) uses the tag ``ldp-telemetry/ledger/v1`` instead, so the stored key reveals
nothing about the permanent response. Changing how a mechanism consumes its random words changes
its permanent responses; bump :data:`MEMO_VERSION` then, which also renews every memo key (so the
ledger charges the new responses again instead of treating them as already paid for).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any

from client_sdk.randomness import HmacWordSource
from client_sdk.state import fsync_directory

__all__ = [
    "DEVICE_SECRET_BYTES",
    "DEVICE_SECRET_FILE",
    "MEMO_VERSION",
    "DeviceKeys",
    "check_scope",
    "check_secret",
    "load_or_create_device_secret",
    "memo_key",
    "memo_source",
]

DEVICE_SECRET_BYTES = 32
DEVICE_SECRET_FILE = "device_secret"
MEMO_VERSION = 1
MIN_SECRET_BYTES = 16
MAX_SCOPE_BYTES = 1024

_MEMO_TAG = f"ldp-telemetry/memo/v{MEMO_VERSION}".encode()
_LEDGER_TAG = f"ldp-telemetry/ledger/v{MEMO_VERSION}".encode()


def load_or_create_device_secret(state_dir: str | os.PathLike[str]) -> bytes:
    """The device's secret: read ``state_dir/device_secret``, creating it on first use.

    Creation is atomic and never replaces an existing secret: 32 bytes from ``os.urandom`` go to
    a private temporary file (mode 0600, fsynced) that is then hard-linked to the final name, which
    fails if another process got there first (its secret is then used). A file of the wrong size
    is an error, not a reason to draw a new secret: every memoized response depends on the secret,
    and a new one would give a fresh permanent response for every value, spending the privacy
    budget again without the ledger knowing.
    """
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / DEVICE_SECRET_FILE
    if not path.exists():
        _create_secret_file(path)
    return _read_secret_file(path)


def _create_secret_file(path: Path) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), 0o600)  # whatever the umask was
            handle.write(os.urandom(DEVICE_SECRET_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process created it first
            os.link(temporary, path)
        fsync_directory(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _read_secret_file(path: Path) -> bytes:
    data = path.read_bytes()
    if len(data) != DEVICE_SECRET_BYTES:
        raise ValueError(
            f"device secret {path} must hold {DEVICE_SECRET_BYTES} bytes; got {len(data)}. "
            "It is not replaced automatically: memoized responses depend on it"
        )
    if hasattr(os, "chmod") and (path.stat().st_mode & 0o077):
        os.chmod(path, 0o600)  # tighten a secret that someone made readable to others
    return data


# ---- derivations ------------------------------------------------------------------------------


def check_secret(secret: Any) -> bytes:
    """A device secret: bytes, at least 16 long. ``None`` is refused with a clear error."""
    if secret is None:
        raise ValueError(
            "secret is required: a memoized mechanism derives its permanent responses from the "
            "device secret (client_sdk.secrets_store.load_or_create_device_secret); it never "
            "falls back to unmemoized reports"
        )
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"secret must be bytes of length >= {MIN_SECRET_BYTES}")
    return bytes(secret)


def check_scope(scope: Any) -> str:
    """The memoization scope: a non-empty string (the campaign's config id)."""
    if scope is None:
        raise ValueError(
            "scope is required: pass the campaign's config id, so that permanent responses are "
            "drawn once per (device, campaign configuration, value)"
        )
    if not isinstance(scope, str) or not scope or len(scope.encode("utf-8")) > MAX_SCOPE_BYTES:
        raise ValueError(f"scope must be a non-empty string of at most {MAX_SCOPE_BYTES} bytes")
    return scope


def _message(tag: bytes, scope: str, label: str, index: int) -> bytes:
    if not 0 <= index < (1 << 64):
        raise ValueError(f"memo index must be in [0, 2**64); got {index}")
    parts = (tag, scope.encode("utf-8"), label.encode("utf-8"))
    framed = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
    return framed + int(index).to_bytes(8, "big")


def memo_source(secret: bytes, scope: str, label: str, index: int) -> HmacWordSource:
    """The deterministic word stream of one memoized draw (module docstring)."""
    key = hmac.new(
        check_secret(secret), _message(_MEMO_TAG, check_scope(scope), label, index), hashlib.sha256
    ).digest()
    return HmacWordSource(key)


def memo_key(secret: bytes, scope: str, label: str, index: int) -> str:
    """The ledger's name for one memoized draw: 64 hex digits, not the value, not the response.

    Someone holding both the ledger and the secret file (that is, the device itself) can test
    candidate values against it, as they could recompute the permanent responses; nobody else can.
    """
    return hmac.new(
        check_secret(secret),
        _message(_LEDGER_TAG, check_scope(scope), label, index),
        hashlib.sha256,
    ).hexdigest()


@dataclasses.dataclass(frozen=True, repr=False)
class DeviceKeys:
    """The keyed source of one device and one campaign configuration (``scope``).

    What memoized mechanisms are handed (``client_sdk.mechanisms.memoization.KeyedSource``):
    ``source(label, index)`` is :func:`memo_source` and ``key(label, index)`` is :func:`memo_key`
    under this secret and scope, so the mechanisms never import this module. The repr shows the
    scope only, never the secret.
    """

    secret: bytes
    scope: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "secret", check_secret(self.secret))
        object.__setattr__(self, "scope", check_scope(self.scope))

    def __repr__(self) -> str:
        return f"DeviceKeys(scope={self.scope!r})"

    @property
    def reference_secret(self) -> bytes:
        """The device secret itself, for RAPPOR's reference-compatible derivation."""
        return self.secret

    def source(self, label: str, index: int) -> HmacWordSource:
        return memo_source(self.secret, self.scope, label, index)

    def key(self, label: str, index: int) -> str:
        return memo_key(self.secret, self.scope, label, index)
