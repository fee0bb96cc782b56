"""The device's DAP upload: the Aggregators open their shares and Prio3 verification accepts."""

from __future__ import annotations

import random
from typing import Any

import pytest

from client_sdk.dap.codec import DapEncodeError
from client_sdk.dap.hpke import (
    AEAD_AES_128_GCM,
    KDF_HKDF_SHA256,
    KEM_X25519_HKDF_SHA256,
    HpkeError,
    HpkeKeyPair,
    generate_key_pair,
)
from client_sdk.dap.messages import (
    HpkeConfig,
    HpkeConfigList,
    Report,
    ReportMetadata,
    Role,
    UploadRequest,
    vdaf_context,
)
from client_sdk.dap.upload import (
    DapTask,
    open_input_share,
    prepare_report,
    select_hpke_config,
    task_configuration,
    vdaf_configuration,
)
from client_sdk.vdaf import (
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
)

SEED = 2026
TASK_ID = bytes(range(32))


def hpke_config(config_id: int, pair: HpkeKeyPair) -> HpkeConfig:
    return HpkeConfig(
        config_id, KEM_X25519_HKDF_SHA256, KDF_HKDF_SHA256, AEAD_AES_128_GCM, pair.public_key
    )


def make_task(
    vdaf: Prio3[Any, Any], rng: random.Random
) -> tuple[DapTask, HpkeKeyPair, HpkeKeyPair]:
    leader, helper = generate_key_pair(rng.randbytes(32)), generate_key_pair(rng.randbytes(32))
    config = task_configuration(
        vdaf,
        task_info=b"test task",
        leader_endpoint="https://leader.example/",
        helper_endpoint="https://helper.example/",
        time_precision=3600,
        min_batch_size=10,
    )
    task = DapTask(TASK_ID, config, vdaf, hpke_config(7, leader), hpke_config(9, helper))
    return task, leader, helper


def aggregate(
    task: DapTask, leader: HpkeKeyPair, helper: HpkeKeyPair, upload: bytes, verify_key: bytes
) -> tuple[Any, int]:
    """What the two Aggregators will do: open, verify, aggregate; then the Collector unshards."""
    vdaf, ctx = task.vdaf, vdaf_context(task.task_id)
    keys = {Role.LEADER: leader.private_key, Role.HELPER: helper.private_key}
    agg = [vdaf.agg_init(None), vdaf.agg_init(None)]
    reports = UploadRequest.decode(upload).reports
    for report in reports:
        public = vdaf.decode_public_share(report.public_share)
        states, verifier_shares = [], []
        for agg_id, role, sealed in (
            (0, Role.LEADER, report.leader_encrypted_input_share),
            (1, Role.HELPER, report.helper_encrypted_input_share),
        ):
            plain = open_input_share(
                task, role, keys[role], report.report_metadata, report.public_share, sealed
            )
            assert plain.private_extensions == ()
            share = vdaf.decode_input_share(agg_id, plain.payload)
            state, vshare = vdaf.verify_init(
                verify_key, ctx, agg_id, None, report.report_metadata.report_id, public, share
            )
            states.append(state)
            verifier_shares.append(vshare)
        message = vdaf.verifier_shares_to_message(ctx, None, verifier_shares)
        for agg_id in (0, 1):
            out = vdaf.verify_next(ctx, states[agg_id], message)
            agg[agg_id] = vdaf.agg_update(None, agg[agg_id], out)
    return vdaf.unshard(None, agg, len(reports)), len(reports)


CASES: list[tuple[str, Prio3[Any, Any], list[Any], Any]] = [
    ("count", Prio3Count(2), [1, 0, 1, 1], 3),
    ("sum", Prio3Sum(2, 100), [3, 100, 0], 103),
    ("sumvec", Prio3SumVec(2, 3, 7, 2), [[1, 2, 7], [0, 5, 1]], [1, 7, 8]),
    ("histogram", Prio3Histogram(2, 5, 2), [0, 4, 4, 2], [1, 0, 1, 0, 2]),
    (
        "multihot",
        Prio3MultihotCountVec(2, 4, 2, 2),
        [[True, False, True, False], [False, False, False, True]],
        [1, 0, 1, 1],
    ),
]


@pytest.mark.parametrize(
    ("name", "vdaf", "measurements", "total"), CASES, ids=[c[0] for c in CASES]
)
def test_aggregators_open_and_verify_the_device_reports(
    name: str, vdaf: Prio3[Any, Any], measurements: list[Any], total: Any
) -> None:
    rng = random.Random(SEED)
    task, leader, helper = make_task(vdaf, rng)
    reports = [
        prepare_report(
            task,
            x,
            now=1_700_000_123,
            report_id=rng.randbytes(16),
            rand=rng.randbytes(vdaf.RAND_SIZE),
        )
        for x in measurements
    ]
    assert all(r.report_metadata.time == 1_700_000_123 // 3600 for r in reports)
    assert all(r.leader_encrypted_input_share.config_id == 7 for r in reports)
    assert all(r.helper_encrypted_input_share.config_id == 9 for r in reports)
    upload = UploadRequest(tuple(reports)).encode()
    result, count = aggregate(task, leader, helper, upload, rng.randbytes(vdaf.VERIFY_KEY_SIZE))
    assert (result, count) == (total, len(measurements))


def test_shares_are_bound_to_role_task_and_report() -> None:
    rng = random.Random(SEED)
    vdaf = Prio3Histogram(2, 4, 2)
    task, leader, helper = make_task(vdaf, rng)
    report = prepare_report(task, 2, now=10_000)
    meta, public = report.report_metadata, report.public_share
    sealed = report.helper_encrypted_input_share
    open_input_share(task, Role.HELPER, helper.private_key, meta, public, sealed)
    # The Leader cannot read the Helper's share, even with its config id swapped in.
    swapped = type(sealed)(7, sealed.enc, sealed.payload)
    with pytest.raises(HpkeError, match="cannot open"):
        open_input_share(task, Role.LEADER, leader.private_key, meta, public, swapped)
    with pytest.raises(HpkeError, match="config_id 9 is not LEADER's"):
        open_input_share(task, Role.LEADER, leader.private_key, meta, public, sealed)
    # Any change to the report's metadata or public share, or to the task, breaks the AAD.
    later = ReportMetadata(meta.report_id, meta.time + 1)
    with pytest.raises(HpkeError, match="cannot open"):
        open_input_share(task, Role.HELPER, helper.private_key, later, public, sealed)
    with pytest.raises(HpkeError, match="cannot open"):
        open_input_share(task, Role.HELPER, helper.private_key, meta, public + b"\x00", sealed)
    other_config = task_configuration(
        vdaf,
        task_info=b"test task",
        leader_endpoint="https://leader.example/",
        helper_endpoint="https://helper.example/",
        time_precision=3600,
        min_batch_size=11,
    )
    other = DapTask(TASK_ID, other_config, vdaf, task.leader_hpke_config, task.helper_hpke_config)
    with pytest.raises(HpkeError, match="cannot open"):
        open_input_share(other, Role.HELPER, helper.private_key, meta, public, sealed)


def test_report_id_and_randomness_are_fresh_by_default() -> None:
    rng = random.Random(SEED)
    task, _, _ = make_task(Prio3Count(2), rng)
    a, b = prepare_report(task, 1), prepare_report(task, 1)
    assert a.report_metadata.report_id != b.report_metadata.report_id
    assert a.leader_encrypted_input_share.enc != b.leader_encrypted_input_share.enc
    assert a.helper_encrypted_input_share.payload != b.helper_encrypted_input_share.payload
    assert Report.decode(a.encode()) == a


def test_vdaf_configurations_match_janus() -> None:
    # Hex from divviup/janus messages/src/tests/task.rs::roundtrip_vdaf_config at
    # 4ab28a36c70c97f88e02ec01cd224fe6762177ba (vdaf_type, then the configuration's bytes).
    assert vdaf_configuration(Prio3Count(2)) == (1, b"")
    assert vdaf_configuration(Prio3Sum(2, 0xFF)) == (2, bytes.fromhex("00000000000000ff"))
    assert vdaf_configuration(Prio3SumVec(2, 12, 8, 14)) == (
        3,
        bytes.fromhex("0000000c00000000000000080000000e"),
    )
    assert vdaf_configuration(Prio3Histogram(2, 256, 18)) == (4, bytes.fromhex("0000010000000012"))
    assert vdaf_configuration(Prio3MultihotCountVec(2, 256, 14, 18)) == (
        5,
        bytes.fromhex("0000010000000012000000000000000e"),
    )
    with pytest.raises(DapEncodeError, match="3 shares"):
        vdaf_configuration(Prio3Count(3))


def test_task_and_config_refusals_name_the_field() -> None:
    rng = random.Random(SEED)
    task, leader, _ = make_task(Prio3Count(2), rng)
    with pytest.raises(DapEncodeError, match="does not match the task configuration's vdaf_type 1"):
        DapTask(
            TASK_ID,
            task.configuration,
            Prio3Sum(2, 5),
            task.leader_hpke_config,
            task.helper_hpke_config,
        )
    p256 = HpkeConfig(3, 0x0010, 1, 1, bytes(65))
    with pytest.raises(HpkeError, match="helper_hpke_config: unsupported HPKE kem_id 0x0010"):
        DapTask(TASK_ID, task.configuration, task.vdaf, task.leader_hpke_config, p256)
    good = hpke_config(5, leader)
    assert select_hpke_config(HpkeConfigList((p256, good)), "leader") == good
    with pytest.raises(HpkeError, match="leader's hpke_config list has no supported config"):
        select_hpke_config(HpkeConfigList((p256,)), "leader")
    with pytest.raises(HpkeError, match="the list is empty"):
        select_hpke_config(HpkeConfigList(()), "helper")
