"""``conformance/dap_campaigns.json``: secure-aggregation campaign documents and policies with
the verdicts a port must reach (docs/dap.md, "The device"): each document's ``config_id`` and
canonical form, each policy's acceptance or the field it refuses by. The committed file must be
what :func:`cases` builds (``python -m tests.client_sdk.dap.test_campaign_conformance`` rewrites
it), and this SDK must reach every verdict."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from client_sdk.dap.campaign import DapCampaign, b64encode, dap_campaign_document, dap_object
from client_sdk.dap.messages import HpkeConfig
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from client_sdk.zcdp import zcdp_epsilon

FILE = Path(__file__).parents[3] / "conformance" / "dap_campaigns.json"
LEADER = "https://leader.example/dap/"
HELPER = "https://helper.example/dap/"
LEADER_KEY = bytes(range(32))
HELPER_KEY = bytes(range(32, 64))
_DOMAIN = ["light", "dark", "system"]


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


def cases() -> dict[str, Any]:
    """Every document and policy case, with its verdict."""
    histogram = {"type": "histogram", "length": 3, "chunk_length": 1}
    valid = [
        dap_campaign_document(
            "theme",
            _dap(histogram, "laplace:1"),
            domain=_DOMAIN,
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
        ("dap.dp", lambda d: d["dap"].update(dp="gaussian:0")),
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
    # Added with the discrete Gaussian (documents 9 on, policies 10 on; the cases above are
    # unchanged): a "gaussian:RHO" task is held to max_central_epsilon through its epsilon at
    # max_central_delta (client_sdk.zcdp.zcdp_epsilon, in "zcdp_epsilons" below). The ceilings
    # sit 1e-4 from the converted epsilon, far above a port's rounding.
    gaussian = [
        dap_campaign_document("theme-zcdp", _dap(histogram, "gaussian:1/8"), domain=_DOMAIN),
        dap_campaign_document(
            "opted-in-zcdp",
            _dap({"type": "count"}, "gaussian:0.02"),
            local={"mechanism": "grr", "epsilon": 1.0, "k": 2},
            policy={"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400},
        ),
    ]
    first = len(documents)
    documents += [{"document": d, "valid": True} for d in gaussian]
    for dp in ("gaussian:-0.5", "gaussian:", "gaussian:1e", "gauss:0.5"):
        document = copy.deepcopy(gaussian[0])
        document["dap"]["dp"] = dp
        documents.append({"document": document, "valid": False, "field": "dap.dp"})
    conversions = [(1 / 8, 1e-6), (1 / 8, 1e-9), (0.02, 1e-6), (0.02, 1e-3)]
    epsilon = {(rho, delta): zcdp_epsilon(rho, delta) for rho, delta in conversions}
    theme, opted_in = first, first + 1
    for delta in (1e-6, 1e-9):
        at = epsilon[(1 / 8, delta)]
        central = {"trusted_aggregators": trusted, "max_central_delta": delta}
        policies += [
            ({**central, "max_central_epsilon": round(at + 1e-4, 4)}, theme, None),
            ({**central, "max_central_epsilon": round(at - 1e-4, 4)}, theme, "max_central_epsilon"),
        ]
    policies += [
        ({"trusted_aggregators": trusted}, theme, "max_epsilon"),  # no central ceiling
        # local grr at epsilon 1 is within max_epsilon, whatever the central noise
        ({"trusted_aggregators": trusted}, opted_in, None),
        (
            {"trusted_aggregators": trusted, "max_epsilon": 0.5, "max_central_epsilon": 0.6},
            opted_in,
            "max_central_epsilon",  # 0.02-zCDP is epsilon 0.90 at the default delta 1e-6
        ),
        (
            {
                "trusted_aggregators": trusted,
                "max_epsilon": 0.5,
                "max_central_epsilon": 0.6,
                "max_central_delta": 1e-3,
            },
            opted_in,
            None,  # and 0.53 at 1e-3
        ),
    ]
    # Added with randomized response inside Prio3 (documents 15 on, policies 18 on; the cases
    # above are unchanged): sue/oue before a multihotcountvec task of length = max_weight = k.
    multihot = {"type": "multihotcountvec", "length": 3, "max_weight": 3, "chunk_length": 2}
    unary = [
        dap_campaign_document(
            "theme-oue",
            _dap(multihot, "laplace:1"),
            domain=_DOMAIN,
            local={"mechanism": "oue", "epsilon": 2.0, "k": 3},
        ),
        dap_campaign_document(
            "theme-sue",
            _dap(multihot, "none"),
            domain=_DOMAIN,
            local={"mechanism": "sue", "epsilon": 1.0, "k": 3},
        ),
    ]
    oue = len(documents)
    documents += [{"document": d, "valid": True} for d in unary]
    unary_invalid = [
        ("local", lambda d: d.update(local={"mechanism": "grr", "epsilon": 2.0, "k": 3})),
        ("local", lambda d: d.update(local=None)),
        ("local", lambda d: d.update(local={"mechanism": "oue", "epsilon": 2.0})),
        ("dap.vdaf.max_weight", lambda d: d["dap"]["vdaf"].update(max_weight=2)),
        ("domain", lambda d: d.update(domain=None)),
    ]
    for field, edit in unary_invalid:
        document = copy.deepcopy(unary[0])
        edit(document)
        documents.append({"document": document, "valid": False, "field": field})
    policies += [
        ({"trusted_aggregators": trusted}, oue, None),  # local epsilon 2 <= max_epsilon 4
        (
            {"trusted_aggregators": trusted, "allowed_mechanisms": ["grr"]},
            oue,
            "allowed_mechanisms",
        ),
        ({"trusted_aggregators": trusted, "allowed_mechanisms": ["oue"]}, oue, None),
        ({"trusted_aggregators": trusted, "allowed_mechanisms": ["oue"]}, 0, "allowed_mechanisms"),
    ]
    return {
        "protocol": 1,
        "about": "docs/dap.md, 'The device': documents (valid, or the field refused) and "
        "PrivacyPolicy fields with the verdict for documents[campaign] (null: accepted)",
        "documents": documents,
        "policies": [
            {"policy": policy, "campaign": index, "refused_by": verdict}
            for policy, index, verdict in policies
        ],
        "zcdp_epsilons": [
            {"rho": rho, "delta": delta, "epsilon": epsilon[(rho, delta)]}
            for rho, delta in conversions
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


@pytest.mark.parametrize("index", range(len(cases()["zcdp_epsilons"])))
def test_zcdp_epsilons(index: int) -> None:
    """The conversion a port must reproduce (to 1e-6, relative): rho-zCDP's epsilon at delta."""
    case = json.loads(FILE.read_text(encoding="utf-8"))["zcdp_epsilons"][index]
    converted = zcdp_epsilon(case["rho"], case["delta"])
    assert converted == pytest.approx(case["epsilon"], rel=1e-6)


if __name__ == "__main__":
    FILE.write_text(json.dumps(cases(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
