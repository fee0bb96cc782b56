"""Secure-aggregation campaigns: the document a device reads to report through a DAP pair.

A campaign document with a ``"dap"`` object instead of ``"mechanism"`` (docs/dap.md, "The
device: secure-aggregation campaigns")::

    {"name": "app-crashes", "protocol": 1,
     "dap": {"task_id", "task_info", "leader", "helper", "vdaf", "min_batch_size",
             "time_precision", "dp", "leader_hpke_config", "helper_hpke_config"},
     "domain": [...],                       # histogram, multihotcountvec: its labels
     "local": {"mechanism": "grr", "epsilon": 2.0, "k": 4},   # histogram/count: optional
     "local": {"mechanism": "oue", "epsilon": 2.0, "k": 4},   # multihotcountvec: sue or oue
     "policy": {...}, "config_id": "<32 hex>"}

``dap`` is the DAP task's public part (the task file every party shares, plus both
Aggregators' ``HpkeConfig``); :class:`DapCampaign` verifies a document (its ``config_id``, its
canonical form) and turns recorded values into Prio3 measurements. What the app accepts is
``PrivacyPolicy.check_dap`` (client_sdk/policy.py); the upload is ``TelemetryClient``'s.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from client_sdk.campaign import (
    BUDGET_TOLERANCE,
    CAMPAIGN_NAME_PATTERN,
    METADATA_FIELDS,
    PROTOCOL_VERSION,
    BudgetPolicy,
    parse_metadata,
)
from client_sdk.config import config_id as content_id
from client_sdk.dap.hpke import HpkeError, check_suite
from client_sdk.dap.messages import TASK_ID_SIZE, HpkeConfig, TaskConfiguration
from client_sdk.dap.upload import DapTask, task_configuration
from client_sdk.mechanisms import Mechanism, mechanism_from_config
from client_sdk.mechanisms._validation import check_int, describe, shape_of
from client_sdk.mechanisms.unary import UnaryEncoding
from client_sdk.vdaf import (
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
)
from client_sdk.vdaf.rr import unary_measurement
from client_sdk.zcdp import zcdp_epsilon

__all__ = [
    "DAP_CAMPAIGN_FIELDS",
    "DAP_FIELDS",
    "DP_FORMS",
    "VDAF_PARAMETERS",
    "DapCampaign",
    "b64decode",
    "b64encode",
    "dap_campaign_content",
    "dap_campaign_document",
    "dap_object",
    "dp_parameter",
    "hpke_config_from_json",
    "hpke_config_to_json",
    "vdaf_from_config",
]

DAP_FIELDS = (
    "task_id",
    "task_info",
    "leader",
    "helper",
    "vdaf",
    "min_batch_size",
    "time_precision",
    "dp",
    "leader_hpke_config",
    "helper_hpke_config",
)
"""The fields of a campaign's ``dap`` object: the task file's, then both Aggregators' keys."""

DAP_CAMPAIGN_FIELDS = frozenset({"name", "protocol", "dap", "local", "domain", "policy"}) | set(
    METADATA_FIELDS
)
"""The fields of a secure-aggregation campaign's content (a served one adds ``config_id``)."""

VDAF_PARAMETERS: dict[str, tuple[str, ...]] = {
    "count": (),
    "sum": ("max_measurement",),
    "histogram": ("length", "chunk_length"),
    "sumvec": ("length", "max_measurement", "chunk_length"),
    "multihotcountvec": ("length", "max_weight", "chunk_length"),
}
"""``vdaf.type`` -> its parameters, in the order of the Prio3 constructor."""

LOCAL_MECHANISMS: dict[str, tuple[str, ...]] = {
    "histogram": ("grr",),
    "count": ("grr",),
    "multihotcountvec": ("sue", "oue"),
}
"""``vdaf.type`` -> the randomizers a campaign's ``local`` may name before it (docs/dap.md): k-ary
randomized response reported one-hot, or a unary encoding reported as its bit vector (Prio3's
MultihotCountVec composition, :class:`client_sdk.vdaf.rr.Prio3UnaryRR`)."""

_HPKE_FIELDS = ("id", "kem_id", "kdf_id", "aead_id", "public_key")
_X25519_KEY_SIZE = 32


def b64encode(data: bytes) -> str:
    """Unpadded base64url, as DAP writes task ids in URLs (and this document writes keys)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64decode(text: Any, field: str, size: int | None = None) -> bytes:
    """Decode unpadded base64url; ``ValueError`` naming ``field`` and the value otherwise."""
    if not isinstance(text, str) or "=" in text:
        raise ValueError(f"{field} must be unpadded base64url text; got {describe(text)}")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"{field} is not base64url: {describe(text)}") from None
    if size is not None and len(data) != size:
        raise ValueError(f"{field} must be {size} bytes; got {len(data)} ({describe(text)})")
    return data


def vdaf_from_config(vdaf: Any, field: str = "vdaf") -> Prio3[Any, Any]:
    """The two-share Prio3 of a ``vdaf`` object (``{"type": "histogram", "length": L,
    "chunk_length": C}``, :data:`VDAF_PARAMETERS`); ``ValueError`` naming the field."""
    if not isinstance(vdaf, Mapping):
        raise ValueError(f"{field} must be a JSON object; got {describe(vdaf)}")
    kind = vdaf.get("type")
    if not isinstance(kind, str) or kind not in VDAF_PARAMETERS:
        raise ValueError(
            f"{field}.type must be one of {', '.join(VDAF_PARAMETERS)}; got {describe(kind)}"
        )
    expected = VDAF_PARAMETERS[kind]
    params = {k: v for k, v in vdaf.items() if k != "type"}
    if sorted(params) != sorted(expected):
        raise ValueError(f"{field} {kind} takes {list(expected)}; got {sorted(map(str, params))}")
    values = [check_int(params[name], f"{field}.{name}", minimum=1) for name in expected]
    constructors: dict[str, Any] = {
        "count": Prio3Count,
        "sum": Prio3Sum,
        "histogram": Prio3Histogram,
        "sumvec": Prio3SumVec,
        "multihotcountvec": Prio3MultihotCountVec,
    }
    try:
        built: Prio3[Any, Any] = constructors[kind](2, *values)
    except ValueError as error:
        raise ValueError(f"{field}: {error}") from None
    return built


DP_FORMS = '"none", "laplace:EPSILON" or "gaussian:RHO" (EPSILON, RHO > 0)'
"""The DP strategies of a DAP task (docs/math/dap-noise.md)."""


def dp_parameter(dp: Any, field: str = "dp") -> tuple[str, Fraction | None]:
    """A task's ``dp``: ``("none", None)``, ``("laplace", EPSILON)`` (each Aggregator's discrete
    Laplace, epsilon-DP) or ``("gaussian", RHO)`` (each Aggregator's discrete Gaussian,
    rho-zCDP); ``ValueError`` naming the field for anything else (docs/math/dap-noise.md)."""
    if dp == "none":
        return "none", None
    kind, _, value = dp.partition(":") if isinstance(dp, str) else ("", "", "")
    try:
        parameter = Fraction(value)
    except (ValueError, ZeroDivisionError):
        parameter = Fraction(0)
    if kind not in ("laplace", "gaussian") or parameter <= 0:
        raise ValueError(f"{field} must be {DP_FORMS}; got {dp!r}")
    return kind, parameter


def hpke_config_to_json(config: HpkeConfig) -> dict[str, Any]:
    """An ``HpkeConfig`` as the document writes it (the key in unpadded base64url)."""
    return {
        "id": config.id,
        "kem_id": config.kem_id,
        "kdf_id": config.kdf_id,
        "aead_id": config.aead_id,
        "public_key": b64encode(config.public_key),
    }


def hpke_config_from_json(document: Any, field: str) -> HpkeConfig:
    """The inverse of :func:`hpke_config_to_json`; the suite must be DAP's one (X25519,
    HKDF-SHA256, AES-128-GCM). ``ValueError`` naming the field."""
    if not isinstance(document, Mapping) or sorted(document) != sorted(_HPKE_FIELDS):
        raise ValueError(f"{field} must be an object with exactly {list(_HPKE_FIELDS)}")
    config_id = check_int(document["id"], f"{field}.id", minimum=0, maximum=255)
    suite = [
        check_int(document[name], f"{field}.{name}", minimum=0, maximum=0xFFFF)
        for name in ("kem_id", "kdf_id", "aead_id")
    ]
    try:
        check_suite(*suite)
    except HpkeError as error:
        raise ValueError(f"{field}: {error}") from None
    key = b64decode(document["public_key"], f"{field}.public_key", _X25519_KEY_SIZE)
    return HpkeConfig(config_id, suite[0], suite[1], suite[2], key)


def _endpoint(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(f"{field} must be an http(s) URL; got {describe(value)}")
    try:
        value.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError(f"{field} must be ASCII; got {describe(value)}") from None
    return value.rstrip("/") + "/"


def dap_object(
    task: Mapping[str, Any], leader_hpke_config: HpkeConfig, helper_hpke_config: HpkeConfig
) -> dict[str, Any]:
    """A campaign's ``dap`` object from a task file (what ``ldp-collector dap task add``
    reads) and both Aggregators' configs: the task's public part, canonical. Task-file fields
    that are the Aggregators' own settings (none of :data:`DAP_FIELDS`, e.g. how long a report
    may wait) are not part of it: a device neither needs nor checks them."""
    document = {
        "task_id": task["task_id"],
        "task_info": task.get("task_info", ""),
        "leader": str(task["leader"]).rstrip("/") + "/",
        "helper": str(task["helper"]).rstrip("/") + "/",
        "vdaf": dict(task["vdaf"]),
        "min_batch_size": task["min_batch_size"],
        "time_precision": task["time_precision"],
        "dp": task.get("dp", "none"),
        "leader_hpke_config": hpke_config_to_json(leader_hpke_config),
        "helper_hpke_config": hpke_config_to_json(helper_hpke_config),
    }
    _parse_dap(document)  # refuse a bad task now, naming the field
    return document


def dap_campaign_content(
    *,
    dap: Mapping[str, Any],
    local: Mapping[str, Any] | None,
    domain: Sequence[str] | None,
    policy: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What a secure-aggregation campaign's ``config_id`` hashes (docs/dap.md)."""
    return {
        "dap": dict(dap),
        "local": None if local is None else dict(local),
        "domain": None if domain is None else list(domain),
        "policy": None if policy is None else dict(policy),
    }


def dap_campaign_document(
    name: str,
    dap: Mapping[str, Any],
    *,
    local: Mapping[str, Any] | None = None,
    domain: Sequence[str] | None = None,
    policy: Mapping[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A complete, verified campaign document (with ``protocol`` and ``config_id``), as an app
    pins it or a server serves it. ``local`` is normalized to its canonical config."""
    if local is not None:
        local = mechanism_from_config(local).to_config()
    content = dap_campaign_content(dap=dap, local=local, domain=domain, policy=policy)
    document = {"name": name, "protocol": PROTOCOL_VERSION, **content, **metadata}
    document["config_id"] = content_id(content)
    DapCampaign.from_document(document, name=name)
    return document


@dataclass(frozen=True)
class _Dap:
    task_id: bytes
    task_info: str
    leader: str
    helper: str
    vdaf_type: str
    vdaf_params: dict[str, int]
    vdaf: Prio3[Any, Any]
    min_batch_size: int
    time_precision: int
    dp: str
    central_epsilon: Fraction | None
    central_rho: Fraction | None
    leader_hpke_config: HpkeConfig
    helper_hpke_config: HpkeConfig

    def canonical(self) -> dict[str, Any]:
        return {
            "task_id": b64encode(self.task_id),
            "task_info": self.task_info,
            "leader": self.leader,
            "helper": self.helper,
            "vdaf": {"type": self.vdaf_type, **self.vdaf_params},
            "min_batch_size": self.min_batch_size,
            "time_precision": self.time_precision,
            "dp": self.dp,
            "leader_hpke_config": hpke_config_to_json(self.leader_hpke_config),
            "helper_hpke_config": hpke_config_to_json(self.helper_hpke_config),
        }

    def configuration(self) -> TaskConfiguration:
        """The ``TaskConfiguration`` bound into every input share's AAD (the Aggregators
        build the same one from the task file)."""
        return task_configuration(
            self.vdaf,
            task_info=self.task_info.encode("utf-8"),
            leader_endpoint=self.leader,
            helper_endpoint=self.helper,
            time_precision=self.time_precision,
            min_batch_size=self.min_batch_size,
        )


def _parse_dap(dap: Any) -> _Dap:
    if not isinstance(dap, Mapping):
        raise ValueError(f"dap must be a JSON object; got {describe(dap)}")
    missing = [name for name in DAP_FIELDS if name not in dap]
    unknown = sorted(str(name) for name in set(dap) - set(DAP_FIELDS))
    if missing or unknown:
        raise ValueError(
            f"dap needs exactly {list(DAP_FIELDS)}; missing {missing}, unknown {unknown}"
        )
    task_info = dap["task_info"]
    if not isinstance(task_info, str):
        raise ValueError(f"dap.task_info must be text; got {describe(task_info)}")
    vdaf = vdaf_from_config(dap["vdaf"], "dap.vdaf")
    kind = dap["vdaf"]["type"]
    dp_kind, dp_value = dp_parameter(dap["dp"], "dap.dp")
    return _Dap(
        task_id=b64decode(dap["task_id"], "dap.task_id", TASK_ID_SIZE),
        task_info=task_info,
        leader=_endpoint(dap["leader"], "dap.leader"),
        helper=_endpoint(dap["helper"], "dap.helper"),
        vdaf_type=kind,
        vdaf_params={name: int(dap["vdaf"][name]) for name in VDAF_PARAMETERS[kind]},
        vdaf=vdaf,
        min_batch_size=check_int(dap["min_batch_size"], "dap.min_batch_size", minimum=1),
        time_precision=check_int(dap["time_precision"], "dap.time_precision", minimum=1),
        dp=str(dap["dp"]),
        central_epsilon=dp_value if dp_kind == "laplace" else None,
        central_rho=dp_value if dp_kind == "gaussian" else None,
        leader_hpke_config=hpke_config_from_json(
            dap["leader_hpke_config"], "dap.leader_hpke_config"
        ),
        helper_hpke_config=hpke_config_from_json(
            dap["helper_hpke_config"], "dap.helper_hpke_config"
        ),
    )


@dataclass(frozen=True)
class DapCampaign:
    """A verified secure-aggregation campaign (module docstring), as the client uses it.

    ``task`` is what ``prepare_report`` needs; ``local`` the ``grr`` randomizing a histogram
    index or a count's bit before sharding (``None``: none), or the ``sue``/``oue`` whose bit
    vector a multihotcountvec task shards (required there); the Aggregators' noise is
    ``central_epsilon`` (``dp = "laplace:EPSILON"``) or ``central_rho`` (``"gaussian:RHO"``),
    both ``None`` for ``dp = "none"``.
    """

    name: str
    config_id: str
    task: DapTask
    vdaf_type: str
    vdaf_params: Mapping[str, int]
    leader: str
    helper: str
    central_epsilon: Fraction | None
    central_rho: Fraction | None
    local: Mechanism | None
    domain: tuple[str, ...] | None
    policy: dict[str, Any] | None
    document: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_document(cls, document: Any, *, name: str) -> DapCampaign:
        """Verify a document: a valid secure-aggregation campaign named ``name``, in canonical
        form, whose ``config_id`` is the hash of its content; ``ValueError`` naming the field."""
        if not isinstance(document, Mapping):
            raise ValueError(f"a campaign must be a JSON object; got {describe(document)}")
        if document.get("name") != name:
            raise ValueError(f"asked for campaign {name!r}, got {describe(document.get('name'))}")
        if not isinstance(name, str) or CAMPAIGN_NAME_PATTERN.fullmatch(name) is None:
            raise ValueError(f"name is not a campaign name; got {describe(name)}")
        protocol = document.get("protocol", PROTOCOL_VERSION)
        if isinstance(protocol, bool) or protocol != PROTOCOL_VERSION:
            raise ValueError(f"protocol must be {PROTOCOL_VERSION}; got {describe(protocol)}")
        for refused in ("mechanism", "shuffle", "min_batch_size"):
            if refused in document:
                raise ValueError(
                    f"a secure-aggregation campaign has no {refused!r} (its task's dap object "
                    "says how reports are made and collected)"
                )
        dap = _parse_dap(document.get("dap"))
        if dap.canonical() != document["dap"]:
            raise ValueError(
                f"dap is not in canonical form (endpoints ending with '/', integers as "
                f"integers, every field present): expected {dap.canonical()}"
            )
        local = _parse_local(document.get("local"), dap)
        domain = _parse_domain(document.get("domain"), dap)
        policy = document.get("policy")
        budget = None if policy is None else BudgetPolicy.from_dict(policy)
        if budget is not None:
            _check_budget_reachable(budget, local, dap.central_epsilon, dap.central_rho)
        parse_metadata(document)
        content = dap_campaign_content(
            dap=document["dap"],
            local=document.get("local"),
            domain=document.get("domain"),
            policy=policy,
        )
        expected = content_id(content)
        if document.get("config_id") != expected:
            raise ValueError(
                f"config_id {describe(document.get('config_id'))} does not match the content "
                f"(expected {expected})"
            )
        task = DapTask(
            dap.task_id,
            dap.configuration(),
            dap.vdaf,
            dap.leader_hpke_config,
            dap.helper_hpke_config,
        )
        return cls(
            name=name,
            config_id=expected,
            task=task,
            vdaf_type=dap.vdaf_type,
            vdaf_params=dap.vdaf_params,
            leader=dap.leader,
            helper=dap.helper,
            central_epsilon=dap.central_epsilon,
            central_rho=dap.central_rho,
            local=local,
            domain=domain,
            policy=None if budget is None else budget.to_dict(),
            document=dict(document),
        )

    @property
    def local_epsilon(self) -> float:
        """The local guarantee of one report (infinite without ``local``)."""
        return math.inf if self.local is None else float(self.local.privacy_epsilon)

    def central_epsilon_at(self, delta: float) -> float:
        """The Aggregators' central epsilon of one collection at ``delta``: ``EPSILON`` for
        ``laplace`` (pure DP, any delta), rho-zCDP converted at ``delta`` for ``gaussian``
        (:func:`client_sdk.zcdp.zcdp_epsilon`), infinite for ``none``."""
        if self.central_epsilon is not None:
            return float(self.central_epsilon)
        if self.central_rho is not None:
            return zcdp_epsilon(float(self.central_rho), delta)
        return math.inf

    def charge_at(self, delta: float) -> float:
        """What one report costs the device's ledger: the smaller of its local epsilon and the
        Aggregators' central epsilon at ``delta``, the app's ``max_central_delta`` (docs/dap.md,
        "What record does")."""
        return min(self.local_epsilon, self.central_epsilon_at(delta))

    def measurements(self, values: Sequence[Any]) -> tuple[list[Any], int]:
        """The Prio3 measurements of recorded values (before ``local``, which randomizes a
        histogram's or a multihotcountvec's index, or a count's bit), and how many were
        clipped to ``[0, max_measurement]``. ``ValueError`` naming the position, never echoing
        the value."""
        out: list[Any] = []
        clipped = 0
        top = self.vdaf_params.get("max_measurement", 1)
        for position, value in enumerate(values):
            where = (
                f"the value at position {position} ({shape_of(value)}) of campaign {self.name!r}"
            )
            if self.vdaf_type == "count":
                if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
                    out.append(int(value))
                    continue
                raise ValueError(f"{where} must be True or False")
            if self.vdaf_type in ("histogram", "multihotcountvec"):
                assert self.domain is not None
                index = self._index.get(value) if isinstance(value, str) else None
                if index is None:
                    raise ValueError(
                        f"{where} is not a label of its domain ({len(self.domain)} labels)"
                    )
                out.append(index)
                continue
            if self.vdaf_type == "sum":
                number, over = _clip(value, top, where)
                out.append(number)
                clipped += over
                continue
            length = self.vdaf_params["length"]
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
                raise ValueError(f"{where} must be a list of {length} integers")
            if len(value) != length:
                raise ValueError(f"{where} must have {length} entries; got {len(value)}")
            vector = [_clip(v, top, where) for v in value]
            out.append([number for number, _ in vector])
            clipped += int(any(over for _, over in vector))
        return out, clipped

    def prio3_measurement(self, randomized: Any) -> Any:
        """What is sharded for a histogram index, a count bit or a unary encoding's report (one
        packed row of ``local.perturb``): the index itself (Prio3 encodes it one-hot), the bit,
        or the report's k bits (MultihotCountVec)."""
        if self.vdaf_type == "multihotcountvec":
            assert isinstance(self.local, UnaryEncoding)
            return unary_measurement(self.local, randomized)
        return bool(randomized) if self.vdaf_type == "count" else int(randomized)

    @property
    def _index(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.domain or ())}


def _clip(value: Any, top: int, where: str) -> tuple[int, int]:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where} must be an integer (or list of integers)")
    return min(max(value, 0), top), int(value < 0 or value > top)


def _check_budget_reachable(
    budget: BudgetPolicy, local: Mechanism | None, central: Fraction | None, rho: Fraction | None
) -> None:
    """Refuse a budget no report can meet: the ledger charges each report the smaller of its
    local and central epsilon (:meth:`DapCampaign.charge_at`) and refuses one above
    ``epsilon_per_report``, so such a campaign would collect nothing. A ``gaussian`` task's
    central epsilon depends on the device's ``max_central_delta`` (any epsilon > 0 is reached at
    some delta), so only the laplace or local part is checked here; the device refuses the
    reports its own delta makes too dear (``BudgetExceededError``)."""
    if rho is not None:
        return
    charge = min(
        math.inf if local is None else float(local.privacy_epsilon),
        math.inf if central is None else float(central),
    )
    if charge > budget.epsilon_per_report * (1 + BUDGET_TOLERANCE):
        raise ValueError(
            f"policy.epsilon_per_report {budget.epsilon_per_report:g} is below what a report "
            f"costs ({charge:g}, the smaller of its local and central epsilon): devices would "
            "refuse every report"
        )


def _parse_local(local: Any, dap: _Dap) -> Mechanism | None:
    allowed = LOCAL_MECHANISMS.get(dap.vdaf_type)
    if local is None:
        if dap.vdaf_type == "multihotcountvec":
            raise ValueError(
                "local is required before a multihotcountvec task (a sue or oue config with k = "
                f"its length); got {describe(local)}"
            )
        return None
    if allowed is None:
        raise ValueError(
            f"local randomization is for histogram, count and multihotcountvec tasks; this is "
            f"{dap.vdaf_type}"
        )
    try:
        mechanism = mechanism_from_config(local)
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"local: {error}") from None
    config = mechanism.to_config()
    k = dap.vdaf_params.get("length", 2)
    if config.get("mechanism") not in allowed or config.get("k") != k:
        raise ValueError(
            f"local must be a {' or '.join(allowed)} config with k = {k} before a "
            f"{dap.vdaf_type} task; got {describe(config.get('mechanism'))} with k "
            f"{describe(config.get('k'))}"
        )
    weight = dap.vdaf_params.get("max_weight", k)
    if weight != k:
        # every bit vector is a possible sue/oue report: a smaller bound refuses honest ones
        raise ValueError(
            f"dap.vdaf.max_weight must equal length ({k}) before a {config['mechanism']} "
            f"local; got {weight}"
        )
    if config != local:
        raise ValueError(f"local is not canonical: expected {config}")
    return mechanism


def _parse_domain(domain: Any, dap: _Dap) -> tuple[str, ...] | None:
    if dap.vdaf_type not in ("histogram", "multihotcountvec"):
        if domain is not None:
            raise ValueError(
                f"domain is only for histogram and multihotcountvec tasks; this is {dap.vdaf_type}"
            )
        return None
    length = dap.vdaf_params["length"]
    if isinstance(domain, str) or not isinstance(domain, Sequence) or len(domain) != length:
        raise ValueError(f"domain must list the task's {length} labels")
    if not all(isinstance(label, str) for label in domain) or len(set(domain)) != length:
        raise ValueError("domain labels must be distinct strings")
    return tuple(domain)
