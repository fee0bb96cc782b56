"""conformance/policy_shuffle.json (the central ceiling of shuffled campaigns, for ports: the
TypeScript SDK reproduces it under ``node --test``) is what this SDK decides: each policy case's
verdict, field and figures, and the amplification bound's values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from client_sdk.amplification import clone_delta, numerical_epsilon
from client_sdk.policy import PrivacyPolicy
from tests.client_sdk.policy_shuffle_vectors import (
    POLICY_SHUFFLE_FILE,
    bound_inputs,
    claim,
    policy_error_inputs,
    policy_inputs,
    verdict,
)


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return json.loads(POLICY_SHUFFLE_FILE.read_text())


def test_the_cases_are_the_generators(committed: dict[str, Any]) -> None:
    """The committed inputs are the generator's (regenerate after a deliberate change)."""
    inputs = [
        {k: c[k] for k in ("epsilon", "epsilon0", "n", "delta") if k in c}
        for c in committed["bound_cases"]
    ]
    assert inputs == bound_inputs()
    names = [c["name"] for c in committed["policy_cases"]]
    assert names == [c["name"] for c in policy_inputs()]
    assert committed["policy_errors"] == policy_error_inputs()


def test_every_policy_case_gets_its_verdict(committed: dict[str, Any]) -> None:
    """Accepted, refused naming the field with both values and the note (the bound the device
    computed, to 4 digits), or an error naming the bad shuffle field."""
    verdicts = {"accept": 0, "refuse": 0, "error": 0}
    for case in committed["policy_cases"]:
        result = verdict(case)
        expected = case["verdict"]
        if "error_contains" in expected:
            assert "error" in result, case["name"]
            assert all(part in result["error"] for part in expected["error_contains"]), case["name"]
            verdicts["error"] += 1
            continue
        if "field" in result and isinstance(result["campaign_value"], float):
            # the bound in a refusal is a bisection's end: the same on every platform unless a
            # midpoint's divergence lands within a few ulps of delta
            assert result["campaign_value"] == pytest.approx(expected["campaign_value"], rel=1e-3)
            result["campaign_value"] = expected["campaign_value"]
        assert result == expected, case["name"]
        assert claim(case["mechanism"]) == case["claim"], case["name"]
        verdicts["accept" if "accept" in expected else "refuse"] += 1
    assert verdicts["accept"] >= 8 and verdicts["refuse"] >= 12 and verdicts["error"] == 2


def test_the_central_figures_are_the_bounds(committed: dict[str, Any]) -> None:
    for case in committed["policy_cases"]:
        shuffle = case["shuffle"]
        if case["central_epsilon"] is None:
            continue
        figure = numerical_epsilon(case["claim"]["epsilon"], shuffle["min_batch"], shuffle["delta"])
        assert figure == pytest.approx(case["central_epsilon"], rel=1e-3), case["name"]


def test_the_bound_values_are_clone_delta(committed: dict[str, Any]) -> None:
    """Every value to 1e-9 relative (the platform's exp and BLAS may move the last bits); the
    numerical epsilons where n <= 10^4 (the larger n are checked by the TypeScript tests)."""
    for case in committed["bound_cases"]:
        value = clone_delta(case["epsilon"], case["epsilon0"], case["n"])
        assert value == pytest.approx(case["clone_delta"], rel=1e-9, abs=1e-300), case
        if "delta" in case and case["n"] <= 10**4:
            figure = numerical_epsilon(case["epsilon0"], case["n"], case["delta"])
            assert figure == pytest.approx(case["numerical_epsilon"], rel=1e-4), case


@pytest.mark.parametrize("case", policy_error_inputs(), ids=lambda c: f"{c['field']}={c['policy']}")
def test_a_bad_policy_is_refused_naming_the_field(case: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=case["field"]):
        PrivacyPolicy(**case["policy"])
