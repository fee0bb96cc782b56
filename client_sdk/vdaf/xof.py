"""XofTurboShake128 of draft-irtf-cfrg-vdaf-20 (section "XofTurboShake128"), on the
TurboSHAKE128 of RFC 9861 as PyCryptodome (``Cryptodome.Hash.TurboSHAKE128``, >= 3.20) ships it.
"""

from __future__ import annotations

from Cryptodome.Hash import TurboSHAKE128

from client_sdk.vdaf.field import Field

__all__ = ["XofTurboShake128", "format_dst"]

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
        self._h = TurboSHAKE128.new(
            domain=1,
            data=len(dst).to_bytes(2, "little") + dst + bytes((len(seed),)) + seed + binder,
        )

    def next(self, length: int) -> bytes:
        return bytes(self._h.read(length))

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
