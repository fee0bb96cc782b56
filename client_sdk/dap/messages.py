"""DAP messages (draft-ietf-ppm-dap-18): the encodings the device, both Aggregators and the
Collector share.

Each message is a frozen dataclass with ``encode() -> bytes`` and ``decode(bytes)``; decoding
refuses a short field, trailing bytes, a wrong fixed size or an unknown enum value, naming the
field. Names follow the draft (``CollectionJobResp`` is what earlier drafts called
``Collection``; ``VerifyInit``/``VerifyResp`` were ``PrepareInit``/``PrepareResp``). Drafts 19
and 20 are wire-identical apart from ``VERSION``. See docs/dap.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar, TypeVar

from client_sdk.dap.codec import DapDecodeError, DapEncodeError, Reader, fixed, opaque, uint

__all__ = [
    "MEDIA_TYPE_PREFIX",
    "TASK_ID_SIZE",
    "VERSION",
    "AggregateShare",
    "AggregateShareAad",
    "AggregateShareReq",
    "AggregationJobContinueReq",
    "AggregationJobInitReq",
    "AggregationJobResp",
    "BatchMode",
    "BatchSelector",
    "CollectionJobReq",
    "CollectionJobResp",
    "Extension",
    "HpkeCiphertext",
    "HpkeConfig",
    "HpkeConfigList",
    "InputShareAad",
    "Interval",
    "PingPongMessage",
    "PingPongType",
    "PlaintextInputShare",
    "Query",
    "Report",
    "ReportError",
    "ReportMetadata",
    "ReportShare",
    "ReportUploadStatus",
    "Role",
    "TaskConfiguration",
    "UploadErrors",
    "UploadRequest",
    "VerifyContinue",
    "VerifyInit",
    "VerifyResp",
    "VerifyRespType",
    "aggregate_share_info",
    "input_share_info",
    "vdaf_context",
]

# The draft's version tag, in every domain-separation string: the one place to change it.
VERSION = "dap-18"
# Each message's media type is this and its name (DAP-18; each message class's MEDIA_TYPE).
MEDIA_TYPE_PREFIX = "application/ppm-dap;message="

TASK_ID_SIZE = 32
REPORT_ID_SIZE = 16
BATCH_ID_SIZE = 32
CHECKSUM_SIZE = 32

T = TypeVar("T")


class Role(IntEnum):
    """``Role`` (Section 4.1)."""

    COLLECTOR = 0
    CLIENT = 1
    LEADER = 2
    HELPER = 3


class BatchMode(IntEnum):
    """``BatchMode`` (Section 5): how reports are grouped into batches."""

    TIME_INTERVAL = 1
    LEADER_SELECTED = 2


class ReportError(IntEnum):
    """``ReportError`` (Section 4.1): why one report was refused."""

    RESERVED = 0
    BATCH_COLLECTED = 1
    REPORT_REPLAYED = 2
    REPORT_DROPPED = 3
    HPKE_UNKNOWN_CONFIG_ID = 4
    HPKE_DECRYPT_ERROR = 5
    VDAF_VERIFY_ERROR = 6
    TASK_EXPIRED = 7
    INVALID_MESSAGE = 8
    REPORT_TOO_EARLY = 9
    TASK_NOT_STARTED = 10
    OUTDATED_CONFIG = 11


class VerifyRespType(IntEnum):
    """``VerifyRespType`` (Section 4.6.2)."""

    CONTINUE = 0
    FINISH = 1
    REJECT = 2


class PingPongType(IntEnum):
    """``MessageType`` of VDAF's ping-pong topology (draft-irtf-cfrg-vdaf, "Ping-Pong
    Topology"): what ``VerifyInit``, ``VerifyResp`` (continue) and ``VerifyContinue`` carry."""

    INITIALIZE = 0
    CONTINUE = 1
    FINISH = 2


def vdaf_context(task_id: bytes) -> bytes:
    """The VDAF application context, ``"dap-18" || task_id`` (Section 4.5.2)."""
    return VERSION.encode() + fixed(task_id, TASK_ID_SIZE, "task_id")


def input_share_info(server_role: Role) -> bytes:
    """HPKE info sealing an input share: ``"dap-18 input share" || 0x01 || server_role``."""
    if server_role not in (Role.LEADER, Role.HELPER):
        raise DapEncodeError(f"server_role = {server_role!r}: an input share goes to an Aggregator")
    return VERSION.encode() + b" input share" + bytes([Role.CLIENT, server_role])


def aggregate_share_info(server_role: Role) -> bytes:
    """HPKE info sealing an aggregate share: ``"dap-18 aggregate share" || server_role || 0x00``."""
    if server_role not in (Role.LEADER, Role.HELPER):
        raise DapEncodeError(f"server_role = {server_role!r}: not an Aggregator")
    return VERSION.encode() + b" aggregate share" + bytes([server_role, Role.COLLECTOR])


def _enum(cls: type[IntEnum], value: int, where: str) -> IntEnum:
    try:
        return cls(value)
    except ValueError:
        raise DapDecodeError(f"{where}: unknown {cls.__name__} value {value}") from None


def _check_size(value: bytes, size: int, name: str) -> None:
    if len(value) != size:
        raise DapEncodeError(f"{name} has {len(value)} bytes, expected {size}")


def _items(r: Reader, item: Any, field_name: str, prefix: int) -> list[Any]:
    """Items of class ``item`` in a ``prefix``-byte-length vector (0: to the end of ``r``)."""
    inner = r.sub(prefix, field_name) if prefix else r
    out = []
    while inner.remaining():
        out.append(item._read(inner))
    return out


def _encode_items(items: Sequence[object], field_name: str, prefix: int) -> bytes:
    body = b"".join(item.encode() for item in items)  # type: ignore[attr-defined]
    return opaque(body, prefix, field_name) if prefix else body


class _Message:
    """Shared ``decode``: read the whole message, refuse trailing bytes."""

    @classmethod
    def decode(cls: type[T], data: bytes) -> T:
        r = Reader(data, cls.__name__)
        out = cls._read(r)  # type: ignore[attr-defined]
        r.finish()
        return out


@dataclass(frozen=True)
class Extension(_Message):
    """``Extension`` (report, task, aggregation-job and collection-job extensions alike)."""

    extension_type: int
    extension_data: bytes = b""

    def encode(self) -> bytes:
        return uint(self.extension_type, 2, "extension_type") + opaque(
            self.extension_data, 2, "extension_data"
        )

    @classmethod
    def _read(cls, r: Reader) -> Extension:
        return cls(r.uint(2, "extension_type"), r.opaque(2, "extension_data"))


def _read_extensions(r: Reader, field_name: str, *, ordered: bool) -> tuple[Extension, ...]:
    """A ``<0..2^16-1>`` list of extensions; report and task extensions must be strictly
    increasing in type (Sections 4.4.3 and 4.2.2)."""
    exts: tuple[Extension, ...] = tuple(_items(r, Extension, field_name, 2))
    if ordered:
        for before, after in itertools.pairwise(exts):
            if after.extension_type <= before.extension_type:
                raise DapDecodeError(
                    f"{r.message}.{field_name}: extension type {after.extension_type} after "
                    f"{before.extension_type} (must be strictly increasing)"
                )
    return exts


@dataclass(frozen=True)
class Interval(_Message):
    """``Interval``: ``start`` and ``duration`` in units of the task's ``time_precision``."""

    start: int
    duration: int

    def encode(self) -> bytes:
        return uint(self.start, 8, "start") + uint(self.duration, 8, "duration")

    @classmethod
    def _read(cls, r: Reader) -> Interval:
        return cls(r.uint(8, "start"), r.uint(8, "duration"))


@dataclass(frozen=True)
class HpkeConfig(_Message):
    """``HpkeConfig`` (Section 4.5.1): an Aggregator's or the Collector's public key and suite."""

    id: int
    kem_id: int
    kdf_id: int
    aead_id: int
    public_key: bytes

    def encode(self) -> bytes:
        return (
            uint(self.id, 1, "id")
            + uint(self.kem_id, 2, "kem_id")
            + uint(self.kdf_id, 2, "kdf_id")
            + uint(self.aead_id, 2, "aead_id")
            + opaque(self.public_key, 2, "public_key")
        )

    @classmethod
    def _read(cls, r: Reader) -> HpkeConfig:
        return cls(
            r.uint(1, "id"),
            r.uint(2, "kem_id"),
            r.uint(2, "kdf_id"),
            r.uint(2, "aead_id"),
            r.opaque(2, "public_key"),
        )


@dataclass(frozen=True)
class HpkeConfigList(_Message):
    """``HpkeConfigList``: configs in decreasing order of preference."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "hpke-config-list"

    configs: tuple[HpkeConfig, ...]

    def encode(self) -> bytes:
        return _encode_items(self.configs, "configs", 2)

    @classmethod
    def _read(cls, r: Reader) -> HpkeConfigList:
        return cls(tuple(_items(r, HpkeConfig, "configs", 2)))


@dataclass(frozen=True)
class HpkeCiphertext(_Message):
    """``HpkeCiphertext``: ``enc`` and ``payload`` of ``SealBase`` and the config they used."""

    config_id: int
    enc: bytes
    payload: bytes

    def encode(self) -> bytes:
        return (
            uint(self.config_id, 1, "config_id")
            + opaque(self.enc, 2, "enc")
            + opaque(self.payload, 4, "payload")
        )

    @classmethod
    def _read(cls, r: Reader) -> HpkeCiphertext:
        return cls(r.uint(1, "config_id"), r.opaque(2, "enc"), r.opaque(4, "payload"))


@dataclass(frozen=True)
class TaskConfiguration(_Message):
    """``TaskConfiguration`` (Section 4.2), bound into every HPKE AAD."""

    task_info: bytes
    leader_aggregator_endpoint: bytes
    helper_aggregator_endpoint: bytes
    time_precision: int
    min_batch_size: int
    batch_mode: BatchMode
    vdaf_type: int
    vdaf_configuration: bytes
    batch_config: bytes = b""
    extensions: tuple[Extension, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.task_info) < 256:
            raise DapEncodeError(f"task_info has {len(self.task_info)} bytes, expected 1 to 255")
        if self.time_precision <= 0:
            raise DapEncodeError(f"time_precision = {self.time_precision}, must be positive")

    def encode(self) -> bytes:
        return (
            opaque(self.task_info, 1, "task_info")
            + opaque(self.leader_aggregator_endpoint, 2, "leader_aggregator_endpoint")
            + opaque(self.helper_aggregator_endpoint, 2, "helper_aggregator_endpoint")
            + uint(self.time_precision, 8, "time_precision")
            + uint(self.min_batch_size, 8, "min_batch_size")
            + uint(self.batch_mode, 1, "batch_mode")
            + opaque(self.batch_config, 2, "batch_config")
            + uint(self.vdaf_type, 4, "vdaf_type")
            + opaque(self.vdaf_configuration, 2, "vdaf_configuration")
            + _encode_items(self.extensions, "extensions", 2)
        )

    @classmethod
    def _read(cls, r: Reader) -> TaskConfiguration:
        task_info = r.opaque(1, "task_info")
        leader = r.opaque(2, "leader_aggregator_endpoint")
        helper = r.opaque(2, "helper_aggregator_endpoint")
        time_precision = r.uint(8, "time_precision")
        min_batch_size = r.uint(8, "min_batch_size")
        batch_mode = _enum(BatchMode, r.uint(1, "batch_mode"), f"{r.message}.batch_mode")
        batch_config = r.opaque(2, "batch_config")
        vdaf_type = r.uint(4, "vdaf_type")
        vdaf_configuration = r.opaque(2, "vdaf_configuration")
        extensions = _read_extensions(r, "extensions", ordered=True)
        try:
            return cls(
                task_info,
                leader,
                helper,
                time_precision,
                min_batch_size,
                BatchMode(batch_mode),
                vdaf_type,
                vdaf_configuration,
                batch_config,
                extensions,
            )
        except DapEncodeError as exc:
            raise DapDecodeError(f"{r.message}: {exc}") from None


@dataclass(frozen=True)
class ReportMetadata(_Message):
    """``ReportMetadata``: the report id (the VDAF nonce), its time, its public extensions."""

    report_id: bytes
    time: int
    public_extensions: tuple[Extension, ...] = ()

    def __post_init__(self) -> None:
        _check_size(self.report_id, REPORT_ID_SIZE, "report_id")

    def encode(self) -> bytes:
        return (
            fixed(self.report_id, REPORT_ID_SIZE, "report_id")
            + uint(self.time, 8, "time")
            + _encode_items(self.public_extensions, "public_extensions", 2)
        )

    @classmethod
    def _read(cls, r: Reader) -> ReportMetadata:
        return cls(
            r.fixed(REPORT_ID_SIZE, "report_id"),
            r.uint(8, "time"),
            _read_extensions(r, "public_extensions", ordered=True),
        )


@dataclass(frozen=True)
class Report(_Message):
    """``Report``: what a Client uploads to the Leader."""

    report_metadata: ReportMetadata
    public_share: bytes
    leader_encrypted_input_share: HpkeCiphertext
    helper_encrypted_input_share: HpkeCiphertext

    def encode(self) -> bytes:
        return (
            self.report_metadata.encode()
            + opaque(self.public_share, 4, "public_share")
            + self.leader_encrypted_input_share.encode()
            + self.helper_encrypted_input_share.encode()
        )

    @classmethod
    def _read(cls, r: Reader) -> Report:
        return cls(
            r.field("report_metadata", ReportMetadata._read),
            r.opaque(4, "public_share"),
            r.field("leader_encrypted_input_share", HpkeCiphertext._read),
            r.field("helper_encrypted_input_share", HpkeCiphertext._read),
        )


@dataclass(frozen=True)
class UploadRequest(_Message):
    """``UploadRequest``: reports, back to back to the end of the message."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "upload-req"

    reports: tuple[Report, ...]

    def encode(self) -> bytes:
        return _encode_items(self.reports, "reports", 0)

    @classmethod
    def _read(cls, r: Reader) -> UploadRequest:
        return cls(tuple(_items(r, Report, "reports", 0)))


@dataclass(frozen=True)
class ReportUploadStatus(_Message):
    """``ReportUploadStatus``: one refused report of an upload."""

    id: bytes
    error: ReportError

    def encode(self) -> bytes:
        return fixed(self.id, REPORT_ID_SIZE, "id") + uint(self.error, 1, "error")

    @classmethod
    def _read(cls, r: Reader) -> ReportUploadStatus:
        report_id = r.fixed(REPORT_ID_SIZE, "id")
        error = _enum(ReportError, r.uint(1, "error"), f"{r.message}.error")
        return cls(report_id, ReportError(error))


@dataclass(frozen=True)
class UploadErrors(_Message):
    """``UploadErrors``: the refused reports of an upload, in request order."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "upload-errors"

    status: tuple[ReportUploadStatus, ...]

    def encode(self) -> bytes:
        return _encode_items(self.status, "status", 0)

    @classmethod
    def _read(cls, r: Reader) -> UploadErrors:
        return cls(tuple(_items(r, ReportUploadStatus, "status", 0)))


@dataclass(frozen=True)
class PlaintextInputShare(_Message):
    """``PlaintextInputShare``: what is sealed to one Aggregator."""

    payload: bytes
    private_extensions: tuple[Extension, ...] = ()

    def encode(self) -> bytes:
        return _encode_items(self.private_extensions, "private_extensions", 2) + opaque(
            self.payload, 4, "payload"
        )

    @classmethod
    def _read(cls, r: Reader) -> PlaintextInputShare:
        exts = _read_extensions(r, "private_extensions", ordered=True)
        return cls(r.opaque(4, "payload"), exts)


@dataclass(frozen=True)
class InputShareAad(_Message):
    """``InputShareAad``: binds an input share to its task, configuration and report."""

    task_id: bytes
    task_configuration: TaskConfiguration
    report_metadata: ReportMetadata
    public_share: bytes

    def __post_init__(self) -> None:
        _check_size(self.task_id, TASK_ID_SIZE, "task_id")

    def encode(self) -> bytes:
        return (
            fixed(self.task_id, TASK_ID_SIZE, "task_id")
            + self.task_configuration.encode()
            + self.report_metadata.encode()
            + opaque(self.public_share, 4, "public_share")
        )

    @classmethod
    def _read(cls, r: Reader) -> InputShareAad:
        return cls(
            r.fixed(TASK_ID_SIZE, "task_id"),
            r.field("task_configuration", TaskConfiguration._read),
            r.field("report_metadata", ReportMetadata._read),
            r.opaque(4, "public_share"),
        )


@dataclass(frozen=True)
class ReportShare(_Message):
    """``ReportShare``: a report as the Leader forwards it to the Helper."""

    report_metadata: ReportMetadata
    public_share: bytes
    encrypted_input_share: HpkeCiphertext

    def encode(self) -> bytes:
        return (
            self.report_metadata.encode()
            + opaque(self.public_share, 4, "public_share")
            + self.encrypted_input_share.encode()
        )

    @classmethod
    def _read(cls, r: Reader) -> ReportShare:
        return cls(
            r.field("report_metadata", ReportMetadata._read),
            r.opaque(4, "public_share"),
            r.field("encrypted_input_share", HpkeCiphertext._read),
        )


@dataclass(frozen=True)
class PingPongMessage(_Message):
    """VDAF's ping-pong ``Message``, the ``payload`` of ``VerifyInit``, of a ``continue``
    ``VerifyResp`` and of ``VerifyContinue``: a type byte, then ``initialize``: the verifier
    share; ``continue``: the verifier message and the next round's verifier share; ``finish``:
    the verifier message (each ``opaque<0..2^32-1>``)."""

    type: PingPongType
    verifier_message: bytes = b""
    verifier_share: bytes = b""

    def __post_init__(self) -> None:
        if self.type == PingPongType.INITIALIZE and self.verifier_message:
            raise DapEncodeError("PingPongMessage initialize carries no verifier_message")
        if self.type == PingPongType.FINISH and self.verifier_share:
            raise DapEncodeError("PingPongMessage finish carries no verifier_share")

    @classmethod
    def initialize(cls, verifier_share: bytes) -> PingPongMessage:
        return cls(PingPongType.INITIALIZE, verifier_share=verifier_share)

    @classmethod
    def continue_(cls, verifier_message: bytes, verifier_share: bytes) -> PingPongMessage:
        return cls(PingPongType.CONTINUE, verifier_message, verifier_share)

    @classmethod
    def finish(cls, verifier_message: bytes) -> PingPongMessage:
        return cls(PingPongType.FINISH, verifier_message=verifier_message)

    def encode(self) -> bytes:
        out = uint(self.type, 1, "type")
        if self.type != PingPongType.INITIALIZE:
            out += opaque(self.verifier_message, 4, "verifier_message")
        if self.type != PingPongType.FINISH:
            out += opaque(self.verifier_share, 4, "verifier_share")
        return out

    @classmethod
    def _read(cls, r: Reader) -> PingPongMessage:
        kind = PingPongType(_enum(PingPongType, r.uint(1, "type"), f"{r.message}.type"))
        message = r.opaque(4, "verifier_message") if kind != PingPongType.INITIALIZE else b""
        share = r.opaque(4, "verifier_share") if kind != PingPongType.FINISH else b""
        return cls(kind, message, share)

    def expect(self, kind: PingPongType) -> PingPongMessage:
        """``self`` if it is of type ``kind``; ``DapDecodeError`` naming both otherwise."""
        if self.type != kind:
            raise DapDecodeError(f"PingPongMessage.type = {self.type.name}; expected {kind.name}")
        return self


@dataclass(frozen=True)
class VerifyInit(_Message):
    """``VerifyInit``: a report share and the Leader's first ping-pong message."""

    report_share: ReportShare
    payload: bytes

    def encode(self) -> bytes:
        return self.report_share.encode() + opaque(self.payload, 4, "payload")

    @classmethod
    def _read(cls, r: Reader) -> VerifyInit:
        return cls(r.field("report_share", ReportShare._read), r.opaque(4, "payload"))


@dataclass(frozen=True)
class AggregationJobInitReq(_Message):
    """``AggregationJobInitReq``: Leader to Helper; ``verify_inits`` run to the message's end."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "aggregation-job-init-req"

    verification_key_id: int
    agg_param: bytes
    verify_inits: tuple[VerifyInit, ...]
    extensions: tuple[Extension, ...] = ()

    def encode(self) -> bytes:
        return (
            uint(self.verification_key_id, 1, "verification_key_id")
            + opaque(self.agg_param, 4, "agg_param")
            + _encode_items(self.extensions, "extensions", 2)
            + _encode_items(self.verify_inits, "verify_inits", 0)
        )

    @classmethod
    def _read(cls, r: Reader) -> AggregationJobInitReq:
        key_id = r.uint(1, "verification_key_id")
        agg_param = r.opaque(4, "agg_param")
        exts = _read_extensions(r, "extensions", ordered=False)
        return cls(key_id, agg_param, tuple(_items(r, VerifyInit, "verify_inits", 0)), exts)


@dataclass(frozen=True)
class VerifyResp(_Message):
    """``VerifyResp``: the Helper's answer for one report (a message, done, or refused)."""

    report_id: bytes
    verify_resp_type: VerifyRespType
    payload: bytes = b""
    report_error: ReportError | None = None

    def __post_init__(self) -> None:
        _check_size(self.report_id, REPORT_ID_SIZE, "report_id")
        if (self.verify_resp_type == VerifyRespType.REJECT) != (self.report_error is not None):
            raise DapEncodeError(
                f"report_error = {self.report_error!r} with verify_resp_type "
                f"{self.verify_resp_type.name}: set exactly when rejecting"
            )

    def encode(self) -> bytes:
        head = fixed(self.report_id, REPORT_ID_SIZE, "report_id") + uint(
            self.verify_resp_type, 1, "verify_resp_type"
        )
        if self.verify_resp_type == VerifyRespType.CONTINUE:
            return head + opaque(self.payload, 4, "payload")
        if self.verify_resp_type == VerifyRespType.REJECT:
            assert self.report_error is not None
            return head + uint(self.report_error, 1, "report_error")
        return head

    @classmethod
    def _read(cls, r: Reader) -> VerifyResp:
        report_id = r.fixed(REPORT_ID_SIZE, "report_id")
        kind = VerifyRespType(
            _enum(VerifyRespType, r.uint(1, "verify_resp_type"), f"{r.message}.verify_resp_type")
        )
        if kind == VerifyRespType.CONTINUE:
            return cls(report_id, kind, payload=r.opaque(4, "payload"))
        if kind == VerifyRespType.REJECT:
            error = _enum(ReportError, r.uint(1, "report_error"), f"{r.message}.report_error")
            return cls(report_id, kind, report_error=ReportError(error))
        return cls(report_id, kind)


@dataclass(frozen=True)
class AggregationJobResp(_Message):
    """``AggregationJobResp``: one ``VerifyResp`` a report, to the end of the message."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "aggregation-job-resp"

    verify_resps: tuple[VerifyResp, ...]

    def encode(self) -> bytes:
        return _encode_items(self.verify_resps, "verify_resps", 0)

    @classmethod
    def _read(cls, r: Reader) -> AggregationJobResp:
        return cls(tuple(_items(r, VerifyResp, "verify_resps", 0)))


@dataclass(frozen=True)
class VerifyContinue(_Message):
    """``VerifyContinue``: the Leader's next ping-pong message for one report."""

    report_id: bytes
    payload: bytes

    def encode(self) -> bytes:
        return fixed(self.report_id, REPORT_ID_SIZE, "report_id") + opaque(
            self.payload, 4, "payload"
        )

    @classmethod
    def _read(cls, r: Reader) -> VerifyContinue:
        return cls(r.fixed(REPORT_ID_SIZE, "report_id"), r.opaque(4, "payload"))


@dataclass(frozen=True)
class AggregationJobContinueReq(_Message):
    """``AggregationJobContinueReq``: a step number and ``VerifyContinue``s to the end."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "aggregation-job-continue-req"

    step: int
    verify_continues: tuple[VerifyContinue, ...]

    def encode(self) -> bytes:
        return uint(self.step, 2, "step") + _encode_items(
            self.verify_continues, "verify_continues", 0
        )

    @classmethod
    def _read(cls, r: Reader) -> AggregationJobContinueReq:
        step = r.uint(2, "step")
        return cls(step, tuple(_items(r, VerifyContinue, "verify_continues", 0)))


@dataclass(frozen=True)
class _ModeAndConfig(_Message):
    """``Query`` and ``BatchSelector`` share this shape: a batch mode and its config bytes."""

    batch_mode: BatchMode
    config: bytes = b""

    def encode(self) -> bytes:
        return uint(self.batch_mode, 1, "batch_mode") + opaque(self.config, 2, "config")

    @classmethod
    def _read(cls: type[T], r: Reader) -> T:
        mode = _enum(BatchMode, r.uint(1, "batch_mode"), f"{r.message}.batch_mode")
        return cls(BatchMode(mode), r.opaque(2, "config"))  # type: ignore[call-arg]

    def interval(self) -> Interval:
        """The batch interval of a time-interval query or selector."""
        if self.batch_mode != BatchMode.TIME_INTERVAL:
            raise DapDecodeError(f"batch_mode = {self.batch_mode.name}: no batch interval")
        return Interval.decode(self.config)


@dataclass(frozen=True)
class Query(_ModeAndConfig):
    """``Query``: the Collector's choice of batch (an interval, or the Leader's next batch)."""

    @classmethod
    def time_interval(cls, batch_interval: Interval) -> Query:
        return cls(BatchMode.TIME_INTERVAL, batch_interval.encode())

    @classmethod
    def leader_selected(cls) -> Query:
        return cls(BatchMode.LEADER_SELECTED, b"")


@dataclass(frozen=True)
class BatchSelector(_ModeAndConfig):
    """``BatchSelector``: the batch the Leader asks the Helper to share (interval or batch id)."""

    @classmethod
    def time_interval(cls, batch_interval: Interval) -> BatchSelector:
        return cls(BatchMode.TIME_INTERVAL, batch_interval.encode())

    @classmethod
    def leader_selected(cls, batch_id: bytes) -> BatchSelector:
        return cls(BatchMode.LEADER_SELECTED, fixed(batch_id, BATCH_ID_SIZE, "batch_id"))

    def batch_id(self) -> bytes:
        """The batch id of a leader-selected selector (``LeaderSelectedBatchSelectorConfig``)."""
        if self.batch_mode != BatchMode.LEADER_SELECTED:
            raise DapDecodeError(f"batch_mode = {self.batch_mode.name}: no batch id")
        r = Reader(self.config, "LeaderSelectedBatchSelectorConfig")
        batch_id = r.fixed(BATCH_ID_SIZE, "batch_id")
        r.finish()
        return batch_id


@dataclass(frozen=True)
class CollectionJobReq(_Message):
    """``CollectionJobReq``: the Collector's query and aggregation parameter."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "collection-job-req"

    query: Query
    agg_param: bytes = b""
    extensions: tuple[Extension, ...] = field(default=())

    def encode(self) -> bytes:
        return (
            self.query.encode()
            + opaque(self.agg_param, 4, "agg_param")
            + _encode_items(self.extensions, "extensions", 2)
        )

    @classmethod
    def _read(cls, r: Reader) -> CollectionJobReq:
        query = r.field("query", Query._read)
        agg_param = r.opaque(4, "agg_param")
        return cls(query, agg_param, _read_extensions(r, "extensions", ordered=False))


@dataclass(frozen=True)
class CollectionJobResp(_Message):
    """``CollectionJobResp`` (earlier drafts' ``Collection``): both aggregate shares, sealed."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "collection-job-resp"

    report_count: int
    interval: Interval
    leader_encrypted_agg_share: HpkeCiphertext
    helper_encrypted_agg_share: HpkeCiphertext

    def encode(self) -> bytes:
        return (
            uint(self.report_count, 8, "report_count")
            + self.interval.encode()
            + self.leader_encrypted_agg_share.encode()
            + self.helper_encrypted_agg_share.encode()
        )

    @classmethod
    def _read(cls, r: Reader) -> CollectionJobResp:
        return cls(
            r.uint(8, "report_count"),
            r.field("interval", Interval._read),
            r.field("leader_encrypted_agg_share", HpkeCiphertext._read),
            r.field("helper_encrypted_agg_share", HpkeCiphertext._read),
        )


@dataclass(frozen=True)
class AggregateShareReq(_Message):
    """``AggregateShareReq``: the Leader asks the Helper for its aggregate share of a batch."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "aggregate-share-req"

    collection_job_req: CollectionJobReq
    batch_selector: BatchSelector
    report_count: int
    checksum: bytes

    def __post_init__(self) -> None:
        _check_size(self.checksum, CHECKSUM_SIZE, "checksum")

    def encode(self) -> bytes:
        return (
            self.collection_job_req.encode()
            + self.batch_selector.encode()
            + uint(self.report_count, 8, "report_count")
            + fixed(self.checksum, CHECKSUM_SIZE, "checksum")
        )

    @classmethod
    def _read(cls, r: Reader) -> AggregateShareReq:
        return cls(
            r.field("collection_job_req", CollectionJobReq._read),
            r.field("batch_selector", BatchSelector._read),
            r.uint(8, "report_count"),
            r.fixed(CHECKSUM_SIZE, "checksum"),
        )


@dataclass(frozen=True)
class AggregateShare(_Message):
    """``AggregateShare``: the Helper's aggregate share, sealed to the Collector."""

    MEDIA_TYPE: ClassVar[str] = MEDIA_TYPE_PREFIX + "aggregate-share"

    encrypted_aggregate_share: HpkeCiphertext

    def encode(self) -> bytes:
        return self.encrypted_aggregate_share.encode()

    @classmethod
    def _read(cls, r: Reader) -> AggregateShare:
        return cls(r.field("encrypted_aggregate_share", HpkeCiphertext._read))


@dataclass(frozen=True)
class AggregateShareAad(_Message):
    """``AggregateShareAad``: binds an aggregate share to its task and collection job."""

    task_id: bytes
    task_configuration: TaskConfiguration
    collection_job_req: CollectionJobReq

    def __post_init__(self) -> None:
        _check_size(self.task_id, TASK_ID_SIZE, "task_id")

    def encode(self) -> bytes:
        return (
            fixed(self.task_id, TASK_ID_SIZE, "task_id")
            + self.task_configuration.encode()
            + self.collection_job_req.encode()
        )

    @classmethod
    def _read(cls, r: Reader) -> AggregateShareAad:
        return cls(
            r.fixed(TASK_ID_SIZE, "task_id"),
            r.field("task_configuration", TaskConfiguration._read),
            r.field("collection_job_req", CollectionJobReq._read),
        )
