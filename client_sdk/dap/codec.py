"""TLS presentation-language encoding (RFC 8446, Section 3) as DAP uses it.

Integers are big-endian; ``opaque x<0..2^N-1>`` is a length prefix of N/8 bytes and the bytes.
Every decoding error names the field it was reading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["DapDecodeError", "DapEncodeError", "Reader", "fixed", "opaque", "uint"]


class DapDecodeError(ValueError):
    """A DAP message that does not decode: the message names the field and what was wrong."""


class DapEncodeError(ValueError):
    """A value that no DAP message can carry: the message names the field and the value."""


def uint(value: int, size: int, field: str) -> bytes:
    """``value`` as a big-endian unsigned integer of ``size`` bytes."""
    if not 0 <= value < 1 << (8 * size):
        raise DapEncodeError(f"{field} = {value} does not fit in uint{8 * size}")
    return value.to_bytes(size, "big")


def opaque(data: bytes, prefix: int, field: str) -> bytes:
    """``opaque field<0..2^(8*prefix)-1>``: a ``prefix``-byte length, then ``data``."""
    return uint(len(data), prefix, f"length of {field}") + bytes(data)


def fixed(data: bytes, size: int, field: str) -> bytes:
    """``opaque field[size]``: exactly ``size`` bytes."""
    if len(data) != size:
        raise DapEncodeError(f"{field} has {len(data)} bytes, expected {size}")
    return bytes(data)


class Reader:
    """Reads fields off an encoded message; ``finish`` refuses trailing bytes."""

    def __init__(self, data: bytes, message: str) -> None:
        self.data = memoryview(bytes(data))
        self.pos = 0
        self.message = message

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def fixed(self, size: int, field: str) -> bytes:
        if self.remaining() < size:
            raise DapDecodeError(
                f"{self.message}.{field}: needs {size} bytes at offset {self.pos}, "
                f"{self.remaining()} left"
            )
        out = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return out

    def uint(self, size: int, field: str) -> int:
        return int.from_bytes(self.fixed(size, field), "big")

    def opaque(self, prefix: int, field: str) -> bytes:
        length = self.uint(prefix, f"{field} (length)")
        return self.fixed(length, field)

    def sub(self, prefix: int, field: str) -> Reader:
        """A reader over a length-prefixed vector, to decode its items."""
        inner = Reader(self.opaque(prefix, field), f"{self.message}.{field}")
        return inner

    def field(self, name: str, read: Callable[[Reader], T]) -> T:
        """``read(self)`` with errors naming ``name`` (a struct within a struct)."""
        outer = self.message
        self.message = f"{outer}.{name}"
        try:
            return read(self)
        finally:
            self.message = outer

    def finish(self) -> None:
        if self.remaining():
            raise DapDecodeError(
                f"{self.message}: {self.remaining()} trailing bytes at offset {self.pos}"
            )
