"""Privacy accounting for a device across reports and campaigns (docs/math/accounting.md).

A mechanism's privacy is a :class:`PrivacyAccount`; ``step * 1000`` and ``a + b`` compose, and
every account answers ``epsilon_at(delta)``, ``delta_at(epsilon)``, ``advantage()`` and
``beta_at(alpha)``. :func:`device_privacy` is the entry point for one mechanism over a number of
reports, :func:`device_account` for a device's whole history across campaigns; ``summary(delta)``
gives JSON-safe figures. :func:`calibrate` solves for a parameter that meets a budget. The
classical bounds (basic, advanced, KOV, RDP) live in :mod:`analysis.accounting.bounds`.
"""

from analysis.accounting.account import PrivacyAccount, Step
from analysis.accounting.bounds import (
    advanced_composition_epsilon,
    basic_composition,
    kov_delta,
    kov_epsilon,
    rdp_to_epsilon,
)
from analysis.accounting.calibrate import Budget, CalibrationError, calibrate
from analysis.accounting.device import (
    device_account,
    device_privacy,
    from_channel,
    mechanism_privacy,
)
from analysis.accounting.steps import (
    approximate_dp,
    from_distributions,
    gaussian,
    gaussian_dp,
    pure_dp,
    randomized_response,
    randomized_response_from,
    unary_encoding_from,
)

__all__ = [
    "Budget",
    "CalibrationError",
    "PrivacyAccount",
    "Step",
    "advanced_composition_epsilon",
    "approximate_dp",
    "basic_composition",
    "calibrate",
    "device_account",
    "device_privacy",
    "from_channel",
    "from_distributions",
    "gaussian",
    "gaussian_dp",
    "kov_delta",
    "kov_epsilon",
    "mechanism_privacy",
    "pure_dp",
    "randomized_response",
    "randomized_response_from",
    "rdp_to_epsilon",
    "unary_encoding_from",
]
