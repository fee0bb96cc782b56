"""Prio3 beyond the draft's vectors: end-to-end sums for random valid measurements, tampering
with any single element of an input share, decoding refusals and device-side range checks."""

from __future__ import annotations

import random
from typing import Any

import pytest

from client_sdk.vdaf import (
    DecodeError,
    Field64,
    Field128,
    MeasurementError,
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
    VdafError,
)

CTX = b"ldp-telemetry test"


def variants() -> list[tuple[str, Prio3[Any, Any], Any]]:
    """(name, vdaf, sampler of a valid measurement)."""
    return [
        ("count", Prio3Count(2), lambda r: r.randrange(2)),
        ("sum", Prio3Sum(2, 200), lambda r: r.randrange(201)),
        ("sumvec", Prio3SumVec(2, 5, 6, 3), lambda r: [r.randrange(7) for _ in range(5)]),
        ("histogram", Prio3Histogram(2, 7, 3), lambda r: r.randrange(7)),
        (
            "multihot",
            Prio3MultihotCountVec(2, 6, 3, 2),
            lambda r: [i in r.sample(range(6), r.randrange(4)) for i in range(6)],
        ),
        ("histogram-3-shares", Prio3Histogram(3, 5, 2), lambda r: r.randrange(5)),
    ]


VARIANTS = variants()
IDS = [v[0] for v in VARIANTS]


def run(
    vdaf: Prio3[Any, Any],
    key: bytes,
    nonce: bytes,
    public: Any,
    inputs: list[Any],
) -> list[list[int]]:
    """verify_init for every Aggregator, combine, verify_next: the output shares."""
    states, shares = zip(
        *(vdaf.verify_init(key, CTX, j, None, nonce, public, s) for j, s in enumerate(inputs)),
        strict=True,
    )
    msg = vdaf.verifier_shares_to_message(CTX, None, list(shares))
    return [vdaf.verify_next(CTX, st, msg) for st in states]


def expected_sum(name: str, measurements: list[Any]) -> Any:
    if name in ("count", "sum"):
        return sum(measurements)
    if name == "sumvec":
        return [sum(col) for col in zip(*measurements, strict=True)]
    if name.startswith("histogram"):
        length = 7 if name == "histogram" else 5
        return [sum(m == b for m in measurements) for b in range(length)]
    return [sum(int(m[i]) for m in measurements) for i in range(6)]


@pytest.mark.parametrize(("name", "vdaf", "sample"), VARIANTS, ids=IDS)
def test_shard_verify_unshard_returns_the_sum(
    name: str, vdaf: Prio3[Any, Any], sample: Any
) -> None:
    rng = random.Random(20261203)
    key = rng.randbytes(vdaf.VERIFY_KEY_SIZE)
    aggs = [vdaf.agg_init(None) for _ in range(vdaf.SHARES)]
    measurements = [sample(rng) for _ in range(12)]
    for m in measurements:
        nonce = rng.randbytes(vdaf.NONCE_SIZE)
        public, inputs = vdaf.shard(CTX, m, nonce, rng.randbytes(vdaf.RAND_SIZE))
        # Every message survives its encoding.
        public = vdaf.decode_public_share(vdaf.encode_public_share(public))
        inputs = [
            vdaf.decode_input_share(j, vdaf.encode_input_share(s)) for j, s in enumerate(inputs)
        ]
        outs = run(vdaf, key, nonce, public, inputs)
        aggs = [vdaf.agg_update(None, a, o) for a, o in zip(aggs, outs, strict=True)]
    aggs = [vdaf.decode_agg_share(None, vdaf.encode_agg_share(a)) for a in aggs]
    assert vdaf.unshard(None, aggs, len(measurements)) == expected_sum(name, measurements)


def _tampered_leader_shares(share: Any, mod: int) -> list[Any]:
    meas, proofs, blind = share
    out = []
    for i in range(len(meas)):
        m = list(meas)
        m[i] = (m[i] + 1) % mod
        out.append((m, proofs, blind))
    for i in range(len(proofs)):
        p = list(proofs)
        p[i] = (p[i] + 1) % mod
        out.append((meas, p, blind))
    return out


@pytest.mark.parametrize(("name", "vdaf", "sample"), VARIANTS, ids=IDS)
def test_every_single_element_change_to_an_input_share_is_rejected(
    name: str, vdaf: Prio3[Any, Any], sample: Any
) -> None:
    rng = random.Random(7)
    key = rng.randbytes(vdaf.VERIFY_KEY_SIZE)
    nonce = rng.randbytes(vdaf.NONCE_SIZE)
    public, inputs = vdaf.shard(CTX, sample(rng), nonce, rng.randbytes(vdaf.RAND_SIZE))
    run(vdaf, key, nonce, public, inputs)  # the untouched report passes
    variants_of_input: list[list[Any]] = []
    for leader in _tampered_leader_shares(inputs[0], vdaf.field.MODULUS):
        variants_of_input.append([leader, *inputs[1:]])
    for j in range(1, vdaf.SHARES):
        helper: Any = inputs[j]
        seed, blind = helper
        for k in range(len(seed)):  # one byte of the helper's seed, then of its blind
            bad = bytearray(seed)
            bad[k] ^= 1
            variants_of_input.append([*inputs[:j], (bytes(bad), blind), *inputs[j + 1 :]])
        if blind is not None:
            bad = bytearray(blind)
            bad[0] ^= 1
            variants_of_input.append([*inputs[:j], (seed, bytes(bad)), *inputs[j + 1 :]])
    assert len(variants_of_input) >= vdaf.flp.MEAS_LEN + vdaf.flp.PROOF_LEN
    for tampered in variants_of_input:
        with pytest.raises(VdafError, match="check failed"):
            run(vdaf, key, nonce, public, tampered)
    if public is not None:  # a tampered joint-randomness part in the public share
        for j in range(vdaf.SHARES):
            bad_public = list(public)
            bad_public[j] = bytes([public[j][0] ^ 1]) + public[j][1:]
            with pytest.raises(VdafError, match="check failed"):
                run(vdaf, key, nonce, bad_public, inputs)


@pytest.mark.parametrize(
    ("vdaf", "measurement", "needle"),
    [
        (Prio3Count(2), 2, "Prio3Count measurement"),
        (Prio3Count(2), -1, "Prio3Count measurement"),
        (Prio3Count(2), "1", "Prio3Count measurement"),
        (Prio3Sum(2, 255), 256, "Prio3Sum measurement"),
        (Prio3Sum(2, 255), -1, "Prio3Sum measurement"),
        (Prio3SumVec(2, 3, 7, 2), [1, 8, 0], r"Prio3SumVec measurement\[1\]"),
        (Prio3SumVec(2, 3, 7, 2), [1, 2], "Prio3SumVec measurement"),
        (Prio3Histogram(2, 4, 2), 4, "Prio3Histogram measurement"),
        (Prio3Histogram(2, 4, 2), -1, "Prio3Histogram measurement"),
        (Prio3MultihotCountVec(2, 4, 2, 2), [True, True, True, False], "weight 3"),
        (Prio3MultihotCountVec(2, 4, 2, 2), [True, False], "list of 4 bools"),
        (Prio3MultihotCountVec(2, 4, 2, 2), [True, 2, False, False], r"measurement\[1\]"),
    ],
)
def test_a_measurement_outside_the_range_is_refused_on_the_device(
    vdaf: Prio3[Any, Any], measurement: Any, needle: str
) -> None:
    with pytest.raises(MeasurementError, match=needle):
        vdaf.shard(CTX, measurement, bytes(16), bytes(vdaf.RAND_SIZE))


def test_shard_refuses_wrong_nonce_and_rand_sizes() -> None:
    vdaf = Prio3Histogram(2, 4, 2)
    with pytest.raises(ValueError, match="nonce must be 16 bytes, got 15"):
        vdaf.shard(CTX, 1, bytes(15), bytes(vdaf.RAND_SIZE))
    with pytest.raises(ValueError, match=f"rand must be {vdaf.RAND_SIZE} bytes"):
        vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.RAND_SIZE - 1))


def test_decoding_refuses_wrong_lengths_naming_the_message() -> None:
    vdaf = Prio3Histogram(2, 4, 2)
    _, inputs = vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.RAND_SIZE))
    leader = vdaf.encode_input_share(inputs[0])
    cases = [
        (lambda: vdaf.decode_input_share(0, leader[:-1]), "leader input share"),
        (lambda: vdaf.decode_input_share(1, bytes(63)), "helper input share"),
        (lambda: vdaf.decode_public_share(bytes(65)), "public share"),
        (lambda: vdaf.decode_verifier_share(None, bytes(10)), "verifier share"),
        (lambda: vdaf.decode_verifier_message(None, bytes(31)), "verifier message"),
        (lambda: vdaf.decode_agg_share(None, bytes(16 * 5)), "aggregate share"),
        (lambda: vdaf.decode_out_share(bytes(17)), "output share"),
        (lambda: Prio3Count(2).decode_public_share(b"x"), "public share"),
    ]
    for call, needle in cases:
        with pytest.raises(DecodeError, match=needle):
            call()


@pytest.mark.parametrize("field", [Field64, Field128])
def test_decoding_refuses_an_element_outside_the_field(field: Any) -> None:
    vdaf: Prio3[Any, Any] = Prio3Count(2) if field is Field64 else Prio3Histogram(2, 4, 2)
    _, inputs = vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.RAND_SIZE))
    good = bytearray(vdaf.encode_input_share(inputs[0]))
    size = field.ENCODED_SIZE
    good[0:size] = field.MODULUS.to_bytes(size, "little")  # exactly the modulus: not canonical
    with pytest.raises(
        DecodeError, match=rf"leader measurement share\[0\]: {field.MODULUS} is not below"
    ):
        vdaf.decode_input_share(0, bytes(good))
    share = vdaf.encode_agg_share([field.MODULUS - 1] * vdaf.flp.OUTPUT_LEN)
    bad = share[:-size] + (2 ** (8 * size) - 1).to_bytes(size, "little")
    with pytest.raises(DecodeError, match=rf"aggregate share\[{vdaf.flp.OUTPUT_LEN - 1}\]"):
        vdaf.decode_agg_share(None, bad)


def test_constructor_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="shares"):
        Prio3Count(1)
    with pytest.raises(ValueError, match="max_weight 5 exceeds length 4"):
        Prio3MultihotCountVec(2, 4, 5, 2)
    with pytest.raises(ValueError, match="chunk_length"):
        Prio3Histogram(2, 4, 0)
    with pytest.raises(ValueError, match="max_measurement"):
        Prio3Sum(2, 0)


def test_constants_are_the_drafts() -> None:
    v = Prio3Histogram(2, 4, 2)
    assert (v.SHARES, v.ROUNDS, v.VERIFY_KEY_SIZE, v.NONCE_SIZE, v.RAND_SIZE) == (2, 1, 32, 16, 128)
    assert Prio3Count(3).RAND_SIZE == 96


def test_verify_init_refuses_a_public_share_with_the_wrong_number_of_parts() -> None:
    vdaf = Prio3Histogram(2, 4, 2)
    public, inputs = vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.RAND_SIZE))
    assert public is not None
    with pytest.raises(ValueError, match="public share: expected 2 joint randomness parts, got 1"):
        vdaf.verify_init(bytes(32), CTX, 1, None, bytes(16), public[:1], inputs[1])


def test_numpy_integers_are_measurements_as_ints_are() -> None:
    import numpy as np

    cases: list[tuple[Any, Any, Any]] = [
        (Prio3Histogram(2, 5, 2), 3, np.int64(3)),
        (Prio3Sum(2, 9), 7, np.uint8(7)),
        (Prio3SumVec(2, 3, 4, 2), [1, 4, 0], list(np.array([1, 4, 0]))),
    ]
    for vdaf, as_int, as_numpy in cases:
        args = (bytes(16), bytes(vdaf.RAND_SIZE))
        assert vdaf.shard(CTX, as_numpy, *args) == vdaf.shard(CTX, as_int, *args)
    with pytest.raises(MeasurementError, match="Prio3Histogram measurement"):
        Prio3Histogram(2, 5, 2).shard(CTX, np.bool_(True), bytes(16), bytes(128))  # type: ignore[arg-type]
