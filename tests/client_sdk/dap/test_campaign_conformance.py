"""``conformance/dap_campaigns.json``: secure-aggregation campaign documents and policies with
the verdicts a port must reach (docs/dap.md, "The device"): each document's ``config_id`` and
canonical form, each policy's acceptance or the field it refuses by; and the reports of recorded
values with fixed randomness (``local``'s words from ``HmacWordSource(words_key)``, each report's
id, Prio3 ``rand`` and HPKE ephemeral keys), so that a port makes the same bytes. The committed
file must be what :func:`cases` builds (``python -m tests.client_sdk.dap.test_campaign_conformance``
rewrites it), and this SDK must reach every verdict and report."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from client_sdk.dap import upload
from client_sdk.dap.campaign import DapCampaign, b64encode, dap_campaign_document, dap_object
from client_sdk.dap.hpke import seal_base
from client_sdk.dap.messages import REPORT_ID_SIZE, HpkeConfig
from client_sdk.dap.upload import prepare_report
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from client_sdk.randomness import HmacWordSource

FILE = Path(__file__).parents[3] / "conformance" / "dap_campaigns.json"
LEADER = "https://leader.example/dap/"
HELPER = "https://helper.example/dap/"
LEADER_KEY = bytes(range(32))
HELPER_KEY = bytes(range(32, 64))


def _task(vdaf: dict[str, Any], dp: str) -> dict[str, Any]:
    return {
        "task_id": b64encode(bytes(range(100, 132))),
        "task_info": "conformance",
        "leader": LEADER,
        "helper": HELPER,
        "vdaf": vdaf,
        "min_batch_size": 100,
        "time_precision": 3600,
        "dp": dp,
    }


def _dap(vdaf: dict[str, Any], dp: str) -> dict[str, Any]:
    return dap_object(
        _task(vdaf, dp),
        HpkeConfig(1, 0x20, 1, 1, LEADER_KEY),
        HpkeConfig(2, 0x20, 1, 1, HELPER_KEY),
    )


NOW = 1_764_800_000
"""The recording time of the report cases (POSIX seconds)."""


def _derived(label: str, size: int) -> bytes:
    """Fixed test bytes: SHA-256 in counter mode over a label (no randomness in the file)."""
    out = b""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:size]


def record_reports(document: dict[str, Any], values: list[Any], label: str) -> dict[str, Any]:
    """What ``TelemetryClient.record`` makes of ``values`` (``client._record_dap``, step by step),
    with fixed randomness: ``local``'s words from ``HmacWordSource(words_key)``, and for report
    ``i`` its id, ``rand`` and the two HPKE ephemeral keys derived from ``label`` and ``i``."""
    campaign = DapCampaign.from_document(document, name=document["name"])
    words_key = _derived(f"{label}/words_key", 32)
    measurements, clipped = campaign.measurements(values)
    if campaign.local is not None:
        randomized = campaign.local.perturb(np.asarray(measurements), rng=HmacWordSource(words_key))
        sharded = [campaign.prio3_measurement(v) for v in np.asarray(randomized)]
    else:
        sharded = [
            campaign.prio3_measurement(m) if campaign.vdaf_type == "count" else m
            for m in measurements
        ]
    reports = []
    for i, measurement in enumerate(sharded):
        fixed = {
            "report_id": _derived(f"{label}/{i}/report_id", REPORT_ID_SIZE),
            "rand": _derived(f"{label}/{i}/rand", campaign.task.vdaf.RAND_SIZE),
            "leader_ephemeral_ikm": _derived(f"{label}/{i}/leader_eph", 32),
            "helper_ephemeral_ikm": _derived(f"{label}/{i}/helper_eph", 32),
        }
        queue = [fixed["leader_ephemeral_ikm"], fixed["helper_ephemeral_ikm"]]

        def fixed_seal(*args: Any, queue: list[bytes] = queue, **kwargs: Any) -> Any:
            return seal_base(*args, ephemeral_ikm=queue.pop(0), **kwargs)

        with mock.patch.object(upload, "seal_base", fixed_seal):
            report = prepare_report(
                campaign.task,
                measurement,
                now=NOW,
                report_id=fixed["report_id"],
                rand=fixed["rand"],
            )
        assert not queue
        reports.append(
            {**{k: v.hex() for k, v in fixed.items()}, "report": b64encode(report.encode())}
        )
    return {
        "campaign": document["name"],
        "values": values,
        "words_key": words_key.hex(),
        "now": NOW,
        "measurements": [m if isinstance(m, (bool, list)) else int(m) for m in sharded],
        "clipped": clipped,
        "reports": reports,
    }


def cases() -> dict[str, Any]:
    """Every document and policy case, with its verdict."""
    histogram = {"type": "histogram", "length": 3, "chunk_length": 1}
    valid = [
        dap_campaign_document(
            "theme",
            _dap(histogram, "laplace:1"),
            domain=["light", "dark", "system"],
            local={"mechanism": "grr", "epsilon": 2.0, "k": 3},
            policy={"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400},
        ),
        dap_campaign_document("opted-in", _dap({"type": "count"}, "laplace:0.5")),
        dap_campaign_document(
            "minutes", _dap({"type": "sum", "max_measurement": 1440}, "none"), unit="minutes"
        ),
    ]
    documents: list[dict[str, Any]] = [{"document": d, "valid": True} for d in valid]
    invalid = [
        ("config_id", lambda d: d.update(config_id="0" * 32)),
        ("dap", lambda d: d["dap"].update(leader=LEADER.rstrip("/"))),
        ("dap.dp", lambda d: d["dap"].update(dp="gaussian:0.1")),
        ("domain", lambda d: d.update(domain=["light", "dark"])),
        ("local", lambda d: d.update(local={"mechanism": "oue", "epsilon": 2.0, "k": 3})),
        ("mechanism", lambda d: d.update(mechanism={"mechanism": "grr", "epsilon": 1.0, "k": 3})),
    ]
    for field, edit in invalid:
        document = copy.deepcopy(valid[0])
        edit(document)
        documents.append({"document": document, "valid": False, "field": field})
    trusted = {LEADER: b64encode(LEADER_KEY), HELPER: b64encode(HELPER_KEY)}
    policies = [
        ({}, 0, "trusted_aggregators"),
        ({"trusted_aggregators": trusted}, 0, None),  # local epsilon 2 <= max_epsilon 4
        ({"trusted_aggregators": trusted, "max_epsilon": 1.0}, 0, "max_epsilon"),
        (
            {"trusted_aggregators": trusted, "max_epsilon": 1.0, "max_central_epsilon": 1.0},
            0,
            None,
        ),
        ({"trusted_aggregators": trusted, "max_central_epsilon": 0.4}, 1, "max_central_epsilon"),
        ({"trusted_aggregators": trusted, "max_central_epsilon": 0.5}, 1, None),
        (
            {"trusted_aggregators": {**trusted, HELPER: b64encode(bytes(32))}},
            0,
            "trusted_aggregators",
        ),
        ({"trusted_aggregators": {LEADER: b64encode(LEADER_KEY)}}, 0, "trusted_aggregators"),
        ({"trusted_aggregators": trusted, "max_central_epsilon": 40.0}, 2, "max_central_epsilon"),
        ({"trusted_aggregators": trusted, "allowed_mechanisms": ["olh"]}, 0, "allowed_mechanisms"),
    ]
    recorded: list[tuple[dict[str, Any], list[Any]]] = [
        (valid[0], ["dark", "light", "system", "dark", "dark", "light"]),
        (valid[1], [True, False, 1]),
        (valid[2], [30, 2000, -5, 1440]),
    ]
    return {
        "protocol": 1,
        "about": "docs/dap.md, 'The device': documents (valid, or the field refused), "
        "PrivacyPolicy fields with the verdict for documents[campaign] (null: accepted), and "
        "the reports record makes of values with fixed randomness (payload: the outbox's "
        "unpadded base64url of the encoded Report)",
        "documents": documents,
        "policies": [
            {"policy": policy, "campaign": index, "refused_by": verdict}
            for policy, index, verdict in policies
        ],
        "reports": [
            record_reports(document, values, f"reports/{document['name']}")
            for document, values in recorded
        ],
    }


def test_the_committed_file_is_what_the_cases_build() -> None:
    assert json.loads(FILE.read_text(encoding="utf-8")) == json.loads(json.dumps(cases()))


@pytest.mark.parametrize("index", range(len(cases()["documents"])))
def test_documents(index: int) -> None:
    case = json.loads(FILE.read_text(encoding="utf-8"))["documents"][index]
    document = case["document"]
    if case["valid"]:
        DapCampaign.from_document(document, name=document["name"])
        return
    with pytest.raises(ValueError, match=case["field"]):
        DapCampaign.from_document(document, name=document["name"])


@pytest.mark.parametrize("index", range(len(cases()["policies"])))
def test_policies(index: int) -> None:
    data = json.loads(FILE.read_text(encoding="utf-8"))
    case = data["policies"][index]
    document = data["documents"][case["campaign"]]["document"]
    fields = dict(case["policy"])
    if "allowed_mechanisms" in fields:
        fields["allowed_mechanisms"] = frozenset(fields["allowed_mechanisms"])
    policy = PrivacyPolicy(**fields)
    campaign = DapCampaign.from_document(document, name=document["name"])
    if case["refused_by"] is None:
        policy.check_dap(campaign)
        return
    with pytest.raises(PolicyViolation) as caught:
        policy.check_dap(campaign)
    assert caught.value.field == case["refused_by"]


if __name__ == "__main__":
    FILE.write_text(json.dumps(cases(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
