"""The device's ``shard`` without a Python loop per element: the measurement is encoded with
numpy, the helpers' shares are read from the XOF straight into limb arrays, and the FLP prover
of the chunked circuits (SumVec, Histogram, MultihotCountVec) runs on limb arrays with a
vectorized NTT. Output: the *encoded* public share and input shares, byte for byte what
``vdaf.encode_*`` of ``vdaf.shard`` gives (tests/client_sdk/vdaf/test_device.py, and the draft's
vectors). Count and Sum (a handful of elements) go through ``vdaf.shard`` itself.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from client_sdk.vdaf.batch import _xof_vec
from client_sdk.vdaf.errors import MeasurementError
from client_sdk.vdaf.field import Field, Lagrange
from client_sdk.vdaf.flp import Histogram, MultihotCountVec, SumVec, gadget_poly_len, wire_poly_len
from client_sdk.vdaf.prio3 import (
    USAGE_JOINT_RAND_PART,
    USAGE_MEAS_SHARE,
    USAGE_PROOF_SHARE,
    Prio3,
)
from client_sdk.vdaf.vec import Arr, LimbField, limb_field

__all__ = ["shard_encoded"]


def shard_encoded(
    vdaf: Prio3[Any, Any], ctx: bytes, measurement: Any, nonce: bytes, rand: bytes
) -> tuple[bytes, list[bytes]]:
    """``vdaf.shard`` with its messages encoded: ``(public_share, input_shares)`` as bytes."""
    valid = vdaf.flp.valid
    if not isinstance(valid, (SumVec, Histogram, MultihotCountVec)) or vdaf.PROOFS != 1:
        public, shares = vdaf.shard(ctx, measurement, nonce, rand)
        return vdaf.encode_public_share(public), [vdaf.encode_input_share(s) for s in shares]
    if len(nonce) != vdaf.NONCE_SIZE:
        raise ValueError(f"nonce must be {vdaf.NONCE_SIZE} bytes, got {len(nonce)}")
    if len(rand) != vdaf.RAND_SIZE:
        raise ValueError(f"rand must be {vdaf.RAND_SIZE} bytes, got {len(rand)}")
    lf = limb_field(vdaf.field)
    size = vdaf.xof.SEED_SIZE
    seeds = [rand[i : i + size] for i in range(0, vdaf.RAND_SIZE, size)]
    helpers = vdaf.SHARES - 1
    helper_shares, helper_blinds = seeds[0 : 2 * helpers : 2], seeds[1 : 2 * helpers : 2]
    leader_blind, prove_seed = seeds[2 * helpers], seeds[2 * helpers + 1]

    meas = _encode(valid, lf, measurement)  # (MEAS_LEN, N)
    flp = vdaf.flp
    helper_meas, helper_raw = _xof_vec(
        vdaf,
        lf,
        helper_shares,
        USAGE_MEAS_SHARE,
        ctx,
        [bytes([j + 1]) for j in range(helpers)],
        flp.MEAS_LEN,
    )
    helper_proofs, _ = _xof_vec(
        vdaf,
        lf,
        helper_shares,
        USAGE_PROOF_SHARE,
        ctx,
        [bytes([vdaf.PROOFS, j + 1]) for j in range(helpers)],
        flp.PROOF_LEN,
    )
    leader_meas = meas
    for j in range(helpers):
        leader_meas = lf.sub(leader_meas, helper_meas[j])
    dst = vdaf.domain_separation_tag(USAGE_JOINT_RAND_PART, ctx)
    leader_meas_raw = lf.to_bytes(leader_meas)
    parts = [vdaf.xof.derive_seed(leader_blind, dst, bytes([0]) + nonce + leader_meas_raw)]
    parts += [
        vdaf.xof.derive_seed(helper_blinds[j], dst, bytes([j + 1]) + nonce + helper_raw[j])
        for j in range(helpers)
    ]
    joint = lf.from_ints(vdaf.joint_rands(ctx, vdaf.joint_rand_seed(ctx, parts)))
    prove_rand = lf.from_ints(vdaf.prove_rands(ctx, prove_seed))
    proof = _prove_chunked(valid, lf, meas, joint, prove_rand)
    leader_proof = proof
    for j in range(helpers):
        leader_proof = lf.sub(leader_proof, helper_proofs[j])
    leader = leader_meas_raw + lf.to_bytes(leader_proof) + leader_blind
    inputs = [leader] + [helper_shares[j] + helper_blinds[j] for j in range(helpers)]
    return b"".join(parts), inputs


def _encode(valid: Any, lf: LimbField, measurement: Any) -> Arr:
    """The circuit's encoding as limbs (every encoded value is 0 or 1), range-checked."""
    if isinstance(valid, Histogram):
        if (
            isinstance(measurement, (bool, np.bool_))
            or not isinstance(measurement, numbers.Integral)
            or not 0 <= int(measurement) < valid.length
        ):
            raise MeasurementError(
                f"Prio3Histogram measurement must be an int in [0, {valid.length - 1}], "
                f"got {measurement!r}"
            )
        bits = np.zeros(valid.length, dtype=np.uint64)
        bits[int(measurement)] = 1
    elif isinstance(valid, MultihotCountVec):
        arr = np.asarray(measurement)
        if arr.shape != (valid.length,) or arr.dtype.kind not in "biu":
            raise MeasurementError(
                f"Prio3MultihotCountVec measurement must be a list of {valid.length} bools"
            )
        bad = np.flatnonzero((arr != 0) & (arr != 1))
        if bad.size:
            i = int(bad[0])
            raise MeasurementError(
                f"Prio3MultihotCountVec measurement[{i}] must be a bool, got {arr[i]!r}"
            )
        counts = arr.astype(np.uint64)
        weight = int(counts.sum())
        if weight > valid.max_weight:
            raise MeasurementError(
                f"Prio3MultihotCountVec measurement has weight {weight}, above max_weight "
                f"{valid.max_weight}"
            )
        bits = np.concatenate([counts, _range_bits(np.array([weight]), valid.max_weight)])
    else:
        arr = np.asarray(measurement)
        if arr.shape != (valid.length,) or arr.dtype.kind not in "iu":
            raise MeasurementError(
                f"Prio3SumVec measurement must be a list of {valid.length} ints, got "
                f"{measurement!r:.80}"
            )
        bad = np.flatnonzero((arr < 0) | (arr > valid.max_measurement))
        if bad.size:
            i = int(bad[0])
            raise MeasurementError(
                f"Prio3SumVec measurement[{i}] must be in [0, {valid.max_measurement}], "
                f"got {arr[i]}"
            )
        bits = _range_bits(arr.astype(np.int64), valid.max_measurement)
    out = lf.zeros((bits.size,))
    out[:, 0] = bits
    return out


def _range_bits(values: np.ndarray[Any, Any], max_measurement: int) -> np.ndarray[Any, Any]:
    """``encode_range_checked_int`` of every value, concatenated (as uint64 0/1)."""
    bits = max_measurement.bit_length()
    rest_all_ones = 2 ** (bits - 1) - 1
    last_weight = max_measurement - rest_all_ones
    high = values > rest_all_ones
    rest = np.where(high, values - last_weight, values)
    low_bits = (rest[:, None] >> np.arange(bits - 1)) & 1
    return np.concatenate([low_bits, high[:, None]], axis=1).reshape(-1).astype(np.uint64)


def _prove_chunked(valid: Any, lf: LimbField, meas: Arr, joint: Arr, prove_rand: Arr) -> Arr:
    """``FlpBBCGGI19.prove`` of the ``ParallelSum(Mul, chunk)`` range check on limbs: the wire
    polynomials, then the gadget polynomial ``sum_j double(w_2j) * double(w_2j+1)``."""
    [g], [calls] = valid.GADGETS, valid.GADGET_CALLS
    chunk = valid.chunk_length
    p = wire_poly_len(calls)
    padded = lf.zeros((calls * chunk,))
    padded[: meas.shape[0]] = meas
    padded = padded.reshape(calls, chunk, lf.N)
    powers = lf.powers(joint, chunk)  # (calls, chunk, N)
    wires = lf.zeros((g.ARITY, p))
    wires[:, 0] = prove_rand[: g.ARITY]
    wires[0::2, 1 : calls + 1] = lf.mul(powers, padded).transpose(1, 0, 2)
    wires[1::2, 1 : calls + 1] = lf.sub(padded, lf.const(1)).transpose(1, 0, 2)  # 1/num_shares
    doubled = _double(lf, wires)  # (ARITY, 2p, N)
    gadget = lf.sum(lf.mul(doubled[0::2], doubled[1::2]), axis=0)
    m = gadget_poly_len(g.DEGREE, p)
    return np.concatenate([prove_rand[: g.ARITY], gadget[:m]], axis=0)


def _double(lf: LimbField, values: Arr) -> Arr:
    """``Lagrange.double_evaluations`` of each row (axis -2): its values at the 2n-th roots.
    The new values are a fixed linear map of the old (inverse NTT, scaling by ``s**k``, NTT),
    applied as one matrix product."""
    n = values.shape[-2]
    matrix = lf.from_ints(_odd_values_map(lf.field, n))  # (n, n): new value i from old k
    odd = lf.dot(matrix[None], values[:, None])
    out = np.empty((*values.shape[:-2], 2 * n, lf.N), dtype=np.uint64)
    out[..., 0::2, :] = values
    out[..., 1::2, :] = odd
    return out


_ODD_MAPS: dict[tuple[str, int], list[list[int]]] = {}


def _odd_values_map(field: type[Field], n: int) -> list[list[int]]:
    """Row i: the weights of the n values at the n-th roots that give the value at
    ``W_2n * W_n**i`` (``Lagrange.double_evaluations`` of the unit vectors, odd positions)."""
    key = (field.__name__, n)
    if key not in _ODD_MAPS:
        lag = Lagrange(field)
        cols = [lag.double_evaluations([int(i == k) for i in range(n)])[1::2] for k in range(n)]
        _ODD_MAPS[key] = [[cols[k][i] for k in range(n)] for i in range(n)]
    return _ODD_MAPS[key]
