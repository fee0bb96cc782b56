"""Solve for a parameter (noise scale, epsilon per report, number of reports) meeting a budget.

In the spirit of dp_accounting's ``mechanism_calibration``: the caller passes a factory
``build(param) -> PrivacyAccount`` rather than an object to mutate, and the search is a bisection
on a bracket the caller supplies.

>>> from analysis.accounting import gaussian
>>> result = calibrate(
...     epsilon_budget(1.0, delta=1e-6),
...     lambda noise_multiplier: gaussian(noise_multiplier) * 100,
...     param_min=1.0,
...     param_max=100.0,
... )
>>> round(result.param, 3), result.achieved <= 1.0
(42.247, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, overload

import numpy as np

from analysis.accounting._validation import check_delta, check_epsilon
from analysis.accounting.account import PrivacyAccount


@dataclasses.dataclass(frozen=True)
class Budget:
    """A privacy target: the account must be (epsilon, delta)-DP."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, allow_zero=True))
        object.__setattr__(self, "delta", check_delta(self.delta))

    def met_by(self, account: PrivacyAccount) -> bool:
        """True when ``account`` is (epsilon, delta)-DP: delta_at(epsilon) <= delta."""
        return account.delta_at(self.epsilon) <= self.delta


def epsilon_budget(epsilon: float, delta: float = 0.0) -> Budget:
    """The target "(epsilon, delta)-DP" for :func:`calibrate`."""
    return Budget(epsilon, delta)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The result of :func:`calibrate` with ``param_min``/``param_max``: the parameter, the
    epsilon its account achieves at the budget's delta (at most the budget's epsilon), and
    that account."""

    param: Any
    achieved: float
    account: PrivacyAccount


class CalibrationError(ValueError):
    """The bracket does not contain a parameter at which the budget switches from met to not."""


@overload
def calibrate(
    target: Budget | tuple[float, float],
    build: Callable[[Any], PrivacyAccount],
    lo: float,
    hi: float,
    *,
    integer: bool | None = None,
    rtol: float = 1e-10,
) -> Any: ...


@overload
def calibrate(
    target: Budget | tuple[float, float],
    build: Callable[[Any], PrivacyAccount],
    *,
    param_min: float,
    param_max: float,
    integer: bool | None = None,
    rtol: float = 1e-10,
) -> Calibration: ...


def calibrate(
    target: Budget | tuple[float, float],
    build: Callable[[Any], PrivacyAccount],
    lo: float | None = None,
    hi: float | None = None,
    *,
    param_min: float | None = None,
    param_max: float | None = None,
    integer: bool | None = None,
    rtol: float = 1e-10,
) -> Any:
    """The parameter in [lo, hi] at the edge of meeting ``target``, by bisection.

    Two spellings: ``calibrate(budget, build, param_min=a, param_max=b)`` returns a
    :class:`Calibration` (``.param``, ``.achieved``, ``.account``); the positional
    ``calibrate(budget, build, lo, hi)`` returns the parameter alone.

    Monotonicity: ``build(param)`` must become either steadily *more* private as ``param``
    grows (a noise scale) or steadily *less* private (an epsilon per report, a number of
    reports). The direction is read from the ends: the budget must be met at exactly one of
    ``build(lo)``, ``build(hi)``, otherwise :class:`CalibrationError` (a ValueError) is raised.
    The result always meets the budget: the *smallest* feasible parameter when privacy grows
    with it, the *largest* when privacy shrinks. Floats are bisected to a relative ``rtol``;
    integers (``integer=True``, the default when ``lo`` and ``hi`` are ints) exactly.
    """
    budget = target if isinstance(target, Budget) else Budget(*target)
    keywords = param_min is not None or param_max is not None
    if keywords:
        if lo is not None or hi is not None:
            raise ValueError("give the bracket as lo, hi or as param_min=, param_max=, not both")
        if param_min is None or param_max is None:
            raise ValueError(
                f"calibrate needs both param_min and param_max; got param_min={param_min!r}, "
                f"param_max={param_max!r}"
            )
        param = _bisect(budget, build, param_min, param_max, integer, rtol)
        account = build(param)
        return Calibration(param, account.epsilon_at(budget.delta), account)
    if lo is None or hi is None:
        raise ValueError(f"calibrate needs a bracket lo, hi; got lo={lo!r}, hi={hi!r}")
    return _bisect(budget, build, lo, hi, integer, rtol)


def _bisect(
    budget: Budget,
    build: Callable[[Any], PrivacyAccount],
    lo: float,
    hi: float,
    integer: bool | None,
    rtol: float,
) -> Any:
    if integer is None:
        integer = _is_int(lo) and _is_int(hi)
    if integer:
        if not (_is_int(lo) and _is_int(hi)):
            raise ValueError(f"lo and hi must be integers; got {lo!r}, {hi!r}")
        lo_v: float = int(lo)
        hi_v: float = int(hi)
    else:
        lo_v, hi_v = _finite(lo, "lo"), _finite(hi, "hi")
    if not lo_v < hi_v:
        raise ValueError(f"lo must be below hi; got lo={lo!r}, hi={hi!r}")
    if not (0 < rtol < 1):
        raise ValueError(f"rtol must be in (0, 1); got {rtol!r}")

    def meets(param: float) -> bool:
        account = build(int(param) if integer else param)
        if not isinstance(account, PrivacyAccount):
            raise ValueError(f"build must return a PrivacyAccount; got {type(account).__name__}")
        return budget.met_by(account)

    at_lo, at_hi = meets(lo_v), meets(hi_v)
    if at_lo == at_hi:
        state = "meets" if at_lo else "misses"
        raise CalibrationError(
            f"the bracket [{lo!r}, {hi!r}] contains no solution: both ends {state} the target "
            f"(epsilon={budget.epsilon!r}, delta={budget.delta!r}); widen or move it"
        )
    # Keep the invariant: meets(good) is True, meets(bad) is False.
    good, bad = (hi_v, lo_v) if at_hi else (lo_v, hi_v)
    while True:
        if integer:
            if abs(good - bad) <= 1:
                return int(good)
            mid: float = (int(good) + int(bad)) // 2
        else:
            if abs(good - bad) <= rtol * max(abs(good), abs(bad)):
                return good
            mid = 0.5 * (good + bad)
            if mid in (good, bad):
                return good
        if meets(mid):
            good = mid
        else:
            bad = mid


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _finite(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{field} must be a finite number; got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{field} must be a finite number; got {value!r}")
    return number
