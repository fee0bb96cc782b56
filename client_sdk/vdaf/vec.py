"""Vectorized arithmetic in Field64 and Field128 for batches of reports.

An element is ``N = ENCODED_SIZE / 2`` little-endian 16-bit limbs held in ``uint64``, so an
array of elements has shape ``(..., N)`` and is read from (and written to) the draft's encoding
with one ``frombuffer``. Products of limbs are below 2**32, so a product or a dot product of up
to 2**28 terms accumulates in ``uint64`` without loss; reduction folds the part above
``2**(16 N)`` back with ``2**(16 N) = c (mod p)``, ``c = 2**(16 N) - p`` (``2**32 - 1`` for
Field64, ``28 * 2**64 - 1`` for Field128), a fixed number of times, then subtracts ``p`` once
if needed. Exact integer arithmetic throughout: no float, no Python object per element.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from client_sdk.vdaf.field import Field

__all__ = ["LimbField", "WordField64", "limb_field"]

Arr = npt.NDArray[np.uint64]
MASK = np.uint64(0xFFFF)
SIXTEEN = np.uint64(16)


def _limbs_of(x: int, n: int) -> list[int]:
    return [(x >> (16 * i)) & 0xFFFF for i in range(n)]


class LimbField:
    """Arithmetic on ``(..., N)`` limb arrays of one field."""

    def __init__(self, field: type[Field]) -> None:
        self.field = field
        self.N = field.ENCODED_SIZE // 2
        self.c = (1 << (16 * self.N)) - field.MODULUS
        self.c_bits = self.c.bit_length()
        self.c_limbs = [x for x in _limbs_of(self.c, (self.c_bits + 15) // 16)]
        self.c_arr = np.array(_limbs_of(self.c, self.N), dtype=np.uint64)
        self.c_col = np.array(_limbs_of(self.c, self.N), dtype=np.int64)
        self.p_col = np.array(_limbs_of(field.MODULUS, self.N), dtype=np.int64)
        # 2**16N = c (mod p) as a few signed limb terms: (offset, coefficient).
        self.fold = _sparse_limbs(self.c)
        # Rounds of carry-and-fold that bring any reduce input below 2**16N (with one spare):
        # Field128's top carry is below 2**39, then -1, 0 or 1 after one fold, then 0 within
        # two more; Field64's shrinks 2**38 -> 2**7 -> {-1, 0, 1} -> 0 within two more.
        self.rounds = 4 if self.c_bits > 64 else 5

    # -- conversions ------------------------------------------------------------------------

    def from_bytes(self, buf: bytes, shape: tuple[int, ...]) -> Arr:
        """Elements encoded as the draft does (little-endian), not checked against ``p``."""
        return np.frombuffer(buf, dtype="<u2").astype(np.uint64).reshape(*shape, self.N)

    def from_array(self, raw: npt.NDArray[np.uint8], shape: tuple[int, ...]) -> Arr:
        """``from_bytes`` of a byte array (its rows the encodings, not checked against ``p``)."""
        limbs = np.ascontiguousarray(raw).view("<u2")
        return limbs.astype(np.uint64).reshape(*shape, self.N)

    def to_bytes(self, a: Arr) -> bytes:
        return a.astype("<u2").tobytes()

    def from_ints(self, values: Sequence[int] | Sequence[Sequence[int]]) -> Arr:
        arr = np.asarray(values, dtype=object)
        flat = b"".join(int(x).to_bytes(2 * self.N, "little") for x in arr.reshape(-1))
        return self.from_bytes(flat, arr.shape)

    def to_ints(self, a: Arr) -> list[int]:
        """Flattened elements as Python ints (only for the few values that leave a batch):
        64-bit words through ``tolist``, two of them per Field128 element."""
        words = [_words64(a[..., k : k + 4]).reshape(-1).tolist() for k in range(0, self.N, 4)]
        if len(words) == 1:
            return list(words[0])
        lo, hi = words
        return [h << 64 | w for w, h in zip(lo, hi, strict=True)]

    def to_int_rows(self, a: Arr) -> list[list[int]]:
        """``to_ints`` of each row of a ``(B, ..., N)`` array: one list per report."""
        flat = self.to_ints(a)
        k = len(flat) // a.shape[0] if a.shape[0] else 0
        return [flat[i * k : (i + 1) * k] for i in range(a.shape[0])]

    def const(self, x: int) -> Arr:
        return np.array(_limbs_of(x % self.field.MODULUS, self.N), dtype=np.uint64)

    def zeros(self, shape: tuple[int, ...]) -> Arr:
        return np.zeros((*shape, self.N), dtype=np.uint64)

    def below_modulus(self, a: Arr) -> npt.NDArray[np.bool_]:
        """True where the limbs hold a canonical element (``< p``): compared limb by limb
        from the top."""
        p_limbs = _limbs_of(self.field.MODULUS, self.N)
        less = np.zeros(a.shape[:-1], dtype=bool)
        equal = np.ones(a.shape[:-1], dtype=bool)
        for d in range(self.N - 1, -1, -1):
            limb = a[..., d]
            less |= equal & (limb < p_limbs[d])
            equal &= limb == p_limbs[d]
        return less

    # -- arithmetic -------------------------------------------------------------------------

    def reduce(self, acc: Arr) -> Arr:
        """Canonical limbs of ``sum_d acc[..., d] * 2**(16 d)`` mod p, for at most ``2 N``
        limbs each below 2**44 (the folds multiply a limb by 28 at most twice: < 2**54).

        Works limb-major in signed 64-bit: each limb ``d >= N`` folds down by the sparse
        identity ``2**16N = sum coeff * 2**(16 offset)`` (Field128: ``28 * 2**64 - 1``,
        Field64: ``2**32 - 1``), then ``rounds`` rounds of carry-and-fold of the top carry bring
        the value into ``[0, 2**16N)`` (a carry of +-1 settles within two folds: if
        ``low + c`` carries out again, its new low part is below c), and ``p`` is subtracted
        once if needed.
        """
        return np.moveaxis(self._reduce_major(np.moveaxis(acc, -1, 0)), 0, -1)

    def _reduce_major(self, acc: npt.NDArray[Any]) -> Arr:
        """``reduce`` on limb-major input ``(D, ...)``; returns limb-major ``(N, ...)``."""
        n = self.N
        d_total = acc.shape[0]
        if d_total > 2 * n:
            raise ValueError(f"reduce takes at most {2 * n} limbs, got {d_total}")
        x = np.zeros((max(d_total, n + 1), *acc.shape[1:]), dtype=np.int64)
        x[:d_total] = acc
        for d in range(d_total - 1, n - 1, -1):
            top = x[d]
            for off, co in self.fold:
                if co == 1:
                    x[d - n + off] += top
                elif co == -1:
                    x[d - n + off] -= top
                else:
                    x[d - n + off] += co * top
        x = x[: n + 1]
        x[n] = 0
        for _ in range(self.rounds):
            for d in range(n):
                x[d + 1] += x[d] >> 16
                x[d] &= 0xFFFF
            top = x[n].copy()
            x[n] = 0
            for off, co in self.fold:
                x[off] += co * top
        for d in range(n):
            x[d + 1] += x[d] >> 16
            x[d] &= 0xFFFF
        # Now 0 <= x < 2**16N; if x >= p then x + c carries out of the top limb.
        y = x[:n] + self.c_col.reshape((n,) + (1,) * (x.ndim - 1))
        for d in range(n - 1):
            y[d + 1] += y[d] >> 16
            y[d] &= 0xFFFF
        over = y[n - 1] >> 16
        y[n - 1] &= 0xFFFF
        return np.where(over != 0, y, x[:n]).astype(np.uint64)

    def add(self, a: Arr, b: Arr) -> Arr:
        """``a + b``: limb sums with carries, then ``p`` subtracted where the sum reaches it."""
        a, b = np.broadcast_arrays(a, b)
        x = np.moveaxis(a, -1, 0).astype(np.int64) + np.moveaxis(b, -1, 0).astype(np.int64)
        return np.moveaxis(self._minus_p_if_needed(x), 0, -1)

    def sub(self, a: Arr, b: Arr) -> Arr:
        """``a - b``: signed limb differences with borrows, then ``p`` added where negative."""
        a, b = np.broadcast_arrays(a, b)
        x = np.moveaxis(a, -1, 0).astype(np.int64) - np.moveaxis(b, -1, 0).astype(np.int64)
        n = self.N
        for d in range(n - 1):
            x[d + 1] += x[d] >> 16
            x[d] &= 0xFFFF
        negative = x[n - 1] < 0
        x[n - 1] &= 0xFFFF
        y = x + self.p_col.reshape((n,) + (1,) * (x.ndim - 1))
        for d in range(n - 1):
            y[d + 1] += y[d] >> 16
            y[d] &= 0xFFFF
        y[n - 1] &= 0xFFFF
        return np.moveaxis(np.where(negative, y, x).astype(np.uint64), 0, -1)

    def _minus_p_if_needed(self, x: npt.NDArray[np.int64]) -> Arr:
        """Limb-major ``x`` (a value below ``2 p``, limbs not yet carried) to canonical."""
        n = self.N
        for d in range(n - 1):
            x[d + 1] += x[d] >> 16
            x[d] &= 0xFFFF
        top = x[n - 1] >> 16  # 0 or 1: the bit 2**16N
        x[n - 1] &= 0xFFFF
        y = x + self.c_col.reshape((n,) + (1,) * (x.ndim - 1))
        for d in range(n - 1):
            y[d + 1] += y[d] >> 16
            y[d] &= 0xFFFF
        over = (y[n - 1] >> 16) + top  # x + c >= 2**16N  <=>  x >= p
        y[n - 1] &= 0xFFFF
        return np.where(over != 0, y, x).astype(np.uint64)

    def neg(self, a: Arr) -> Arr:
        return self.sub(np.zeros_like(a), a)

    def mul(self, a: Arr, b: Arr) -> Arr:
        """Element-wise product (leading dimensions broadcast)."""
        if self.N == 4 and self.field.MODULUS == GOLDILOCKS:
            return _limbs64(_mul_goldilocks(_words64(a), _words64(b)))
        a, b = np.broadcast_arrays(a, b)
        n = self.N
        am = np.ascontiguousarray(np.moveaxis(a, -1, 0))
        bm = np.ascontiguousarray(np.moveaxis(b, -1, 0))
        acc = np.zeros((2 * n, *a.shape[:-1]), dtype=np.uint64)
        for i in range(n):
            acc[i : i + n] += am[i] * bm
        return np.moveaxis(self._reduce_major(acc), 0, -1)

    def dot(self, a: Arr, b: Arr) -> Arr:
        """``sum_k a[..., k, :] * b[..., k, :]`` over the second-to-last axis; leading
        dimensions broadcast. Chunks of 512 terms keep each limb sum below 2**44."""
        n = self.N
        k_total = max(a.shape[-2], b.shape[-2])
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        result: Arr | None = None
        for start in range(0, k_total, 512):
            a_k, b_k = a[..., start : start + 512, :], b[..., start : start + 512, :]
            acc = np.zeros((*lead, 2 * n), dtype=np.uint64)
            for i in range(n):
                acc[..., i : i + n] += np.einsum("...k,...kj->...j", a_k[..., i], b_k)
            part = self.reduce(acc)
            result = part if result is None else self.add(result, part)
        assert result is not None
        return result

    def sum(self, a: Arr, axis: int) -> Arr:
        """Sum over ``axis`` (an axis of the elements, not the limbs; < 2**28 terms)."""
        if axis < 0:
            axis -= 1
        return self.reduce(a.sum(axis=axis, dtype=np.uint64))

    def powers(self, r: Arr, count: int) -> Arr:
        """``r**1 .. r**count`` along a new second-to-last axis, by doubling."""
        out = r[..., None, :]
        while out.shape[-2] < count:
            top = out[..., -1:, :]
            out = np.concatenate([out, self.mul(out, top)], axis=-2)
        return out[..., :count, :]


GOLDILOCKS = 2**64 - 2**32 + 1  # Field64's modulus
_EPS = np.uint64(2**32 - 1)  # 2**64 mod p
_P64 = np.uint64(GOLDILOCKS)
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_TWO32 = np.uint64(1 << 32)


def _words64(a: Arr) -> Arr:
    """Field64 limbs ``(..., 4)`` to one ``uint64`` per element."""
    return (
        a[..., 0]
        | (a[..., 1] << SIXTEEN)
        | (a[..., 2] << np.uint64(32))
        | (a[..., 3] << np.uint64(48))
    )


def _limbs64(x: Arr) -> Arr:
    return np.stack([(x >> np.uint64(16 * i)) & MASK for i in range(4)], axis=-1)


def _mul_goldilocks(a: Arr, b: Arr) -> Arr:
    """``a * b mod p`` for Field64 on whole 64-bit words: the 128-bit product from four
    32-bit partial products (exact in ``uint64``), then ``2**64 = 2**32 - 1`` and
    ``2**96 = -1 (mod p)`` fold its high word ``h1 2**32 + h0`` into ``lo - h1 + h0 (2**32 -
    1)``, with the wrap-arounds of ``uint64`` corrected by ``2**32 - 1``."""
    a0, a1, b0, b1 = a & _M32, a >> _S32, b & _M32, b >> _S32
    lo, mid, hl, hh = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid += hl
    hh += (mid < hl) * _TWO32  # the carry out of mid is worth 2**96
    hh += mid >> _S32
    mid <<= _S32
    lo += mid
    hh += lo < mid  # the carry out of the low word (a bool adds 0 or 1)
    h1 = hh >> _S32
    hh &= _M32  # h0
    borrow = lo < h1
    lo -= h1
    lo -= borrow * _EPS  # a borrow added 2**64 = 2**32 - 1 (mod p)
    hh *= _EPS  # h0 (2**32 - 1) < 2**64
    lo += hh
    lo += (lo < hh) * _EPS  # a carry dropped 2**64 = 2**32 - 1 (mod p)
    lo -= (lo >= _P64) * _P64
    return lo


def _sparse_limbs(c: int) -> list[tuple[int, int]]:
    """``c`` as a short signed sum of ``coeff * 2**(16 offset)`` terms."""
    known = {
        (1 << 64) - (2**32 * 4294967295 + 1): [(2, 1), (0, -1)],  # 2**32 - 1
        (1 << 128) - (2**66 * 4611686018427387897 + 1): [(4, 28), (0, -1)],  # 28*2**64 - 1
    }
    terms = known.get(c)
    if terms is None or sum(co << (16 * off) for off, co in terms) != c:
        raise ValueError(f"no sparse form for c = {c}")
    return terms


def _carry(acc: Arr, extra: int) -> Arr:
    """Propagate carries so every limb is 16 bits; ``extra`` zero limbs absorb the top."""
    if extra:
        acc = np.concatenate([acc, np.zeros((*acc.shape[:-1], extra), dtype=np.uint64)], axis=-1)
    else:
        acc = acc.copy()
    for d in range(acc.shape[-1] - 1):
        acc[..., d + 1] += acc[..., d] >> SIXTEEN
        acc[..., d] &= MASK
    return acc


class WordField64(LimbField):
    """Field64 on whole 64-bit words: ``N = 1``, one ``uint64`` per element, so arrays have the
    same ``(..., N)`` shapes as limb arrays and every caller works unchanged. Fewer numpy
    operations per product, sum and conversion than four 16-bit limbs, which is what counts
    for the small circuits of Count and Sum (a batch's cost there is per operation, not per
    element). Exact: the products by ``_mul_goldilocks``, sums split into 32-bit halves."""

    def __init__(self, field: type[Field]) -> None:
        if field.MODULUS != GOLDILOCKS or field.ENCODED_SIZE != 8:
            raise ValueError(f"WordField64 needs Field64, not {field.__name__}")
        super().__init__(field)
        self.N = 1

    def from_bytes(self, buf: bytes, shape: tuple[int, ...]) -> Arr:
        return np.frombuffer(buf, dtype="<u8").astype(np.uint64).reshape(*shape, 1)

    def from_array(self, raw: npt.NDArray[np.uint8], shape: tuple[int, ...]) -> Arr:
        words = np.ascontiguousarray(raw).view("<u8")
        return words.astype(np.uint64).reshape(*shape, 1)

    def to_bytes(self, a: Arr) -> bytes:
        return a.astype("<u8").tobytes()

    def from_ints(self, values: Sequence[int] | Sequence[Sequence[int]]) -> Arr:
        return np.array(values, dtype=np.uint64)[..., None]

    def to_ints(self, a: Arr) -> list[int]:
        out: list[int] = a.reshape(-1).tolist()
        return out

    def to_int_rows(self, a: Arr) -> list[list[int]]:
        rows: list[list[int]] = a.reshape(a.shape[0], -1).tolist()
        return rows

    def const(self, x: int) -> Arr:
        return np.array([x % GOLDILOCKS], dtype=np.uint64)

    def below_modulus(self, a: Arr) -> npt.NDArray[np.bool_]:
        return a[..., 0] < _P64

    def reduce(self, acc: Arr) -> Arr:
        raise TypeError("WordField64 holds whole words: there are no limbs to reduce")

    def add(self, a: Arr, b: Arr) -> Arr:
        """``a + b``: ``p`` subtracted (mod 2**64) where the sum wrapped or reached ``p``; a
        wrapped sum ``s`` stands for ``s + 2**64 = s + p + (2**32 - 1)``, so ``s - p`` it is."""
        s = a + b
        return s - np.where((s < a) | (s >= _P64), _P64, _ZERO)

    def sub(self, a: Arr, b: Arr) -> Arr:
        """``a - b``, plus ``p`` (mod 2**64) where it borrowed."""
        return (a - b) + np.where(a < b, _P64, _ZERO)

    def mul(self, a: Arr, b: Arr) -> Arr:
        return _mul_goldilocks(a, b)

    def dot(self, a: Arr, b: Arr) -> Arr:
        """``sum_k a[..., k, :] * b[..., k, :]``: the products, then ``_sum_words``."""
        return self._sum_words(_mul_goldilocks(a, b), axis=-2)

    def sum(self, a: Arr, axis: int) -> Arr:
        return self._sum_words(a, axis - 1 if axis < 0 else axis)

    def _sum_words(self, x: Arr, axis: int) -> Arr:
        """Sum of canonical words along an axis (fewer than 2**32 of them): the low and high
        32-bit halves summed apart (no overflow), each reduced, then ``hi * 2**32 + lo``."""
        if x.shape[axis] >= 1 << 32:
            raise ValueError(f"sum of {x.shape[axis]} words: at most 2**32 - 1")
        lo = np.bitwise_and(x, _M32).sum(axis=axis, dtype=np.uint64)
        hi = np.right_shift(x, _S32).sum(axis=axis, dtype=np.uint64)
        lo -= np.where(lo >= _P64, _P64, _ZERO)
        hi -= np.where(hi >= _P64, _P64, _ZERO)
        return self.add(_mul_goldilocks(hi, _TWO32), lo)


_ZERO = np.uint64(0)

_LIMB_FIELDS: dict[str, LimbField] = {}


def limb_field(field: type[Field]) -> LimbField:
    """The (cached) vectorized arithmetic of ``field``: whole words for Field64
    (``WordField64``), 16-bit limbs otherwise."""
    lf = _LIMB_FIELDS.get(field.__name__)
    if lf is None:
        words = field.MODULUS == GOLDILOCKS and field.ENCODED_SIZE == 8
        lf = WordField64(field) if words else LimbField(field)
        _LIMB_FIELDS[field.__name__] = lf
    return lf
