"""TurboSHAKE128 (RFC 9861) over many independent messages at once, in numpy.

The state of every message is 25 lanes of ``uint64``; a batch keeps them lane-major, shape
``(25, B)``, so each step of Keccak-p[1600, 12 rounds] (FIPS 202 section 3.2: theta, rho, pi,
chi, iota, and section 3.3: TurboSHAKE keeps the last 12 of Keccak-f's 24 rounds) is a handful
of numpy operations over all ``B`` states. Absorbing, padding and squeezing follow RFC 9861:
rate 168 bytes, the message followed by the domain byte ``D`` and zeros to a multiple of the
rate, the last byte XORed with 0x80. Exact against PyCryptodome's ``TurboSHAKE128``
(tests/client_sdk/vdaf/test_turboshake.py); it exists because one PyCryptodome call costs
6-30 microseconds, almost all Python overhead, about a whole Count report's verification budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "RATE",
    "keccak_p12",
    "turboshake128_arrays",
    "turboshake128_batch",
    "turboshake128_groups",
]

RATE = 168  # bytes: 1600 - 256 bits of capacity (RFC 9861, TurboSHAKE128)
_ROUNDS = 12

Lanes = npt.NDArray[np.uint64]


def _round_constants() -> list[int]:
    """The 24 iota constants of Keccak-f[1600] from the LFSR of FIPS 202 Algorithm 5."""
    r = 1
    bits = []
    for _ in range(7 * 24):
        bits.append(r & 1)
        r = ((r << 1) ^ 0x71) & 0xFF if r & 0x80 else r << 1
    return [
        sum(bits[7 * i + j] << ((1 << j) - 1) for j in range(7))  # bit 2**j - 1 of RC_i
        for i in range(24)
    ]


def _rho_pi() -> tuple[list[int], list[int]]:
    """For each destination lane ``x + 5 y`` of rho-then-pi: its source lane and rotation.
    Pi moves lane ``(x, y)`` to ``(y, 2 x + 3 y)``; rho's offsets are those of FIPS 202
    Algorithm 2 (the walk ``(x, y) -> (y, 2 x + 3 y)`` from ``(1, 0)``)."""
    offsets = [0] * 25
    x, y = 1, 0
    for t in range(24):
        offsets[x + 5 * y] = ((t + 1) * (t + 2) // 2) % 64
        x, y = y, (2 * x + 3 * y) % 5
    src = [0] * 25
    for x in range(5):
        for y in range(5):
            src[y + 5 * ((2 * x + 3 * y) % 5)] = x + 5 * y
    return src, [offsets[s] for s in src]


_RC = [np.uint64(x) for x in _round_constants()[24 - _ROUNDS :]]
_SRC, _ROT = _rho_pi()
_SRC_IDX = np.array(_SRC)
_LEFT = np.array(_ROT, dtype=np.uint64).reshape(5, 5, 1)
_RIGHT = np.array([(64 - r) % 64 for r in _ROT], dtype=np.uint64).reshape(5, 5, 1)  # r = 0: x | x
_ONE, _SIXTY_THREE = np.uint64(1), np.uint64(63)
# States per pass: the working arrays (25 lanes of this many) stay within the CPU's L2 cache.
_CHUNK = 4096


_SHIFTS: dict[int, tuple[Lanes, Lanes]] = {}


def _shifts(n: int) -> tuple[Lanes, Lanes]:
    """rho's left and right shift amounts spelled out for ``n`` states: numpy shifts two
    contiguous arrays about twice as fast as it shifts by a broadcast ``(5, 5, 1)`` one."""
    if n not in _SHIFTS:
        if len(_SHIFTS) > 8:
            _SHIFTS.clear()
        _SHIFTS[n] = (
            np.ascontiguousarray(np.broadcast_to(_LEFT, (5, 5, n))),
            np.ascontiguousarray(np.broadcast_to(_RIGHT, (5, 5, n))),
        )
    return _SHIFTS[n]


def keccak_p12(state: Lanes) -> Lanes:
    """Keccak-p[1600, 12] of every column of a ``(25, B)`` lane array (lane ``x + 5 y``).

    About fifteen numpy operations per round, each over all lanes of all states, in place on
    preallocated arrays; the cyclic neighbours of theta and chi are views of arrays with their
    first columns repeated at the end, so no step gathers but pi's."""
    if state.shape[1] > _CHUNK:
        return np.concatenate(
            [keccak_p12(state[:, s : s + _CHUNK]) for s in range(0, state.shape[1], _CHUNK)],
            axis=1,
        )
    return _keccak_p12_owned(np.array(state, dtype=np.uint64, order="C"))


def _keccak_p12_owned(a: Lanes) -> Lanes:
    """``keccak_p12`` of a C-contiguous ``(25, B)`` array the caller gives up: permuted in
    place (no copy) and returned."""
    if a.shape[1] > _CHUNK:
        return keccak_p12(a)
    n = a.shape[1]
    a3 = a.reshape(5, 5, n)  # (y, x, state)
    c = np.empty((7, n), dtype=np.uint64)  # column parities, c[i] = C[(i - 1) % 5]
    d = np.empty((5, n), dtype=np.uint64)
    t = np.empty((5, n), dtype=np.uint64)
    b = np.empty((5, 7, n), dtype=np.uint64)  # after rho and pi, b[y, i] = B[y, i % 5]
    b5 = b[:, :5]
    moved = np.empty((25, n), dtype=np.uint64)
    moved3 = moved.reshape(5, 5, n)
    left, right = _shifts(n)
    xor, and_, or_, inv = np.bitwise_xor, np.bitwise_and, np.bitwise_or, np.invert
    shl, shr = np.left_shift, np.right_shift
    for rc in _RC:
        # theta: every lane XORs the parities of the columns either side of it.
        xor.reduce(a3, axis=0, out=c[1:6])
        c[0], c[6] = c[5], c[1]
        shl(c[2:7], _ONE, out=d)
        shr(c[2:7], _SIXTY_THREE, out=t)
        or_(d, t, out=d)
        xor(d, c[0:5], out=d)
        xor(a3, d[None], out=a3)
        # rho and pi: move each lane, then rotate it.
        np.take(a, _SRC_IDX, axis=0, out=moved, mode="clip")  # in range: skip the checks
        shl(moved3, left, out=b5)
        shr(moved3, right, out=moved3)
        or_(b5, moved3, out=b5)
        # chi, then iota.
        b[:, 5:7] = b[:, 0:2]
        inv(b[:, 1:6], out=a3)
        and_(a3, b[:, 2:7], out=a3)
        xor(a3, b5, out=a3)
        a[0] ^= rc
    return a


def turboshake128_batch(messages: npt.NDArray[np.uint8], domain: int, length: int) -> bytes:
    """TurboSHAKE128(M, D, L) of each row of ``messages`` (``(B, M)`` bytes, one message per
    row), concatenated: ``B * length`` bytes, row by row."""
    return turboshake128_groups([messages], domain, length)[0]


def turboshake128_groups(
    groups: Sequence[npt.NDArray[np.uint8]], domain: int, length: int
) -> list[bytes]:
    """``turboshake128_batch`` of several ``(B_g, M_g)`` arrays in one pass of permutations;
    their messages must take the same number of rate blocks (``M_g // 168`` equal)."""
    return [out.tobytes() for out in turboshake128_arrays(groups, domain, length)]


def turboshake128_arrays(
    groups: Sequence[npt.NDArray[np.uint8]], domain: int, length: int
) -> list[npt.NDArray[np.uint8]]:
    """``turboshake128_groups`` as ``(B_g, length)`` byte arrays (no bytes object per message,
    for callers that read the streams as field elements)."""
    if not 0x01 <= domain <= 0x7F:
        raise ValueError(f"TurboSHAKE128 domain byte: {domain:#x} is not in 0x01..0x7F")
    for g in groups:
        if g.ndim != 2:
            raise ValueError(f"messages: expected a (B, M) byte array, got shape {g.shape}")
    blocks = groups[0].shape[1] // RATE + 1
    if any(g.shape[1] // RATE + 1 != blocks for g in groups):
        raise ValueError("batched TurboSHAKE128: messages of different numbers of blocks")
    sizes = [g.shape[0] for g in groups]
    b = sum(sizes)
    # Each message padded to whole blocks, then 32 zero bytes: a row's first 200 bytes, read
    # as 25 lanes, are the state after absorbing the first block (for one block, the zeros are
    # the capacity lanes; for more, those lanes are zeroed below).
    padded = np.zeros((b, blocks * RATE + 200 - RATE), dtype=np.uint8)
    row = 0
    for g in groups:
        m = g.shape[1]
        padded[row : row + g.shape[0], :m] = g
        padded[row : row + g.shape[0], m] = domain
        row += g.shape[0]
    padded[:, blocks * RATE - 1] ^= 0x80
    lanes = padded.view("<u8")  # (b, 21 * blocks + 4)
    # Lane-major (lane, message): one transposing copy.
    state = np.ascontiguousarray(lanes[:, :25].T, dtype=np.uint64)
    if blocks == 1:
        state = _keccak_p12_owned(state)
    else:
        state[RATE // 8 :] = 0
        state = keccak_p12(state)
        for k in range(1, blocks):
            state[: RATE // 8] ^= lanes[:, k * (RATE // 8) : (k + 1) * (RATE // 8)].T
            state = keccak_p12(state)
    squeezed = -(-length // RATE)
    last = -(-(length - (squeezed - 1) * RATE) // 8)  # lanes read from the last block
    out = np.empty(((squeezed - 1) * RATE // 8 + last, b), dtype="<u8")
    for k in range(squeezed):
        if k:
            state = keccak_p12(state)
        take = RATE // 8 if k < squeezed - 1 else last
        out[k * (RATE // 8) : k * (RATE // 8) + take] = state[:take]
    flat = np.ascontiguousarray(out.T).view(np.uint8)[:, :length]
    bounds = np.cumsum([0, *sizes])
    return [flat[bounds[i] : bounds[i + 1]] for i in range(len(groups))]
