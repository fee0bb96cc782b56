"""Validation shared by every mechanism: errors name the field and the value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt


def check_epsilon(value: Any, field: str = "epsilon") -> float:
    """A finite, strictly positive float (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{field} must be a positive finite number; got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{field} must be a positive finite number; got {value!r}")
    return number


def check_probability(
    value: Any, field: str, *, open_low: bool = True, open_high: bool = True
) -> float:
    """A float in (0, 1) (or with closed ends when asked)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{field} must be a number in (0, 1); got {value!r}")
    number = float(value)
    low_ok = number > 0 if open_low else number >= 0
    high_ok = number < 1 if open_high else number <= 1
    if not (math.isfinite(number) and low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{field} must be in {interval}; got {value!r}")
    return number


def check_int(value: Any, field: str, *, minimum: int, maximum: int | None = None) -> int:
    """An integer (not a bool, not a float) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{field} must be an integer >= {minimum}; got {value!r}")
    number = int(value)
    if number < minimum or (maximum is not None and number > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{field} must be an integer {bound}; got {value!r}")
    return number


def check_values(values: Any, k: int, field: str = "values") -> npt.NDArray[np.int64]:
    """Categorical inputs: a 1-D array (or sequence) of integers in ``[0, k)``.

    Floats, bools, strings and objects are refused even when they look integral, so a caller
    who passes labels or probabilities finds out at once.
    """
    array = np.asarray(values)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1:
        raise ValueError(f"{field} must be one-dimensional; got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{field} must be integers in [0, {k}); got dtype {array.dtype}")
    bad = np.flatnonzero((array < 0) | (array >= k))
    if bad.size:
        index = int(bad[0])
        raise ValueError(
            f"{field}[{index}] must be in [0, {k}); got {array[index]!r}"
            + (f" ({bad.size} values out of range)" if bad.size > 1 else "")
        )
    return array.astype(np.int64, copy=False)


def check_config_keys(
    config: Mapping[str, Any], *, name: str, required: set[str], optional: set[str]
) -> None:
    """Refuse missing and unknown keys of a mechanism config, naming them."""
    if not isinstance(config, Mapping):
        raise ValueError(f"a mechanism config must be a JSON object; got {type(config).__name__}")
    missing = sorted(required - set(config))
    if missing:
        raise ValueError(f"config for {name!r} is missing {', '.join(missing)}")
    unknown = sorted(set(config) - required - optional - {"mechanism"})
    if unknown:
        raise ValueError(f"config for {name!r} has unknown field(s) {', '.join(unknown)}")
