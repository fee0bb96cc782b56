"""The deployment's key pairs: init-db makes one, rotation makes a new active one and keeps the
old private key, so reports sealed before the rotation still open; a tampered or foreign
envelope does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from client_sdk.sealing import PAD_BYTES, seal_payload
from collector.cli import main
from collector.keys import EnvelopeOpener, active_key
from collector.storage import Storage


def test_rotation_keeps_old_envelopes_openable(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    assert main(["init-db", "--db", db]) == 0
    with Storage(db) as storage:
        first = active_key(storage)
    assert first is not None
    before = seal_payload({"v": 1}, public_key=first[1], key_id=first[0])
    assert main(["keys", "rotate", "--db", db]) == 0
    with Storage(db) as storage:
        second = active_key(storage)
        opener = EnvelopeOpener(storage.private_keys())
        assert [active for *_, active in storage.list_keys()].count(True) == 1
    assert second is not None and second[0] != first[0]
    after = seal_payload([2], public_key=second[1], key_id=second[0])
    # Plaintexts are padded with spaces to a multiple of PAD_BYTES: equal sizes, same JSON.
    assert opener.open(before) == b'{"v":1}'.ljust(PAD_BYTES)
    assert opener.open(after) == b"[2]".ljust(PAD_BYTES)
    assert len(before["sealed"]) == len(after["sealed"])
    tampered = {
        **after,
        "sealed": ("B" if after["sealed"][5] != "B" else "C").join(
            [after["sealed"][:5], after["sealed"][6:]]
        ),
    }
    with pytest.raises(ValueError, match="does not open"):
        opener.open(tampered)
    with pytest.raises(ValueError, match="no key pair"):
        opener.open({**after, "key_id": "0" * 16})
    with pytest.raises(ValueError, match="does not match key_id"):
        seal_payload(1, public_key=second[1], key_id=first[0])
