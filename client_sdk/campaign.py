"""What a campaign is, checked once: the collector stores and the client verifies the same shape.

A campaign document is::

    {"name": "app-theme",
     "protocol": 1,
     "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
     "domain": ["light", "dark", "system"],
     "policy": {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400},
     "min_batch_size": 100}

(``protocol``, ``policy`` and ``min_batch_size`` optional; ``protocol`` is the device
protocol's version, docs/protocol.md, and absent means 1). :func:`parse_campaign` validates it
and returns a :class:`CampaignSpec`; ``collector.storage`` stores what
:func:`normalize_campaign` returns and ``client_sdk.client`` verifies a fetched campaign with the
same function, so both sides refuse the same documents with the same messages (a
``ValueError`` naming the field and the value).

The domain depends on what a device records (``Mechanism.value_kind``): a ``"category"``
mechanism needs the ``k`` distinct labels its indices stand for; a ``"string"`` mechanism may
carry a bounded candidate list the analysis estimates against (devices may report any string);
a ``"number"`` mechanism has none.

The budget policy is the one the device's ledger enforces (``client_sdk.budget``): a campaign
may spend at most ``reports_per_period`` charges and ``epsilon_per_report *
reports_per_period`` epsilon per period of ``period_seconds`` (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping, Sequence
from typing import Any

from client_sdk.config import canonical_json
from client_sdk.mechanisms import Mechanism, mechanism_from_config
from client_sdk.mechanisms._validation import check_epsilon, check_int, describe
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.protocol import DEFAULT_MIN_BATCH_SIZE, campaign_config_id

__all__ = [
    "CAMPAIGN_FIELDS",
    "CAMPAIGN_NAME_PATTERN",
    "MAX_CANDIDATES",
    "METADATA_FIELDS",
    "PROTOCOL_VERSION",
    "BudgetPolicy",
    "CampaignSpec",
    "ShufflePlan",
    "check_domain",
    "normalize_campaign",
    "parse_campaign",
    "parse_metadata",
]

CAMPAIGN_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""Campaign names are URL path segments: letters, digits, ``.``, ``_``, ``-`` (1-128 chars)."""

METADATA_FIELDS = ("description", "unit", "owner", "expires", "retention_days")
"""Optional metadata of a campaign: what it measures and its lifecycle. None is hashed into
``config_id`` (docs/campaigns.md): a device does nothing with ``description``, ``unit`` or
``owner``; ``retention_days`` is the collector's; ``expires`` is enforced by the collector
(uploads after it are refused with ``campaign-expired``, which the device stops on)."""

MAX_TEXT_LENGTH = 1000
"""The longest ``description``, ``unit`` or ``owner``."""

CAMPAIGN_FIELDS = frozenset(
    {"name", "protocol", "mechanism", "domain", "policy", "min_batch_size", "shuffle"}
    | set(METADATA_FIELDS)
)
"""The fields of a campaign's content (a served campaign adds ``config_id`` and ``created``)."""

PROTOCOL_VERSION = 1
"""The device protocol's version (docs/protocol.md): what a device must implement to report.
A campaign document carries it as ``"protocol"`` (absent means 1); a device refuses a campaign
of a version it does not implement. It is not hashed into ``config_id`` while it is 1, so the
ids of campaigns created before the field are unchanged."""

MAX_CANDIDATES = 10_000
"""The longest candidate list a ``"string"`` campaign may carry."""

BUDGET_TOLERANCE = 1e-9
"""The relative slack of the device ledger's comparisons (``client_sdk.budget``)."""

MAX_SAFE_INT = (1 << 53) - 1
"""The largest integer every JSON reader holds exactly."""


@dataclasses.dataclass(frozen=True)
class BudgetPolicy:
    """A campaign's budget policy (module docstring); build it with :meth:`from_dict`."""

    epsilon_per_report: float
    reports_per_period: int
    period_seconds: int

    @property
    def epsilon_per_period(self) -> float:
        """The most one period can spend: ``epsilon_per_report * reports_per_period``."""
        return self.epsilon_per_report * self.reports_per_period

    @classmethod
    def from_dict(cls, policy: Mapping[str, Any] | BudgetPolicy) -> BudgetPolicy:
        """Validate a policy dict; ``ValueError`` naming the field and the value."""
        if isinstance(policy, BudgetPolicy):
            return policy
        if not isinstance(policy, Mapping):
            raise ValueError(f"policy must be a JSON object; got {type(policy).__name__}")
        fields = {"epsilon_per_report", "reports_per_period", "period_seconds"}
        missing = sorted(fields - set(policy))
        if missing:
            raise ValueError(f"policy is missing {', '.join(missing)}")
        unknown = sorted(set(map(str, policy)) - fields)
        if unknown:
            raise ValueError(f"policy has unknown field(s) {', '.join(unknown)}")
        return cls(
            check_epsilon(policy["epsilon_per_report"], "policy.epsilon_per_report"),
            check_int(policy["reports_per_period"], "policy.reports_per_period", minimum=1),
            check_int(policy["period_seconds"], "policy.period_seconds", minimum=1),
        )

    def to_dict(self) -> dict[str, Any]:
        """The budget as its JSON object (what ``from_dict`` reads)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ShufflePlan:
    """A shuffled campaign's central target: batches of at least ``min_batch`` reports go
    through an anonymizing shuffler, and the collector calibrates the mechanism's (local)
    epsilon so that each such batch is (``central_epsilon``, ``delta``)-DP by the numerical
    bound of Feldman, McMillan, Talwar (FOCS 2021; ``client_sdk.amplification``,
    docs/math/central-and-shuffle.md)."""

    min_batch: int
    central_epsilon: float
    delta: float

    @classmethod
    def from_dict(cls, shuffle: Any) -> ShufflePlan:
        if not isinstance(shuffle, Mapping):
            raise ValueError(f"shuffle must be a JSON object or null; got {describe(shuffle)}")
        fields = {"min_batch", "central_epsilon", "delta"}
        missing, unknown = sorted(fields - set(shuffle)), sorted(map(str, set(shuffle) - fields))
        if missing or unknown:
            raise ValueError(
                f"shuffle needs exactly {sorted(fields)}; missing {missing}, unknown {unknown}"
            )
        delta = shuffle["delta"]
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
            raise ValueError(f"shuffle.delta must be a number in (0, 1); got {describe(delta)}")
        return cls(
            min_batch=check_int(
                shuffle["min_batch"], "shuffle.min_batch", minimum=2, maximum=MAX_SAFE_INT
            ),
            central_epsilon=check_epsilon(shuffle["central_epsilon"], "shuffle.central_epsilon"),
            delta=float(delta),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CampaignSpec:
    """A validated campaign: its mechanism, canonical config, domain, policy and minimum."""

    name: str
    mechanism: Mechanism
    config: dict[str, Any]
    domain: tuple[str, ...] | None
    policy: BudgetPolicy | None
    min_batch_size: int
    shuffle: ShufflePlan | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The :data:`METADATA_FIELDS` the document gave (absent ones are left out)."""

    @property
    def expires(self) -> datetime.date | None:
        """The last UTC day the campaign takes reports (``None``: no expiry)."""
        expires = self.metadata.get("expires")
        return None if expires is None else datetime.date.fromisoformat(expires)

    def content(self) -> dict[str, Any]:
        """The canonical document (what the collector stores; JSON-safe)."""
        content: dict[str, Any] = {
            "name": self.name,
            "protocol": PROTOCOL_VERSION,
            "mechanism": dict(self.config),
            "domain": None if self.domain is None else list(self.domain),
            "policy": None if self.policy is None else self.policy.to_dict(),
            "min_batch_size": self.min_batch_size,
        }
        if self.shuffle is not None:
            content["shuffle"] = self.shuffle.to_dict()
        content.update(self.metadata)
        return content

    @property
    def config_id(self) -> str:
        """``client_sdk.protocol.campaign_config_id`` of this content."""
        return campaign_config_id(
            mechanism=self.config,
            domain=self.domain,
            policy=None if self.policy is None else self.policy.to_dict(),
            min_batch_size=self.min_batch_size,
            shuffle=None if self.shuffle is None else self.shuffle.to_dict(),
        )


def parse_campaign(document: Any, *, strict: bool = True) -> CampaignSpec:
    """Validate a campaign document (module docstring); ``ValueError`` naming the field.

    The mechanism config is normalised through ``mechanism_from_config(...).to_config()``.
    ``strict`` refuses fields other than :data:`CAMPAIGN_FIELDS` (what the collector accepts);
    ``strict=False`` ignores them (what a client reads: a served campaign adds its
    ``config_id``, its creation time, and perhaps fields of a newer collector).

    >>> spec = parse_campaign({"name": "theme", "domain": ["light", "dark"],
    ...                        "mechanism": {"mechanism": "grr", "epsilon": 1, "k": 2}})
    >>> spec.config, spec.domain, spec.min_batch_size
    ({'mechanism': 'grr', 'epsilon': 1.0, 'k': 2}, ('light', 'dark'), 100)
    >>> parse_campaign({"name": "theme", "domain": ["light"],
    ...                 "mechanism": {"mechanism": "grr", "epsilon": 1, "k": 2}})
    Traceback (most recent call last):
    ValueError: domain must have k=2 labels; got 1 labels
    """
    if not isinstance(document, Mapping):
        raise ValueError(f"a campaign must be a JSON object; got {type(document).__name__}")
    if strict:
        unknown = sorted(str(key) for key in set(document) - CAMPAIGN_FIELDS)
        if unknown:
            raise ValueError(f"campaign has unknown field(s): {', '.join(unknown)}")
    for field in ("name", "mechanism"):
        if field not in document:
            raise ValueError(f"campaign is missing the field {field!r}")

    protocol = document.get("protocol", PROTOCOL_VERSION)
    if isinstance(protocol, bool) or protocol != PROTOCOL_VERSION:
        raise ValueError(
            f"protocol must be {PROTOCOL_VERSION} (the device protocol this SDK implements, "
            f"docs/protocol.md); got {describe(protocol)}"
        )

    name = document["name"]
    if not isinstance(name, str) or CAMPAIGN_NAME_PATTERN.fullmatch(name) is None:
        raise ValueError(
            "name must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or "
            f"digit; got {describe(name)}"
        )

    try:
        mechanism = mechanism_from_config(document["mechanism"])
    except (TypeError, ValueError, OverflowError, KeyError, RecursionError) as error:
        message = str(error)
        message = message if len(message) <= 300 else message[:297] + "..."
        raise ValueError(f"mechanism: {message}") from error

    domain = check_domain(mechanism, document.get("domain"))

    policy = document.get("policy")
    if policy is not None and not isinstance(policy, Mapping):
        raise ValueError(f"policy must be a JSON object or null; got {describe(policy)}")
    # The device ledger enforces it (client_sdk.budget); refuse a policy it cannot read.
    budget = None if policy is None else BudgetPolicy.from_dict(policy)
    if budget is not None:
        _check_budget_reachable(mechanism, budget)

    min_batch_size = check_int(
        document.get("min_batch_size", DEFAULT_MIN_BATCH_SIZE),
        "min_batch_size",
        minimum=1,
        maximum=MAX_SAFE_INT,
    )

    shuffle = document.get("shuffle")
    spec = CampaignSpec(
        name=name,
        mechanism=mechanism,
        config=mechanism.to_config(),
        domain=domain,
        policy=budget,
        min_batch_size=min_batch_size,
        shuffle=None if shuffle is None else ShufflePlan.from_dict(shuffle),
        metadata=parse_metadata(document),
    )
    try:
        canonical_json(spec.content())
    except (TypeError, ValueError) as error:
        raise ValueError(f"campaign is not JSON-safe: {error}") from error
    return spec


def parse_metadata(document: Mapping[str, Any]) -> dict[str, Any]:
    """The campaign's :data:`METADATA_FIELDS`, validated; ``ValueError`` naming the field.

    ``description``, ``unit``, ``owner``: non-empty text of at most :data:`MAX_TEXT_LENGTH`
    characters; ``expires``: an ISO date ``YYYY-MM-DD`` (the last UTC day that takes reports);
    ``retention_days``: how many UTC days raw reports are kept, an integer >= 1.

    >>> parse_metadata({"unit": "ms", "expires": "2027-01-31", "retention_days": 90})
    {'unit': 'ms', 'expires': '2027-01-31', 'retention_days': 90}
    >>> parse_metadata({"expires": "31/01/2027"})
    Traceback (most recent call last):
    ValueError: expires must be an ISO date YYYY-MM-DD; got '31/01/2027'
    """
    metadata: dict[str, Any] = {}
    for field in ("description", "unit", "owner"):
        value = document.get(field)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT_LENGTH:
            raise ValueError(
                f"{field} must be non-empty text of at most {MAX_TEXT_LENGTH} characters; "
                f"got {describe(value)}"
            )
        metadata[field] = value
    expires = document.get("expires")
    if expires is not None:
        if not isinstance(expires, str) or _ISO_DATE.fullmatch(expires) is None:
            raise ValueError(f"expires must be an ISO date YYYY-MM-DD; got {describe(expires)}")
        try:
            datetime.date.fromisoformat(expires)
        except ValueError:
            raise ValueError(f"expires is not a calendar date; got {describe(expires)}") from None
        metadata["expires"] = expires
    retention = document.get("retention_days")
    if retention is not None:
        metadata["retention_days"] = check_int(
            retention, "retention_days", minimum=1, maximum=MAX_SAFE_INT
        )
    return metadata


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _check_budget_reachable(mechanism: Mechanism, budget: BudgetPolicy) -> None:
    """Refuse a policy no report can meet: the device ledger refuses every ordinary report whose
    epsilon exceeds ``epsilon_per_report`` (``client_sdk.budget``), so such a campaign would
    collect nothing. Memoized mechanisms are charged epsilon_inf once per value instead."""
    if is_memoized(mechanism):
        return
    epsilon = float(mechanism.privacy_epsilon)
    if epsilon > budget.epsilon_per_report * (1 + BUDGET_TOLERANCE):
        raise ValueError(
            f"policy.epsilon_per_report {budget.epsilon_per_report:g} is below the mechanism's "
            f"per-report epsilon {epsilon:g}: devices would refuse every report; raise "
            "policy.epsilon_per_report or lower mechanism.epsilon"
        )


def normalize_campaign(document: Any) -> dict[str, Any]:
    """The canonical form of a campaign document (``parse_campaign(document).content()``)."""
    return parse_campaign(document).content()


def check_domain(mechanism: Mechanism, domain: Any) -> tuple[str, ...] | None:
    """The campaign's domain as ``mechanism.value_kind`` wants it (module docstring)."""
    kind = mechanism.value_kind
    if kind == "number":
        if domain is not None:
            raise ValueError(
                f"domain must be absent for the numeric mechanism {mechanism.name!r}; "
                f"got {describe(domain)}"
            )
        return None
    if kind == "string":
        if domain is None:
            return None
        if getattr(mechanism, "discovery", None) is not None:
            raise ValueError(
                f"domain must be absent for the discovery mechanism {mechanism.name!r} (it finds "
                f"the frequent strings itself); got {describe(domain)}"
            )
        if not isinstance(domain, list) or not 1 <= len(domain) <= MAX_CANDIDATES:
            raise ValueError(
                f"domain (the candidate list of the string mechanism {mechanism.name!r}) must "
                f"be absent or 1 to {MAX_CANDIDATES} strings; got "
                + (f"{len(domain)}" if isinstance(domain, list) else describe(domain))
            )
        return _labels(domain)
    if kind == "record":
        if domain is not None:
            raise ValueError(
                f"domain must be absent for the multi-attribute mechanism {mechanism.name!r} "
                f"(each attribute's labels are in its config); got {describe(domain)}"
            )
        return None
    if kind == "category":
        k: int = getattr(mechanism, "k")  # noqa: B009 -- every category mechanism has k
        if not isinstance(domain, list):
            raise ValueError(
                f"domain must be a list of {k} labels for mechanism {mechanism.name!r}; "
                f"got {describe(domain)}"
            )
        if len(domain) != k:
            raise ValueError(f"domain must have k={k} labels; got {len(domain)} labels")
        return _labels(domain)
    raise ValueError(f"mechanism {mechanism.name!r} records values of unknown kind {kind!r}")


def _labels(domain: Sequence[Any]) -> tuple[str, ...]:
    """Distinct string labels, in order."""
    for index, label in enumerate(domain):
        if not isinstance(label, str):
            raise ValueError(f"domain[{index}] must be a string; got {describe(label)}")
    seen: set[str] = set()
    for label in domain:
        if label in seen:
            raise ValueError(f"domain labels must be unique; {describe(label)} appears twice")
        seen.add(label)
    return tuple(domain)
