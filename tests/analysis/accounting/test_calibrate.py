"""calibrate: coarse passes, warm starts and a full-precision bracket (issue 21, item 11).

The answer keeps its accuracy: at full precision the parameter meets the budget, a parameter
rtol further towards the other end misses it, and the epsilon it achieves is the target's to
1e-4. It costs few full-precision accounts: the bisection built about 40 (every one at full
precision) for a bracket [0.5, 10] at rtol 1e-10.
"""

from __future__ import annotations

import collections

import pytest

from analysis.accounting import (
    PrivacyAccount,
    _pld,
    calibrate,
    epsilon_budget,
    gaussian,
    parallel_poisson,
    randomized_response,
)

BUDGET = epsilon_budget(1.0, delta=1e-5)


def _counting(
    build_one: collections.abc.Callable[[float], PrivacyAccount],
) -> tuple[collections.Counter[str], collections.abc.Callable[[float], PrivacyAccount]]:
    counts: collections.Counter[str] = collections.Counter()

    def build(param: float) -> PrivacyAccount:
        counts["full" if _pld._max_span() == _pld.MAX_SPAN else "coarse"] += 1
        return build_one(param)

    return counts, build


def test_calibrate_is_accurate_and_builds_few_full_precision_accounts() -> None:
    counts, build = _counting(
        lambda multiplier: parallel_poisson(gaussian(multiplier), 0.01, num_workers=8) * 100
    )
    rtol = 1e-10
    result = calibrate(BUDGET, build, param_min=0.5, param_max=10.0, rtol=rtol)
    assert counts["full"] <= 6, counts  # the bisection: 40
    full = sum(counts.values())
    assert BUDGET.met_by(build(result.param))
    assert not BUDGET.met_by(build(result.param * (1 - 2 * rtol)))
    assert BUDGET.epsilon * (1 - 1e-4) <= result.achieved <= BUDGET.epsilon
    assert sum(counts.values()) == full + 2
    # The returned account is the full-precision one at the parameter (not a coarse one).
    assert result.account.epsilon_at(BUDGET.delta) == pytest.approx(
        build(result.param).epsilon_at(BUDGET.delta), rel=1e-12
    )


def test_calibrate_counts_and_epsilons_stay_exact() -> None:
    """Integers: the largest count meeting the budget, exactly; a decreasing direction too."""
    step = randomized_response(0.5, 4)
    _, build = _counting(lambda t: step * int(t))
    count = calibrate((5.0, 1e-6), build, 1, 10_000)
    assert isinstance(count, int)
    assert (step * count).epsilon_at(1e-6) <= 5.0 < (step * (count + 1)).epsilon_at(1e-6)
    eps = calibrate((3.0, 1e-6), lambda e: randomized_response(e, 4) * 20, 0.01, 3.0, rtol=1e-8)
    assert (randomized_response(eps, 4) * 20).epsilon_at(1e-6) <= 3.0
    assert (randomized_response(eps * (1 + 2e-8), 4) * 20).epsilon_at(1e-6) > 3.0


def test_the_calibration_example_takes_few_transforms(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's example (1000 rounds, 8 workers): each full-precision account is one forward
    transform per direction (``DiscretePLD.power`` in one FFT), so the whole search runs 20
    (10 of them at full precision); repeated squaring ran 28 per direction, 460 in all. The
    answer still meets the budget at full precision and one ``rtol`` lower misses it."""
    calls = 0
    rfft = _pld.fft.rfft

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        return rfft(*args, **kwargs)

    monkeypatch.setattr(_pld.fft, "rfft", counting)
    counts, build = _counting(
        lambda multiplier: parallel_poisson(gaussian(multiplier), 0.01, num_workers=8) * 1000
    )
    result = calibrate(BUDGET, build, param_min=0.5, param_max=10.0)
    assert counts["full"] <= 6, counts
    assert calls <= 2 * counts["full"] + 10, (calls, counts)
    assert BUDGET.met_by(result.account)
    assert not BUDGET.met_by(build(result.param * (1 - 2e-10)))
