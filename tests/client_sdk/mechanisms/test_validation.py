"""The shared argument checks (client_sdk.mechanisms._validation): one rule per check, the options
spelled out where the accounting needs them, errors naming the field and a bounded value."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from analysis.accounting import _validation as accounting
from client_sdk.mechanisms._validation import (
    check_delta,
    check_epsilon,
    check_finite,
    check_int,
    check_positive,
    check_probability,
    describe,
)


@pytest.mark.parametrize("good", [1e-9, 1, 2.5, np.float32(0.5), np.int64(3), Fraction(1, 2)])
def test_epsilon_accepts_positive_finite_reals(good: Any) -> None:
    assert check_epsilon(good) == float(good)


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.inf, math.nan, True, "1", None, [1.0]])
def test_epsilon_is_strictly_positive_and_finite_by_default(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"^epsilon must be a positive finite number; got "):
        check_epsilon(bad)


def test_the_accounting_options_are_explicit() -> None:
    assert check_epsilon(0.0, allow_zero=True) == 0.0
    assert check_epsilon(math.inf, allow_inf=True) == math.inf
    with pytest.raises(ValueError, match="a number >= 0"):
        check_epsilon(-1.0, allow_zero=True, allow_inf=True)
    with pytest.raises(ValueError, match="a finite number >= 0"):
        check_epsilon(math.inf, allow_zero=True)
    # The accounting uses the same function, not a copy with other rules.
    assert accounting.check_epsilon is check_epsilon
    assert accounting.check_delta is check_delta


def test_positive_finite_and_probability_checks() -> None:
    assert check_positive(2, "sigma") == 2.0
    with pytest.raises(ValueError, match=r"^sigma must be a positive finite number"):
        check_positive(0, "sigma")
    assert check_finite(-3, "lower") == -3.0
    with pytest.raises(ValueError, match=r"^lower must be a finite number"):
        check_finite(math.inf, "lower")
    assert check_probability(0.5, "p") == 0.5
    with pytest.raises(ValueError, match=r"^p must be in \(0, 1\)"):
        check_probability(1.0, "p")
    assert check_probability(1.0, "q", open_high=False) == 1.0
    assert check_delta(0.0) == 0.0
    with pytest.raises(ValueError, match=r"^delta must be in \(0, 1\)"):
        check_delta(0.0, allow_zero=False)
    with pytest.raises(ValueError, match=r"^delta must be in \[0, 1\)"):
        check_delta(1.0)
    assert accounting.check_alpha(1.0) == 1.0
    assert accounting.check_rate(1.0) == 1.0
    with pytest.raises(ValueError, match=r"^q must be in"):
        accounting.check_rate(0.0)


def test_integer_checks_name_the_bound() -> None:
    assert check_int(np.int64(4), "k", minimum=2) == 4
    with pytest.raises(ValueError, match=r"^n must be a positive integer; got 0$"):
        check_int(0, "n", minimum=1)
    with pytest.raises(ValueError, match=r"^k must be an integer >= 2; got 1.0$"):
        check_int(1.0, "k", minimum=2)
    with pytest.raises(ValueError, match=r"^d must be an integer in \[1, 3\]; got True$"):
        check_int(True, "d", minimum=1, maximum=3)
    assert accounting.check_count(3) == 3
    with pytest.raises(ValueError, match=r"^count must be a positive integer"):
        accounting.check_count(0)


def test_untrusted_values_are_described_boundedly() -> None:
    assert describe(1.5) == "1.5"
    assert describe("x" * 200) == repr("x" * 200)[:77] + "..."
    assert describe([0] * 10**6) == "a list"
    with pytest.raises(ValueError, match=r"got a dict$"):
        check_epsilon({"a": 1})
