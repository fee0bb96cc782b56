"""Solve for a parameter (noise scale, epsilon per report, number of reports) meeting a budget.

In the spirit of dp_accounting's ``mechanism_calibration``: the caller passes a factory
``build(param) -> PrivacyAccount`` rather than an object to mutate, and a bracket. The search
runs coarse passes first (PLDs on small lattices, still pessimistic) and reads only the last
bracket at full precision, with warm starts and secant steps on ln delta (``_Search``).

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

from analysis.accounting._pld import coarse
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
    """The parameter in [lo, hi] at the edge of meeting ``target``.

    Two spellings: ``calibrate(budget, build, param_min=a, param_max=b)`` returns a
    :class:`Calibration` (``.param``, ``.achieved``, ``.account``); the positional
    ``calibrate(budget, build, lo, hi)`` returns the parameter alone.

    Monotonicity: ``build(param)`` must become either steadily *more* private as ``param``
    grows (a noise scale) or steadily *less* private (an epsilon per report, a number of
    reports). The direction is read from the ends: the budget must be met at exactly one of
    ``build(lo)``, ``build(hi)``, otherwise :class:`CalibrationError` (a ValueError) is raised.
    The result always meets the budget at full precision: the *smallest* feasible parameter
    when privacy grows with it, the *largest* when privacy shrinks, to a relative ``rtol`` for
    floats (a parameter ``rtol`` further misses it) and exactly for integers (``integer=True``,
    the default when ``lo`` and ``hi`` are ints). The ends are read on coarse PLDs (a second
    time at full precision only when both seem to miss); the edge is found on coarser grids
    first, and only its last bracket is built at full precision (about five accounts where a
    bisection built about 40); see ``_Search``.
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
        param, account = _bisect(budget, build, param_min, param_max, integer, rtol)
        return Calibration(param, account.epsilon_at(budget.delta), account)
    if lo is None or hi is None:
        raise ValueError(f"calibrate needs a bracket lo, hi; got lo={lo!r}, hi={hi!r}")
    return _bisect(budget, build, lo, hi, integer, rtol)[0]


_LEVELS: tuple[int, ...] = (1 << 10, 1 << 12, 1 << 15)
"""Lattice spans of the coarse passes (see ``_pld.coarse``) before the full-precision one."""

_COARSE_RTOL = 1e-4
"""Relative width at which a coarse pass stops: far below the gap between its root and the next
pass's (about 1-2% at these spans)."""


class _Search:
    """The parameter at the edge of meeting a budget: coarse passes, then full precision.

    Each pass brackets the edge by stepping from the previous pass's root (a warm start, along
    the previous pass's slope of ln delta(epsilon) against the parameter) and narrows the bracket
    with secant steps on ln delta (regula falsi with the Illinois rule, then bisection, as
    fallbacks: see ``_narrow``). Coarse passes run inside ``_pld.coarse``: their PLDs are smaller
    and still pessimistic. Only the final bracket is read at full precision, and its ends are
    checked there: the result always meets the budget at full precision, the other end misses.
    Accounts are cached by (pass, parameter), so no account is built twice.
    """

    def __init__(
        self,
        budget: Budget,
        build: Callable[[Any], PrivacyAccount],
        integer: bool,
    ) -> None:
        self.budget = budget
        self.build = build
        self.integer = integer
        self.accounts: dict[tuple[int | None, float], PrivacyAccount] = {}
        self.margins: dict[tuple[int | None, float], float] = {}

    def account(self, param: float, level: int | None) -> PrivacyAccount:
        """``build(param)`` at a level; full-precision accounts are kept, coarse ones are read
        (inside their context: evaluation is lazy) and dropped."""
        key = (level, param)
        if key not in self.accounts:
            value = int(param) if self.integer else param
            if level is None:
                account = self.build(value)
            else:
                with coarse(level):
                    account = self.build(value)
            if not isinstance(account, PrivacyAccount):
                raise ValueError(
                    f"build must return a PrivacyAccount; got {type(account).__name__}"
                )
            if level is None:
                self.accounts[key] = account
            else:
                with coarse(level):
                    self.margins[key] = self._margin(account)
                return account
        return self.accounts[key]

    def margin(self, param: float, level: int | None) -> float:
        """ln delta_at(epsilon) - ln delta: <= 0 exactly when the budget is met."""
        key = (level, param)
        if key not in self.margins:
            account = self.account(param, level)
            if key not in self.margins:
                self.margins[key] = self._margin(account)
        return self.margins[key]

    def _margin(self, account: PrivacyAccount) -> float:
        delta = account.delta_at(self.budget.epsilon)
        if delta <= self.budget.delta:
            if delta <= 0 or self.budget.delta <= 0:
                return -math.inf
            return min(0.0, math.log(delta) - math.log(self.budget.delta))
        if self.budget.delta <= 0:
            return math.inf
        return max(math.log(delta) - math.log(self.budget.delta), 5e-324)

    def solve(self, lo: float, hi: float, rtol: float) -> float:
        ends = (lo, hi)
        coarse_meets = [self.margin(x, _LEVELS[0]) <= 0 for x in ends]
        if coarse_meets[0] != coarse_meets[1]:
            grows = coarse_meets[1]  # privacy grows with the parameter (a noise scale)
        else:
            fine_meets = [self.margin(x, None) <= 0 for x in ends]
            if fine_meets[0] == fine_meets[1]:
                state = "meets" if fine_meets[0] else "misses"
                raise CalibrationError(
                    f"the bracket [{lo!r}, {hi!r}] contains no solution: both ends {state} "
                    f"the target (epsilon={self.budget.epsilon!r}, "
                    f"delta={self.budget.delta!r}); widen or move it"
                )
            grows = fine_meets[1]
        good, bad = (hi, lo) if grows else (lo, hi)
        slope: float | None = None
        guess: float | None = None
        for level in (*_LEVELS, None):
            tol = rtol if level is None else max(rtol, _COARSE_RTOL)
            bracket = self._bracket(good, bad, guess, slope, level)
            if bracket is None:
                continue  # no edge at this coarse level beyond the guess: keep the guess
            good_l, bad_l = self._narrow(*bracket, level, tol)
            m_good, m_bad = self.margin(good_l, level), self.margin(bad_l, level)
            if math.isfinite(m_good) and math.isfinite(m_bad) and bad_l != good_l:
                slope = (m_bad - m_good) / (bad_l - good_l)
            guess = good_l
            if level is None:
                return good_l
        raise AssertionError("unreachable: the full-precision pass returns or raises")

    def _bracket(
        self,
        good: float,
        bad: float,
        guess: float | None,
        slope: float | None,
        level: int | None,
    ) -> tuple[float, float] | None:
        """A (meets, misses) pair at this level, searched outwards from ``guess`` (None at a
        coarse level where the caller's end agrees with the guess)."""
        if guess is None:
            return good, bad
        direction = 1.0 if bad > good else -1.0
        m = self.margin(guess, level)
        meets = m <= 0
        # Step towards the side the edge is on, by the predicted distance (plus a margin).
        if slope is not None and math.isfinite(m) and slope != 0:
            # The previous pass's slope predicts the edge well: aim just past it.
            width = 1.02 * abs(m / slope) + self._tol_abs(guess, guess, 1e-10)
        else:
            width = abs(guess) * 1e-3 + (1.0 if self.integer else 0.0)
        anchor = guess
        toward = direction if meets else -direction
        limit = bad if meets else good
        while True:
            probe = anchor + toward * width
            if (probe - limit) * toward >= 0:
                probe = limit
            probe = self._round(probe)
            m_probe = self.margin(probe, level)
            if (m_probe <= 0) != meets:
                return (anchor, probe) if meets else (probe, anchor)
            if probe == limit:
                # The caller's end agrees with the guess at this level: no edge beyond it.
                if level is None:
                    state = "meets" if meets else "misses"
                    raise CalibrationError(
                        f"the bracket contains no solution at full precision: both "
                        f"{anchor!r} and the end {limit!r} {state} the target; widen or move it"
                    )
                return None
            anchor = probe
            width *= 4

    def _narrow(
        self, good: float, bad: float, level: int | None, tol: float
    ) -> tuple[float, float]:
        """Shrink [good, bad] until its width is at most ``tol`` relative (1 for integers).

        The next probe is the secant through the last two probes when it falls inside the
        bracket, else regula falsi on the ends (Illinois: an end kept twice counts half), else
        the midpoint; it is nudged by 0.45 of the tolerance towards the end that did not move
        last, so that an accurate estimate closes the bracket from both sides.
        """
        stale = 0  # +1: the good end moved last, -1: the bad end
        weight_good = weight_bad = 1.0
        last = [good, bad]
        while not self._done(good, bad, tol):
            m_good = self.margin(good, level) * weight_good
            m_bad = self.margin(bad, level) * weight_bad
            width = bad - good
            lo_end, hi_end = sorted((good, bad))
            point = math.nan
            x0, x1 = last[-2], last[-1]
            f0, f1 = self.margin(x0, level), self.margin(x1, level)
            if math.isfinite(f0) and math.isfinite(f1) and f0 != f1:
                point = x1 - f1 * (x1 - x0) / (f1 - f0)
            if not lo_end < point < hi_end:
                if math.isfinite(m_good) and math.isfinite(m_bad) and m_bad > m_good:
                    point = good - m_good * width / (m_bad - m_good)
                else:
                    point = good + 0.5 * width
            nudge = 0.45 * self._tol_abs(good, bad, tol)
            point += nudge * (1.0 if stale >= 0 else -1.0) * (1.0 if width > 0 else -1.0)
            inner = min(0.01 * (hi_end - lo_end), 0.25 * self._tol_abs(good, bad, tol))
            point = self._round(min(max(point, lo_end + inner), hi_end - inner))
            if point in (good, bad):
                point = self._round(good + 0.5 * width)
                if point in (good, bad):
                    break
            last.append(point)
            if self.margin(point, level) <= 0:
                good = point
                weight_bad = weight_bad * 0.5 if stale == 1 else 1.0
                weight_good = 1.0
                stale = 1
            else:
                bad = point
                weight_good = weight_good * 0.5 if stale == -1 else 1.0
                weight_bad = 1.0
                stale = -1
        return good, bad

    def _tol_abs(self, good: float, bad: float, tol: float) -> float:
        if self.integer:
            return 1.0
        return tol * max(abs(good), abs(bad))

    def _done(self, good: float, bad: float, tol: float) -> bool:
        if self.integer:
            return abs(good - bad) <= 1
        return abs(good - bad) <= tol * max(abs(good), abs(bad))

    def _round(self, value: float) -> float:
        return float(round(value)) if self.integer else value


def _bisect(
    budget: Budget,
    build: Callable[[Any], PrivacyAccount],
    lo: float,
    hi: float,
    integer: bool | None,
    rtol: float,
) -> tuple[Any, PrivacyAccount]:
    if integer is None:
        integer = _is_int(lo) and _is_int(hi)
    if integer:
        if not (_is_int(lo) and _is_int(hi)):
            raise ValueError(f"lo and hi must be integers; got {lo!r}, {hi!r}")
        lo_v: float = float(int(lo))
        hi_v: float = float(int(hi))
    else:
        lo_v, hi_v = _finite(lo, "lo"), _finite(hi, "hi")
    if not lo_v < hi_v:
        raise ValueError(f"lo must be below hi; got lo={lo!r}, hi={hi!r}")
    if not (0 < rtol < 1):
        raise ValueError(f"rtol must be in (0, 1); got {rtol!r}")
    search = _Search(budget, build, integer)
    param = search.solve(lo_v, hi_v, rtol)
    account = search.account(param, None)
    return (int(param) if integer else param), account


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _finite(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{field} must be a finite number; got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{field} must be a finite number; got {value!r}")
    return number
