"""Input checks for the accounting package: the shared ones (``client_sdk.mechanisms._validation``)
under the accounting's names, each interval spelled out. ValueError naming the field and the value.

``check_epsilon`` is the one every mechanism uses (strictly positive and finite); the accounting
passes ``allow_zero`` where it reads a curve at epsilon = 0 or holds a claim of epsilon 0, and
``allow_inf`` where an infinite epsilon is meaningful.
"""

from __future__ import annotations

from typing import Any

from client_sdk.mechanisms._validation import (
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
    check_probability,
)

__all__ = [
    "check_alpha",
    "check_count",
    "check_delta",
    "check_epsilon",
    "check_positive",
    "check_rate",
]


def check_alpha(value: Any, field: str = "alpha") -> float:
    """A type I error in [0, 1]."""
    return check_probability(value, field, open_low=False, open_high=False)


def check_rate(value: Any, field: str = "q") -> float:
    """A sampling probability in (0, 1]."""
    return check_probability(value, field, open_low=True, open_high=False)


def check_count(value: Any, field: str = "count") -> int:
    """A positive integer (not a bool, not a float)."""
    return check_int(value, field, minimum=1)
