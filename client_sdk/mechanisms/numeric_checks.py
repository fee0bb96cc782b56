"""Checks of numeric inputs and parameters: errors name the field and the value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from client_sdk.mechanisms._validation import check_finite as check_finite
from client_sdk.mechanisms._validation import check_positive as check_positive
from client_sdk.mechanisms._validation import one_dimensional
from client_sdk.mechanisms.base import FloatArray

MAX_DIM = 1 << 16
"""The largest vector dimension a numeric mechanism accepts."""


def check_bounds(lower: Any, upper: Any) -> tuple[float, float]:
    """Finite bounds with upper > lower and a finite width."""
    low = check_finite(lower, "lower")
    high = check_finite(upper, "upper")
    if not high > low:
        raise ValueError(f"upper must be greater than lower; got lower={lower!r}, upper={upper!r}")
    if not math.isfinite(high - low):
        raise ValueError(f"upper - lower must be finite; got lower={lower!r}, upper={upper!r}")
    return low, high


def check_scalar_values(values: Any, field: str = "values") -> FloatArray:
    """A 1-D array of finite real numbers (a scalar counts as one value)."""
    array = one_dimensional(values, field)
    if array.size == 0:
        return np.zeros(0, dtype=np.float64)
    if array.dtype == np.bool_ or array.dtype.kind not in "iuf":
        raise ValueError(f"{field} must be real numbers; got dtype {array.dtype}")
    floats = array.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(floats))
    if bad.size:
        index = int(bad[0])
        raise ValueError(
            f"{field}[{index}] must be finite; got {floats[index]!r}"
            + (f" ({bad.size} non-finite values)" if bad.size > 1 else "")
        )
    return floats


def check_vector_values(values: Any, dim: int, field: str = "values") -> FloatArray:
    """An (n, dim) array of finite real numbers."""
    array = np.asarray(values)
    if array.ndim != 2 or array.shape[1] != dim:
        raise ValueError(f"{field} must have shape (n, {dim}); got shape {array.shape}")
    if array.size == 0:
        return np.zeros((array.shape[0], dim), dtype=np.float64)
    if array.dtype == np.bool_ or array.dtype.kind not in "iuf":
        raise ValueError(f"{field} must be real numbers; got dtype {array.dtype}")
    floats = array.astype(np.float64)
    bad = np.argwhere(~np.isfinite(floats))
    if bad.size:
        row, column = (int(v) for v in bad[0])
        raise ValueError(
            f"{field}[{row}, {column}] must be finite; got {floats[row, column]!r}"
            + (f" ({len(bad)} non-finite values)" if len(bad) > 1 else "")
        )
    return floats
