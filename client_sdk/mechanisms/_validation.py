"""Argument checks shared by the mechanisms, the device's ledger and the analysis.

One definition of each check: errors are ``ValueError`` naming the field and the value. Epsilon
is strictly positive and finite wherever a mechanism is built; the accounting, which also reads
curves at epsilon = 0 and holds infinite budgets, says so explicitly (:func:`check_epsilon`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt


def describe(value: Any) -> str:
    """A bounded description of an untrusted value for an error message (never a huge repr)."""
    if value is None or isinstance(value, (bool, int, float, str, np.integer, np.floating)):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return f"a {type(value).__name__}"


def shape_of(value: Any) -> str:
    """What a recorded value is, without what it says: its type, and a string's length (for
    errors that end up in logs: a raw value is never echoed)."""
    if isinstance(value, str):
        return f"a str of {len(value)} characters"
    return f"a {type(value).__name__}"


def _real(value: Any, field: str, expected: str) -> float:
    """A real number that is not NaN (bools, strings and complex numbers are refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be {expected}; got {describe(value)}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"{field} must be {expected}; got {describe(value)}")
    return number


def check_finite(value: Any, field: str) -> float:
    """A finite real number (not a bool)."""
    number = _real(value, field, "a finite number")
    if not math.isfinite(number):
        raise ValueError(f"{field} must be a finite number; got {describe(value)}")
    return number


def check_positive(
    value: Any, field: str, *, allow_zero: bool = False, allow_inf: bool = False
) -> float:
    """A strictly positive finite number; ``allow_zero`` admits 0, ``allow_inf`` admits +inf."""
    if allow_zero:
        bound = "a number >= 0" if allow_inf else "a finite number >= 0"
    else:
        bound = "a positive number" if allow_inf else "a positive finite number"
    number = _real(value, field, bound)
    if (number < 0 if allow_zero else number <= 0) or (math.isinf(number) and not allow_inf):
        raise ValueError(f"{field} must be {bound}; got {describe(value)}")
    return number


def check_epsilon(
    value: Any, field: str = "epsilon", *, allow_zero: bool = False, allow_inf: bool = False
) -> float:
    """An epsilon: strictly positive, finite and at most :data:`MAX_EPSILON`, as every
    mechanism needs.

    The options are for the accounting's arguments only, and are spelled out where used: an
    epsilon at which a curve is read may be 0 (``allow_zero``), a budget or claim may be
    infinite (``allow_inf``); neither is bounded above.
    """
    number = check_positive(value, field, allow_zero=allow_zero, allow_inf=allow_inf)
    if not (allow_zero or allow_inf) and number > MAX_EPSILON:
        raise ValueError(
            f"{field} must be at most {MAX_EPSILON:g}: beyond it the sampler's 2**-64 grid "
            f"cannot represent the channel's probabilities; got {describe(value)}"
        )
    return number


MAX_EPSILON = 40.0
"""The largest epsilon a mechanism is built with. Probabilities are integer thresholds on a
2**-64 grid, so no implemented ratio of output probabilities exceeds 2**64 = e**44.36; beyond
about that epsilon a mechanism would claim what it cannot implement (and exp overflows near
709.8). 40 keeps a margin and is far above any epsilon worth collecting telemetry at."""


MIN_EPSILON = 1e-4
"""The smallest epsilon a campaign's mechanism config may ask for (:func:`check_config_epsilon`;
docs/architecture.md, "The epsilon floor"). Above it every mechanism's arithmetic stays exact to
far below its noise: doubles near 1 are 2**-52 apart, so e**eps - 1 (e**(eps/2) - 1 for piecewise
and hybrid) keeps a relative precision of 2**-52 / eps (4e-12 here, none at 1e-300 where
e**eps == 1 and the estimators divide by zero); Square Wave's b(eps) divides two differences of
order eps**2 / 2 (relative error 4e-8 here, 4e-4 at 1e-6, no digit left at 1e-8); Laplace's
integer noise needs a scale of at most 2**36 grid steps (its default 2**20 steps: eps >= 2**-16);
a 64-bit threshold keeps a signal of (e**eps - 1)/K to 2**-64 K / eps. Below it, a frequency's
standard error exceeds 10**4 / sqrt(n), so no campaign is worth collecting there either."""


def check_config_epsilon(value: Any, field: str = "epsilon") -> float:
    """A config's epsilon: :func:`check_epsilon` and at least :data:`MIN_EPSILON`, in the one
    place every mechanism config passes (``client_sdk.mechanisms.factory``), so the collector's
    campaign creation refuses it too. Mechanisms built inside others may run at a share of it
    (SFP's fragment, HCMS's e**(eps/2)): the floor keeps those exact as well."""
    number = check_epsilon(value, field)
    if number < MIN_EPSILON:
        raise ValueError(
            f"{field} must be at least {MIN_EPSILON:g}: below it e**{field} - 1 loses its digits "
            f"in 64-bit floats and the estimates stop being exact; got {describe(value)}"
        )
    return number


def check_probability(
    value: Any, field: str, *, open_low: bool = True, open_high: bool = True
) -> float:
    """A float in (0, 1) (or with closed ends when asked)."""
    interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
    number = _real(value, field, f"a number in {interval}")
    low_ok = number > 0 if open_low else number >= 0
    high_ok = number < 1 if open_high else number <= 1
    if not (low_ok and high_ok):
        raise ValueError(f"{field} must be in {interval}; got {describe(value)}")
    return number


def check_delta(value: Any, field: str = "delta", *, allow_zero: bool = True) -> float:
    """A delta in [0, 1) (in (0, 1) without ``allow_zero``)."""
    return check_probability(value, field, open_low=not allow_zero, open_high=True)


def check_int(value: Any, field: str, *, minimum: int, maximum: int | None = None) -> int:
    """An integer (not a bool, not a float) in ``[minimum, maximum]``."""
    if maximum is not None:
        expected = f"an integer in [{minimum}, {maximum}]"
    else:
        expected = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{field} must be {expected}; got {describe(value)}")
    number = int(value)
    if number < minimum or (maximum is not None and number > maximum):
        raise ValueError(f"{field} must be {expected}; got {describe(value)}")
    return number


def one_dimensional(values: Any, field: str = "values") -> npt.NDArray[Any]:
    """``values`` as a 1-D array (a scalar counts as one value); other shapes are refused."""
    array = np.asarray(values)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1:
        raise ValueError(f"{field} must be one-dimensional; got shape {array.shape}")
    return array


def check_values(values: Any, k: int, field: str = "values") -> npt.NDArray[np.int64]:
    """Categorical inputs: a 1-D array (or sequence) of integers in ``[0, k)``.

    Floats, bools, strings and objects are refused even when they look integral, so a caller
    who passes labels or probabilities finds out at once.
    """
    array = one_dimensional(values, field)
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
