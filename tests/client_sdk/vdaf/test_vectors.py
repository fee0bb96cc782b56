"""The draft-irtf-cfrg-vdaf-20 test vectors (commit 5203892, poc/test_vec/) replayed operation by
operation: every encoded message must match byte for byte, and every step the vector marks
``success: false`` must raise a ``ValueError`` subclass naming the failed check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from client_sdk.vdaf import (
    Field64,
    Field128,
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
    VdafError,
    XofTurboShake128,
)
from client_sdk.vdaf.device import shard_encoded
from client_sdk.vdaf.flp import PolyEval, SumVec, Valid

VEC_DIR = Path(__file__).parent / "vectors"  # vendored: see vectors/README.md
VARIANTS = ("Prio3Count", "Prio3Sum", "Prio3SumVec", "Prio3Histogram", "Prio3MultihotCountVec")
EXTRA = ("Prio3SumVecWithMultiproof", "Prio3HigherDegree")
# The files the tests need, named here so that a missing one fails rather than skips.
FILES = (
    [f"Prio3Count_{i}.json" for i in range(3)]
    + [
        f"Prio3Count_bad_{c}.json"
        for c in ("gadget_poly", "helper_seed", "meas_share", "wire_seed")
    ]
    + [f"Prio3Sum_{i}.json" for i in range(3)]
    + [f"Prio3SumVec_{i}.json" for i in range(2)]
    + [f"Prio3Histogram_{i}.json" for i in range(3)]
    + [
        f"Prio3Histogram_bad_{c}.json"
        for c in ("helper_jr_blind", "leader_jr_blind", "public_share", "verifier_message")
    ]
    + [f"Prio3MultihotCountVec_{i}.json" for i in range(3)]
    + [f"Prio3SumVecWithMultiproof_{i}.json" for i in range(2)]
    + ["Prio3HigherDegree_0.json"]
)


class _HigherDegree(Valid[int, int]):
    """The draft's test circuit with a degree-3 gadget: ``x (x - 1) (x - 2)``."""

    MEAS_LEN = 1
    JOINT_RAND_LEN = 0
    OUTPUT_LEN = 1
    EVAL_OUTPUT_LEN = 1

    def __init__(self) -> None:
        self.field = Field64
        self.GADGETS = [PolyEval([0, 2, -3, 1], 1)]
        self.GADGET_CALLS = [1]

    def encode(self, measurement: int) -> list[int]:
        return [measurement % Field64.MODULUS]

    def eval(self, meas: Any, joint_rand: Any, num_shares: int, gadgets: Any = None) -> list[int]:
        return [(gadgets or self.GADGETS)[0].eval(self.field, [meas[0]])]

    def truncate(self, meas: Any) -> list[int]:
        return list(meas)

    def decode(self, output: Any, num_measurements: int) -> int:
        return int(output[0])


class _TestVdaf(Prio3[Any, Any]):
    ID = 0xFFFFFFFF  # the draft's test-only algorithm ID


def make(name: str, v: dict[str, Any]) -> Prio3[Any, Any]:
    kind = name.split("_")[0]
    if kind == "Prio3SumVecWithMultiproof":  # Field64 with three proofs, as the draft's tests
        valid = SumVec(Field64, v["length"], v["max_measurement"], v["chunk_length"])
        return _TestVdaf(v["shares"], valid, num_proofs=3)
    if kind == "Prio3HigherDegree":
        return _TestVdaf(v["shares"], _HigherDegree())
    if kind == "Prio3Count":
        return Prio3Count(v["shares"])
    if kind == "Prio3Sum":
        return Prio3Sum(v["shares"], v["max_measurement"])
    if kind == "Prio3SumVec":
        return Prio3SumVec(v["shares"], v["length"], v["max_measurement"], v["chunk_length"])
    if kind == "Prio3Histogram":
        return Prio3Histogram(v["shares"], v["length"], v["chunk_length"])
    return Prio3MultihotCountVec(v["shares"], v["length"], v["max_weight"], v["chunk_length"])


def test_the_vendored_vectors_are_present_and_unmodified() -> None:
    assert len(FILES) == 25  # 22 of the five variants, 2 multiproof, 1 higher degree
    assert sum("_bad_" in f for f in FILES) == 8
    lines = (VEC_DIR / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split() for line in lines)}
    assert sorted(sums) == sorted([*FILES, "XofTurboShake128.json"])
    for name, digest in sums.items():
        assert hashlib.sha256((VEC_DIR / name).read_bytes()).hexdigest() == digest, name


def test_xof_turboshake128_vector() -> None:
    v = json.loads((VEC_DIR / "XofTurboShake128.json").read_text())
    seed, dst, binder = (bytes.fromhex(v[k]) for k in ("seed", "dst", "binder"))
    assert XofTurboShake128.derive_seed(seed, dst, binder).hex() == v["derived_seed"]
    vec = XofTurboShake128.expand_into_vec(Field128, seed, dst, binder, v["length"])
    assert Field128.encode_vec(vec).hex() == v["expanded_vec_field128"]


@pytest.mark.parametrize("name", FILES)
def test_vector_file(name: str) -> None:
    v = json.loads((VEC_DIR / name).read_text())
    vdaf = make(name, v)
    assert v["shares"] == vdaf.SHARES
    ctx = bytes.fromhex(v["ctx"])
    key = bytes.fromhex(v["verify_key"])
    reports = v["reports"]
    # Per report: decoded public share, input shares, states, verifier shares, message.
    state: dict[int, dict[str, Any]] = {i: {} for i in range(len(reports))}
    for i, r in enumerate(reports):
        st = state[i]
        st["public"] = vdaf.decode_public_share(bytes.fromhex(r["public_share"]))
        st["inputs"] = [
            vdaf.decode_input_share(j, bytes.fromhex(s)) for j, s in enumerate(r["input_shares"])
        ]
        st["verify_state"] = {}
        st["verifier_shares"] = {}
    agg_shares = [vdaf.agg_init(None) for _ in range(vdaf.SHARES)]
    out_shares: dict[int, dict[int, list[int]]] = {i: {} for i in range(len(reports))}
    failures = 0
    for op in v["operations"]:
        kind, ok = op["operation"], op["success"]
        i = op.get("report_index", 0)
        r, st = reports[i] if reports else {}, state.get(i, {})
        nonce = bytes.fromhex(r["nonce"]) if r else b""
        try:
            if kind == "shard":
                public, inputs = vdaf.shard(ctx, r["measurement"], nonce, bytes.fromhex(r["rand"]))
                assert vdaf.encode_public_share(public).hex() == r["public_share"]
                assert [vdaf.encode_input_share(s).hex() for s in inputs] == r["input_shares"]
                fast_public, fast_inputs = shard_encoded(
                    vdaf, ctx, r["measurement"], nonce, bytes.fromhex(r["rand"])
                )
                assert fast_public.hex() == r["public_share"]
                assert [s.hex() for s in fast_inputs] == r["input_shares"]
            elif kind == "verify_init":
                j = op["aggregator_id"]
                vstate, vshare = vdaf.verify_init(
                    key, ctx, j, None, nonce, st["public"], st["inputs"][j]
                )
                st["verify_state"][j] = vstate
                st["verifier_shares"][j] = vshare
                if r["verifier_shares"]:
                    assert vdaf.encode_verifier_share(vshare).hex() == r["verifier_shares"][0][j]
            elif kind == "verifier_shares_to_message":
                shares = [st["verifier_shares"][j] for j in range(vdaf.SHARES)]
                msg = vdaf.verifier_shares_to_message(ctx, None, shares)
                assert vdaf.encode_verifier_message(msg).hex() == r["verifier_messages"][0]
                st["message"] = msg
            elif kind == "verify_next":
                j = op["aggregator_id"]
                if "message" in st:
                    msg = st["message"]
                else:  # the vector supplies the (tampered) message
                    msg = vdaf.decode_verifier_message(
                        None, bytes.fromhex(r["verifier_messages"][0])
                    )
                out = vdaf.verify_next(ctx, st["verify_state"][j], msg)
                assert vdaf.encode_out_share(out).hex() == r["out_shares"][j]
                out_shares[i][j] = out
            elif kind == "aggregate":
                j = op["aggregator_id"]
                for i2 in range(len(reports)):
                    agg_shares[j] = vdaf.agg_update(None, agg_shares[j], out_shares[i2][j])
                assert vdaf.encode_agg_share(agg_shares[j]).hex() == v["agg_shares"][j]
            elif kind == "unshard":
                result = vdaf.unshard(None, agg_shares, len(reports))
                assert result == v["agg_result"]
            else:
                pytest.fail(f"unknown operation {kind}")
        except VdafError as exc:
            assert not ok, f"{kind} raised {exc!r} but the vector expects success"
            assert "check failed" in str(exc)
            failures += 1
            continue
        assert ok, f"{kind} succeeded but the vector expects failure"
    assert failures == sum(not op["success"] for op in v["operations"])
