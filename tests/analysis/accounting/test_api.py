"""The accounting API in the shape dp-accounting users know: poisson, gaussian(noise_multiplier),
epsilon_budget and calibrate(param_min=, param_max=), and group privacy."""

from __future__ import annotations

import math
from typing import TypedDict

import pytest
from dp_accounting import dp_event, mechanism_calibration, pld

from analysis.accounting import (
    Calibration,
    approximate_dp,
    calibrate,
    epsilon_budget,
    gaussian,
    gaussian_dp,
    poisson,
    pure_dp,
    randomized_response,
)

DELTA = 1e-6
ADD_OR_REMOVE = pld.pld_privacy_accountant.NeighborRel.ADD_OR_REMOVE_ONE


def _pld_accountant() -> pld.PLDAccountant:
    return pld.PLDAccountant(ADD_OR_REMOVE)


# ---- gaussian(noise_multiplier) ----------------------------------------------------------------


def test_gaussian_takes_a_noise_multiplier_positionally() -> None:
    assert gaussian(2.0).mu == pytest.approx(0.5)
    assert (gaussian(2.0) * 50).epsilon_at(DELTA) == pytest.approx(
        (gaussian(sigma=4.0, sensitivity=2.0) * 50).epsilon_at(DELTA), rel=1e-12
    )
    accountant = _pld_accountant()
    accountant.compose(dp_event.GaussianDpEvent(2.0), 50)
    theirs = accountant.get_epsilon(DELTA)
    ours = (gaussian(2.0) * 50).epsilon_at(DELTA)  # exact Gaussian DP
    assert ours <= theirs <= ours * 1.01


class GaussianArguments(TypedDict, total=False):
    """The keyword arguments of ``gaussian`` that a bad combination is made of."""

    noise_multiplier: float
    sigma: float
    sensitivity: float


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "exactly one"),
        ({"noise_multiplier": 1.0, "sigma": 1.0}, "exactly one"),
        ({"noise_multiplier": 1.0, "sensitivity": 2.0}, "sensitivity"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"sigma": -1.0}, "sigma"),
    ],
)
def test_gaussian_refuses_bad_arguments(kwargs: GaussianArguments, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        gaussian(**kwargs)


# ---- poisson ---------------------------------------------------------------------------------


def test_poisson_is_dp_accountings_poisson_sampled_event() -> None:
    account = poisson(gaussian(1.0), 0.01) * 10
    assert account.epsilon_at(DELTA) == pytest.approx(
        (gaussian(sigma=1.0).subsample(0.01) * 10).epsilon_at(DELTA), rel=1e-12
    )
    accountant = _pld_accountant()
    accountant.compose(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0)), 10)
    theirs = accountant.get_epsilon(DELTA)
    assert theirs * (1 - 1e-3) <= account.epsilon_at(DELTA) <= theirs * 1.05


def test_truncated_poisson_needs_both_sizes() -> None:
    with pytest.raises(ValueError, match="truncated_batch_size and dataset_size"):
        poisson(gaussian(1.0), 0.1, truncated_batch_size=10)
    with pytest.raises(ValueError, match="sample_rate"):
        poisson(gaussian(1.0), 0.0)
    with pytest.raises(ValueError, match="dataset_size"):
        poisson(gaussian(1.0), 0.1, truncated_batch_size=10, dataset_size=0)


# ---- epsilon_budget and calibrate --------------------------------------------------------------


def test_calibrate_returns_the_parameter_and_what_it_achieves() -> None:
    def build(multiplier: float):
        return gaussian(multiplier) * 100

    result = calibrate(epsilon_budget(1.0, delta=DELTA), build, param_min=1.0, param_max=100.0)
    assert isinstance(result, Calibration)
    assert result.achieved <= 1.0
    assert result.achieved == pytest.approx(1.0, rel=1e-8)
    assert result.param == calibrate((1.0, DELTA), build, 1.0, 100.0)
    theirs = mechanism_calibration.calibrate_dp_mechanism(
        _pld_accountant,
        lambda m: dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(m), 100),
        1.0,
        DELTA,
        mechanism_calibration.ExplicitBracketInterval(1.0, 100.0),
    )
    assert result.param == pytest.approx(theirs, rel=0.01)  # their PLD is discretised

    count = calibrate(
        epsilon_budget(5.0, delta=DELTA),
        lambda t: randomized_response(1.0, 4) * t,
        param_min=1,
        param_max=10_000,
    )
    assert isinstance(count.param, int) and count.achieved <= 5.0
    assert (randomized_response(1.0, 4) * (count.param + 1)).epsilon_at(DELTA) > 5.0


def test_calibrate_refuses_a_mixed_or_partial_bracket() -> None:
    build = lambda s: gaussian(s)  # noqa: E731
    with pytest.raises(ValueError, match="not both"):
        # Deliberately outside both overloads: the runtime check is what is under test.
        calibrate(epsilon_budget(1.0, DELTA), build, 1.0, 5.0, param_min=1.0, param_max=5.0)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="param_max"):
        calibrate(epsilon_budget(1.0, DELTA), build, param_min=1.0)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="delta"):
        epsilon_budget(1.0, delta=1.5)


# ---- group privacy ---------------------------------------------------------------------------


def test_group_privacy_of_pure_steps_is_k_fold() -> None:
    rr = randomized_response(1.0, 4)
    assert rr.group(3).epsilon_at(0.0) == pytest.approx(3.0, rel=1e-9)
    assert (rr * 10).group(2).epsilon_at(0.0) == pytest.approx(20.0, rel=1e-9)
    # The k-fold step is the worst 3-DP report, composed exactly.
    assert (rr * 10).group(3).epsilon_at(DELTA) == pytest.approx(
        (pure_dp(3.0) * 10).epsilon_at(DELTA), rel=1e-9
    )
    # Subsampled pure steps are pure too.
    sub = rr.subsample(0.1)
    assert sub.group(2).epsilon_at(0.0) <= 2 * 1.0 + 1e-12
    assert rr.group(1) is rr


def test_group_privacy_of_gaussian_steps_is_exact() -> None:
    account = gaussian(2.0) * 10 + gaussian(sigma=3.0) * 5
    grouped = account.group(3)
    assert grouped.mu == pytest.approx(3 * account.mu, rel=1e-12)
    assert grouped.epsilon_at(DELTA) == pytest.approx(
        gaussian_dp(3 * account.mu).epsilon_at(DELTA), rel=1e-9
    )
    mixed = (gaussian(2.0) * 10 + randomized_response(0.5) * 4).group(2)
    assert mixed.epsilon_at(DELTA) == pytest.approx(
        (gaussian_dp(2 * math.sqrt(10) / 2) + pure_dp(1.0) * 4).epsilon_at(DELTA), rel=1e-9
    )


@pytest.mark.parametrize(
    "account",
    [
        approximate_dp(1.0, 1e-6),
        gaussian(1.0).subsample(0.1),
        randomized_response(1.0) + approximate_dp(0.5, 1e-9),
    ],
)
def test_group_privacy_refuses_what_it_cannot_bound(account: object) -> None:
    with pytest.raises(ValueError, match="group privacy is implemented for pure-DP and Gaussian"):
        account.group(2)  # type: ignore[attr-defined]


def test_group_size_is_checked() -> None:
    with pytest.raises(ValueError, match="k"):
        gaussian(1.0).group(0)
