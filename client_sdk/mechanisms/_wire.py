"""Wire helpers shared by mechanisms.

Rules for every payload: JSON-safe; integers on the wire stay below 2**53 so that every JSON
implementation reads them exactly; bit vectors travel as unpadded URL-safe base64 of the packed
bits (``numpy.packbits``, big-endian bit order, trailing pad bits zero).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms.base import WireFormatError

JSON_SAFE_INT = 1 << 53

IMPLAUSIBLE_PROBABILITY = 2.0**-64
"""Mechanisms whose noise is unbounded (laplace, gaussian) refuse at parse time every payload an
honest device sends with probability at most this (per report, whatever its value): one report
then moves a mean by a bounded amount instead of by up to 2**53 grid steps."""

IntArray = npt.NDArray[np.int64]


def is_plain_int(value: Any) -> bool:
    """True for a Python/numpy integer that is not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _int_problem(value: Any, low: int, high: int, what: str) -> str | None:
    """Why ``value`` is not an integer in [low, high), or None."""
    if not is_plain_int(value):
        return f"{what} must be an integer; got {type(value).__name__}"
    if not low <= int(value) < high:
        return f"{what} must be in [{low}, {high}); got {value}"
    return None


def parse_int_payloads(
    payloads: Sequence[Any], high: int, what: str = "value", *, low: int = 0
) -> tuple[IntArray, list[WireFormatError]]:
    """Payloads that are each one integer in ``[low, high)``."""
    good: list[int] = []
    errors: list[WireFormatError] = []
    for index, payload in enumerate(payloads):
        problem = _int_problem(payload, low, high, what)
        if problem:
            errors.append(WireFormatError(index, problem))
        else:
            good.append(int(payload))
    return np.asarray(good, dtype=np.int64), errors


def parse_int_vectors(
    payloads: Sequence[Any], length: int, low: int, high: int, what: str = "value"
) -> tuple[IntArray, list[WireFormatError]]:
    """Payloads that are each a list of ``length`` integers in [low, high)."""
    good: list[list[int]] = []
    errors: list[WireFormatError] = []
    for index, payload in enumerate(payloads):
        if not isinstance(payload, (list, tuple)):
            errors.append(
                WireFormatError(
                    index,
                    f"payload must be a list of {length} integers; got {type(payload).__name__}",
                )
            )
            continue
        if len(payload) != length:
            errors.append(
                WireFormatError(index, f"payload must have {length} entries; got {len(payload)}")
            )
            continue
        problem = next(
            (
                p
                for j, item in enumerate(payload)
                if (p := _int_problem(item, low, high, f"{what}[{j}]"))
            ),
            None,
        )
        if problem:
            errors.append(WireFormatError(index, problem))
        else:
            good.append([int(v) for v in payload])
    array = np.asarray(good, dtype=np.int64).reshape(len(good), length)
    return array, errors


def parse_coordinate_pairs(
    payloads: Sequence[Any], k: int, d: int, high: int
) -> tuple[list[list[int]], list[list[int]], list[WireFormatError]]:
    """Payloads that are each k pairs [coordinate, output], coordinates strictly increasing in
    [0, d), outputs in [0, high)."""
    coordinates: list[list[int]] = []
    outputs: list[list[int]] = []
    errors: list[WireFormatError] = []
    for index, payload in enumerate(payloads):
        if not isinstance(payload, (list, tuple)) or len(payload) != k:
            got = len(payload) if isinstance(payload, (list, tuple)) else type(payload).__name__
            errors.append(
                WireFormatError(
                    index, f"payload must be a list of {k} [coordinate, output] pairs; got {got}"
                )
            )
            continue
        row_c: list[int] = []
        row_o: list[int] = []
        problem: str | None = None
        for j, pair in enumerate(payload):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                problem = f"pair {j} must be [coordinate, output]"
                break
            problem = _int_problem(pair[0], 0, d, f"coordinate of pair {j}") or _int_problem(
                pair[1], 0, high, f"output of pair {j}"
            )
            if problem:
                break
            if row_c and int(pair[0]) <= row_c[-1]:
                problem = f"coordinates must be strictly increasing; pair {j} has {pair[0]}"
                break
            row_c.append(int(pair[0]))
            row_o.append(int(pair[1]))
        if problem:
            errors.append(WireFormatError(index, problem))
        else:
            coordinates.append(row_c)
            outputs.append(row_o)
    return coordinates, outputs, errors


SIGNED_WIRE_LIMIT = JSON_SAFE_INT
"""Unbounded integer outputs (noise on a grid) travel as integers of absolute value < 2**53."""


SIGNED_WIRE_LIMIT = JSON_SAFE_INT
"""Unbounded integer outputs (noise on a grid) travel as integers of absolute value < 2**53."""


def widest_int(low: int, high: int) -> int:
    """The integer of ``[low, high)`` with the longest JSON text (a bound on a payload's size)."""
    return low if len(str(low)) > len(str(high - 1)) else high - 1


def bits_text(bits: int) -> str:
    """The wire text of a ``bits``-bit vector of zeros: every such vector has its length."""
    return encode_bits(np.zeros((1, (bits + 7) // 8), dtype=np.uint8))[0]


_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def wire_length(payload: Any) -> int:
    """The length in bytes of a payload's compact JSON in UTF-8 (what a device seals)."""
    return len(_compact(payload).encode("utf-8"))


def encode_bit_rows(reports: npt.ArrayLike, bits: int) -> list[str]:
    """Reports of ``bits``-bit packed rows to the wire, checking their shape first."""
    rows = np.asarray(reports, dtype=np.uint8)
    nbytes = (bits + 7) // 8
    if rows.ndim != 2 or rows.shape[1] != nbytes:
        raise ValueError(f"reports must have shape (n, {nbytes}) for k={bits}; got {rows.shape}")
    return encode_bits(rows)


def encode_bits(packed: npt.NDArray[np.uint8]) -> list[str]:
    """Packed bit rows (n, ceil(bits/8)) to unpadded URL-safe base64 strings."""
    rows = np.ascontiguousarray(packed, dtype=np.uint8)
    return [base64.urlsafe_b64encode(row.tobytes()).rstrip(b"=").decode("ascii") for row in rows]


def decode_bits(
    payloads: Sequence[Any], bits: int, *, exact_ones: int | None = None
) -> tuple[npt.NDArray[np.uint8], list[WireFormatError]]:
    """Inverse of :func:`encode_bits`, validating length, pad bits and (optionally) weight."""
    nbytes = (bits + 7) // 8
    pad = 8 * nbytes - bits
    pad_mask = (1 << pad) - 1
    expected_chars = (4 * nbytes + 2) // 3
    rows: list[bytes] = []
    errors: list[WireFormatError] = []
    for index, payload in enumerate(payloads):
        if not isinstance(payload, str):
            errors.append(
                WireFormatError(
                    index, f"bit vector must be a base64 string; got {type(payload).__name__}"
                )
            )
            continue
        if len(payload) != expected_chars:
            errors.append(
                WireFormatError(
                    index,
                    f"bit vector of {bits} bits must be {expected_chars} base64 characters; "
                    f"got {len(payload)}",
                )
            )
            continue
        try:
            raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        except (binascii.Error, ValueError):
            errors.append(WireFormatError(index, "bit vector is not valid base64"))
            continue
        if len(raw) != nbytes or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != payload:
            errors.append(WireFormatError(index, "bit vector is not canonical base64"))
            continue
        if pad and raw[-1] & pad_mask:
            errors.append(WireFormatError(index, f"bit vector sets bits beyond its {bits} bits"))
            continue
        if exact_ones is not None:
            ones = int(np.unpackbits(np.frombuffer(raw, dtype=np.uint8)).sum())
            if ones != exact_ones:
                errors.append(
                    WireFormatError(
                        index, f"bit vector must have exactly {exact_ones} ones; got {ones}"
                    )
                )
                continue
        rows.append(raw)
    if rows:
        packed = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), nbytes).copy()
    else:
        packed = np.zeros((0, nbytes), dtype=np.uint8)
    return packed, errors
