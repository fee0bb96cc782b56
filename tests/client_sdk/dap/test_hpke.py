"""HPKE base mode against RFC 9180's test vectors for DAP's suite, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client_sdk.dap.hpke import (
    HpkeError,
    check_suite,
    generate_key_pair,
    open_base,
    seal_base,
)

# Vendored from RFC 9180, Appendix A.1.1; the file names its source and commit.
VECTORS = json.loads((Path(__file__).parent / "hpke_rfc9180_a1_base.json").read_text())


def h(name: str) -> bytes:
    return bytes.fromhex(VECTORS[name])


def test_vector_suite_is_the_one_supported() -> None:
    assert VECTORS["mode"] == 0
    check_suite(VECTORS["kem_id"], VECTORS["kdf_id"], VECTORS["aead_id"])


def test_derive_key_pair_matches_the_vector() -> None:
    receiver = generate_key_pair(h("ikmR"))
    assert receiver.public_key == h("pkRm")
    assert receiver.private_key == h("skRm")
    sender = generate_key_pair(h("ikmE"))
    assert (sender.public_key, sender.private_key) == (h("pkEm"), h("skEm"))


def test_seal_base_matches_the_vector() -> None:
    enc_vec = VECTORS["encryptions"][0]
    enc, ct = seal_base(
        h("pkRm"),
        h("info"),
        bytes.fromhex(enc_vec["aad"]),
        bytes.fromhex(enc_vec["pt"]),
        ephemeral_ikm=h("ikmE"),
    )
    assert enc == h("enc")
    assert ct.hex() == enc_vec["ct"]


def test_open_base_matches_the_vector() -> None:
    enc_vec = VECTORS["encryptions"][0]
    pt = open_base(
        h("skRm"), h("enc"), h("info"), bytes.fromhex(enc_vec["aad"]), bytes.fromhex(enc_vec["ct"])
    )
    assert pt.hex() == enc_vec["pt"]


def test_round_trip_with_fresh_keys_and_fresh_ephemeral() -> None:
    pair = generate_key_pair()
    enc1, ct1 = seal_base(pair.public_key, b"info", b"aad", b"share")
    enc2, ct2 = seal_base(pair.public_key, b"info", b"aad", b"share")
    assert enc1 != enc2 and ct1 != ct2  # a fresh ephemeral key each time
    assert open_base(pair.private_key, enc1, b"info", b"aad", ct1) == b"share"
    assert "private" not in repr(pair) and pair.private_key.hex() not in repr(pair)


@pytest.mark.parametrize("field", ["info", "aad", "ct", "key"])
def test_open_refuses_any_mismatch(field: str) -> None:
    pair = generate_key_pair(bytes(32))
    enc, ct = seal_base(pair.public_key, b"info", b"aad", b"share")
    info, aad, key = b"info", b"aad", pair.private_key
    if field == "info":
        info = b"other info"
    elif field == "aad":
        aad = b"other aad"
    elif field == "ct":
        ct = bytes([ct[0] ^ 1]) + ct[1:]
    else:
        key = generate_key_pair(bytes([1]) * 32).private_key
    with pytest.raises(HpkeError, match="cannot open"):
        open_base(key, enc, info, aad, ct)


def test_refusals_name_the_field() -> None:
    with pytest.raises(HpkeError, match="kem_id 0x0010"):
        check_suite(0x0010, 1, 1)
    with pytest.raises(HpkeError, match="aead_id 0x0003"):
        check_suite(0x0020, 1, 3)
    with pytest.raises(HpkeError, match="public_key has 31 bytes"):
        seal_base(bytes(31), b"", b"", b"x")
    with pytest.raises(HpkeError, match="enc has 0 bytes"):
        open_base(bytes(32), b"", b"", b"", b"x")
