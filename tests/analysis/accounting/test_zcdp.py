"""rho-zCDP accounting (analysis.accounting.Zcdp): composition, the (epsilon, delta) conversion
checked against known bounds and curves, and the discrete Gaussian's exact privacy curve below
the zCDP bound it is accounted with (CKS 2020, Theorem 14)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.accounting import Zcdp, from_distributions, gaussian_dp
from client_sdk.sampling import DiscreteGaussian


def test_rho_adds_under_composition() -> None:
    assert (Zcdp(0.25) + Zcdp(0.5)).rho == 0.75
    assert (Zcdp(0.125) * 8).rho == 1.0 == (8 * Zcdp(0.125)).rho


@pytest.mark.parametrize("rho", [0.01, 0.125, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_conversion_between_known_bounds(rho: float, delta: float) -> None:
    """Sound: at least the exact epsilon of the Gaussian mechanism with the same rho (it is
    rho-zCDP, mu = sqrt(2 rho)); tighter than Bun & Steinke's rho + 2 sqrt(rho ln(1/delta))
    (TCC 2016, Prop. 1.3), which CKS 2020's Corollary 13 improves."""
    epsilon = Zcdp(rho).epsilon_at(delta)
    exact_gaussian = gaussian_dp(math.sqrt(2 * rho)).epsilon_at(delta)
    assert exact_gaussian <= epsilon <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert epsilon <= 1.25 * exact_gaussian + 0.05  # and not far above it


@pytest.mark.parametrize("rho", [0.05, 0.5, 5.0])
def test_delta_at_inverts_epsilon_at(rho: float) -> None:
    """Both directions use CKS 2020 Corollary 13 over the same orders: delta(eps(d)) = d."""
    for delta in (1e-4, 1e-8):
        assert Zcdp(rho).delta_at(Zcdp(rho).epsilon_at(delta)) == pytest.approx(delta, rel=1e-6)
    assert Zcdp(rho).delta_at(0.0) <= 1.0


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_at_epsilon_is_the_largest_rho_within_epsilon(epsilon: float, delta: float) -> None:
    """Zcdp.at_epsilon inverts epsilon_at: its rho meets epsilon at delta, 1e-9 more does not,
    and it is above Bun & Steinke's rho for the same epsilon (their bound is looser)."""
    rho = Zcdp.at_epsilon(epsilon, delta).rho
    assert Zcdp(rho).epsilon_at(delta) <= epsilon < Zcdp(rho * (1 + 1e-9)).epsilon_at(delta)
    log_inverse = math.log(1 / delta)
    assert rho > (math.sqrt(log_inverse + epsilon) - math.sqrt(log_inverse)) ** 2


@pytest.mark.parametrize("sigma2", [(2, 2), (7, 9), (30, 33)])
def test_discrete_gaussian_curve_is_below_its_zcdp_bound(sigma2: tuple[int, int]) -> None:
    """The sampler's distribution N_Z(0, t*m) against its shift by 1 (sensitivity 1): its
    exact delta(eps), from the pmfs, is at most the bound of rho = 1 / (2 t m)."""
    noise = DiscreteGaussian(*sigma2)
    support = np.arange(-40 * 33, 40 * 33 + 2)
    p = noise.pmf(support)
    q = noise.pmf(support - 1)
    account = from_distributions(p / p.sum(), q / q.sum(), label="discrete gaussian")
    bound = Zcdp(1 / (2 * noise.sigma2))
    for epsilon in (0.05, 0.2, 0.5, 1.0):
        assert account.delta_at(epsilon) <= bound.delta_at(epsilon)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Zcdp(0.0), "rho"),
    (lambda: Zcdp(-1.0), "rho"),
    (lambda: Zcdp(math.inf), "rho"),
    (lambda: Zcdp(1.0) * 0, "count"),
    (lambda: Zcdp(1.0).epsilon_at(2.0), "delta"),
    (lambda: Zcdp.at_epsilon(0.0, 1e-6), "epsilon"),
    (lambda: Zcdp.at_epsilon(1.0, 0.0), "delta"),
])  # fmt: skip
def test_bad_input_names_the_field(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]
