"""XofTurboShake128 of draft-irtf-cfrg-vdaf-20 (section "XofTurboShake128"), on the
TurboSHAKE128 of RFC 9861 as PyCryptodome (``Cryptodome.Hash.TurboSHAKE128``, >= 3.20) ships it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from Cryptodome.Hash import TurboSHAKE128

from client_sdk.vdaf.field import Field
from client_sdk.vdaf.turboshake import RATE, turboshake128_arrays

__all__ = ["XofRequest", "XofTurboShake128", "format_dst"]

# One batched XOF request: seeds, dst, binders, bytes per stream.
XofRequest = tuple[Sequence[bytes], bytes, Sequence[bytes], int]

# Batches at least this large, whose XOF calls take at most this many Keccak-p permutations
# each (absorbing and squeezing), run through the vectorized TurboSHAKE128: one PyCryptodome
# call costs about 6-8 us of Python overhead, one vectorized permutation 1.5-3 us per state
# (measured on this project's 2-core machine), so longer streams stay with PyCryptodome.
_VECTOR_MIN_BATCH = 16
_VECTOR_MAX_PERMUTATIONS = 2

VERSION = 18  # draft-irtf-cfrg-vdaf-20, section "Conventions"


def format_dst(algo_class: int, algo: int, usage: int) -> bytes:
    """The domain separation tag: version, class, algorithm id, usage (big-endian)."""
    return (
        VERSION.to_bytes(1, "big")
        + algo_class.to_bytes(1, "big")
        + algo.to_bytes(4, "big")
        + usage.to_bytes(2, "big")
    )


class XofTurboShake128:
    """TurboSHAKE128 with domain byte 1 over ``len(dst) || dst || len(seed) || seed || binder``;
    ``next`` squeezes the stream in order."""

    SEED_SIZE = 32

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        if len(seed) > 255:
            raise ValueError(f"XOF seed: {len(seed)} bytes, at most 255 allowed")
        if len(dst) > 65535:
            raise ValueError(f"XOF dst: {len(dst)} bytes, at most 65535 allowed")
        self._h = TurboSHAKE128.new(domain=1, data=self._input(seed, dst, binder))

    @staticmethod
    def _input(seed: bytes, dst: bytes, binder: bytes) -> bytes:
        """The TurboSHAKE128 message: ``len(dst) (2 bytes LE) || dst || len(seed) || seed ||
        binder``."""
        return len(dst).to_bytes(2, "little") + dst + bytes((len(seed),)) + seed + binder

    def next(self, length: int) -> bytes:
        return bytes(self._h.read(length))

    @classmethod
    def next_batch(
        cls, seeds: Sequence[bytes], dst: bytes, binders: Sequence[bytes], length: int
    ) -> list[bytes]:
        """``cls(seed, dst, binder).next(length)`` for each pair of a batch. Short calls of a
        large batch (all of one message length) go through the vectorized TurboSHAKE128
        (``client_sdk.vdaf.turboshake``), the others through PyCryptodome one by one."""
        return cls.next_batches([(seeds, dst, binders, length)])[0]

    @classmethod
    def next_batches(cls, requests: Sequence[XofRequest]) -> list[list[bytes]]:
        """``next_batch`` of several requests ``(seeds, dst, binders, length)``; the
        vectorized ones that absorb and squeeze equally many blocks share the permutations
        (more states per numpy operation, fewer operations)."""
        return [
            [row.tobytes() for row in out] if out.shape[1] else [b""] * out.shape[0]
            for out in cls.next_batches_arrays(requests)
        ]

    @classmethod
    def next_batches_arrays(cls, requests: Sequence[XofRequest]) -> list[npt.NDArray[np.uint8]]:
        """``next_batches`` as one ``(B, length)`` byte array per request (stream by stream,
        row by row), without a bytes object per stream."""
        results: list[npt.NDArray[np.uint8] | None] = [None] * len(requests)
        groups: dict[tuple[int, int], list[tuple[int, npt.NDArray[np.uint8], int]]] = {}
        for r, (seeds, dst, binders, length) in enumerate(requests):
            rows = cls._rows(seeds, dst, binders, length)
            if rows is None:
                raw = b"".join(
                    cls(seed, dst, binder).next(length)
                    for seed, binder in zip(seeds, binders, strict=True)
                )
                results[r] = np.frombuffer(raw, dtype=np.uint8).reshape(len(seeds), length)
            else:
                key = (rows.shape[1] // RATE, (length - 1) // RATE)  # blocks absorbed, squeezed
                groups.setdefault(key, []).append((r, rows, length))
        for group in groups.values():
            longest = max(length for _, _, length in group)
            outs = turboshake128_arrays([rows for _, rows, _ in group], 1, longest)
            for (r, _, length), out in zip(group, outs, strict=True):
                results[r] = out[:, :length]
        done = [out for out in results if out is not None]
        assert len(done) == len(requests)
        return done

    @classmethod
    def _rows(
        cls, seeds: Sequence[bytes], dst: bytes, binders: Sequence[bytes], length: int
    ) -> npt.NDArray[np.uint8] | None:
        """The request's messages as a ``(B, M)`` array if it is worth vectorizing, else
        None (checking the lengths the draft bounds)."""
        if len(seeds) != len(binders):
            raise ValueError(f"XOF batch: {len(seeds)} seeds but {len(binders)} binders")
        seed_lens = set(map(len, seeds))
        if seed_lens and max(seed_lens) > 255:
            raise ValueError(f"XOF seed: {max(seed_lens)} bytes, at most 255 allowed")
        if len(dst) > 65535:
            raise ValueError(f"XOF dst: {len(dst)} bytes, at most 65535 allowed")
        b = len(seeds)
        if b < _VECTOR_MIN_BATCH or length <= 0:
            return None
        s_len, b_len = len(seeds[0]), len(binders[0])
        m = len(cls._input(bytes(s_len), dst, bytes(b_len)))
        if (
            m // RATE + 1 + (length - 1) // RATE > _VECTOR_MAX_PERMUTATIONS
            or len(seed_lens) != 1
            or set(map(len, binders)) != {b_len}
        ):
            return None
        # The common head, then each seed and binder.
        head = np.frombuffer(cls._input(b"", dst, b"")[:-1] + bytes((s_len,)), dtype=np.uint8)
        return np.concatenate(
            [
                np.broadcast_to(head, (b, head.size)),
                np.frombuffer(b"".join(seeds), dtype=np.uint8).reshape(b, s_len),
                np.frombuffer(b"".join(binders), dtype=np.uint8).reshape(b, b_len),
            ],
            axis=1,
        )

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(cls.SEED_SIZE)

    def next_vec(self, field: type[Field], length: int) -> list[int]:
        """``length`` elements by rejection sampling (both fields' masks are all ones)."""
        size = field.ENCODED_SIZE
        mod = field.MODULUS
        out: list[int] = []
        while len(out) < length:
            need = length - len(out)
            chunk = self.next(need * size)
            for i in range(0, len(chunk), size):
                x = int.from_bytes(chunk[i : i + size], "little")
                if x < mod:
                    out.append(x)
        return out

    @classmethod
    def expand_into_vec(
        cls, field: type[Field], seed: bytes, dst: bytes, binder: bytes, length: int
    ) -> list[int]:
        return cls(seed, dst, binder).next_vec(field, length)
