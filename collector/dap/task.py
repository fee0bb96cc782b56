"""A DAP task: its public part (the task file, shared by Leader, Helper and Collector) and what
one aggregator keeps secret (verify key, HPKE private key, bearer tokens)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from client_sdk.dap.campaign import b64decode, b64encode, dp_parameter, vdaf_from_config
from client_sdk.dap.messages import TASK_ID_SIZE, HpkeConfig, ReportError, TaskConfiguration
from client_sdk.dap.upload import task_configuration
from client_sdk.randomness import RandomSource
from client_sdk.sampling import MAX_GAUSSIAN_T, DiscreteGaussian, DiscreteLaplace
from client_sdk.vdaf import Prio3

__all__ = ["AggregatorTask", "TaskSpec", "b64decode", "b64encode", "signed"]

VDAF_TYPES = ("count", "sum", "histogram", "sumvec", "multihotcountvec")
ROLES = ("leader", "helper")
REPORT_EXPIRY = 7 * 86400  # seconds a report may wait from its time to its aggregation


def _positive_int(document: dict[str, Any], name: str, default: int | None = None) -> int:
    value = document.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"task {name} must be a positive integer; got {value!r}")
    return value


def _optional_time(document: dict[str, Any], name: str) -> int | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(
            f"task {name} must be a non-negative integer (POSIX seconds); got {value!r}"
        )
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
    "chunk_length": C}`` or ``{"type": "multihotcountvec", "length": L, "max_weight": W,
    "chunk_length": C}``; ``dp`` is ``"none"``, ``"laplace:EPSILON"`` or ``"gaussian:RHO"``
    (docs/math/dap-noise.md). ``report_expiry`` (seconds, default 7 days): a report whose time
    unit ended longer ago is refused, and its anti-replay id may be forgotten after that plus
    ``clock_skew``; ``clock_skew`` (seconds, default one ``time_precision``): how far ahead of
    an aggregator's clock a report's time may be. ``task_start`` / ``task_end`` (POSIX
    seconds, optional): the task's validity window, DAP-18's ``task_interval``; a report whose
    time is before the start, or at or after the end, is refused."""

    task_id: bytes
    task_info: str
    leader: str
    helper: str
    vdaf: dict[str, Any]
    min_batch_size: int
    time_precision: int
    dp: str = "none"
    report_expiry: int = REPORT_EXPIRY
    clock_skew: int | None = None
    task_start: int | None = None
    task_end: int | None = None

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
            report_expiry=_positive_int(document, "report_expiry", REPORT_EXPIRY),
            clock_skew=(
                None
                if document.get("clock_skew") is None
                else _positive_int(document, "clock_skew")
            ),
            task_start=_optional_time(document, "task_start"),
            task_end=_optional_time(document, "task_end"),
        )
        spec.build_vdaf()  # refuse a bad vdaf or dp now, naming the field
        spec.noise()  # a dp the exact samplers cannot serve is refused now too
        if spec.report_expiry < 2 * spec.time_precision:
            raise ValueError(
                f"task report_expiry must be at least two time_precision units "
                f"({2 * spec.time_precision} s); got {spec.report_expiry}"
            )
        if (
            spec.task_start is not None
            and spec.task_end is not None
            and spec.task_end <= spec.task_start
        ):
            raise ValueError(
                f"task task_end must be after task_start ({spec.task_start}); got {spec.task_end}"
            )
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
        for name in ("task_start", "task_end"):  # absent, as in tasks stored before them
            if document[name] is None:
                del document[name]
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

    # -- report times (DAP-18 "Upload Request" and "Report Expiry"; docs/dap.md)

    @property
    def skew(self) -> int:
        """The tolerated clock skew in seconds (one ``time_precision`` unless stated)."""
        return self.time_precision if self.clock_skew is None else self.clock_skew

    def too_early(self, unit: int, now: float) -> bool:
        """A report of time ``unit`` starts beyond our clock plus the tolerated skew."""
        return unit * self.time_precision > now + self.skew

    def expired(self, unit: int, now: float) -> bool:
        """A report of time ``unit``: its whole time unit ended ``report_expiry`` ago."""
        return (unit + 1) * self.time_precision + self.report_expiry <= now

    def window_error(self, unit: int) -> ReportError | None:
        """DAP-18, "Input Share Validation": a report of time ``unit`` (the start of its time
        unit) before ``task_start`` is ``task_not_started``, at or after ``task_end``
        ``task_expired``; None inside the window (or without one)."""
        seconds = unit * self.time_precision
        if self.task_start is not None and seconds < self.task_start:
            return ReportError.TASK_NOT_STARTED
        if self.task_end is not None and seconds >= self.task_end:
            return ReportError.TASK_EXPIRED
        return None

    def forgettable(self, unit: int, now: float) -> bool:
        """A report id of time ``unit`` may leave the anti-replay record: a replay would be
        refused as expired even by a clock up to ``skew`` behind ``now``."""
        return self.expired(unit, now - self.skew)

    # -- differential privacy (docs/math/dap-noise.md)

    def dp_parameter(self) -> tuple[str, Fraction | None]:
        """``("none", None)``, ``("laplace", EPSILON)`` or ``("gaussian", RHO)``: the device's
        parser (``client_sdk.dap.campaign.dp_parameter``), one definition for every party."""
        return dp_parameter(self.dp, "task dp")

    def epsilon(self) -> Fraction | None:
        """The pure epsilon of ``dp = "laplace:EPS"`` (one collection); ``None`` otherwise."""
        kind, parameter = self.dp_parameter()
        return parameter if kind == "laplace" else None

    def rho(self) -> Fraction | None:
        """The rho of ``dp = "gaussian:RHO"`` (rho-zCDP, one collection); ``None`` otherwise."""
        kind, parameter = self.dp_parameter()
        return parameter if kind == "gaussian" else None

    def multihot_sensitivity(self) -> int:
        """MultihotCountVec's L1 and squared L2 sensitivity to one report replaced, both
        min(2 max_weight, length): two 0/1 vectors of weight <= W differ by -1, 0 or +1 per
        coordinate, in at most 2W coordinates and at most all L (docs/math/dap-noise.md)."""
        return min(2 * int(self.vdaf["max_weight"]), int(self.vdaf["length"]))

    def sensitivity(self) -> int:
        """L1 sensitivity of the aggregate to one report replaced: 1 (Count), max_measurement
        (Sum), 2 (Histogram: one report moved from one bucket to another), length *
        max_measurement (SumVec), min(2 max_weight, length) (MultihotCountVec)."""
        kind = self.vdaf["type"]
        if kind == "count":
            return 1
        if kind == "multihotcountvec":
            return self.multihot_sensitivity()
        if kind == "sum":
            return int(self.vdaf["max_measurement"])
        if kind == "histogram":
            return 2
        return int(self.vdaf["length"]) * int(self.vdaf["max_measurement"])

    def l2_sensitivity_squared(self) -> int:
        """Squared L2 sensitivity to one report replaced: 1 (Count), max_measurement^2 (Sum),
        2 (Histogram: -1 in one bucket, +1 in another), length * max_measurement^2 (SumVec),
        min(2 max_weight, length) (MultihotCountVec: each differing coordinate adds 1)."""
        kind = self.vdaf["type"]
        if kind == "count":
            return 1
        if kind == "multihotcountvec":
            return self.multihot_sensitivity()
        if kind == "histogram":
            return 2
        length = int(self.vdaf["length"]) if kind == "sumvec" else 1
        return length * int(self.vdaf["max_measurement"]) ** 2

    def noise(self) -> DiscreteLaplace | DiscreteGaussian | None:
        """Each aggregator's noise, per coordinate: discrete Laplace of scale L1
        sensitivity / epsilon (Cook 2024), or the discrete Gaussian with sigma^2 = L2
        sensitivity^2 / (2 rho), rounded up to what the exact sampler offers (CKS 2020,
        Theorem 14: rho-zCDP)."""
        kind, parameter = self.dp_parameter()
        if kind == "laplace" and parameter is not None:
            return DiscreteLaplace(Fraction(self.sensitivity()) / parameter)
        if kind == "gaussian" and parameter is not None:
            target = math.ceil(Fraction(self.l2_sensitivity_squared()) / (2 * parameter))
            if target > MAX_GAUSSIAN_T**2:  # the exact sampler's proposal scale t <= 2**24
                raise ValueError(
                    f"task dp {self.dp!r} needs sigma^2 = {target} per aggregator, above the "
                    f"exact sampler's 2**48 (t <= 2**24); a larger rho or smaller vdaf bounds"
                )
            return DiscreteGaussian.at_least(float(target))
        return None

    def add_noise(
        self, share: list[int], modulus: int, rng: RandomSource | None = None
    ) -> list[int]:
        """``share`` plus this aggregator's independent draw per coordinate, modulo the
        field's prime; unchanged without dp. ``rng`` None: the OS CSPRNG (tests seed it)."""
        noise = self.noise()
        if noise is None:
            return list(share)
        draws = noise.sample(rng, len(share))
        return [(x + int(d)) % modulus for x, d in zip(share, draws, strict=True)]

    def noise_std_error(self) -> float:
        """Standard error of one coordinate of the result: the sum of both aggregators'
        independent draws has twice one draw's variance."""
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
    # How tokens travel: "bearer" (Authorization: Bearer, DAP-18) or "dap-auth-token" (the
    # DAP-Auth-Token header of the interop test design, for tasks added through it).
    auth_header: str = "bearer"

    def to_json(self) -> str:
        extra = {} if self.auth_header == "bearer" else {"auth_header": self.auth_header}
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
                **extra,
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
            auth_header=d.get("auth_header", "bearer"),
        )
