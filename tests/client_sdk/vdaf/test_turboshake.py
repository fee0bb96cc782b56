"""The vectorized TurboSHAKE128 (client_sdk.vdaf.turboshake) against PyCryptodome's on random
messages of many lengths and domain bytes, and the batched XOF against the draft's
XofTurboShake128 vector and the one-at-a-time XOF."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from Cryptodome.Hash import TurboSHAKE128

from client_sdk.vdaf import Field128, XofTurboShake128
from client_sdk.vdaf.turboshake import RATE, keccak_p12, turboshake128_batch

VECTORS = Path(__file__).parent / "vectors"


def _reference(message: bytes, domain: int, length: int) -> bytes:
    return bytes(TurboSHAKE128.new(domain=domain, data=message).read(length))


# Message lengths around the rate's boundaries (the domain byte and the final 0x80 share a
# byte when the message is one short of a block) and several blocks long.
LENGTHS = [0, 1, 7, 8, 9, RATE - 2, RATE - 1, RATE, RATE + 1, 2 * RATE - 1, 2 * RATE, 700]


@pytest.mark.parametrize("m", LENGTHS)
def test_batch_matches_pycryptodome_on_random_messages(m: int) -> None:
    rng = random.Random(20261203 + m)
    for domain in (0x01, 0x06, 0x0B, 0x1F, 0x7F):
        rows = 5
        raw = rng.randbytes(rows * m)
        length = rng.choice([1, 8, 32, RATE - 1, RATE, RATE + 1, 3 * RATE + 5])
        got = turboshake128_batch(
            np.frombuffer(raw, dtype=np.uint8).reshape(rows, m), domain, length
        )
        want = b"".join(_reference(raw[i * m : (i + 1) * m], domain, length) for i in range(rows))
        assert got == want, (m, domain, length)


def test_rfc9861_empty_message_vector() -> None:
    """RFC 9861 section 5: TurboSHAKE128(M = `00`^0, D = `1F`, 32), as PyCryptodome gives it
    too (the fixed expectation guards against both sides sharing a mistake)."""
    out = turboshake128_batch(np.zeros((1, 0), dtype=np.uint8), 0x1F, 32)
    assert out.hex() == "1e415f1c5983aff2169217277d17bb538cd945a397ddec541f1ce41af2c1b74c"


def test_permutation_of_many_states_is_column_by_column() -> None:
    """Chunked and whole-batch permutations agree, and each column depends only on itself."""
    gen = np.random.default_rng(7)
    state = gen.integers(0, 2**64 - 1, size=(25, 5000), dtype=np.uint64, endpoint=True)
    whole = keccak_p12(state)
    assert np.array_equal(whole[:, 4321:4322], keccak_p12(state[:, 4321:4322]))
    changed = state.copy()
    changed[3, 10] ^= np.uint64(1)
    after = keccak_p12(changed)
    assert np.array_equal(np.delete(after, 10, axis=1), np.delete(whole, 10, axis=1))
    assert not np.array_equal(after[:, 10], whole[:, 10])


def test_domain_byte_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="domain byte: 0x80"):
        turboshake128_batch(np.zeros((1, 3), dtype=np.uint8), 0x80, 8)


def test_next_batch_matches_the_draft_vector_and_the_scalar_xof() -> None:
    v = json.loads((VECTORS / "XofTurboShake128.json").read_text())
    seed, dst, binder = (bytes.fromhex(v[k]) for k in ("seed", "dst", "binder"))
    rows = 40  # large enough for the vectorized path
    streams = XofTurboShake128.next_batch([seed] * rows, dst, [binder] * rows, 32)
    assert streams == [bytes.fromhex(v["derived_seed"])] * rows
    rng = random.Random(5)
    seeds = [rng.randbytes(32) for _ in range(rows)]
    binders = [rng.randbytes(17) for _ in range(rows)]
    for length in (8, 48, 200):  # one or two permutations: vectorized; then PyCryptodome
        got = XofTurboShake128.next_batch(seeds, dst, binders, length)
        assert got == [
            XofTurboShake128(s, dst, b).next(length) for s, b in zip(seeds, binders, strict=True)
        ]
    vec = XofTurboShake128.expand_into_vec(Field128, seed, dst, binder, v["length"])
    assert Field128.encode_vec(vec).hex() == v["expanded_vec_field128"]


def test_next_batches_mixes_vectorized_and_scalar_requests_exactly() -> None:
    """Requests that share permutation passes (one or two blocks squeezed, different binder
    lengths), a batch too small to vectorize and a stream too long to: each as the scalar XOF."""
    rng = random.Random(9)
    dst = b"\x12\x00\x00\x00\x00\x01\x00\x05ctx"
    seeds = [rng.randbytes(32) for _ in range(30)]
    requests = [
        (seeds, dst, [b"\x01"] * 30, 8),
        (seeds, dst, [b"\x01\x01"] * 30, 256),
        (seeds, dst, [b"\x01" + rng.randbytes(16) for _ in range(30)], 16),
        (seeds[:3], dst, [b"\x07"] * 3, 8),
        (seeds, dst, [b"\x02"] * 30, 1000),
        (seeds, dst, [b"\x03"] * 30, 0),
    ]
    got = XofTurboShake128.next_batches(requests)
    for (s, d, b, length), streams in zip(requests, got, strict=True):
        assert streams == [
            XofTurboShake128(x, d, y).next(length) for x, y in zip(s, b, strict=True)
        ]
