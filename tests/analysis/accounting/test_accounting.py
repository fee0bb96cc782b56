"""Tests of analysis.accounting: exactness against independent computations, cross-checks with
Google's dp_accounting (imported only here), the classical bounds, monotonicity, inverses, the
trade-off function, calibration, subsampling, the device view and input validation.

Tolerances: exact quantities (closed forms, brute-force enumerations, KOV at its lattice points)
agree to a relative 1e-9 (float rounding of sums of up to ~1e5 terms). dp_accounting's PLD
accountant is *pessimistic* (losses rounded up to a 1e-4 grid), so its epsilon and delta must be
at least ours (up to 1e-9) and above ours by at most the stated discretisation allowance.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event, pld, rdp
from scipy import integrate, special

from analysis.accounting import (
    Budget,
    CalibrationError,
    PrivacyAccount,
    advanced_composition_epsilon,
    approximate_dp,
    basic_composition,
    calibrate,
    device_account,
    device_privacy,
    from_channel,
    from_distributions,
    gaussian,
    gaussian_dp,
    kov_delta,
    kov_epsilon,
    mechanism_privacy,
    pure_dp,
    randomized_response,
    rdp_to_epsilon,
)
from analysis.accounting._gaussian import gaussian_hockey_stick
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism
from client_sdk.mechanisms.gaussian import Gaussian
from client_sdk.mechanisms.gaussian_calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
)
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.privacy import ChannelSource
from client_sdk.mechanisms.rappor import RAPPOR
from client_sdk.mechanisms.unary import OUE

NR = dp_accounting.NeighboringRelation
DELTA = 1e-6


def rr_noise_parameter(epsilon: float, k: int) -> float:
    """dp_accounting's RR: with probability rho answer uniformly over k buckets."""
    return k / (math.exp(epsilon) + k - 1)


def grr_pair(epsilon: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    e = math.exp(epsilon)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    a = np.full(k, q)
    b = np.full(k, q)
    a[0], b[1] = p, p
    return a, b


def brute_force_delta(p: np.ndarray, q: np.ndarray, count: int, epsilon: float) -> float:
    """sum over all output sequences of (P(o) - e^eps Q(o))_+ for the count-fold product."""
    total = 0.0
    for outputs in itertools.product(range(p.size), repeat=count):
        po = math.prod(p[o] for o in outputs)
        qo = math.prod(q[o] for o in outputs)
        total += max(0.0, po - math.exp(epsilon) * qo)
    return total


def brute_force_tradeoff(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """Neyman-Pearson: the least type II error at type I error alpha, for both orderings.

    Reject "P" on the outputs with the smallest P/Q first (randomizing on the boundary)."""
    best = 1.0
    for a, b in ((p, q), (q, p)):
        order = np.argsort(a / np.maximum(b, 1e-300))
        spent, power = 0.0, 0.0
        for o in order:
            if spent + a[o] <= alpha:
                spent += a[o]
                power += b[o]
            else:
                power += b[o] * (alpha - spent) / a[o]
                break
        best = min(best, 1 - power)
    return best


def tradeoff_from_delta_grid(account: PrivacyAccount, alpha: float, top: float) -> float:
    """The f-DP conversion over a dense eps grid: a lower bound on the exact trade-off."""
    eps = np.linspace(0.0, top, 4001)
    deltas = np.array([account.delta_at(float(e)) for e in eps])
    first = 1 - deltas - np.exp(eps) * alpha
    second = np.exp(-eps) * (1 - deltas - alpha)
    return float(max(0.0, first.max(), second.max()))


# ---- Gaussian --------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 10, 100, 1000])
def test_gaussian_composes_to_sqrt_count_mu(count: int) -> None:
    sigma, sensitivity = 5.0, 2.0
    account = gaussian(sigma=sigma, sensitivity=sensitivity) * count
    assert account.mu == pytest.approx(math.sqrt(count) * sensitivity / sigma, rel=1e-12)
    single = gaussian_dp(math.sqrt(count) * sensitivity / sigma)
    for delta in (1e-3, 1e-6, 1e-10):
        assert account.epsilon_at(delta) == pytest.approx(single.epsilon_at(delta), rel=1e-12)
    # Composing one report at a time (a + b + ...) is the same as one * count.
    one = gaussian(sigma=sigma, sensitivity=sensitivity)
    stepwise = sum([one] * count)
    assert isinstance(stepwise, PrivacyAccount)
    assert stepwise.reports == count
    assert stepwise.epsilon_at(DELTA) == pytest.approx(account.epsilon_at(DELTA), rel=1e-12)
    assert (count * one).epsilon_at(DELTA) == account.epsilon_at(DELTA)


@pytest.mark.parametrize("count", [1, 10, 100, 1000])
def test_gaussian_against_dp_accounting_pld(count: int) -> None:
    """dp_accounting's PLD accountant (ADD_OR_REMOVE_ONE, noise multiplier sigma/sensitivity)
    is pessimistic: its epsilon is >= ours and within 1e-4 (its discretisation interval) above."""
    sigma = 5.0
    accountant = pld.PLDAccountant(NR.ADD_OR_REMOVE_ONE)
    accountant.compose(dp_event.GaussianDpEvent(sigma), count)
    theirs = accountant.get_epsilon(DELTA)
    ours = (gaussian(sigma=sigma) * count).epsilon_at(DELTA)
    assert -1e-9 <= theirs - ours <= 1e-4
    for eps in (0.5, 2.0):
        d_theirs = accountant.get_delta(eps)
        d_ours = (gaussian(sigma=sigma) * count).delta_at(eps)
        assert d_ours <= d_theirs * (1 + 1e-9) + 1e-15
        assert d_theirs - d_ours <= 1e-4 * max(d_ours, 1e-3)


def test_gaussian_hockey_stick_matches_the_sdk_curve_and_symmetry() -> None:
    for mu in (0.05, 0.3, 1.0, 4.0):
        for eps in (0.0, 0.1, 1.0, 3.0, 10.0):
            ours = float(gaussian_hockey_stick(mu, eps))
            sdk = analytic_gaussian_delta(1.0, eps, mu)
            assert ours == pytest.approx(sdk, rel=1e-10, abs=1e-300)
            # At negative arguments: D_{e^-x}(P||Q) = 1 - e^-x + e^-x D_{e^x}(Q||P), and the
            # Gaussian pair is symmetric.
            neg = float(gaussian_hockey_stick(mu, -eps))
            assert neg == pytest.approx(-math.expm1(-eps) + math.exp(-eps) * sdk, rel=1e-12)


def test_gaussian_tradeoff_is_the_conversion_of_its_delta_curve() -> None:
    account = gaussian(sigma=2.0) * 4  # mu = 1
    for alpha in (0.01, 0.1, 0.3, 0.6):
        closed = account.beta_at(alpha)
        assert closed == pytest.approx(special.ndtr(special.ndtri(1 - alpha) - 1.0), rel=1e-12)
        grid = tradeoff_from_delta_grid(account, alpha, top=6.0)
        assert grid <= closed + 1e-12
        assert closed - grid <= 2e-4


# ---- randomized response: exact discrete composition ----------------------------------------


@pytest.mark.parametrize("k", [2, 10])
def test_rr_single_event_matches_dp_accounting_mapping(k: int) -> None:
    """noise_parameter = k/(e^eps + k - 1) reproduces GRR: one event gives our exact curve."""
    eps0 = 1.0
    accountant = pld.PLDAccountant(NR.REPLACE_ONE)
    accountant.compose(dp_event.RandomizedResponseDpEvent(rr_noise_parameter(eps0, k), k))
    account = randomized_response(eps0, k)
    for eps in (0.0, 0.3, 0.7, 0.99):
        assert account.delta_at(eps) == pytest.approx(accountant.get_delta(eps), rel=1e-9)
    assert -1e-9 <= accountant.get_epsilon(DELTA) - account.epsilon_at(DELTA) <= 1e-4


@pytest.mark.parametrize(("k", "count"), [(2, 10), (10, 25)])
def test_rr_composition_against_dp_accounting_event_by_event(k: int, count: int) -> None:
    """dp_accounting 0.6.0 ignores ``count`` on RandomizedResponseDpEvent, so compose in a loop.
    Its pessimistic rounding may add up to 1e-4 of loss per event."""
    eps0 = 1.0
    accountant = pld.PLDAccountant(NR.REPLACE_ONE)
    event = dp_event.RandomizedResponseDpEvent(rr_noise_parameter(eps0, k), k)
    for _ in range(count):
        accountant.compose(event)
    account = randomized_response(eps0, k) * count
    theirs = accountant.get_epsilon(DELTA)
    ours = account.epsilon_at(DELTA)
    assert -1e-9 <= theirs - ours <= count * 1e-4
    for eps in (1.0, 3.0, 6.0):
        d_ours, d_theirs = account.delta_at(eps), accountant.get_delta(eps)
        assert d_ours <= d_theirs + 1e-12
        assert d_theirs - d_ours <= 1e-3 * d_ours + 1e-9


def test_rr_composition_matches_brute_force_enumeration() -> None:
    for k, count in ((2, 6), (3, 5), (5, 4)):
        p, q = grr_pair(0.8, k)
        account = from_distributions(p, q) * count
        for eps in (0.0, 0.5, 1.6, 2.5):
            assert account.delta_at(eps) == pytest.approx(
                brute_force_delta(p, q, count, eps), rel=1e-10, abs=1e-16
            )


@pytest.mark.parametrize("count", [1, 2, 5, 20, 100, 1000])
def test_binary_rr_exact_equals_kov_at_its_lattice_points(count: int) -> None:
    """For pure eps, KOV's delta at (k - 2i) eps is the binary RR binomial sum exactly (up to
    the tail masses below 1e-150 that the PLD moves to +inf)."""
    account = pure_dp(1.0) * count
    for i in range(0, count // 2 + 1, max(1, count // 20)):
        eps = (count - 2 * i) * 1.0
        assert account.delta_at(eps) == pytest.approx(
            kov_delta(1.0, 0.0, count, eps), rel=1e-9, abs=1e-140
        )
    # KOV's epsilon is the smallest lattice point meeting delta: at or above the exact one and
    # less than one lattice step (2 eps) above it.
    for delta in (1e-2, 1e-6, 1e-10):
        exact, kov = account.epsilon_at(delta), kov_epsilon(1.0, 0.0, count, delta)
        assert exact <= kov + 1e-9
        assert kov - exact < 2.0 + 1e-9


def test_approximate_dp_composition_equals_kov_with_delta() -> None:
    eps0, delta0, count = 0.5, 1e-4, 40
    account = approximate_dp(eps0, delta0) * count
    for i in range(0, count // 2 + 1, 4):
        eps = (count - 2 * i) * eps0
        assert account.delta_at(eps) == pytest.approx(kov_delta(eps0, delta0, count, eps), rel=1e-9)


@pytest.mark.parametrize("k", [2, 10])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
def test_exact_below_kov_below_advanced_and_basic(k: int, eps0: float) -> None:
    for count in (1, 10, 100, 1000):
        account = randomized_response(eps0, k) * count
        bounds = account.bounds(DELTA)
        exact, kov = bounds["exact"], bounds["kov"]
        assert exact is not None and kov is not None
        assert bounds["basic"] is not None and bounds["advanced"] is not None
        assert exact <= kov + 1e-9
        assert kov <= bounds["basic"] + 1e-9
        assert kov <= bounds["advanced"] + 1e-9
        assert bounds["rdp"] is not None and exact <= bounds["rdp"] + 1e-9
        if k > 2 and count > 1:
            assert exact < kov  # k-ary RR is strictly more private than the binary worst case


def test_classical_bounds_match_their_formulas() -> None:
    """Dwork-Rothblum-Vadhan: eps sqrt(2k ln(1/delta')) + k eps (e^eps - 1), total delta
    k delta_0 + delta'; basic: k eps, k delta_0."""
    eps0, delta0, k = 0.5, 1e-7, 100
    target = k * delta0 + 1e-5
    expected = eps0 * math.sqrt(2 * k * math.log(1e5)) + k * eps0 * math.expm1(eps0)
    assert advanced_composition_epsilon([(eps0, delta0, k)], target) == pytest.approx(
        expected, rel=1e-12
    )
    assert advanced_composition_epsilon([(eps0, delta0, k)], k * delta0) == math.inf
    # Heterogeneous: sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1).
    mixed = [(0.5, 0.0, 10), (1.0, 0.0, 5)]
    expected = (
        math.sqrt(2 * math.log(1e6) * (10 * 0.25 + 5))
        + 10 * 0.5 * math.expm1(0.5)
        + 5 * (math.e - 1)
    )
    assert advanced_composition_epsilon(mixed, 1e-6) == pytest.approx(expected, rel=1e-12)
    assert basic_composition([(0.5, 1e-7, 10), (1.0, 1e-6, 3)]) == pytest.approx((8.0, 4e-6))
    # KOV with delta_0: the i = 0 point is (k eps, 1 - (1 - delta_0)^k).
    assert kov_delta(0.5, 1e-4, 20, 10.0) == pytest.approx(-math.expm1(20 * math.log1p(-1e-4)))


def test_heterogeneous_exact_below_classical_bounds() -> None:
    account = randomized_response(1.0, 4) * 30 + randomized_response(0.5, 8) * 60 + pure_dp(2.0) * 5
    claims = account.claims()
    assert claims is not None
    for delta in (1e-3, 1e-6, 1e-9):
        exact = account.epsilon_at(delta)
        assert exact <= basic_composition(claims)[0]
        assert exact <= advanced_composition_epsilon(claims, delta)
        assert exact <= account.rdp_epsilon(delta)
    assert account.bounds(1e-6)["kov"] is None  # KOV is for homogeneous steps only
    assert account.exact  # commensurate lattices (1, 0.5, 2): no rounding


def test_incommensurate_steps_round_up_within_the_reported_bound() -> None:
    """GRR at eps 1 and ln 3 share no lattice; 200 + 200 reports exceed the exact-merge limit,
    so the losses go on a grid. The result must lie between the exact value (from an outer sum
    of the two exact self-compositions) and that value plus the reported loss rounding."""
    a, b = randomized_response(1.0, 4) * 200, randomized_response(math.log(3), 8) * 200
    account = a + b
    assert not account.exact and 0 < account.loss_rounding < 0.01
    pa, pb = a._evaluated.remove, b._evaluated.remove
    losses = (pa.losses[:, None] + pb.losses[None, :]).ravel()
    masses = (pa.masses[:, None] * pb.masses[None, :]).ravel()
    for eps in (50.0, 120.0, 160.0):
        above = losses > eps
        exact = float(np.sum(masses[above] * -np.expm1(eps - losses[above])))
        assert exact <= account.delta_at(eps) * (1 + 1e-9)
        shifted = eps - account.loss_rounding
        assert account.delta_at(eps) <= float(
            np.sum(masses[losses > shifted] * -np.expm1(shifted - losses[losses > shifted]))
        ) * (1 + 1e-9)


# ---- monotonicity and inverses -------------------------------------------------------------


def test_epsilon_grows_with_the_number_of_reports() -> None:
    step = randomized_response(1.0, 4)
    counts = [*range(1, 201), 300, 500, 1000, 2000, 5000, 10_000, 100_000]
    eps = [(step * t).epsilon_at(DELTA) for t in counts]
    assert all(b >= a for a, b in itertools.pairwise(eps))
    assert eps[-1] > eps[199] > eps[0]
    gauss = [(gaussian(sigma=5.0) * t).epsilon_at(DELTA) for t in counts[::10]]
    assert all(b > a for a, b in itertools.pairwise(gauss))
    mixed = [(step * t + gaussian(sigma=5.0) * t).epsilon_at(DELTA) for t in (1, 3, 10, 30, 100)]
    assert all(b > a for a, b in itertools.pairwise(mixed))
    delta_at_one = [(step * t).delta_at(1.0) for t in range(1, 60)]
    assert all(b >= a for a, b in itertools.pairwise(delta_at_one))


INVERSE_CASES = {
    "grr": randomized_response(1.0, 4) * 50,
    "binary": pure_dp(0.7) * 9,
    "gaussian": gaussian(sigma=3.0) * 20,
    "mixed": randomized_response(1.0, 3) * 10 + gaussian(sigma=4.0) * 5,
    "approx": approximate_dp(0.4, 1e-7) * 30,
    "subsampled": randomized_response(2.0, 2).subsample(0.2) * 30,
}


@pytest.mark.parametrize("name", sorted(INVERSE_CASES))
def test_epsilon_and_delta_are_inverse(name: str) -> None:
    account = INVERSE_CASES[name]
    floor = account.delta_at(math.inf)
    for delta in (1e-2, 1e-4, 1e-6, 1e-9):
        if delta <= floor:
            assert account.epsilon_at(delta) == math.inf
            continue
        eps = account.epsilon_at(delta)
        back = account.delta_at(eps)
        assert back <= delta * (1 + 1e-9)  # the returned epsilon meets the target
        assert back == pytest.approx(delta, rel=1e-6)
    for eps in (0.1, 0.5, 1.0, 2.5):
        delta = account.delta_at(eps)
        if floor < delta < account.delta_at(0.0):
            assert account.epsilon_at(delta) == pytest.approx(eps, rel=1e-8)


# ---- trade-off function and advantage --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(INVERSE_CASES))
def test_advantage_is_the_largest_gap_of_the_tradeoff(name: str) -> None:
    account = INVERSE_CASES[name]
    alphas = np.linspace(0.0, 1.0, 401)
    betas = account.tradeoff(alphas)
    assert np.all(np.diff(betas) <= 1e-12)  # non-increasing
    assert np.all(betas <= 1 - alphas + 1e-12)
    gap = np.max(1 - alphas - betas)
    assert gap <= account.advantage() + 1e-9
    assert gap >= account.advantage() - 2e-3  # the grid of alphas is 1/400 apart
    # Every (eps, delta(eps)) line lies below the trade-off function.
    for eps in (0.0, 0.5, 2.0):
        d = account.delta_at(eps)
        assert np.all(betas >= 1 - d - math.exp(eps) * alphas - 1e-9)


def test_advantage_closed_forms() -> None:
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 5})
    assert isinstance(grr, GRR)
    assert mechanism_privacy(grr).advantage() == pytest.approx(grr.p_star - grr.q_star, rel=1e-12)
    mu = 0.8
    assert gaussian_dp(mu).advantage() == pytest.approx(2 * special.ndtr(mu / 2) - 1, rel=1e-12)


def test_discrete_tradeoff_is_exact_neyman_pearson() -> None:
    p1, q1 = grr_pair(1.0, 3)
    # The 3-fold product pair, enumerated.
    p = np.array([math.prod(t) for t in itertools.product(p1, repeat=3)])
    q = np.array([math.prod(t) for t in itertools.product(q1, repeat=3)])
    account = from_distributions(p1, q1) * 3
    for alpha in (0.0, 0.01, 0.05, 0.2, 0.5, 0.9):
        assert account.beta_at(alpha) == pytest.approx(
            brute_force_tradeoff(p, q, alpha), rel=1e-9, abs=1e-12
        )


def test_mixed_tradeoff_is_within_the_conversion() -> None:
    account = INVERSE_CASES["mixed"]
    for alpha in (0.05, 0.3):
        beta = account.beta_at(alpha)
        grid = tradeoff_from_delta_grid(account, alpha, top=15.0)
        assert grid - 1e-9 <= beta <= grid + 1e-3


# ---- mixed Gaussian + discrete ---------------------------------------------------------------


def test_mixed_composition_is_exact_by_quadrature_and_below_dp_accounting() -> None:
    k, count_rr, count_g, sigma = 10, 20, 10, 5.0
    account = randomized_response(1.0, k) * count_rr + gaussian(sigma=sigma) * count_g
    mu = math.sqrt(count_g) / sigma
    rr = (randomized_response(1.0, k) * count_rr).terms[0][0].remove.power(count_rr)
    for eps in (2.0, 5.0, 9.0):
        # delta(eps) = E[(1 - e^{eps - L_rr - G})_+] integrated numerically over G's density.
        def integrand(g: float, e: float = eps) -> float:
            return float(np.sum(rr.masses * -np.expm1(np.minimum(e - rr.losses - g, 0.0))))

        def weighted(g: float, e: float = eps) -> float:
            density = math.exp(-((g - mu * mu / 2) ** 2) / (2 * mu * mu))
            return integrand(g, e) * density

        value, _ = integrate.quad(weighted, -12 * mu, 12 * mu + mu * mu, limit=400)
        expected = value / (mu * math.sqrt(2 * math.pi))
        assert account.delta_at(eps) == pytest.approx(expected, rel=1e-7)
    # dp_accounting: RR event by event plus the Gaussian (REPLACE_ONE doubles the sensitivity).
    accountant = pld.PLDAccountant(NR.REPLACE_ONE)
    event = dp_event.RandomizedResponseDpEvent(rr_noise_parameter(1.0, k), k)
    for _ in range(count_rr):
        accountant.compose(event)
    accountant.compose(dp_event.GaussianDpEvent(2 * sigma), count_g)
    ours, theirs = account.epsilon_at(DELTA), accountant.get_epsilon(DELTA)
    assert -1e-9 <= theirs - ours <= (count_rr + 1) * 1e-4
    assert ours <= account.rdp_epsilon(DELTA)


# ---- RDP ----------------------------------------------------------------------------------------


def test_rdp_conversion_matches_dp_accounting() -> None:
    orders = np.array([1.25, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    for sigma, count in ((5.0, 1), (5.0, 100), (1.0, 1000)):
        accountant = rdp.RdpAccountant(list(orders), NR.ADD_OR_REMOVE_ONE)
        accountant.compose(dp_event.GaussianDpEvent(sigma), count)
        account = gaussian(sigma=sigma) * count
        assert account.rdp_epsilon(DELTA, orders) == pytest.approx(
            accountant.get_epsilon(DELTA), rel=1e-9
        )
        assert account.epsilon_at(DELTA) <= account.rdp_epsilon(DELTA)


def test_rdp_of_binary_rr_is_the_closed_form() -> None:
    eps = 1.3
    orders = np.array([1.5, 2.0, 5.0, 20.0])
    step = pure_dp(eps).terms[0][0].remove
    closed = np.log((np.exp(orders * eps) + np.exp((1 - orders) * eps)) / (1 + np.exp(eps)))
    np.testing.assert_allclose(step.renyi(orders), closed / (orders - 1), rtol=1e-12)
    # A k-ary RR at the same eps has a smaller Renyi divergence (binary RR is the worst case).
    grr = randomized_response(eps, 6).terms[0][0].remove
    assert np.all(grr.renyi(orders) <= step.renyi(orders) + 1e-12)


def test_rdp_to_epsilon_validates() -> None:
    with pytest.raises(ValueError, match="orders"):
        rdp_to_epsilon([1.0, 2.0], [0.1, 0.2], 1e-6)
    with pytest.raises(ValueError, match="delta"):
        rdp_to_epsilon([2.0], [0.1], 1.5)


# ---- subsampling ---------------------------------------------------------------------------------


@pytest.mark.parametrize("eps0", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("q", [0.01, 0.3, 1.0])
def test_subsampling_a_pure_step_is_the_closed_form(eps0: float, q: float) -> None:
    sub = pure_dp(eps0).subsample(q)
    closed = math.log1p(q * math.expm1(eps0))
    assert sub.epsilon_at(0.0) == pytest.approx(closed, rel=1e-12)
    assert sub.terms[0][0].claim == pytest.approx((closed, 0.0))
    approx = approximate_dp(eps0, 1e-5).subsample(q)
    assert approx.epsilon_at(q * 1e-5) <= closed * (1 + 1e-12)


def test_subsampling_reduces_epsilon() -> None:
    step = randomized_response(1.0, 4)
    for count in (1, 10, 100):
        full = (step * count).epsilon_at(DELTA)
        sub = (step.subsample(0.1) * count).epsilon_at(DELTA)
        assert sub < full
    assert (step.subsample(0.1) * 10).epsilon_at(DELTA) < (step.subsample(0.5) * 10).epsilon_at(
        DELTA
    )


def test_subsampled_gaussian_against_dp_accounting() -> None:
    """Both are pessimistic discretisations of the same add/remove pair: they agree to within
    our reported loss rounding (which bounds how far above the truth we can be)."""
    for sigma, q, count in ((1.0, 0.01, 1), (1.0, 0.01, 10), (2.0, 0.1, 8)):
        accountant = pld.PLDAccountant(NR.ADD_OR_REMOVE_ONE)
        accountant.compose(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), count
        )
        account = gaussian(sigma=sigma).subsample(q) * count
        theirs, ours = accountant.get_epsilon(DELTA), account.epsilon_at(DELTA)
        assert theirs - 1e-3 <= ours <= theirs + account.loss_rounding + 1e-9
        assert not account.exact


def test_subsampled_exact_composition_is_bounded_by_the_rounded_one() -> None:
    """A wide composition falls back to a grid; its result stays above the exact one."""
    step = randomized_response(1.0, 3).subsample(0.3)
    exact = step * 12  # few atoms: merged exactly
    assert exact.exact
    for delta in (1e-3, 1e-6):
        e_exact = exact.epsilon_at(delta)
        coarse = step.terms[0][0].remove.regridded(0.01).power(12)
        assert coarse.epsilon(delta) >= e_exact - 1e-12
        assert coarse.epsilon(delta) <= e_exact + coarse.rounding


# ---- envelopes and channels ----------------------------------------------------------------------


def test_asymmetric_pair_is_symmetrised_by_the_envelope() -> None:
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.1, 0.3, 0.4, 0.2])
    account = from_distributions(p, q)
    for count in (1, 2):
        for eps in (0.0, 0.3, 0.9, 1.7):
            both = max(brute_force_delta(p, q, count, eps), brute_force_delta(q, p, count, eps))
            composed = (account * count).delta_at(eps)
            if count == 1:
                assert composed == pytest.approx(both, rel=1e-10)  # the envelope is the max
            else:
                assert composed >= both - 1e-12  # and dominates compositions
    # Q puts 0.2 where P puts nothing: in the (Q, P) direction that is loss +inf.
    assert account.delta_at(math.inf) == pytest.approx(0.2, rel=1e-12)
    assert from_distributions(q, p).delta_at(0.7) == pytest.approx(account.delta_at(0.7))


def test_channel_steps_of_every_small_oracle() -> None:
    for name in ("grr", "sue", "oue", "olh", "blh", "hr", "ss"):
        mechanism = mechanism_from_config({"mechanism": name, "epsilon": 1.0, "k": 6})
        assert isinstance(mechanism, FrequencyOracle)
        step = mechanism_privacy(mechanism)
        pure = step.epsilon_at(0.0)
        assert pure == pytest.approx(mechanism.implemented_epsilon(), rel=1e-9)
        assert pure <= mechanism.privacy_epsilon * (1 + 1e-12)
        # Never worse than the binary randomized response worst case of its epsilon.
        for count in (1, 20):
            assert (step * count).epsilon_at(DELTA) <= (
                pure_dp(mechanism.privacy_epsilon) * count
            ).epsilon_at(DELTA) + 1e-9


@pytest.mark.parametrize("name", ["sue", "oue", "grr"])
def test_closed_form_steps_equal_the_enumerated_channel(name: str) -> None:
    """GRR and unary encoding skip the enumeration at any k; at small k both agree."""
    mechanism = mechanism_from_config({"mechanism": name, "epsilon": 1.3, "k": 7})
    assert isinstance(mechanism, ChannelSource)
    fast, enumerated = mechanism_privacy(mechanism), from_channel(mechanism)
    for count in (1, 40):
        for eps in (0.0, 0.7, 5.0):
            assert (fast * count).delta_at(eps) == pytest.approx(
                (enumerated * count).delta_at(eps), rel=1e-9, abs=1e-15
            )
    big = mechanism_from_config({"mechanism": name, "epsilon": 1.3, "k": 1000})
    assert mechanism_privacy(big).epsilon_at(0.0) == pytest.approx(1.3, rel=1e-9)


def test_oue_channel_step_is_the_known_pld() -> None:
    mechanism = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": 5})
    assert isinstance(mechanism, OUE)
    pld_oue = from_channel(mechanism).terms[0][0].remove
    q = mechanism.q_star
    np.testing.assert_allclose(pld_oue.losses, [-1.0, 0.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(pld_oue.masses, [q / 2, 0.5, (1 - q) / 2], rtol=1e-9)


# ---- calibration ------------------------------------------------------------------------------


def test_calibrate_finds_the_tight_gaussian_sigma() -> None:
    target = Budget(epsilon=1.0, delta=1e-6)

    def build(sigma: float) -> PrivacyAccount:
        return gaussian(sigma=sigma) * 1000

    sigma = calibrate(target, build, 1.0, 1000.0)
    assert target.met_by(build(sigma))
    assert not target.met_by(build(sigma * (1 - 1e-6)))
    # The same sigma as one Gaussian of sensitivity sqrt(1000), from the SDK's calibration.
    assert sigma == pytest.approx(analytic_gaussian_sigma(1.0, 1e-6, math.sqrt(1000)), rel=1e-8)


def test_calibrate_integers_and_decreasing_direction() -> None:
    step = randomized_response(0.5, 4)
    count = calibrate((5.0, 1e-6), lambda t: step * t, 1, 10_000)
    assert isinstance(count, int)
    assert (step * count).epsilon_at(1e-6) <= 5.0
    assert (step * (count + 1)).epsilon_at(1e-6) > 5.0
    eps = calibrate((3.0, 1e-6), lambda e: randomized_response(e, 4) * 20, 0.01, 3.0)
    assert (randomized_response(eps, 4) * 20).epsilon_at(1e-6) <= 3.0
    assert (randomized_response(eps * (1 + 1e-6), 4) * 20).epsilon_at(1e-6) > 3.0


def test_calibrate_reports_a_bracket_without_solution() -> None:
    with pytest.raises(CalibrationError, match="bracket"):
        calibrate((1.0, 1e-6), lambda s: gaussian(sigma=s) * 1000, 1.0, 2.0)
    with pytest.raises(CalibrationError, match="bracket"):
        calibrate((1.0, 1e-6), lambda s: gaussian(sigma=s), 100.0, 200.0)
    with pytest.raises(ValueError, match="lo"):
        calibrate((1.0, 1e-6), lambda s: gaussian(sigma=s), 5.0, 5.0)
    with pytest.raises(ValueError, match="delta"):
        calibrate((1.0, 2.0), lambda s: gaussian(sigma=s), 1.0, 5.0)


# ---- device view -------------------------------------------------------------------------------


def test_device_account_composes_campaigns() -> None:
    grr = {"mechanism": "grr", "epsilon": 1.0, "k": 8}
    oue = mechanism_from_config({"mechanism": "oue", "epsilon": 2.0, "k": 6})
    assert isinstance(oue, OUE)
    history: list[tuple[Mechanism | Mapping[str, Any] | PrivacyAccount, int]] = [
        (grr, 100),
        (oue, 30),
        (gaussian(sigma=4.0), 10),
    ]
    account = device_account(history)
    manual = (
        mechanism_privacy(mechanism_from_config(grr)) * 100
        + from_channel(oue) * 30
        + gaussian(sigma=4.0) * 10
    )
    assert account.reports == 140
    assert account.epsilon_at(DELTA) == pytest.approx(manual.epsilon_at(DELTA), rel=1e-12)
    assert device_privacy(grr, 100).epsilon_at(DELTA) < account.epsilon_at(DELTA)
    summary = account.summary(DELTA)
    json.dumps(summary, allow_nan=False)
    assert summary["reports"] == 140
    assert [c["reports"] for c in summary["components"]] == [100, 30, 10]
    assert summary["components"][0]["epsilon_per_report"] == pytest.approx(
        device_privacy(grr, 1).epsilon_at(DELTA)
    )


def test_device_view_of_the_gaussian_mechanism() -> None:
    """The SDK's analytic calibration makes one report exactly (epsilon, delta) tight; T reports
    are Gaussian DP with mu = sqrt(T) sensitivity / sigma."""
    config = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 2.0}
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, Gaussian)
    one = device_privacy(config, 1)
    assert one.epsilon_at(1e-6) == pytest.approx(1.0, rel=1e-9)
    many = device_privacy(mechanism, 50)
    assert many.mu == pytest.approx(math.sqrt(50) * 2.0 / mechanism.sigma, rel=1e-12)
    vector = mechanism_from_config(
        {"mechanism": "gaussian", "epsilon": 2.0, "delta": 1e-5, "dim": 3, "clip_norm": 1.5}
    )
    assert device_privacy(vector, 1).epsilon_at(1e-5) == pytest.approx(2.0, rel=1e-9)


def hockey_stick_rows(matrix: np.ndarray, eps: float) -> float:
    """max over ordered pairs of rows of sum_o (A[x,o] - e^eps A[x',o])_+."""
    rows = range(matrix.shape[0])
    return max(
        float(np.maximum(matrix[i] - math.exp(eps) * matrix[j], 0).sum())
        for i in rows
        for j in rows
        if i != j
    )


def test_correlated_reports_can_leak_more_than_their_composed_marginals() -> None:
    """Why memoized mechanisms are accounted through their permanent response: reports that
    share a latent draw (x -> B -> S_1, S_2) are not bounded by composing P[S | x]."""
    rng = np.random.default_rng(1)
    excess = 0.0
    for _ in range(300):
        a = rng.dirichlet(np.full(3, 0.5), size=2)  # x -> B
        c = rng.dirichlet(np.full(3, 0.5), size=3)  # B -> S
        joint = np.einsum("xb,bs,bt->xst", a, c, c).reshape(2, -1)
        marginal = from_distributions(*(a @ c)) * 2
        excess = max(excess, hockey_stick_rows(joint, 0.5) - marginal.delta_at(0.5))
    assert excess > 0.05


def test_rappor_is_accounted_once_per_distinct_value() -> None:
    """Any number of reports of one value are a post-processing of the permanent randomized
    response: the exact joint channel of T reports stays below one PRR step."""
    for f, p, q in ((0.5, 0.25, 0.75), (0.25, 0.3, 0.9)):
        config = {"mechanism": "rappor", "k": 4, "h": 1, "m": 1, "f": f, "p": p, "q": q}
        rappor = mechanism_from_config(config)
        assert isinstance(rappor, RAPPOR)
        step = mechanism_privacy(rappor)
        assert step.epsilon_at(0.0) == pytest.approx(rappor.epsilon_inf, rel=1e-9)
        prr = next(rappor.channel_matrices("permanent"))
        bits = (np.arange(16)[:, None] >> np.arange(4)) & 1
        ones = np.where(bits == 1, q, p)  # P[IRR bit = 1 | PRR bits], per bit
        irr = np.prod(np.where(bits[None, :, :] == 1, ones[:, None, :], 1 - ones[:, None, :]), 2)
        joint = np.einsum("xb,bs,bt,bu->xstu", prr, irr, irr, irr).reshape(prr.shape[0], -1)
        account = device_privacy(config, 3, distinct_values=1)
        assert account.reports == 1
        for eps in (0.0, 1.0, 2.0, 3.0):
            assert hockey_stick_rows(joint, eps) <= account.delta_at(eps) + 1e-12
        assert device_privacy(rappor, 3).reports == 3  # default: every report a new value
    with pytest.raises(ValueError, match="distinct_values"):
        device_privacy(rappor, 3, distinct_values=4)


def test_device_view_falls_back_to_the_claim_for_large_channels() -> None:
    big = mechanism_from_config({"mechanism": "hr", "epsilon": 1.0, "k": 512})
    step = mechanism_privacy(big)
    assert step.epsilon_at(0.0) == pytest.approx(1.0)
    assert "dp(eps=1" in repr(step)


# ---- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, math.nan, "0.1", True, None])
def test_delta_is_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="delta"):
        randomized_response(1.0).epsilon_at(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1.0, math.nan, "1", False])
def test_epsilon_is_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        randomized_response(1.0).delta_at(bad)  # type: ignore[arg-type]


def test_counts_and_parameters_are_validated() -> None:
    step = randomized_response(1.0)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="count"):
            step * bad
    for bad_type in (1.5, True, "2"):
        with pytest.raises(TypeError):
            step * bad_type
    with pytest.raises(ValueError, match="alpha"):
        step.beta_at(1.5)
    with pytest.raises(ValueError, match="q"):
        step.subsample(0.0)
    with pytest.raises(ValueError, match="reports"):
        device_privacy({"mechanism": "grr", "epsilon": 1.0, "k": 4}, 0)
    with pytest.raises(ValueError, match="sigma"):
        gaussian(sigma=0.0)
    with pytest.raises(ValueError, match="mu"):
        gaussian_dp(-1.0)
    with pytest.raises(ValueError, match="p must sum"):
        from_distributions([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(ValueError, match="history"):
        device_account([])
    with pytest.raises(ValueError, match="count"):
        kov_epsilon(1.0, 0.0, 0, 1e-6)
    with pytest.raises(ValueError, match="epsilon"):
        approximate_dp(-1.0, 0.0)
