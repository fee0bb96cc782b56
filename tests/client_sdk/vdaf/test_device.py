"""The vectorized device shard (client_sdk.vdaf.device.shard_encoded) gives the same bytes as
``vdaf.shard`` then ``encode_*``, for every variant, and refuses the same bad measurements."""

from __future__ import annotations

import random
from typing import Any

import pytest

from client_sdk.vdaf import (
    MeasurementError,
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
)
from client_sdk.vdaf.device import shard_encoded

CTX = b"device test"

CASES: list[tuple[str, Prio3[Any, Any], Any]] = [
    ("count", Prio3Count(2), lambda r: r.randrange(2)),
    ("sum", Prio3Sum(2, 100), lambda r: r.randrange(101)),
    ("sumvec", Prio3SumVec(2, 9, 13, 5), lambda r: [r.randrange(14) for _ in range(9)]),
    ("histogram", Prio3Histogram(2, 37, 6), lambda r: r.randrange(37)),
    ("histogram-3", Prio3Histogram(3, 11, 3), lambda r: r.randrange(11)),
    (
        "multihot",
        Prio3MultihotCountVec(2, 14, 6, 4),
        lambda r: [i in r.sample(range(14), r.randrange(7)) for i in range(14)],
    ),
    ("sumvec-1", Prio3SumVec(3, 20, 1, 4), lambda r: [r.randrange(2) for _ in range(20)]),
]


@pytest.mark.parametrize(("name", "vdaf", "sample"), CASES, ids=[c[0] for c in CASES])
def test_vectorized_shard_is_byte_identical(name: str, vdaf: Prio3[Any, Any], sample: Any) -> None:
    rng = random.Random(21)
    for _ in range(6):
        m, nonce, rand = sample(rng), rng.randbytes(16), rng.randbytes(vdaf.RAND_SIZE)
        public, shares = vdaf.shard(CTX, m, nonce, rand)
        fast_public, fast_shares = shard_encoded(vdaf, CTX, m, nonce, rand)
        assert fast_public == vdaf.encode_public_share(public)
        assert fast_shares == [vdaf.encode_input_share(s) for s in shares]


@pytest.mark.parametrize(
    ("vdaf", "measurement", "needle"),
    [
        (Prio3Histogram(2, 4, 2), 4, "Prio3Histogram measurement"),
        (Prio3Histogram(2, 4, 2), True, "Prio3Histogram measurement"),
        (Prio3SumVec(2, 3, 7, 2), [1, 8, 0], r"Prio3SumVec measurement\[1\]"),
        (Prio3SumVec(2, 3, 7, 2), [1, -1, 0], r"Prio3SumVec measurement\[1\]"),
        (Prio3SumVec(2, 3, 7, 2), [1, 2], "Prio3SumVec measurement"),
        (Prio3MultihotCountVec(2, 4, 2, 2), [True, True, True, False], "weight 3"),
        (Prio3MultihotCountVec(2, 4, 2, 2), [1, 2, 0, 0], r"measurement\[1\]"),
    ],
)
def test_vectorized_shard_refuses_out_of_range_measurements(
    vdaf: Prio3[Any, Any], measurement: Any, needle: str
) -> None:
    with pytest.raises(MeasurementError, match=needle):
        shard_encoded(vdaf, CTX, measurement, bytes(16), bytes(vdaf.RAND_SIZE))


def test_a_numpy_index_shards_as_an_int_does() -> None:
    import numpy as np

    vdaf = Prio3Histogram(2, 9, 3)
    args = (bytes(16), bytes(vdaf.RAND_SIZE))
    assert shard_encoded(vdaf, CTX, np.int64(4), *args) == shard_encoded(vdaf, CTX, 4, *args)
