"""The deployment's key pairs: init-db makes one, rotation makes a new active one and keeps the
old private key, so reports sealed before the rotation still open; a tampered or foreign
envelope does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from client_sdk.mechanisms import mechanism_from_config
from client_sdk.sealing import open_plaintext, plaintext_size, seal_payload
from collector.cli import main
from collector.keys import EnvelopeOpener, active_key
from collector.storage import Storage

GRR = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 12})
BINDING = {"campaign": "theme", "config_id": "c0" * 16, "mechanism": GRR}


def test_rotation_keeps_old_envelopes_openable(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    assert main(["init-db", "--db", db]) == 0
    with Storage(db) as storage:
        first = active_key(storage)
    assert first is not None
    before = seal_payload(1, public_key=first[1], key_id=first[0], **BINDING)
    assert main(["keys", "rotate", "--db", db]) == 0
    with Storage(db) as storage:
        second = active_key(storage)
        opener = EnvelopeOpener(storage.private_keys())
        assert [active for *_, active in storage.list_keys()].count(True) == 1
    assert second is not None and second[0] != first[0]
    after = seal_payload(11, public_key=second[1], key_id=second[0], **BINDING)
    # Plaintexts are padded with spaces to the campaign's size: equal sizes, the same JSON.
    size = plaintext_size("theme", "c0" * 16, GRR)
    for envelope, payload in ((before, 1), (after, 11)):
        plaintext = opener.open(envelope)
        assert len(plaintext) == size and plaintext.endswith(b"} " if payload == 1 else b"}")
        opened = open_plaintext(plaintext)
        assert (opened.campaign, opened.config_id, opened.payload) == ("theme", "c0" * 16, payload)
        assert opened.text == str(payload)
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
        seal_payload(1, public_key=second[1], key_id=first[0], **BINDING)


def _hostile(good: dict[str, str]) -> list[object]:
    sealed = good["sealed"]
    padded = sealed + "=" * (-len(sealed) % 4)
    return [
        good,
        {**good, "sealed": padded},  # valid base64url with its padding
        {**good, "sealed": sealed[:-1] + ("A" if sealed[-1] != "A" else "B")},  # tampered
        {**good, "key_id": "0" * 16},
        {**good, "key_id": ["a"]},
        {**good, "sealed": sealed[:10] + "+" + sealed[11:]},
        {**good, "sealed": sealed[:10] + "\n" + sealed[10:]},
        {**good, "sealed": sealed[:10] + "é" + sealed[11:]},
        {**good, "sealed": ""},
        {**good, "sealed": sealed + "A"},  # one more than a multiple of 4 (or a bad tail)
        {**good, "sealed": sealed[:5] + "=" + sealed[6:]},
        {**good, "sealed": 5},
        {**good, "extra": 1},
        {"sealed": sealed},
        [good],
        None,
    ]


def test_opening_a_batch_agrees_with_opening_each_envelope(tmp_path: Path) -> None:
    """``open_all`` (the batch route's pass) gives exactly :meth:`open`'s plaintexts and
    reasons, on good, padded, tampered and malformed envelopes alike; and the shuffler's
    all-at-once check accepts a list only when each envelope passes alone, with the same
    result."""
    from client_sdk.sealing import check_envelope, check_envelopes

    db = str(tmp_path / "c.db")
    assert main(["init-db", "--db", db]) == 0
    with Storage(db) as storage:
        key = active_key(storage)
        opener = EnvelopeOpener(storage.private_keys())
    assert key is not None
    good = seal_payload(1, public_key=key[1], key_id=key[0], **BINDING)
    envelopes = _hostile(good)
    plaintexts, reasons = opener.open_all(envelopes)
    for position, envelope in enumerate(envelopes):
        try:
            expected: object = opener.open(envelope)
        except ValueError as error:
            expected = str(error)
        got = plaintexts[position] if plaintexts[position] is not None else reasons[position]
        assert got == expected, (position, envelope)
    assert plaintexts[0] == plaintexts[1] and open_plaintext(plaintexts[0] or b"").payload == 1
    many = [seal_payload(i, public_key=key[1], key_id=key[0], **BINDING) for i in range(5)]
    assert check_envelopes(many) == [check_envelope(e) for e in many]
    for envelope in envelopes[2:]:
        try:
            check_envelope(envelope)
            alone_ok = True
        except ValueError:
            alone_ok = False
        result = check_envelopes([*many, envelope])
        if not alone_ok:
            assert result is None, envelope
        elif result is not None:
            assert result == [check_envelope(e) for e in [*many, envelope]]


@pytest.mark.parametrize(
    ("texts", "values"),
    [
        (["1", "[1,2]", '{"a":1}', '"é"'], [1, [1, 2], {"a": 1}, "é"]),  # compact: kept
        (["1", "[1, 2]"], [1, [1, 2]]),  # a space
        (["1e2", "1"], [100.0, 1]),  # a float written short: stored as 100.0
        (['"\\u0041"', "2"], ["A", 2]),  # an escape the compact form does not need
        (["[1,2", "3]"], [[1, 2], 3]),  # texts that are not one value each
    ],
)
def test_a_batchs_payloads_are_stored_in_their_compact_form(
    texts: list[str], values: list[object]
) -> None:
    """The batch route hands the opened plaintexts' texts to ``validate_batch``, which keeps
    them only when they are the payloads' compact encodings."""
    from client_sdk.mechanisms import mechanism_from_config
    from collector.ingest import _compact, _compact_all, validate_batch

    assert _compact_all(values, texts) == [_compact(v) for v in values]
    mechanism = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 4})
    reports = [{"id": f"{i:032x}", "payload": v} for i, v in enumerate(values)]
    assert validate_batch(mechanism, reports, texts=texts) == validate_batch(mechanism, reports)
