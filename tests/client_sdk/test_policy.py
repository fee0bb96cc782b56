"""The app's PrivacyPolicy: every field refuses a weaker campaign, naming the field and values."""

from __future__ import annotations

import math

import pytest

from client_sdk import mechanism_from_config
from client_sdk.budget import BudgetPolicy
from client_sdk.policy import DEFAULT_POLICY, PolicyViolation, PrivacyPolicy


def test_defaults_are_the_documented_ones() -> None:
    assert DEFAULT_POLICY.max_epsilon == 4.0
    assert DEFAULT_POLICY.max_epsilon_inf == 8.0
    assert DEFAULT_POLICY.max_delta == 1e-6
    assert DEFAULT_POLICY.budget is None
    assert DEFAULT_POLICY.allowed_mechanisms is None


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "grr", "epsilon": 10.0, "k": 4},
        {"mechanism": "oue", "epsilon": 4.5, "k": 8},
        {"mechanism": "laplace", "epsilon": 39.0, "lower": 0.0, "upper": 1.0},
    ],
)
def test_a_campaign_above_max_epsilon_is_refused(config: dict[str, object]) -> None:
    mechanism = mechanism_from_config(config)
    with pytest.raises(PolicyViolation) as caught:
        DEFAULT_POLICY.check("c", mechanism, config_id="x")
    error = caught.value
    assert error.field == "max_epsilon"
    assert error.campaign_value == pytest.approx(float(config["epsilon"]))  # type: ignore[arg-type]
    assert error.policy_value == 4.0
    assert "max_epsilon" in str(error) and "'c'" in str(error)
    assert isinstance(error, ValueError)


def test_a_campaign_at_the_limit_passes() -> None:
    mechanism = mechanism_from_config({"mechanism": "grr", "epsilon": 4.0, "k": 4})
    DEFAULT_POLICY.check("c", mechanism, config_id="x")


def test_delta_above_the_policy_is_refused() -> None:
    mechanism = mechanism_from_config(
        {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-3, "lower": 0.0, "upper": 1.0}
    )
    with pytest.raises(PolicyViolation) as caught:
        DEFAULT_POLICY.check("g", mechanism, config_id="x")
    assert caught.value.field == "max_delta"
    PrivacyPolicy(max_delta=1e-3).check("g", mechanism, config_id="x")


def test_epsilon_inf_of_a_memoized_campaign_is_bounded() -> None:
    mechanism = mechanism_from_config(
        {"mechanism": "grr", "epsilon": 1.0, "k": 4, "longitudinal": {"epsilon_permanent": 9.0}}
    )
    with pytest.raises(PolicyViolation) as caught:
        DEFAULT_POLICY.check("m", mechanism, config_id="x")
    assert caught.value.field == "max_epsilon_inf"
    assert caught.value.campaign_value == pytest.approx(9.0)
    PrivacyPolicy(max_epsilon_inf=9.0).check("m", mechanism, config_id="x")


@pytest.mark.parametrize(
    ("config", "pseudonymous"),
    [
        ({"mechanism": "olh", "epsilon": 1.0, "k": 16}, True),
        ({"mechanism": "blh", "epsilon": 1.0, "k": 16}, True),
        ({"mechanism": "grr", "epsilon": 1.0, "k": 16}, False),
        ({"mechanism": "ss", "epsilon": 1.0, "k": 16}, False),
    ],
)
def test_a_deterministic_pseudonym_needs_allow_pseudonymous_memoization(
    config: dict[str, object], pseudonymous: bool
) -> None:
    """Memoized local hashing resends its hash seed (docs/math/memoization.md): refused unless
    the app allows it; the same oracle unmemoized, and chains without a pseudonym, pass."""
    memoized = mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": 2.0}})
    assert getattr(memoized, "deterministic_pseudonym") is pseudonymous  # noqa: B009
    DEFAULT_POLICY.check("c", mechanism_from_config(config), config_id="x")
    PrivacyPolicy(allow_pseudonymous_memoization=True).check("c", memoized, config_id="x")
    if not pseudonymous:
        DEFAULT_POLICY.check("c", memoized, config_id="x")
        return
    with pytest.raises(PolicyViolation) as caught:
        DEFAULT_POLICY.check("c", memoized, config_id="x")
    assert caught.value.field == "allow_pseudonymous_memoization"
    assert "allow_pseudonymous_memoization" in str(caught.value)


def test_allowed_mechanisms_and_pinned_config_ids() -> None:
    mechanism = mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": 16})
    policy = PrivacyPolicy(allowed_mechanisms=frozenset({"grr", "oue"}))
    with pytest.raises(PolicyViolation) as caught:
        policy.check("c", mechanism, config_id="x")
    assert caught.value.field == "allowed_mechanisms"
    assert caught.value.campaign_value == "olh"

    pinned = PrivacyPolicy(pinned_config_ids={"c": "a" * 64})
    pinned.check("c", mechanism, config_id="a" * 64)
    pinned.check("other", mechanism, config_id="b" * 64)  # only the pinned name is bound
    with pytest.raises(PolicyViolation) as caught:
        pinned.check("c", mechanism, config_id="b" * 64)
    assert caught.value.field == "pinned_config_ids"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_epsilon", 0.0),
        ("max_epsilon", -1.0),
        ("max_epsilon", math.inf),
        ("max_epsilon", math.nan),
        ("max_epsilon", True),
        ("max_epsilon_inf", "8"),
        ("max_delta", 1.0),
        ("max_delta", -1e-9),
        ("allowed_mechanisms", "grr"),
        ("pinned_config_ids", {"c": 1}),
        ("allow_pseudonymous_memoization", 1),
    ],
)
def test_bad_policies_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        PrivacyPolicy(**{field: value})  # type: ignore[arg-type]


def test_the_stricter_budget_applies_field_by_field() -> None:
    app = PrivacyPolicy(
        budget=BudgetPolicy(epsilon_per_report=1.0, reports_per_period=4, period_seconds=86400)
    )
    served = {"epsilon_per_report": 2.0, "reports_per_period": 200, "period_seconds": 3600}
    assert app.effective_budget(served) == BudgetPolicy(1.0, 4, 86400)
    tighter = {"epsilon_per_report": 0.5, "reports_per_period": 2, "period_seconds": 7 * 86400}
    assert app.effective_budget(tighter) == BudgetPolicy(0.5, 2, 7 * 86400)
    assert app.effective_budget(None) == BudgetPolicy(1.0, 4, 86400)
    assert PrivacyPolicy().effective_budget(served) == BudgetPolicy(2.0, 200, 3600)
    assert PrivacyPolicy().effective_budget(None) is None
