"""conformance/policy_shuffle.json: the device's central ceiling for shuffled campaigns, as this
SDK decides it (``client_sdk.policy.PrivacyPolicy.check``, docs/shuffler.md "The device's
policy"), for ports to reproduce (the TypeScript SDK checks it under ``node --test``).

- ``bound_cases``: ``clone_delta(epsilon, epsilon0, n)`` and, where a ``delta`` is given,
  ``numerical_epsilon(epsilon0, n, delta)`` (Feldman, McMillan, Talwar, FOCS 2021;
  ``client_sdk.amplification``). Floating-point figures: a port agrees to a few ulps of the
  log-weights, and its bisection takes the same steps.
- ``policy_cases``: a policy (``PrivacyPolicy`` keyword arguments), a campaign (its canonical
  mechanism config and ``shuffle`` object), whether the client sends through a shuffler, what the
  mechanism claims (``epsilon``, ``delta``, ``memoized``, ``epsilon_inf``), and the verdict:
  ``{"accept": true}``, the refusal (``field``, ``campaign_value``, ``policy_value``, ``note``)
  or the error a bad ``shuffle`` raises (``error_contains``); ``central_epsilon`` is the
  numerical bound at the campaign's ``min_batch`` and ``delta`` (``null`` when not shuffled).
- ``policy_errors``: policies refused at construction, with the field named.

Regenerate after a deliberate change: ``python -m tests.client_sdk.policy_shuffle_vectors``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from client_sdk.amplification import clone_delta, numerical_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from collector.calibration import local_epsilon_for

POLICY_SHUFFLE_FILE = Path(__file__).resolve().parents[2] / "conformance" / "policy_shuffle.json"

_NS = (2, 3, 7, 20, 50, 200, 1000, 10**4, 10**5, 10**6)
_EPSILON0S = (0.1, 0.5, 1.0, 1.64, 3.0, 4.5, 7.07, 9.37, 12.0)
_EPSILONS = (0.0, 0.05, 0.3, 1.0, 2.5)
_DELTAS = (1e-6, 1e-9)


def bound_inputs() -> list[dict[str, Any]]:
    """The (epsilon, epsilon0, n[, delta]) grid: every n and epsilon0, epsilons below epsilon0,
    epsilons a hair below epsilon0 (where the divergence cancels), and the numerical epsilon at
    two deltas for each (epsilon0, n)."""
    cases: list[dict[str, Any]] = []
    for n in _NS:
        for epsilon0 in _EPSILON0S:
            for epsilon in _EPSILONS:
                if epsilon < epsilon0:
                    cases.append({"epsilon": epsilon, "epsilon0": epsilon0, "n": n})
            cases.append({"epsilon": epsilon0 * (1 - 1e-4), "epsilon0": epsilon0, "n": n})
            for delta in _DELTAS:
                cases.append(
                    {"epsilon": 0.5 * epsilon0, "epsilon0": epsilon0, "n": n, "delta": delta}
                )
    return cases


def _calibrated(central: float, n: int, delta: float) -> float:
    return local_epsilon_for(central, n, delta)


def _shuffled(
    epsilon: float, n: int, central: float, delta: float, **config: Any
) -> dict[str, Any]:
    mechanism = {"mechanism": "grr", "k": 4, "epsilon": epsilon, **config}
    return {
        "mechanism": mechanism,
        "shuffle": {"min_batch": n, "central_epsilon": central, "delta": delta},
    }


def policy_inputs() -> list[dict[str, Any]]:
    """Named cases: each condition of the central ceiling accepted at its edge and refused just
    past it, with and without a shuffler, a ceiling or a delta."""
    ceiling = {"max_central_epsilon": 1.0}
    big = _calibrated(1.0, 10**5, 1e-6)  # 7.06994
    cases: list[dict[str, Any]] = [
        {
            "name": "calibrated at 10^5, target at the ceiling",
            "policy": ceiling,
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "no shuffler: max_epsilon applies",
            "policy": ceiling,
            "through_shuffler": False,
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "no central ceiling (the default policy)",
            "policy": {},
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "target above the ceiling",
            "policy": {"max_central_epsilon": 0.99},
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "no max_central_delta given: 1e-6 at the ceiling",
            "policy": {"max_central_epsilon": 2.0},
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "delta above max_central_delta",
            "policy": ceiling,
            **_shuffled(_calibrated(1.0, 10**5, 1e-5), 10**5, 1.0, 1e-5),
        },
        {
            "name": "delta above a stated max_central_delta",
            "policy": {**ceiling, "max_central_delta": 1e-8},
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "overclaimed: 9.0 at 10^5 for (1, 1e-6)",
            "policy": ceiling,
            **_shuffled(9.0, 10**5, 1.0, 1e-6),
        },
        {
            "name": "just above the calibration",
            "policy": ceiling,
            **_shuffled(big * 1.001, 10**5, 1.0, 1e-6),
        },
        {
            "name": "above max_shuffled_epsilon",
            "policy": {"max_central_epsilon": 2.0},
            **_shuffled(_calibrated(2.0, 10**6, 1e-6), 10**6, 2.0, 1e-6),
        },
        {
            "name": "above a stated max_shuffled_epsilon",
            "policy": {**ceiling, "max_shuffled_epsilon": 7.0},
            **_shuffled(big, 10**5, 1.0, 1e-6),
        },
        {
            "name": "memoized reports are not amplified",
            "policy": ceiling,
            **_shuffled(big, 10**5, 1.0, 1e-6, longitudinal={"epsilon_permanent": 8.0}),
        },
        {
            "name": "within max_epsilon: no central check",
            "policy": ceiling,
            **_shuffled(3.0, 10**5, 0.01, 1e-6),
        },
        {
            "name": "not shuffled, above max_epsilon",
            "policy": ceiling,
            "mechanism": {"mechanism": "grr", "k": 4, "epsilon": 6.0},
            "shuffle": None,
        },
        {
            "name": "shuffle without delta",
            "policy": ceiling,
            "mechanism": {"mechanism": "grr", "k": 4, "epsilon": 6.0},
            "shuffle": {"min_batch": 1000, "central_epsilon": 1.0},
            "expect_error": ["shuffle", "delta"],
        },
        {
            "name": "shuffle with min_batch 1",
            "policy": ceiling,
            **_shuffled(6.0, 1, 1.0, 1e-6),
            "expect_error": ["shuffle.min_batch"],
        },
        {
            "name": "n = 2: no amplification to speak of",
            "policy": {"max_epsilon": 1.0, "max_central_epsilon": 1.5},
            **_shuffled(1.02, 2, 1.01, 1e-6),
        },
        {
            "name": "n = 2 at the local epsilon itself",
            "policy": {"max_epsilon": 1.0, "max_central_epsilon": 1.5},
            **_shuffled(1.02, 2, 1.02, 1e-6),
        },
        {
            "name": "n = 50 calibrated",
            "policy": {"max_epsilon": 1.0, "max_central_epsilon": 1.0},
            **_shuffled(_calibrated(1.0, 50, 1e-6), 50, 1.0, 1e-6),
        },
        {
            "name": "n = 50 a step above",
            "policy": {"max_epsilon": 1.0, "max_central_epsilon": 1.0},
            **_shuffled(_calibrated(1.0, 50, 1e-6) + 1e-4, 50, 1.0, 1e-6),
        },
    ]
    for central, n, delta in (
        (1.0, 200, 1e-6),
        (1.0, 1000, 1e-6),
        (0.5, 10**4, 1e-8),
        (2.0, 10**6, 1e-5),
        (0.3, 10**5, 1e-9),
    ):
        epsilon = _calibrated(central, n, delta)
        policy = {
            "max_epsilon": 1.0,
            "max_central_epsilon": central,
            "max_central_delta": delta,
            "max_shuffled_epsilon": 12.0,
        }
        cases.append(
            {
                "name": f"calibrated ({central}, {delta:g}) at {n}",
                "policy": policy,
                **_shuffled(epsilon, n, central, delta),
            }
        )
    return cases


def policy_error_inputs() -> list[dict[str, Any]]:
    """Policies refused at construction: the field is named."""
    return [
        {"policy": {"max_central_epsilon": 0.0}, "field": "max_central_epsilon"},
        {"policy": {"max_central_epsilon": -1.0}, "field": "max_central_epsilon"},
        {"policy": {"max_central_epsilon": 50.0}, "field": "max_central_epsilon"},
        {"policy": {"max_central_epsilon": "1"}, "field": "max_central_epsilon"},
        {"policy": {"max_central_delta": 0.0}, "field": "max_central_delta"},
        {"policy": {"max_central_delta": 1.0}, "field": "max_central_delta"},
        {"policy": {"max_shuffled_epsilon": 41.0}, "field": "max_shuffled_epsilon"},
    ]


def verdict(case: dict[str, Any]) -> dict[str, Any]:
    """What ``PrivacyPolicy.check`` does with one policy case."""
    policy = PrivacyPolicy(**case["policy"])
    try:
        mechanism = mechanism_from_config(case["mechanism"])
        policy.check(
            "c",
            mechanism,
            config_id="0" * 32,
            shuffle=case["shuffle"],
            through_shuffler=case.get("through_shuffler", True),
        )
    except PolicyViolation as violation:
        allows = f"the policy allows {violation.policy_value!r}"
        note = str(violation).partition(allows)[2]
        return {
            "field": violation.field,
            "campaign_value": violation.campaign_value,
            "policy_value": violation.policy_value,
            "note": note[2:-1] if note else None,
        }
    except ValueError as error:
        return {"error": str(error)}
    return {"accept": True}


def claim(config: dict[str, Any]) -> dict[str, Any]:
    """What the mechanism claims for one report (what the policy reads)."""
    mechanism = mechanism_from_config(config)
    out: dict[str, Any] = {
        "epsilon": float(mechanism.privacy_epsilon),
        "delta": float(mechanism.privacy_delta),
        "memoized": bool(getattr(mechanism, "memoized", False)),
    }
    if out["memoized"]:
        out["epsilon_inf"] = float(getattr(mechanism, "epsilon_inf", math.inf))
    return out


def build() -> dict[str, Any]:
    bounds = []
    for case in bound_inputs():
        row = {**case, "clone_delta": clone_delta(case["epsilon"], case["epsilon0"], case["n"])}
        if "delta" in case:
            row["numerical_epsilon"] = numerical_epsilon(case["epsilon0"], case["n"], case["delta"])
        bounds.append(row)
    policies = []
    for case in policy_inputs():
        expected_error = case.pop("expect_error", None)
        result = verdict(case)
        shuffle = case["shuffle"]
        central = None
        if "error" in result:
            assert expected_error is not None and all(
                s in result["error"] for s in expected_error
            ), result
            result = {"error_contains": expected_error}
        elif shuffle is not None:
            central = numerical_epsilon(
                case["mechanism"]["epsilon"], shuffle["min_batch"], shuffle["delta"]
            )
        policies.append(
            {
                **case,
                "through_shuffler": case.get("through_shuffler", True),
                "claim": claim(case["mechanism"]),
                "verdict": result,
                "central_epsilon": central,
            }
        )
    return {
        "description": __doc__.split("\n\n")[0].replace("\n", " "),
        "generator": "python -m tests.client_sdk.policy_shuffle_vectors",
        "bound_cases": bounds,
        "policy_cases": policies,
        "policy_errors": policy_error_inputs(),
    }


def main() -> None:
    content = build()
    assert all(math.isfinite(b["clone_delta"]) for b in content["bound_cases"])
    POLICY_SHUFFLE_FILE.write_text(json.dumps(content, indent=1) + "\n")
    bounds, policies = len(content["bound_cases"]), len(content["policy_cases"])
    print(f"wrote {POLICY_SHUFFLE_FILE}: {bounds} bound cases, {policies} policy cases")


if __name__ == "__main__":
    main()
