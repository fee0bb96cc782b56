"""A DAP task: its public part (the task file, shared by Leader, Helper and Collector) and what
one aggregator keeps secret (verify key, HPKE private key, bearer tokens)."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from client_sdk.dap.campaign import vdaf_from_config
from client_sdk.dap.messages import TASK_ID_SIZE, HpkeConfig, TaskConfiguration
from client_sdk.dap.upload import task_configuration
from client_sdk.sampling import DiscreteLaplace
from client_sdk.vdaf import Prio3

__all__ = ["AggregatorTask", "TaskSpec", "b64decode", "b64encode", "signed"]

VDAF_TYPES = ("count", "sum", "histogram", "sumvec")
ROLES = ("leader", "helper")


def b64encode(data: bytes) -> str:
    """Unpadded base64url, as DAP writes task ids in URLs."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64decode(text: str, field: str, size: int | None = None) -> bytes:
    """Decode unpadded base64url; ``ValueError`` naming ``field`` and the value otherwise."""
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"{field} is not base64url: {str(text)[:60]!r}") from None
    if size is not None and len(data) != size:
        raise ValueError(f"{field} must be {size} bytes; got {len(data)} ({str(text)[:60]!r})")
    return data


def _positive_int(document: dict[str, Any], name: str) -> int:
    value = document.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"task {name} must be a positive integer; got {value!r}")
    return value


def signed(value: int, modulus: int) -> int:
    """A field element as a signed integer: above p/2 it is negative (noise can take a count
    below zero, and Janus users asked for such counts decoded right, janus#1959)."""
    return value - modulus if value > modulus // 2 else value


@dataclass(frozen=True)
class TaskSpec:
    """The task file: what every party agrees on. ``vdaf`` is ``{"type": "count"}``,
    ``{"type": "sum", "max_measurement": M}``, ``{"type": "histogram", "length": L,
    "chunk_length": C}`` or ``{"type": "sumvec", "length": L, "max_measurement": M,
    "chunk_length": C}``; ``dp`` is ``"none"`` or ``"laplace:EPSILON"``."""

    task_id: bytes
    task_info: str
    leader: str
    helper: str
    vdaf: dict[str, Any]
    min_batch_size: int
    time_precision: int
    dp: str = "none"

    @classmethod
    def from_json(cls, document: Any) -> TaskSpec:
        if not isinstance(document, dict):
            raise ValueError("the task file must hold a JSON object")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(document) - known)
        if unknown:
            raise ValueError(f"task file: unknown field {unknown[0]!r}")
        for name in ("task_id", "leader", "helper", "vdaf"):
            if name not in document:
                raise ValueError(f"task file: missing field {name!r}")
        for name in ("leader", "helper"):
            url = document[name]
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"task {name} must be an http(s) URL; got {url!r}")
        spec = cls(
            task_id=b64decode(str(document["task_id"]), "task_id", TASK_ID_SIZE),
            task_info=str(document.get("task_info", "")),
            leader=document["leader"].rstrip("/") + "/",
            helper=document["helper"].rstrip("/") + "/",
            vdaf=dict(document["vdaf"]) if isinstance(document["vdaf"], dict) else {},
            min_batch_size=_positive_int(document, "min_batch_size"),
            time_precision=_positive_int(document, "time_precision"),
            dp=str(document.get("dp", "none")),
        )
        spec.build_vdaf()  # refuse a bad vdaf or dp now, naming the field
        spec.epsilon()
        return spec

    @classmethod
    def load(cls, path: str) -> TaskSpec:
        with open(path, encoding="utf-8") as file:
            try:
                return cls.from_json(json.load(file))
            except json.JSONDecodeError as error:
                raise ValueError(f"task file {path} is not JSON: {error}") from None

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["task_id"] = b64encode(self.task_id)
        return document

    @property
    def task_id_text(self) -> str:
        return b64encode(self.task_id)

    def build_vdaf(self) -> Prio3[Any, Any]:
        """The task's two-share Prio3 (``client_sdk.dap.campaign.vdaf_from_config``: one
        definition for the Aggregators, the Collector and the device)."""
        return vdaf_from_config(self.vdaf, "task vdaf")

    def configuration(self) -> TaskConfiguration:
        return task_configuration(
            self.build_vdaf(),
            task_info=self.task_info.encode(),
            leader_endpoint=self.leader,
            helper_endpoint=self.helper,
            time_precision=self.time_precision,
            min_batch_size=self.min_batch_size,
        )

    # -- differential privacy (docs/math/dap-noise.md)

    def epsilon(self) -> Fraction | None:
        """The per-aggregator epsilon of ``dp = "laplace:EPS"``; ``None`` for ``"none"``."""
        if self.dp == "none":
            return None
        kind, _, value = self.dp.partition(":")
        try:
            epsilon = Fraction(value)
        except (ValueError, ZeroDivisionError):
            epsilon = Fraction(0)
        if kind != "laplace" or epsilon <= 0:
            raise ValueError(
                f'task dp must be "none" or "laplace:EPSILON" (EPSILON > 0); got {self.dp!r}'
            )
        return epsilon

    def sensitivity(self) -> int:
        """L1 sensitivity of the aggregate to one report: 1 (Count), max_measurement (Sum),
        2 (Histogram: one report moved from one bucket to another), length * max_measurement
        (SumVec)."""
        kind = self.vdaf["type"]
        if kind == "count":
            return 1
        if kind == "sum":
            return int(self.vdaf["max_measurement"])
        if kind == "histogram":
            return 2
        return int(self.vdaf["length"]) * int(self.vdaf["max_measurement"])

    def noise(self) -> DiscreteLaplace | None:
        """Each aggregator's noise: discrete Laplace of scale sensitivity/epsilon (Cook 2024)."""
        epsilon = self.epsilon()
        return None if epsilon is None else DiscreteLaplace(Fraction(self.sensitivity()) / epsilon)

    def noise_std_error(self) -> float:
        """Standard error of one coordinate of the result: the sum of both aggregators'
        independent draws has variance 2 Var[DL]."""
        noise = self.noise()
        return 0.0 if noise is None else math.sqrt(2 * noise.variance())


@dataclass(frozen=True)
class AggregatorTask:
    """A task as one aggregator holds it: the spec, its role and its secrets."""

    spec: TaskSpec
    role: str
    verify_key: bytes
    hpke_config: HpkeConfig
    hpke_private_key: bytes
    collector_hpke_config: HpkeConfig
    aggregator_token: str
    collector_token: str = ""  # the Leader's: what the Collector presents

    def to_json(self) -> str:
        return json.dumps(
            {
                "spec": self.spec.to_json(),
                "role": self.role,
                "verify_key": b64encode(self.verify_key),
                "hpke_config": b64encode(self.hpke_config.encode()),
                "hpke_private_key": b64encode(self.hpke_private_key),
                "collector_hpke_config": b64encode(self.collector_hpke_config.encode()),
                "aggregator_token": self.aggregator_token,
                "collector_token": self.collector_token,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> AggregatorTask:
        d = json.loads(text)
        return cls(
            spec=TaskSpec.from_json(d["spec"]),
            role=d["role"],
            verify_key=b64decode(d["verify_key"], "verify_key"),
            hpke_config=HpkeConfig.decode(b64decode(d["hpke_config"], "hpke_config")),
            hpke_private_key=b64decode(d["hpke_private_key"], "hpke_private_key"),
            collector_hpke_config=HpkeConfig.decode(
                b64decode(d["collector_hpke_config"], "collector_hpke_config")
            ),
            aggregator_token=d["aggregator_token"],
            collector_token=d["collector_token"],
        )
