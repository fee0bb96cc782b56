"""The batched verification path against the one-at-a-time path: identical verifier shares,
joint randomness seeds, output shares and aggregates, for every variant and both Aggregators,
including tampered reports (which must then be rejected in both paths alike)."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import pytest

from client_sdk.vdaf import (
    DecodeError,
    Field64,
    Field128,
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
    VdafError,
)
from client_sdk.vdaf.batch import _refuse_roots_of_unity, verify_init_batch
from client_sdk.vdaf.field import Field
from client_sdk.vdaf.vec import LimbField, WordField64, limb_field

CTX = b"batch test"

CASES: list[tuple[str, Prio3[Any, Any], Any]] = [
    ("count", Prio3Count(2), lambda r: r.randrange(2)),
    ("sum", Prio3Sum(2, 255), lambda r: r.randrange(256)),
    ("sum-1", Prio3Sum(2, 1), lambda r: r.randrange(2)),
    ("sumvec", Prio3SumVec(2, 10, 5, 4), lambda r: [r.randrange(6) for _ in range(10)]),
    ("histogram", Prio3Histogram(2, 20, 4), lambda r: r.randrange(20)),
    (
        "multihot",
        Prio3MultihotCountVec(2, 12, 5, 3),
        lambda r: [r.random() < 0.3 for _ in range(12)][:12],
    ),
    ("histogram-3", Prio3Histogram(3, 9, 3), lambda r: r.randrange(9)),
]


def _measure(name: str, sample: Any, rng: random.Random, vdaf: Prio3[Any, Any]) -> Any:
    m = sample(rng)
    if name == "multihot":  # keep the weight within max_weight
        ones = [i for i, x in enumerate(m) if x][: cast(Any, vdaf.flp.valid).max_weight]
        m = [i in ones for i in range(len(m))]
    return m


@pytest.mark.parametrize(("name", "vdaf", "sample"), CASES, ids=[c[0] for c in CASES])
def test_batched_and_single_paths_agree(name: str, vdaf: Prio3[Any, Any], sample: Any) -> None:
    rng = random.Random(99)
    key = rng.randbytes(32)
    nonces, publics, inputs = [], [], []
    for i in range(24):
        nonce = rng.randbytes(16)
        public, shares = vdaf.shard(
            CTX, _measure(name, sample, rng, vdaf), nonce, rng.randbytes(vdaf.RAND_SIZE)
        )
        if i % 5 == 4:  # tamper with the leader's measurement share: must fail in both paths
            leader: Any = shares[0]
            meas, proofs, blind = leader
            shares[0] = ([(meas[0] + 1) % vdaf.field.MODULUS, *meas[1:]], proofs, blind)
        nonces.append(nonce)
        publics.append(vdaf.encode_public_share(public))
        inputs.append([vdaf.encode_input_share(s) for s in shares])
    batches = [
        verify_init_batch(vdaf, key, CTX, j, nonces, publics, [x[j] for x in inputs])
        for j in range(vdaf.SHARES)
    ]
    accepted = []
    for i in range(len(nonces)):
        single = [
            vdaf.verify_init(
                key,
                CTX,
                j,
                None,
                nonces[i],
                vdaf.decode_public_share(publics[i]),
                vdaf.decode_input_share(j, inputs[i][j]),
            )
            for j in range(vdaf.SHARES)
        ]
        for j in range(vdaf.SHARES):
            assert batches[j].verifier_shares[i] == single[j][1]
            assert batches[j].states()[i] == single[j][0]
        try:
            msg = vdaf.verifier_shares_to_message(
                CTX, None, [batches[j].verifier_shares[i] for j in range(vdaf.SHARES)]
            )
            for j in range(vdaf.SHARES):
                vdaf.verify_next(CTX, batches[j].states()[i], msg)
            accepted.append(True)
        except VdafError:
            accepted.append(False)
    assert accepted == [i % 5 != 4 for i in range(len(nonces))]
    for j in range(vdaf.SHARES):
        agg = vdaf.agg_init(None)
        for i, ok in enumerate(accepted):
            if ok:
                agg = vdaf.agg_update(None, agg, batches[j].states()[i][0])
        assert batches[j].aggregate(accepted) == agg


def test_batch_refuses_an_out_of_field_leader_share() -> None:
    vdaf = Prio3Histogram(2, 4, 2)
    _, shares = vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.RAND_SIZE))
    public, _ = vdaf.shard(CTX, 1, bytes(16), bytes(vdaf.RAND_SIZE))
    leader = bytearray(vdaf.encode_input_share(shares[0]))
    leader[16:32] = Field128.MODULUS.to_bytes(16, "little")
    with pytest.raises(DecodeError, match=r"report 0: leader measurement share\[1\]"):
        verify_init_batch(
            vdaf,
            bytes(32),
            CTX,
            0,
            [bytes(16)],
            [vdaf.encode_public_share(public)],
            [bytes(leader)],
        )


# Each vectorized arithmetic: Field64 on words (what batches use) and on limbs, Field128.
ARITHMETICS = [limb_field(Field64), LimbField(Field64), limb_field(Field128)]


def test_field64_batches_use_whole_words() -> None:
    assert isinstance(limb_field(Prio3Count(2).field), WordField64)
    assert limb_field(Field64).N == 1 and limb_field(Field128).N == 8


def test_limb_arithmetic_matches_python_ints() -> None:
    rng = random.Random(5)
    for lf in ARITHMETICS:
        field = lf.field
        p = field.MODULUS
        edge = [0, 1, p - 1, p - 2, (p + 1) // 2]
        a = [rng.randrange(p) for _ in range(500)] + [x for x in edge for _ in edge]
        b = [rng.randrange(p) for _ in range(500)] + edge * len(edge)
        aa, bb = lf.from_ints(a), lf.from_ints(b)
        assert lf.to_ints(lf.mul(aa, bb)) == [x * y % p for x, y in zip(a, b, strict=True)]
        assert lf.to_ints(lf.add(aa, bb)) == [(x + y) % p for x, y in zip(a, b, strict=True)]
        assert lf.to_ints(lf.sub(aa, bb)) == [(x - y) % p for x, y in zip(a, b, strict=True)]
        rows_a, rows_b = lf.from_ints([a[:25], a[25:50]]), lf.from_ints([b[:25], b[25:50]])
        expect = [
            sum(x * y for x, y in zip(a[s : s + 25], b[s : s + 25], strict=True)) % p
            for s in (0, 25)
        ]
        assert lf.to_ints(lf.dot(rows_a, rows_b)) == expect
        assert lf.to_ints(lf.sum(aa, axis=0)) == [sum(a) % p]
        assert lf.to_ints(lf.neg(aa)) == [-x % p for x in a]
        assert lf.from_bytes(lf.to_bytes(aa), (len(a),)).tolist() == aa.tolist()


def test_field64_word_sums_at_their_largest() -> None:
    """Sums of many words near ``p`` and near ``2**32`` (where the 32-bit halves carry), and
    sums that land exactly on ``p``: the same as Python's, word and limb alike."""
    p = Field64.MODULUS
    for values in (
        [p - 1] * 5000,
        [2**32 - 1, 2**32, p - 2**32] * 1000,
        [p - 1, 1],
        [p - 2**32, 2**32 - 1, 1, 1],
    ):
        for lf in ARITHMETICS[:2]:
            got = lf.to_ints(lf.sum(lf.from_ints([values, values[::-1]]), axis=1))
            assert got == [sum(values) % p] * 2


def test_field64_products_on_whole_words_at_every_carry() -> None:
    """Field64's product on 64-bit words (``_mul_goldilocks``) at the values where its partial
    products carry, borrow or wrap: powers of two around 2**32, 2**63, and near p."""
    lf = limb_field(Field64)
    p = Field64.MODULUS
    edge = [0, 1, 2, 2**16, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**48, 2**63, 2**63 + 2**32]
    edge += [p - 1, p - 2, p - 2**32, p - 2**32 - 1, (p - 1) // 2, 2**64 - 2**33]
    rng = random.Random(11)
    a = [x for x in edge for _ in edge] + [rng.randrange(p) for _ in range(20000)]
    b = edge * len(edge) + [rng.choice([*edge, rng.randrange(p)]) for _ in range(20000)]
    got = lf.to_ints(lf.mul(lf.from_ints(a), lf.from_ints(b)))
    assert got == [x * y % p for x, y in zip(a, b, strict=True)]


def test_the_rejection_fallback_gives_the_same_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream value >= p (probability 2**-32 per Field64 element) is redone by the scalar
    sampler; forced here by pretending every row of the helper's expansion was rejected."""
    vdaf = Prio3Sum(2, 255)
    rng = random.Random(3)
    nonces = [rng.randbytes(16) for _ in range(3)]
    shares = [
        vdaf.shard(CTX, 7 * i, n, rng.randbytes(vdaf.RAND_SIZE))[1] for i, n in enumerate(nonces)
    ]
    helper = [vdaf.encode_input_share(s[1]) for s in shares]
    key = rng.randbytes(32)
    plain = verify_init_batch(vdaf, key, CTX, 1, nonces, [b""] * 3, helper)
    lf = limb_field(vdaf.field)
    never = lambda self, a: np.zeros(a.shape[:-1], dtype=bool)  # noqa: E731
    monkeypatch.setattr(type(lf), "below_modulus", never)
    forced = verify_init_batch(vdaf, key, CTX, 1, nonces, [b""] * 3, helper)
    assert forced.verifier_shares == plain.verifier_shares
    assert forced.states() == plain.states()


@pytest.mark.parametrize("lf", ARITHMETICS, ids=["Field64-words", "Field64-limbs", "Field128"])
def test_reduce_at_its_stated_bounds_and_long_dot_products(lf: LimbField) -> None:
    """``reduce`` takes up to 2N limbs below 2**44 (all-maximal limbs included); ``dot``
    chunks sums longer than 512 terms (words: no limbs to reduce)."""
    import numpy as np

    p = lf.field.MODULUS
    rng = np.random.default_rng(11)
    for limbs in () if isinstance(lf, WordField64) else (lf.N, lf.N + 1, 2 * lf.N):
        acc = rng.integers(0, 1 << 44, size=(400, limbs), dtype=np.uint64)
        acc[0] = (1 << 44) - 1
        expect = [sum(int(x) << (16 * d) for d, x in enumerate(row)) % p for row in acc]
        assert lf.to_ints(lf.reduce(acc)) == expect
    r = random.Random(2)
    a = [[r.randrange(p) for _ in range(1300)] for _ in range(2)]
    b = [[r.randrange(p) for _ in range(1300)] for _ in range(2)]
    expect = [sum(x * y for x, y in zip(u, v, strict=True)) % p for u, v in zip(a, b, strict=True)]
    assert lf.to_ints(lf.dot(lf.from_ints(a), lf.from_ints(b))) == expect


def test_sub_batches_merge_to_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from client_sdk.vdaf import batch

    vdaf = Prio3Histogram(2, 10, 3)
    rng = random.Random(4)
    nonces = [rng.randbytes(16) for _ in range(7)]
    sharded = [
        vdaf.shard(CTX, i % 10, n, rng.randbytes(vdaf.RAND_SIZE)) for i, n in enumerate(nonces)
    ]
    publics = [vdaf.encode_public_share(p) for p, _ in sharded]
    leaders = [vdaf.encode_input_share(s[0]) for _, s in sharded]
    whole = verify_init_batch(vdaf, bytes(32), CTX, 0, nonces, publics, leaders)
    monkeypatch.setattr(batch, "_REPORT_BUDGET", 2 * (vdaf.flp.MEAS_LEN + vdaf.flp.PROOF_LEN))
    split = verify_init_batch(vdaf, bytes(32), CTX, 0, nonces, publics, leaders)
    assert split.verifier_shares == whole.verifier_shares
    assert split.states() == whole.states()
    leader_sum = [sum(s[0][0][k] for _, s in sharded) % vdaf.field.MODULUS for k in range(10)]
    assert split.aggregate([True] * 7) == whole.aggregate([True] * 7) == leader_sum


@pytest.mark.parametrize("limit", [0, 1 << 20], ids=["scalar-basis", "vector-basis"])
def test_both_ways_to_the_lagrange_basis_agree_with_the_single_path(
    monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    from client_sdk.vdaf import batch

    monkeypatch.setattr(batch, "_VECTOR_BASIS_MAX", limit)
    name, vdaf, sample = CASES[4]  # histogram
    test_batched_and_single_paths_agree(name, vdaf, sample)
    name, vdaf, sample = CASES[1]  # sum
    test_batched_and_single_paths_agree(name, vdaf, sample)


@pytest.mark.parametrize("field", [Field64, Field128])
def test_a_test_point_that_is_a_root_of_unity_is_refused_and_named(field: type[Field]) -> None:
    """The batched check ``t**p == 1`` (by squarings) names the first offending report."""
    lf = limb_field(field)
    p = 8
    roots = field.nth_root_powers(p)
    _refuse_roots_of_unity(lf, lf.from_ints([5, 12345, 2]), p)  # no root of unity: passes
    for t in ([5, roots[3], roots[1]], [7, field.MODULUS - 1, 1]):
        with pytest.raises(ValueError, match="report 1: test point is a root of unity"):
            _refuse_roots_of_unity(lf, lf.from_ints(t), p)
