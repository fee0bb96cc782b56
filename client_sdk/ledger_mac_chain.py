"""The privacy ledger's MAC chain under the device secret, and its head kept beside it.

Why. The ledger (``client_sdk.budget``) is what stops a device from sending more than its
budget. If deleting, truncating or emptying it, deleting some of its rows, or losing its WAL file
gave the device a fresh budget, the budget would be a suggestion. So a client's ledger is
*sealed*:

* every spend row carries ``mac_i = HMAC-SHA256(K, "row" || mac_{i-1} || row_i)`` where
  ``K = HMAC-SHA256(device secret, "ldp-telemetry/ledger-seal/v1")`` and ``row_i`` is the row's
  canonical JSON (id, campaign, time, epsilon, charged, memoized, payload, memo key);
* the ledger's ``meta`` table holds the chain's head (number of rows, last MAC), the latest
  clock reading and any lock-out, MACed together;
* the same head is written after every commit to a second file, ``privacy_ledger.head``
  (atomically: a temporary file, fsync, rename), so losing committed transactions (a lost WAL,
  a restored older copy of the database, deleted trailing rows) leaves the database *behind* the
  head file, which verification notices. A crash between the commit and the head write leaves
  the database *ahead*, which is consistent and accepted.

A device whose secret exists but whose ledger is missing, empty or fails verification is locked
out: the damaged files are moved aside, a new sealed ledger records the lock-out, and every
budgeted report is refused until the current period of its campaign ends (``BudgetLedger``
says why). A truly new device (no secret, no ledger, no head) starts clean.

What it does not stop: someone who can read the device secret (the device's owner, with the
state directory in hand) can recompute every MAC. The seal turns accidental loss and naive
tampering into a refusal instead of a fresh budget; it is not protection against the device
itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from client_sdk.state import fsync_directory

__all__ = ["HEAD_FILE", "LedgerHead", "LedgerMacChain"]

HEAD_FILE = "privacy_ledger.head"
_KEY_TAG = b"ldp-telemetry/ledger-seal/v1"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


class LedgerHead(dict[str, Any]):
    """``{"entries", "chain", "last_seen", "lockout_since", "lockout_reason"}``."""


class LedgerMacChain:
    """MACs of one device's ledger (module docstring); ``secret`` is the device secret."""

    def __init__(self, secret: bytes) -> None:
        self._key = hmac.new(bytes(secret), _KEY_TAG, hashlib.sha256).digest()

    def __repr__(self) -> str:
        return "LedgerMacChain(...)"

    @property
    def genesis(self) -> str:
        """The chain value before the first row."""
        return self._mac(b"genesis")

    def row(self, previous: str, row: Sequence[Any]) -> str:
        """The MAC of one spend row after ``previous``."""
        return self._mac(b"row" + bytes.fromhex(previous) + _canonical(list(row)))

    def head_tag(self, head: LedgerHead) -> str:
        """The MAC of a head (what ``meta`` and the head file store beside it)."""
        return self._mac(b"head" + _canonical(dict(head)))

    def verify_head(self, head: LedgerHead, tag: Any) -> bool:
        return isinstance(tag, str) and hmac.compare_digest(self.head_tag(head), tag)

    def write_head_file(self, directory: Path, head: LedgerHead) -> None:
        """Replace ``directory/privacy_ledger.head`` atomically and durably."""
        path = directory / HEAD_FILE
        temporary = path.with_name(f".{HEAD_FILE}.{os.getpid()}.tmp")
        document = {"head": dict(head), "tag": self.head_tag(head)}
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(temporary, flags, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(_canonical(document))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        fsync_directory(directory)

    def read_head_file(self, directory: Path) -> LedgerHead | None:
        """The head file's head, or ``None`` when it is missing; ``ValueError`` when altered."""
        path = directory / HEAD_FILE
        try:
            document = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise ValueError(f"the ledger's head file is unreadable ({error})") from error
        if not isinstance(document, dict) or not isinstance(document.get("head"), dict):
            raise ValueError("the ledger's head file is not a head")
        head = LedgerHead(document["head"])
        if not self.verify_head(head, document.get("tag")):
            raise ValueError("the ledger's head file fails verification")
        return head

    def _mac(self, message: bytes) -> str:
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()
