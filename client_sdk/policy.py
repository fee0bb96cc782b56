"""The app's privacy policy: the floor a collector cannot lower.

Local differential privacy exists so that users need not trust the collector, yet the collector
serves the campaign parameters the device randomizes under. A collector that serves
``epsilon = 50`` (or a campaign that changed overnight) would switch the privacy off if the
device obeyed it blindly. So the app ships a :class:`PrivacyPolicy` in its code, and
``TelemetryClient`` checks every campaign against it before anything is randomized::

    policy = PrivacyPolicy(max_epsilon=2.0, max_epsilon_inf=4.0)
    client = TelemetryClient(url, state_dir=..., policy=policy)
    client.record("theme", "dark")   # PolicyViolation (a ValueError) for a weaker campaign

A campaign is refused, with an error naming the field and both values, when:

* one report's epsilon exceeds ``max_epsilon``, or its delta exceeds ``max_delta``;
* it is memoized and what unlimited reports of one value reveal (epsilon_inf) exceeds
  ``max_epsilon_inf``;
* its mechanism is not in ``allowed_mechanisms`` (when given). The names are the registry's
  (``client_sdk.mechanisms.registry``; an unknown name is a ``ValueError`` at construction, so
  ``{"OLH"}`` cannot silently refuse every campaign). ``"auto"`` allows every frequency oracle
  the ``auto`` selector may pick (``client_sdk.mechanisms.auto.CANDIDATES``);
* its ``config_id`` differs from one the app pinned for that campaign name;
* its memoized reports carry a deterministic pseudonym (the same public value in every report of
  a value, see docs/math/memoization.md) and the policy does not allow that.

Shuffled campaigns. A campaign routed through an anonymizing shuffler (``"shuffle":
{"min_batch", "central_epsilon", "delta"}``, docs/shuffler.md) randomizes each report at a larger
local epsilon, calibrated so that every shuffled batch of ``min_batch`` reports is
(central_epsilon, delta)-DP. An app accepts that only by stating a central ceiling,
``max_central_epsilon`` (and ``max_central_delta``): then a shuffled campaign whose local epsilon
exceeds ``max_epsilon`` is accepted when

* the client sends it through a shuffler (``TelemetryClient(shuffler_url=...)``),
* its local epsilon is at most ``max_shuffled_epsilon`` (what still holds if the shuffler
  colludes with the collector), its mechanism is pure epsilon-LDP and not memoized (the
  amplification bound assumes independent reports),
* its declared central target is within the ceiling, and
* the device's own evaluation of the amplification bound (Feldman, McMillan, Talwar, FOCS 2021;
  ``client_sdk.amplification.clone_delta``) confirms the declared target at ``min_batch`` for
  the served local epsilon: the collector's numbers are not trusted.

Secure aggregation. A campaign aggregated by a DAP pair (a ``"dap"`` object, docs/dap.md)
seals its Prio3 shares to two Aggregators: it is private only while one of them is honest. An
app accepts that only by naming the Aggregators it trusts, ``trusted_aggregators`` (endpoint
URL -> HPKE public key, unpadded base64url); :meth:`PrivacyPolicy.check_dap` refuses, before
anything is sharded, a campaign naming another Aggregator or another key, the same Aggregator
twice, or whose guarantee is too weak: its local epsilon (``local`` randomized response,
infinite without) must be within ``max_epsilon``, or its central epsilon (the Aggregators'
noise, infinite for ``dp = "none"``) within ``max_central_epsilon``. The central ceiling is one
(epsilon, delta) statement for every kind of noise: ``"laplace:EPSILON"`` is pure EPSILON-DP;
``"gaussian:RHO"`` (the discrete Gaussian, rho-zCDP) is held to it through its epsilon at
``max_central_delta`` (Canonne, Kamath, Steinke 2020, Corollary 13;
``client_sdk.zcdp.zcdp_epsilon``), so the app states no second, zCDP ceiling that could
disagree with the first.

Budgets. A campaign may carry a budget (``{"epsilon_per_report", "reports_per_period",
"period_seconds"}``); the app's ``budget`` is the most it grants. Where both exist the stricter
applies field by field (the smaller epsilon per report, the fewer reports, the longer period), so
a campaign can tighten the app's budget but never loosen it; where only one exists, it applies.

The defaults, used when the app passes no policy, are deliberately conservative for a
production telemetry SDK: ``max_epsilon = 4`` per report, ``max_epsilon_inf = 8`` for memoized
campaigns, ``max_delta = 1e-6`` for approximate-DP mechanisms, any registered mechanism, no
pinned ids, no budget beyond the campaign's own, and no central ceiling (a shuffled campaign is
held to ``max_epsilon`` like any other). An app that needs more says so in its code.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from client_sdk.amplification import clone_delta, numerical_epsilon
from client_sdk.campaign import BudgetPolicy, ShufflePlan
from client_sdk.dap.campaign import DapCampaign, b64decode, b64encode
from client_sdk.dap.messages import Role
from client_sdk.mechanisms import Mechanism
from client_sdk.mechanisms._validation import check_delta, check_epsilon
from client_sdk.mechanisms.auto import AUTO, CANDIDATES
from client_sdk.mechanisms.registry import MECHANISMS

__all__ = [
    "DEFAULT_POLICY",
    "PolicyViolation",
    "PrivacyPolicy",
]

MAX_DOCUMENT_BYTES = 1 << 20
"""The largest campaign document a device reads (1 MiB): a bigger one is refused unread."""


class PolicyViolation(ValueError):
    """A campaign weaker than the app's :class:`PrivacyPolicy`; nothing was randomized.

    ``field`` names the policy field, ``campaign_value`` what the campaign asks for and
    ``policy_value`` what the policy allows.
    """

    def __init__(
        self,
        campaign: str,
        field: str,
        campaign_value: Any,
        policy_value: Any,
        *,
        note: str | None = None,
    ) -> None:
        super().__init__(
            f"campaign {campaign!r} is refused by the app's privacy policy: {field} is "
            f"{campaign_value!r} in the campaign, the policy allows {policy_value!r}"
            + ("" if note is None else f" ({note})")
        )
        self.campaign = campaign
        self.field = field
        self.campaign_value = campaign_value
        self.policy_value = policy_value


@dataclasses.dataclass(frozen=True)
class PrivacyPolicy:
    """What the app allows, whatever the collector serves (module docstring).

    :param max_epsilon: the largest epsilon of one report.
    :param max_epsilon_inf: the largest epsilon_inf of a memoized campaign (what unlimited
        reports of one value reveal).
    :param max_delta: the largest delta of one report (approximate-DP mechanisms).
    :param budget: the largest budget per period, ``{"epsilon_per_report",
        "reports_per_period", "period_seconds"}``; ``None`` grants whatever the campaign's own
        budget says (and leaves a campaign without one unbudgeted).
    :param allowed_mechanisms: mechanism names the app accepts (``None``: all registered ones);
        registry names, or ``"auto"`` for whatever the ``auto`` selector may pick.
    :param pinned_config_ids: campaign name -> the only ``config_id`` accepted for it.
    :param allow_pseudonymous_memoization: accept memoized campaigns whose reports carry a
        deterministic pseudonym of (device, campaign, value).
    :param max_central_epsilon: the largest central epsilon of a shuffled batch the app accepts
        in exchange for a local epsilon above ``max_epsilon`` (``None``: shuffled campaigns are
        held to ``max_epsilon`` like any other; module docstring).
    :param max_central_delta: the largest central delta of a shuffled batch, and the delta at
        which a secure-aggregation task's zCDP guarantee (``"gaussian:RHO"``) is converted to
        the epsilon held to ``max_central_epsilon`` and charged to the ledger.
    :param max_shuffled_epsilon: the largest local epsilon of one report of a shuffled campaign
        accepted under the central ceiling.
    :param trusted_aggregators: DAP Aggregators the app trusts, endpoint URL (as in the task,
        compared after adding a final ``/``) -> X25519 HPKE public key (32 bytes, unpadded
        base64url). Empty (the default): secure-aggregation campaigns are refused.
    """

    max_epsilon: float = 4.0
    max_epsilon_inf: float = 8.0
    max_delta: float = 1e-6
    budget: BudgetPolicy | None = None
    allowed_mechanisms: frozenset[str] | None = None
    pinned_config_ids: Mapping[str, str] = dataclasses.field(default_factory=dict)
    allow_pseudonymous_memoization: bool = False
    max_central_epsilon: float | None = None
    max_central_delta: float = 1e-6
    max_shuffled_epsilon: float = 10.0
    trusted_aggregators: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for field in ("max_epsilon", "max_epsilon_inf", "max_shuffled_epsilon"):
            object.__setattr__(self, field, check_epsilon(getattr(self, field), field))
        object.__setattr__(self, "max_delta", check_delta(self.max_delta, "max_delta"))
        central_delta = check_delta(self.max_central_delta, "max_central_delta", allow_zero=False)
        object.__setattr__(self, "max_central_delta", central_delta)
        if self.max_central_epsilon is not None:
            ceiling = check_epsilon(self.max_central_epsilon, "max_central_epsilon")
            object.__setattr__(self, "max_central_epsilon", ceiling)
        if self.budget is not None:
            object.__setattr__(self, "budget", BudgetPolicy.from_dict(self.budget))
        if self.allowed_mechanisms is not None:
            names = _names(self.allowed_mechanisms, "allowed_mechanisms")
            object.__setattr__(self, "allowed_mechanisms", names)
        pinned = self.pinned_config_ids
        if not isinstance(pinned, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in pinned.items()
        ):
            raise ValueError(
                f"pinned_config_ids must map campaign names to config ids; got {pinned!r}"
            )
        object.__setattr__(self, "pinned_config_ids", dict(pinned))
        object.__setattr__(self, "trusted_aggregators", _aggregators(self.trusted_aggregators))
        if not isinstance(self.allow_pseudonymous_memoization, bool):
            raise ValueError(
                "allow_pseudonymous_memoization must be True or False; got "
                f"{self.allow_pseudonymous_memoization!r}"
            )

    def check(
        self,
        campaign: str,
        mechanism: Mechanism,
        *,
        config_id: str,
        shuffle: Mapping[str, Any] | None = None,
        through_shuffler: bool = False,
    ) -> None:
        """Raise :class:`PolicyViolation` when ``mechanism`` is weaker than this policy.

        ``shuffle``: the campaign's shuffle target, if any; ``through_shuffler``: whether the
        client sends its reports through a shuffler (module docstring, "Shuffled campaigns").
        """
        pinned = self.pinned_config_ids.get(campaign)
        if pinned is not None and pinned != config_id:
            raise PolicyViolation(campaign, "pinned_config_ids", config_id, pinned)
        name = mechanism.to_config()["mechanism"]
        if self.allowed_mechanisms is not None and not self.allows(name):
            note = None
            if AUTO in self.allowed_mechanisms:
                note = f"{AUTO!r} allows what it may pick: {', '.join(CANDIDATES)}"
            raise PolicyViolation(
                campaign, "allowed_mechanisms", name, sorted(self.allowed_mechanisms), note=note
            )
        epsilon = float(mechanism.privacy_epsilon)
        if not epsilon <= self.max_epsilon:  # also refuses nan
            if shuffle is None or self.max_central_epsilon is None or not through_shuffler:
                raise PolicyViolation(campaign, "max_epsilon", epsilon, self.max_epsilon)
            self._check_central(campaign, mechanism, epsilon, ShufflePlan.from_dict(shuffle))
        delta = float(mechanism.privacy_delta)
        if not delta <= self.max_delta:
            raise PolicyViolation(campaign, "max_delta", delta, self.max_delta)
        if bool(getattr(mechanism, "memoized", False)):
            epsilon_inf = float(getattr(mechanism, "epsilon_inf", math.inf))
            if not epsilon_inf <= self.max_epsilon_inf:
                raise PolicyViolation(
                    campaign, "max_epsilon_inf", epsilon_inf, self.max_epsilon_inf
                )
            pseudonymous = bool(getattr(mechanism, "deterministic_pseudonym", False))
            if pseudonymous and not self.allow_pseudonymous_memoization:
                raise PolicyViolation(campaign, "allow_pseudonymous_memoization", True, False)

    def check_dap(self, campaign: DapCampaign) -> None:
        """Raise :class:`PolicyViolation` when the app does not accept this secure-aggregation
        campaign (module docstring, "Secure aggregation"): checked before anything is sharded."""
        name = campaign.name
        trusted = self.trusted_aggregators
        if not trusted:
            raise PolicyViolation(
                name,
                "trusted_aggregators",
                [campaign.leader, campaign.helper],
                {},
                note="the app accepts no secure aggregation",
            )
        leader_key, helper_key = (
            b64encode(campaign.task.hpke_config(role).public_key)
            for role in (Role.LEADER, Role.HELPER)
        )
        if _normal_url(campaign.leader) == _normal_url(campaign.helper) or leader_key == helper_key:
            raise PolicyViolation(
                name,
                "trusted_aggregators",
                campaign.leader,
                campaign.helper,
                note="the leader and the helper must be two parties: one would hold both shares",
            )
        for role, url, key in (
            ("leader", campaign.leader, leader_key),
            ("helper", campaign.helper, helper_key),
        ):
            expected = trusted.get(_normal_url(url))
            if expected is None:
                raise PolicyViolation(
                    name,
                    "trusted_aggregators",
                    url,
                    sorted(trusted),
                    note=f"the {role} is not trusted",
                )
            if key != expected:
                raise PolicyViolation(
                    name,
                    "trusted_aggregators",
                    key,
                    expected,
                    note=f"the {role} {url}'s HPKE public key is not the trusted one",
                )
        pinned = self.pinned_config_ids.get(name)
        if pinned is not None and pinned != campaign.config_id:
            raise PolicyViolation(name, "pinned_config_ids", campaign.config_id, pinned)
        if campaign.local is not None and not self.allows(campaign.local.name):
            allowed = sorted(self.allowed_mechanisms or ())
            raise PolicyViolation(name, "allowed_mechanisms", campaign.local.name, allowed)
        local = campaign.local_epsilon
        if local <= self.max_epsilon:
            return  # the local guarantee alone is within the app's limit
        central = campaign.central_epsilon_at(self.max_central_delta)
        if self.max_central_epsilon is None:
            raise PolicyViolation(
                name,
                "max_epsilon",
                local,
                self.max_epsilon,
                note="a secure-aggregation campaign without local randomization within "
                "max_epsilon needs the app's max_central_epsilon",
            )
        if not central <= self.max_central_epsilon:
            note = "the central epsilon of the Aggregators' noise (dp); infinite for dp none"
            if campaign.central_rho is not None:
                note = (
                    f"dp {campaign.document['dap']['dp']} is {float(campaign.central_rho):g}-zCDP, "
                    f"epsilon {central:.6g} at max_central_delta {self.max_central_delta:g}"
                )
            raise PolicyViolation(
                name, "max_central_epsilon", central, self.max_central_epsilon, note=note
            )

    def allows(self, mechanism: str) -> bool:
        """Whether ``allowed_mechanisms`` admits the registry name ``mechanism`` (``"auto"``
        admits every candidate of the ``auto`` selector)."""
        allowed = self.allowed_mechanisms
        if allowed is None or mechanism in allowed:
            return True
        return AUTO in allowed and mechanism in CANDIDATES

    def _check_central(
        self, campaign: str, mechanism: Mechanism, epsilon: float, plan: ShufflePlan
    ) -> None:
        """A local epsilon above ``max_epsilon`` bought by shuffling (module docstring)."""
        assert self.max_central_epsilon is not None
        if not epsilon <= self.max_shuffled_epsilon:
            raise PolicyViolation(
                campaign, "max_shuffled_epsilon", epsilon, self.max_shuffled_epsilon
            )
        if float(mechanism.privacy_delta) > 0 or bool(getattr(mechanism, "memoized", False)):
            raise PolicyViolation(
                campaign,
                "max_epsilon",
                epsilon,
                self.max_epsilon,
                note="the amplification bound covers independent pure epsilon-LDP reports only",
            )
        if not plan.central_epsilon <= self.max_central_epsilon:
            raise PolicyViolation(
                campaign, "max_central_epsilon", plan.central_epsilon, self.max_central_epsilon
            )
        if not plan.delta <= self.max_central_delta:
            raise PolicyViolation(campaign, "max_central_delta", plan.delta, self.max_central_delta)
        if clone_delta(plan.central_epsilon, epsilon, plan.min_batch) > plan.delta:
            bound = numerical_epsilon(epsilon, plan.min_batch, plan.delta)
            raise PolicyViolation(
                campaign,
                "max_central_epsilon",
                bound,
                self.max_central_epsilon,
                note=f"the campaign claims central_epsilon {plan.central_epsilon} for batches of "
                f"{plan.min_batch} at local epsilon {epsilon}; the amplification bound gives "
                f"{bound:.4g} at delta {plan.delta:g}",
            )

    def effective_budget(self, campaign_budget: Mapping[str, Any] | None) -> BudgetPolicy | None:
        """The stricter of the campaign's budget and the app's, field by field."""
        theirs = None if campaign_budget is None else BudgetPolicy.from_dict(campaign_budget)
        ours = self.budget
        if theirs is None or ours is None:
            return theirs if ours is None else ours
        return BudgetPolicy(
            epsilon_per_report=min(theirs.epsilon_per_report, ours.epsilon_per_report),
            reports_per_period=min(theirs.reports_per_period, ours.reports_per_period),
            period_seconds=max(theirs.period_seconds, ours.period_seconds),
        )


def _normal_url(url: str) -> str:
    """An Aggregator's endpoint as the policy compares it: with one final ``/``."""
    return url.rstrip("/") + "/"


def _aggregators(trusted: Any) -> dict[str, str]:
    """``trusted_aggregators`` checked: http(s) URL -> 32-byte key in unpadded base64url."""
    if not isinstance(trusted, Mapping):
        raise ValueError(
            "trusted_aggregators must map Aggregator URLs to HPKE public keys; got a "
            f"{type(trusted).__name__}"
        )
    out: dict[str, str] = {}
    for url, key in trusted.items():
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ValueError(f"trusted_aggregators: {url!r} is not an http(s) URL")
        b64decode(key, f"trusted_aggregators[{url!r}]", 32)
        out[_normal_url(url)] = key
    return out


def _names(values: Iterable[Any], field: str) -> frozenset[str]:
    """Registry names (or ``"auto"``); ``ValueError`` naming the field and the unknown names."""
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{field} must be a collection of mechanism names; got {values!r}")
    names = frozenset(values)
    unknown = sorted(names - MECHANISMS.keys() - {AUTO})
    if unknown:
        hints = [f"{u!r} (did you mean {u.lower()!r}?)" for u in unknown if u.lower() in MECHANISMS]
        raise ValueError(
            f"{field}: unknown mechanism name(s) {', '.join(map(repr, unknown))}"
            + (f"; {', '.join(hints)}" if hints else "")
            + f"; the registered names are {', '.join(sorted(MECHANISMS))}, and {AUTO!r}"
        )
    return names


DEFAULT_POLICY = PrivacyPolicy()
"""The policy of a client built without one (module docstring)."""
