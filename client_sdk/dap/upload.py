"""The device's side of a DAP upload (draft-ietf-ppm-dap-18, "Uploading Reports").

``prepare_report`` shards a measurement with Prio3 (report id as the nonce, ``"dap-18" ||
task_id`` as the context), wraps each input share in a ``PlaintextInputShare`` and seals it
to its Aggregator with HPKE, binding the task, its configuration and the report's metadata and
public share as AAD. ``open_input_share`` is the inverse an Aggregator runs. The measurement
never leaves this function in the clear: only the public share and the two ciphertexts do.
"""

from __future__ import annotations

import os
import time as _time
from dataclasses import dataclass
from typing import Any

from client_sdk.dap.codec import DapEncodeError, uint
from client_sdk.dap.hpke import HpkeError, check_suite, open_base, seal_base
from client_sdk.dap.messages import (
    REPORT_ID_SIZE,
    TASK_ID_SIZE,
    BatchMode,
    HpkeCiphertext,
    HpkeConfig,
    HpkeConfigList,
    InputShareAad,
    PlaintextInputShare,
    Report,
    ReportMetadata,
    Role,
    TaskConfiguration,
    input_share_info,
    vdaf_context,
)
from client_sdk.vdaf import (
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
)

__all__ = [
    "DapTask",
    "open_input_share",
    "prepare_report",
    "seal_input_share",
    "select_hpke_config",
    "task_configuration",
    "vdaf_configuration",
]

_AGGREGATOR_INDEX = {Role.LEADER: 0, Role.HELPER: 1}


def vdaf_configuration(vdaf: Prio3[Any, Any]) -> tuple[int, bytes]:
    """``(vdaf_type, vdaf_configuration)`` of a two-share, one-proof Prio3 variant
    (DAP-18, "VDAF Configuration Encodings"; the type is the VDAF's codepoint)."""
    if vdaf.SHARES != 2 or vdaf.PROOFS != 1:
        raise DapEncodeError(
            f"vdaf has {vdaf.SHARES} shares and {vdaf.PROOFS} proofs: DAP's Prio3 encodings "
            "are for 2 shares (Leader, Helper) and 1 proof"
        )
    valid: Any = vdaf.flp.valid  # the variant's circuit carries its parameters
    if isinstance(vdaf, Prio3Count):
        config = b""
    elif isinstance(vdaf, Prio3Sum):
        config = uint(valid.max_measurement, 8, "max_measurement")
    elif isinstance(vdaf, Prio3SumVec):
        config = (
            uint(valid.length, 4, "length")
            + uint(valid.max_measurement, 8, "max_measurement")
            + uint(valid.chunk_length, 4, "chunk_length")
        )
    elif isinstance(vdaf, Prio3Histogram):
        config = uint(valid.length, 4, "length") + uint(valid.chunk_length, 4, "chunk_length")
    elif isinstance(vdaf, Prio3MultihotCountVec):
        config = (
            uint(valid.length, 4, "length")
            + uint(valid.chunk_length, 4, "chunk_length")
            + uint(valid.max_weight, 8, "max_weight")
        )
    else:
        raise DapEncodeError(f"vdaf {type(vdaf).__name__} has no DAP configuration encoding")
    return vdaf.ID, config


def task_configuration(
    vdaf: Prio3[Any, Any],
    *,
    task_info: bytes,
    leader_endpoint: str,
    helper_endpoint: str,
    time_precision: int,
    min_batch_size: int,
    batch_mode: BatchMode = BatchMode.TIME_INTERVAL,
) -> TaskConfiguration:
    """The ``TaskConfiguration`` of a Prio3 task, with no task extensions."""
    vdaf_type, config = vdaf_configuration(vdaf)
    return TaskConfiguration(
        task_info=task_info,
        leader_aggregator_endpoint=leader_endpoint.encode("ascii"),
        helper_aggregator_endpoint=helper_endpoint.encode("ascii"),
        time_precision=time_precision,
        min_batch_size=min_batch_size,
        batch_mode=batch_mode,
        vdaf_type=vdaf_type,
        vdaf_configuration=config,
    )


def select_hpke_config(configs: HpkeConfigList, aggregator: str) -> HpkeConfig:
    """The first config of an Aggregator's list whose suite this SDK supports (DAP-18, "HPKE
    Configuration Request": abort if there is none)."""
    reasons = []
    for config in configs.configs:
        try:
            check_suite(config.kem_id, config.kdf_id, config.aead_id)
        except HpkeError as exc:
            reasons.append(f"config {config.id}: {exc}")
            continue
        return config
    raise HpkeError(
        f"{aggregator}'s hpke_config list has no supported config: "
        + ("; ".join(reasons) or "the list is empty")
    )


@dataclass(frozen=True)
class DapTask:
    """What a device needs to know of a task: its id and configuration, the VDAF, and each
    Aggregator's chosen HPKE config."""

    task_id: bytes
    configuration: TaskConfiguration
    vdaf: Prio3[Any, Any]
    leader_hpke_config: HpkeConfig
    helper_hpke_config: HpkeConfig

    def __post_init__(self) -> None:
        if len(self.task_id) != TASK_ID_SIZE:
            raise DapEncodeError(f"task_id has {len(self.task_id)} bytes, expected {TASK_ID_SIZE}")
        if vdaf_configuration(self.vdaf) != (
            self.configuration.vdaf_type,
            self.configuration.vdaf_configuration,
        ):
            raise DapEncodeError(
                f"vdaf {type(self.vdaf).__name__} does not match the task configuration's "
                f"vdaf_type {self.configuration.vdaf_type} and vdaf_configuration "
                f"{self.configuration.vdaf_configuration.hex()}"
            )
        for name in ("leader_hpke_config", "helper_hpke_config"):
            config = getattr(self, name)
            try:
                check_suite(config.kem_id, config.kdf_id, config.aead_id)
            except HpkeError as exc:
                raise HpkeError(f"{name}: {exc}") from None

    def hpke_config(self, role: Role) -> HpkeConfig:
        return self.leader_hpke_config if role == Role.LEADER else self.helper_hpke_config


def _aad(task: DapTask, metadata: ReportMetadata, public_share: bytes) -> bytes:
    return InputShareAad(task.task_id, task.configuration, metadata, public_share).encode()


def seal_input_share(
    task: DapTask,
    role: Role,
    metadata: ReportMetadata,
    public_share: bytes,
    input_share: bytes,
) -> HpkeCiphertext:
    """Seal one encoded input share to the Aggregator in ``role``."""
    config = task.hpke_config(role)
    plaintext = PlaintextInputShare(payload=input_share).encode()
    enc, payload = seal_base(
        config.public_key, input_share_info(role), _aad(task, metadata, public_share), plaintext
    )
    return HpkeCiphertext(config.id, enc, payload)


def open_input_share(
    task: DapTask,
    role: Role,
    private_key: bytes,
    metadata: ReportMetadata,
    public_share: bytes,
    ciphertext: HpkeCiphertext,
) -> PlaintextInputShare:
    """An Aggregator's decryption of its input share (DAP-18, "Input Share Decryption");
    ``HpkeError`` if it was not sealed to this role's key for this task and report."""
    config = task.hpke_config(role)
    if ciphertext.config_id != config.id:
        raise HpkeError(f"config_id {ciphertext.config_id} is not {role.name}'s ({config.id})")
    plaintext = open_base(
        private_key,
        ciphertext.enc,
        input_share_info(role),
        _aad(task, metadata, public_share),
        ciphertext.payload,
    )
    return PlaintextInputShare.decode(plaintext)


def prepare_report(
    task: DapTask,
    measurement: Any,
    *,
    now: float | None = None,
    report_id: bytes | None = None,
    rand: bytes | None = None,
) -> Report:
    """A ``Report`` for ``measurement``: report id and sharding randomness from the OS CSPRNG
    (``report_id`` and ``rand`` are for tests), time ``now`` (POSIX seconds, default the clock)
    in units of the task's ``time_precision``."""
    vdaf = task.vdaf
    report_id = os.urandom(REPORT_ID_SIZE) if report_id is None else report_id
    rand = os.urandom(vdaf.RAND_SIZE) if rand is None else rand
    seconds = int(_time.time() if now is None else now)
    metadata = ReportMetadata(report_id, seconds // task.configuration.time_precision)
    public, shares = vdaf.shard(vdaf_context(task.task_id), measurement, report_id, rand)
    public_share = vdaf.encode_public_share(public)
    sealed = {
        role: seal_input_share(
            task,
            role,
            metadata,
            public_share,
            vdaf.encode_input_share(shares[_AGGREGATOR_INDEX[role]]),
        )
        for role in (Role.LEADER, Role.HELPER)
    }
    return Report(metadata, public_share, sealed[Role.LEADER], sealed[Role.HELPER])
