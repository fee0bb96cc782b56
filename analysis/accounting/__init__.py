"""Privacy accounting for a device across reports and campaigns (docs/math/accounting.md).

A mechanism's privacy is a :class:`PrivacyAccount`; ``step * 1000`` and ``a + b`` compose, and
every account answers ``epsilon_at(delta)``, ``delta_at(epsilon)``, ``advantage()`` and
``beta_at(alpha)``. :func:`device_privacy` is the entry point for one mechanism over a number of
reports, :func:`device_account` for a device's whole history across campaigns; ``summary(delta)``
gives JSON-safe figures. :func:`poisson` amplifies a step by (truncated) Poisson sampling,
:func:`parallel_poisson` by Poisson sampling of disjoint shards across workers, and
``account.group(k)`` gives the account for groups of k records. :func:`calibrate` solves for a
parameter that meets an :func:`epsilon_budget`. The classical bounds (basic, advanced, KOV,
RDP) live in :mod:`analysis.accounting.bounds`. :class:`Zcdp` is a rho-zCDP guarantee (the
discrete Gaussian's), composing by adding rho and converting to (epsilon, delta).
"""

from analysis.accounting.account import PrivacyAccount, Step
from analysis.accounting.bounds import (
    advanced_composition_epsilon,
    basic_composition,
    kov_delta,
    kov_epsilon,
    rdp_to_epsilon,
)
from analysis.accounting.calibrate import (
    Budget,
    Calibration,
    CalibrationError,
    calibrate,
    epsilon_budget,
)
from analysis.accounting.device import (
    device_account,
    device_privacy,
    event_privacy,
    from_channel,
    mechanism_privacy,
)
from analysis.accounting.steps import (
    approximate_dp,
    from_distributions,
    gaussian,
    gaussian_dp,
    parallel_poisson,
    poisson,
    pure_dp,
    randomized_response,
    randomized_response_from,
    unary_encoding_from,
)
from analysis.accounting.zcdp import Zcdp

__all__ = [
    "Budget",
    "Calibration",
    "CalibrationError",
    "PrivacyAccount",
    "Step",
    "Zcdp",
    "advanced_composition_epsilon",
    "approximate_dp",
    "basic_composition",
    "calibrate",
    "device_account",
    "device_privacy",
    "epsilon_budget",
    "event_privacy",
    "from_channel",
    "from_distributions",
    "gaussian",
    "gaussian_dp",
    "kov_delta",
    "kov_epsilon",
    "mechanism_privacy",
    "parallel_poisson",
    "poisson",
    "pure_dp",
    "randomized_response",
    "randomized_response_from",
    "rdp_to_epsilon",
    "unary_encoding_from",
]
