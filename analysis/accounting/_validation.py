"""Input checks for the accounting package: ValueError naming the field and the value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _number(value: Any, field: str, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{field} must be {expected}; got {value!r}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"{field} must be {expected}; got {value!r}")
    return number


def check_delta(value: Any, field: str = "delta") -> float:
    """A delta in [0, 1)."""
    number = _number(value, field, "a number in [0, 1)")
    if not 0 <= number < 1:
        raise ValueError(f"{field} must be in [0, 1); got {value!r}")
    return number


def check_epsilon(value: Any, field: str = "epsilon", *, allow_inf: bool = False) -> float:
    """An epsilon >= 0 (finite unless ``allow_inf``)."""
    number = _number(value, field, "a number >= 0")
    if number < 0 or (math.isinf(number) and not allow_inf):
        raise ValueError(f"{field} must be a finite number >= 0; got {value!r}")
    return number


def check_alpha(value: Any, field: str = "alpha") -> float:
    """A type I error in [0, 1]."""
    number = _number(value, field, "a number in [0, 1]")
    if not 0 <= number <= 1:
        raise ValueError(f"{field} must be in [0, 1]; got {value!r}")
    return number


def check_rate(value: Any, field: str = "q") -> float:
    """A sampling probability in (0, 1]."""
    number = _number(value, field, "a number in (0, 1]")
    if not 0 < number <= 1:
        raise ValueError(f"{field} must be in (0, 1]; got {value!r}")
    return number


def check_positive(value: Any, field: str) -> float:
    """A finite number > 0."""
    number = _number(value, field, "a finite number > 0")
    if not (0 < number < math.inf):
        raise ValueError(f"{field} must be a finite number > 0; got {value!r}")
    return number


def check_count(value: Any, field: str = "count") -> int:
    """A positive integer (not a bool, not a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{field} must be a positive integer; got {value!r}")
    if int(value) < 1:
        raise ValueError(f"{field} must be a positive integer; got {value!r}")
    return int(value)
