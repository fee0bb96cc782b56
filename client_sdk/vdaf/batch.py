"""Batched Prio3 verification: ``verify_init`` for many reports of one task at once, with the
FLP query vectorized across reports (``client_sdk.vdaf.vec``: limb arrays, no Python object per
field element). Results are identical to ``Prio3.verify_init`` report by report
(tests/client_sdk/vdaf/test_batch.py compares them).

Per report there remain the XOF calls (the draft derives the query and joint randomness from each
report's nonce and shares) and O(VERIFIER_LEN + JOINT_RAND_LEN) conversions; everything of the
size of the measurement or the proof stays in arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from client_sdk.vdaf.errors import DecodeError
from client_sdk.vdaf.field import Field, Lagrange
from client_sdk.vdaf.flp import (
    Count,
    Histogram,
    MultihotCountVec,
    Sum,
    SumVec,
    gadget_poly_len,
    wire_poly_len,
)
from client_sdk.vdaf.prio3 import (
    USAGE_JOINT_RAND_PART,
    USAGE_JOINT_RAND_SEED,
    USAGE_JOINT_RANDOMNESS,
    USAGE_MEAS_SHARE,
    USAGE_PROOF_SHARE,
    USAGE_QUERY_RANDOMNESS,
    Prio3,
    VerifierShare,
    VerifyState,
)
from client_sdk.vdaf.vec import (
    _P64,
    Arr,
    LimbField,
    WordField64,
    _mul_goldilocks,
    limb_field,
)
from client_sdk.vdaf.xof import XofRequest

__all__ = ["VerifyBatch", "verify_init_batch"]

# Elements per sub-batch of the wire array (reports x wires x points), to bound memory.
_WIRE_BUDGET = 1 << 21
# Field elements of measurement and proof shares per sub-batch of reports.
_REPORT_BUDGET = 1 << 19
# Largest n whose Lagrange basis is computed vectorized (above it, per report in Python).
_VECTOR_BASIS_MAX = 32


@dataclass
class VerifyBatch:
    """``verify_init`` of a batch: per report the verifier share and the corrected joint
    randomness seed; the output shares stay one ``(reports, OUTPUT_LEN)`` limb array."""

    vdaf: Prio3[Any, Any]
    verifier_shares: list[VerifierShare]
    corrected_seeds: list[bytes | None]
    out_shares: Arr

    def states(self) -> list[VerifyState]:
        """The per-report verification states as ``verify_init`` returns them."""
        lf = limb_field(self.vdaf.field)
        n = self.vdaf.flp.OUTPUT_LEN
        flat = lf.to_ints(self.out_shares)
        return [(flat[i * n : (i + 1) * n], seed) for i, seed in enumerate(self.corrected_seeds)]

    def aggregate(self, accepted: Sequence[bool]) -> list[int]:
        """The aggregate share of the accepted reports (``agg_update`` over them)."""
        lf = limb_field(self.vdaf.field)
        mask = np.asarray(accepted, dtype=bool)
        if mask.shape != (self.out_shares.shape[0],):
            raise ValueError(
                f"accepted: expected {self.out_shares.shape[0]} flags, got {mask.shape}"
            )
        rows = self.out_shares[mask]
        if rows.shape[0] == 0:
            return [0] * self.vdaf.flp.OUTPUT_LEN
        return lf.to_ints(lf.sum(rows, axis=0))


def _xof_vec(
    vdaf: Prio3[Any, Any],
    lf: LimbField,
    seeds: Sequence[bytes],
    usage: int,
    ctx: bytes,
    binders: Sequence[bytes],
    length: int,
) -> tuple[Arr, list[bytes]]:
    """``expand_into_vec`` for each report with the tag of ``usage``, and each vector's
    encoding: see ``_expand_many``."""
    dst = vdaf.domain_separation_tag(usage, ctx)
    arr, raw = _expand_many(vdaf, lf, [(seeds, dst, binders, length)])[0]
    return arr, [row.tobytes() for row in raw]


def _expand(
    vdaf: Prio3[Any, Any],
    lf: LimbField,
    seeds: Sequence[bytes],
    dst: bytes,
    binders: Sequence[bytes],
    length: int,
) -> Arr:
    """``expand_into_vec`` for each report: see ``_expand_many``."""
    return _expand_many(vdaf, lf, [(seeds, dst, binders, length)])[0][0]


def _expand_many(
    vdaf: Prio3[Any, Any], lf: LimbField, requests: Sequence[XofRequest]
) -> list[tuple[Arr, npt.NDArray[np.uint8]]]:
    """``expand_into_vec`` for each report of each request ``(seeds, dst, binders,
    length)``, straight into limbs (the XOF streams drawn together by
    ``next_batches_arrays``); the rare report whose stream holds a value ``>= p`` is redone by
    the scalar rejection sampler (same stream, same result). Also returns the vectors'
    encodings, one ``(B, length * ENCODED_SIZE)`` byte row per report."""
    field = vdaf.field
    size = field.ENCODED_SIZE
    streams = vdaf.xof.next_batches_arrays(
        [(seeds, dst, binders, length * size) for seeds, dst, binders, length in requests]
    )
    out = []
    for (seeds, dst, binders, length), raw in zip(requests, streams, strict=True):
        arr = lf.from_array(raw, (raw.shape[0], length))
        ok = lf.below_modulus(arr).all(axis=-1)
        if not ok.all():
            raw = raw.copy()
            for i in map(int, np.flatnonzero(~ok)):
                vec = vdaf.xof.expand_into_vec(field, seeds[i], dst, binders[i], length)
                raw[i] = np.frombuffer(field.encode_vec(vec), dtype=np.uint8)
                arr[i] = lf.from_array(raw[i], (length,))
        out.append((arr, raw))
    return out


def _first_wrong_length(items: Sequence[bytes], want: int) -> int | None:
    """The index of the first item not ``want`` bytes long, or None (one C pass if all are)."""
    lengths = list(map(len, items))
    if lengths.count(want) == len(lengths):
        return None
    return next(i for i, n in enumerate(lengths) if n != want)


def _decode_rows(
    lf: LimbField, field: type[Field], blobs: Sequence[bytes], length: int, name: str
) -> Arr:
    arr = lf.from_bytes(b"".join(blobs), (len(blobs), length))
    bad = ~lf.below_modulus(arr)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        value = int.from_bytes(
            blobs[i][j * field.ENCODED_SIZE : (j + 1) * field.ENCODED_SIZE], "little"
        )
        raise DecodeError(f"report {i}: {name}[{j}]: {value} is not below the modulus")
    return arr


def verify_init_batch(
    vdaf: Prio3[Any, Any],
    verify_key: bytes,
    ctx: bytes,
    agg_id: int,
    nonces: Sequence[bytes],
    public_shares: Sequence[bytes],
    input_shares: Sequence[bytes],
) -> VerifyBatch:
    """``verify_init`` for every report of a batch, from the *encoded* public and input shares
    (as they arrive on the wire); one-proof variants (every registered Prio3) only."""
    if vdaf.PROOFS != 1:
        raise ValueError(f"batched verification supports PROOFS = 1, not {vdaf.PROOFS}")
    b = len(nonces)
    if not (len(public_shares) == len(input_shares) == b):
        raise ValueError("nonces, public_shares and input_shares must have one entry per report")
    rows = max(1, _REPORT_BUDGET // (vdaf.flp.MEAS_LEN + vdaf.flp.PROOF_LEN))
    if b > rows:  # bound the memory of the share arrays: sub-batches, merged
        parts_ = [
            verify_init_batch(
                vdaf,
                verify_key,
                ctx,
                agg_id,
                nonces[s : s + rows],
                public_shares[s : s + rows],
                input_shares[s : s + rows],
            )
            for s in range(0, b, rows)
        ]
        return VerifyBatch(
            vdaf,
            [x for part in parts_ for x in part.verifier_shares],
            [x for part in parts_ for x in part.corrected_seeds],
            np.concatenate([part.out_shares for part in parts_], axis=0),
        )
    if len(verify_key) != vdaf.VERIFY_KEY_SIZE:
        raise ValueError(f"verify_key must be {vdaf.VERIFY_KEY_SIZE} bytes")
    i = _first_wrong_length(nonces, vdaf.NONCE_SIZE)
    if i is not None:
        raise ValueError(f"report {i}: nonce must be {vdaf.NONCE_SIZE} bytes, got {len(nonces[i])}")
    flp, field = vdaf.flp, vdaf.field
    lf = limb_field(field)
    size = field.ENCODED_SIZE
    seed_size = vdaf.xof.SEED_SIZE
    jr_len = flp.JOINT_RAND_LEN
    blind_len = seed_size if jr_len else 0

    def dst(usage: int) -> bytes:
        return vdaf.domain_separation_tag(usage, ctx)

    query: XofRequest = (
        [verify_key] * b,
        dst(USAGE_QUERY_RANDOMNESS),
        list(map(bytes([vdaf.PROOFS]).__add__, nonces)),
        flp.QUERY_RAND_LEN,
    )
    # Measurement and proof shares, as limbs, and the measurement shares' encodings.
    if agg_id == 0:
        meas_bytes = flp.MEAS_LEN * size
        want = meas_bytes + flp.PROOF_LEN * size + blind_len
        i = _first_wrong_length(input_shares, want)
        if i is not None:
            raise DecodeError(
                f"report {i}: leader input share: expected {want} bytes, got {len(input_shares[i])}"
            )
        meas_raw = [s[:meas_bytes] for s in input_shares]
        meas = _decode_rows(lf, field, meas_raw, flp.MEAS_LEN, "leader measurement share")
        proof = _decode_rows(
            lf,
            field,
            [s[meas_bytes : want - blind_len] for s in input_shares],
            flp.PROOF_LEN,
            "leader proofs share",
        )
        blinds = [s[want - blind_len :] for s in input_shares]
    else:
        want = seed_size + blind_len
        i = _first_wrong_length(input_shares, want)
        if i is not None:
            raise DecodeError(
                f"report {i}: helper input share: expected {want} bytes, got {len(input_shares[i])}"
            )
        if blind_len:
            seeds = [s[:seed_size] for s in input_shares]
            blinds = [s[seed_size:] for s in input_shares]
        else:  # the share is the seed
            seeds, blinds = list(input_shares), []
        # The shares and the query randomness in one pass of the vectorized XOF.
        (meas, meas_rows), (proof, _), (qr, _) = _expand_many(
            vdaf,
            lf,
            [
                (seeds, dst(USAGE_MEAS_SHARE), [bytes([agg_id])] * b, flp.MEAS_LEN),
                (seeds, dst(USAGE_PROOF_SHARE), [bytes([vdaf.PROOFS, agg_id])] * b, flp.PROOF_LEN),
                query,
            ],
        )
        meas_raw = [row.tobytes() for row in meas_rows] if jr_len else []

    # Joint randomness: it depends on each report's shares and nonce, so three XOF calls per
    # report, each drawn for the whole batch at once.
    corrected: list[bytes | None] = [None] * b
    parts: list[bytes | None] = [None] * b
    joint = lf.zeros((b, jr_len))
    if jr_len:
        publics = []
        for i in range(b):
            public = vdaf.decode_public_share(public_shares[i])  # checks its length
            assert public is not None
            publics.append(public)
        own = vdaf.xof.next_batch(
            blinds,
            vdaf.domain_separation_tag(USAGE_JOINT_RAND_PART, ctx),
            [bytes([agg_id]) + nonces[i] + meas_raw[i] for i in range(b)],
            seed_size,
        )
        for i in range(b):
            publics[i][agg_id] = own[i]
        seeds_ = vdaf.xof.next_batch(
            [bytes(seed_size)] * b,
            vdaf.domain_separation_tag(USAGE_JOINT_RAND_SEED, ctx),
            [b"".join(public) for public in publics],
            seed_size,
        )
        parts[:], corrected[:] = own, seeds_
        joint = _expand(
            vdaf,
            lf,
            seeds_,
            vdaf.domain_separation_tag(USAGE_JOINT_RANDOMNESS, ctx),
            [bytes([vdaf.PROOFS])] * b,
            jr_len,
        )
    if agg_id == 0:
        qr = _expand(vdaf, lf, *query)

    verifiers = _query(vdaf, lf, meas, proof, qr, joint)
    shares: list[VerifierShare] = list(zip(lf.to_int_rows(verifiers), parts, strict=True))
    return VerifyBatch(vdaf, shares, corrected, _truncate(vdaf.flp.valid, lf, meas))


# -- the vectorized FLP query -------------------------------------------------------------


def _basis(lf: LimbField, n: int, t: Arr) -> Arr:
    """``L_i(t)`` over the ``n``-th roots for each report (``t`` of shape ``(B, N)``):
    ``W**i / n * prod_{j != i} (t - W**j)``. Small ``n``: prefix and suffix products,
    vectorized across reports (Field64 on whole words); large ``n``: ``Lagrange.basis_at`` per
    report, O(n) scalar work (the size of a wire, not of the measurement), which is then the
    cheaper."""
    field = lf.field
    if n > _VECTOR_BASIS_MAX:
        lag = Lagrange(field)
        return lf.from_ints([lag.basis_at(n, x) for x in lf.to_ints(t)])
    nodes, weights = _basis_consts(lf, n)
    if isinstance(lf, WordField64):
        return _basis64(t[..., 0], nodes[..., 0], weights[..., 0])[..., None]
    diffs = lf.sub(t[:, None, :], nodes[None, :, :])  # (B, n, N)
    one = np.broadcast_to(lf.const(1), (t.shape[0], 1, lf.N))
    prefix = _scan(lf, np.concatenate([one, diffs[:, :-1]], axis=1))
    suffix = _scan(lf, np.concatenate([one, diffs[:, :0:-1]], axis=1))[:, ::-1]
    return lf.mul(lf.mul(prefix, suffix), weights[None])


_BASIS_CONSTS: dict[tuple[str, str, int], tuple[Arr, Arr]] = {}


def _basis_consts(lf: LimbField, n: int) -> tuple[Arr, Arr]:
    """The ``n``-th roots ``W**i`` and the weights ``W**i / n``, as arrays of ``lf``."""
    key = (type(lf).__name__, lf.field.__name__, n)
    if key not in _BASIS_CONSTS:
        field = lf.field
        n_inv = field.inv(n)
        roots = field.nth_root_powers(n)
        _BASIS_CONSTS[key] = (
            lf.from_ints(roots),
            lf.from_ints([w * n_inv % field.MODULUS for w in roots]),
        )
    return _BASIS_CONSTS[key]


def _basis64(t: Arr, nodes: Arr, weights: Arr) -> Arr:
    """``_basis`` for Field64 on words: ``t`` of shape ``(B,)``, the result ``(B, n)``; the
    prefix and suffix products row by row of ``(n, B)`` arrays (their first factor is 1)."""
    n = nodes.shape[0]
    diffs = t[None, :] - nodes[:, None]  # t - W**j mod 2**64, then + p where it wrapped
    diffs += np.where(t[None, :] < nodes[:, None], _P64, np.uint64(0))
    prefix = np.empty((n, t.shape[0]), dtype=np.uint64)
    suffix = np.empty((n, t.shape[0]), dtype=np.uint64)
    prefix[0] = suffix[n - 1] = 1
    if n > 1:
        prefix[1], suffix[n - 2] = diffs[0], diffs[n - 1]
    for i in range(2, n):
        prefix[i] = _mul_goldilocks(prefix[i - 1], diffs[i - 1])
        suffix[n - 1 - i] = _mul_goldilocks(suffix[n - i], diffs[n - i])
    return _mul_goldilocks(_mul_goldilocks(prefix, suffix), weights[:, None]).T


def _scan(lf: LimbField, a: Arr) -> Arr:
    """Inclusive prefix products along axis 1: ``n - 1`` products, each over the whole batch
    (fewer element products than a log-depth scan, ``n`` instead of ``n log n``)."""
    out = a.copy()
    for d in range(1, out.shape[1]):
        out[:, d] = lf.mul(out[:, d], out[:, d - 1])
    return out


_EXTENSIONS: dict[tuple[str, int, int], list[list[int]]] = {}


def _extension(field: type[Field], m: int, size: int) -> list[list[int]]:
    """The linear map from a gadget polynomial's first ``m`` values to its other
    ``size - m`` values (``Lagrange.extend_values_to_power_of_2`` on unit vectors)."""
    key = (field.__name__, m, size)
    if key in _EXTENSIONS:
        return _EXTENSIONS[key]
    lag = Lagrange(field)
    cols = [
        lag.extend_values_to_power_of_2([int(i == j) for j in range(m)], size)[m:] for i in range(m)
    ]
    _EXTENSIONS[key] = [[cols[i][r] for i in range(m)] for r in range(size - m)]
    return _EXTENSIONS[key]


_EXTENSION_ARRAYS: dict[tuple[str, str, int, int], Arr] = {}


def _extension_array(lf: LimbField, m: int, size: int) -> Arr:
    """``_extension`` as an array of ``lf`` (cached: it is the same for every batch)."""
    key = (type(lf).__name__, lf.field.__name__, m, size)
    if key not in _EXTENSION_ARRAYS:
        _EXTENSION_ARRAYS[key] = lf.from_ints(_extension(lf.field, m, size))
    return _EXTENSION_ARRAYS[key]


def _query(vdaf: Prio3[Any, Any], lf: LimbField, meas: Arr, proof: Arr, qr: Arr, joint: Arr) -> Arr:
    """The verifier shares ``(B, VERIFIER_LEN, N)``; sub-batches bound the wire array."""
    valid = vdaf.flp.valid
    [g], [calls] = valid.GADGETS, valid.GADGET_CALLS
    p = wire_poly_len(calls)
    step = max(1, _WIRE_BUDGET // (g.ARITY * p * lf.N))
    out = [
        _query_rows(
            vdaf, lf, meas[s : s + step], proof[s : s + step], qr[s : s + step], joint[s : s + step]
        )
        for s in range(0, meas.shape[0], step)
    ]
    return np.concatenate(out, axis=0)


def _query_rows(
    vdaf: Prio3[Any, Any], lf: LimbField, meas: Arr, proof: Arr, qr: Arr, joint: Arr
) -> Arr:
    valid = vdaf.flp.valid
    field = lf.field
    [g], [calls] = valid.GADGETS, valid.GADGET_CALLS
    b = meas.shape[0]
    p = wire_poly_len(calls)
    m = gadget_poly_len(g.DEGREE, p)
    size = 1 << (m - 1).bit_length()
    seeds, known = proof[:, : g.ARITY], proof[:, g.ARITY : g.ARITY + m]
    if size > m:
        ext = _extension_array(lf, m, size)
        missing = lf.dot(ext[None], known[:, None])  # (B, size - m, N)
        poly = np.concatenate([known, missing], axis=1)
    else:
        poly = known
    gadget_outs = poly[:, (size // p) * np.arange(1, calls + 1)]  # (B, calls, N)

    # Wires: (B, ARITY, calls + 1, N), value 0 the seed, value k the k-th call's input (the
    # values past the last call, up to p, are zero and left out of the products below).
    wires = lf.zeros((b, g.ARITY, calls + 1))
    wires[:, :, 0] = seeds
    shares_inv = lf.const(field.inv(vdaf.SHARES))
    if isinstance(valid, Count):
        wires[:, :, 1] = meas[:, :1]
        outputs = [lf.sub(gadget_outs[:, 0], meas[:, 0])]
    elif isinstance(valid, Sum):
        wires[:, 0, 1 : calls + 1] = meas
        outputs = [gadget_outs[:, k] for k in range(calls)]
    elif isinstance(valid, (SumVec, Histogram, MultihotCountVec)):
        chunk = valid.chunk_length
        padded = lf.zeros((b, calls * chunk))
        padded[:, : valid.MEAS_LEN] = meas
        padded = padded.reshape(b, calls, chunk, lf.N)
        powers = lf.powers(joint, chunk)  # (B, calls, chunk, N): r_k ** (j + 1)
        even = lf.mul(powers, padded)
        odd = lf.sub(padded, shares_inv)
        wires[:, 0::2, 1 : calls + 1] = even.transpose(0, 2, 1, 3)
        wires[:, 1::2, 1 : calls + 1] = odd.transpose(0, 2, 1, 3)
        outputs = [lf.sum(gadget_outs, axis=1)]
        if isinstance(valid, Histogram):
            outputs.append(lf.sub(lf.sum(meas, axis=1), shares_inv))
        elif isinstance(valid, MultihotCountVec):
            weight = lf.sum(meas[:, : valid.length], axis=1)
            bits = valid.bits_for_weight
            w = [1 << i for i in range(bits - 1)]
            w.append(valid.max_weight - (2 ** (bits - 1) - 1))
            reported = lf.dot(meas[:, valid.length :], lf.from_ints(w)[None])
            outputs.append(lf.sub(weight, reported))
    else:
        raise TypeError(f"no batched circuit for {type(valid).__name__}")

    out_len = valid.EVAL_OUTPUT_LEN
    if out_len > 1:
        v = lf.dot(np.stack(outputs, axis=1), qr[:, :out_len])
        t = qr[:, out_len]
    else:
        v, t = outputs[0], qr[:, 0]
    _refuse_roots_of_unity(lf, t, p)
    wire_checks = lf.dot(wires, _basis(lf, p, t)[:, None, : calls + 1])  # (B, ARITY, N)
    gadget_check = lf.dot(poly, _basis(lf, size, t))
    return np.concatenate([v[:, None], wire_checks, gadget_check[:, None]], axis=1)


def _refuse_roots_of_unity(lf: LimbField, t: Arr, p: int) -> None:
    """Refuse a test point with ``t**p = 1`` (``p`` a power of two: ``log2 p`` squarings)."""
    power = t
    for _ in range(p.bit_length() - 1):
        power = lf.mul(power, power)
    bad = np.flatnonzero((power == lf.const(1)).all(axis=-1))
    if bad.size:
        raise ValueError(f"report {int(bad[0])}: test point is a root of unity")


def _truncate(valid: Any, lf: LimbField, meas: Arr) -> Arr:
    """``valid.truncate`` on every row (linear: a weighted sum of bits for Sum and SumVec)."""
    if isinstance(valid, (Count, Histogram)):
        return meas
    if isinstance(valid, MultihotCountVec):
        return meas[:, : valid.length]
    bits = valid.bits
    w = [1 << i for i in range(bits - 1)]
    w.append(valid.max_measurement - (2 ** (bits - 1) - 1))
    weights = lf.from_ints(w)
    if isinstance(valid, Sum):
        return lf.dot(meas, weights[None])[:, None]
    b = meas.shape[0]
    return lf.dot(meas.reshape(b, valid.length, bits, lf.N), weights[None, None])
