"""client_sdk.campaign: the one campaign validator, which the collector stores with and the client
verifies with, dispatching on what a device records (``Mechanism.value_kind``)."""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import Any

import pytest

from client_sdk import budget
from client_sdk.campaign import (
    MAX_CANDIDATES,
    PROTOCOL_VERSION,
    BudgetPolicy,
    check_domain,
    normalize_campaign,
    parse_campaign,
)
from client_sdk.client import Campaign, CampaignVerificationError
from client_sdk.protocol import DEFAULT_MIN_BATCH_SIZE, campaign_config_id

ROOT = Path(__file__).resolve().parents[2]
GRR = {"mechanism": "grr", "epsilon": 1.0, "k": 3}
RAPPOR = {"mechanism": "rappor", "k": 16, "h": 2, "m": 4, "f": 0.5, "p": 0.25, "q": 0.75}
LAPLACE = {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 10.0}
POLICY = {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400}


def document(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "mechanism": GRR, "domain": ["a", "b", "c"], **fields}


def served(content: dict[str, Any]) -> dict[str, Any]:
    """What a collector serves for ``content``: its fields plus a matching config_id."""
    full = {"domain": None, "policy": None, "min_batch_size": DEFAULT_MIN_BATCH_SIZE, **content}
    config_id = campaign_config_id(
        mechanism=full["mechanism"],
        domain=full["domain"],
        policy=full["policy"],
        min_batch_size=full["min_batch_size"],
    )
    return {**full, "config_id": config_id, "created": "2026-01-01T00:00:00Z"}


def test_a_valid_campaign_normalizes_to_its_canonical_content() -> None:
    spec = parse_campaign(document(policy=POLICY))
    assert spec.domain == ("a", "b", "c")
    assert spec.policy == BudgetPolicy(1.0, 4, 86400)
    assert spec.min_batch_size == DEFAULT_MIN_BATCH_SIZE
    assert normalize_campaign(document(policy=POLICY)) == {
        "name": "c",
        "protocol": 1,
        "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
        "domain": ["a", "b", "c"],
        "policy": POLICY,
        "min_batch_size": DEFAULT_MIN_BATCH_SIZE,
    }
    assert spec.config_id == served(spec.content())["config_id"]


BAD_CONTENT = [
    (document(domain=["a", "b"]), "domain must have k=3 labels; got 2 labels"),
    (document(domain=None), "domain must be a list of 3 labels"),
    (document(domain=["a", "b", 3]), r"domain\[2\] must be a string; got 3"),
    (document(domain=["a", "b", "a"]), "'a' appears twice"),
    (document(mechanism=RAPPOR, domain=[]), "candidate list of the string mechanism 'rappor'"),
    (document(mechanism=RAPPOR, domain="abc"), "candidate list"),
    (
        document(mechanism=RAPPOR, domain=[f"s{i}" for i in range(MAX_CANDIDATES + 1)]),
        f"1 to {MAX_CANDIDATES} strings; got {MAX_CANDIDATES + 1}",
    ),
    (document(mechanism=RAPPOR, domain=["x", "x"]), "'x' appears twice"),
    (document(mechanism=LAPLACE), "domain must be absent for the numeric mechanism 'laplace'"),
    (document(policy={**POLICY, "epsilon_per_report": 0}), "policy.epsilon_per_report"),
    (document(policy={**POLICY, "period_seconds": 0.5}), "policy.period_seconds"),
    (document(policy={**POLICY, "extra": 1}), "policy has unknown field"),
    (document(min_batch_size=0), "min_batch_size must be an integer in"),
    (document(min_batch_size=[1] * 10_000), "min_batch_size must be .*; got a list$"),
    (document(mechanism={"mechanism": "grr", "epsilon": 0, "k": 3}), "mechanism: epsilon"),
    (document(name="no spaces"), "name must be"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_CONTENT)
def test_the_collector_and_the_client_refuse_the_same_content_alike(
    bad: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_campaign(bad)
    try:
        document_served = served(bad)
    except (TypeError, ValueError):  # not even hashable content: refused before any check
        return
    with pytest.raises(CampaignVerificationError, match=message):
        Campaign.from_document(document_served, name=bad["name"])


def test_string_and_number_campaigns_take_what_their_kind_needs() -> None:
    assert parse_campaign(document(mechanism=RAPPOR, domain=None)).domain is None
    assert parse_campaign(document(mechanism=RAPPOR, domain=["u", "v"])).domain == ("u", "v")
    assert parse_campaign(document(mechanism=LAPLACE, domain=None)).domain is None


def stand_in(kind: str, **attributes: Any) -> Any:
    return types.SimpleNamespace(value_kind=kind, name="stand-in", **attributes)


def test_the_domain_check_dispatches_on_value_kind_not_on_the_class() -> None:
    assert check_domain(stand_in("category", k=2), ["x", "y"]) == ("x", "y")
    assert check_domain(stand_in("string"), None) is None
    assert check_domain(stand_in("string"), ["x"]) == ("x",)
    with pytest.raises(ValueError, match="must be absent"):
        check_domain(stand_in("number"), ["x"])
    with pytest.raises(ValueError, match="unknown kind 'vector'"):
        check_domain(stand_in("vector"), None)


def test_the_client_ignores_fields_a_collector_adds_and_the_collector_refuses_them() -> None:
    extra = {**served(document()), "retention": "30d"}
    assert Campaign.from_document(extra, name="c").domain == ("a", "b", "c")
    with pytest.raises(ValueError, match="unknown field"):
        parse_campaign(extra)


def test_the_policy_shape_is_defined_once() -> None:
    assert budget.BudgetPolicy is BudgetPolicy
    assert BudgetPolicy.from_dict(POLICY).to_dict() == POLICY
    imported: set[str] = set()
    tree = ast.parse((ROOT / "collector" / "storage.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert "client_sdk.campaign" in imported and "client_sdk.budget" not in imported


def test_a_policy_no_report_can_meet_is_refused_at_creation() -> None:
    """Policy epsilon 0.5 below the mechanism's 1.0: every device would refuse every report."""
    document: dict[str, Any] = {
        "name": "never",
        "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
        "domain": ["a", "b", "c"],
        "policy": {"epsilon_per_report": 0.5, "reports_per_period": 4, "period_seconds": 86400},
    }
    with pytest.raises(ValueError, match=r"policy.epsilon_per_report 0.5 is below .* epsilon 1"):
        parse_campaign(document)
    document["policy"]["epsilon_per_report"] = 1.0
    assert parse_campaign(document).policy is not None


def test_the_protocol_version_travels_in_the_document_and_not_in_the_config_id(
    tmp_path: Path,
) -> None:
    """``"protocol": 1`` is the document's (absent means 1) and the served one's; config_ids of
    protocol 1 are those of documents written before the field (docs/protocol.md)."""
    from collector.storage import Storage

    plain = parse_campaign(document())
    versioned = parse_campaign(document(protocol=1))
    assert plain.content() == versioned.content()
    assert plain.content()["protocol"] == PROTOCOL_VERSION == 1
    assert plain.config_id == versioned.config_id == served(document())["config_id"]
    with Storage(tmp_path / "c.db") as storage:
        stored, _ = storage.create_campaign(document(protocol=1))
        assert stored.document()["protocol"] == 1
        assert stored.config_id == plain.config_id
    assert Campaign.from_document(stored.document(), name="c").config_id == plain.config_id


@pytest.mark.parametrize("version", [2, 0, "1", 1.5, True, None])
def test_a_protocol_this_sdk_does_not_implement_is_refused_naming_the_field(version: Any) -> None:
    with pytest.raises(ValueError, match=r"^protocol must be 1 \(the device protocol"):
        parse_campaign(document(protocol=version))
    with pytest.raises((ValueError, CampaignVerificationError), match="protocol must be 1"):
        Campaign.from_document({**served(document()), "protocol": version}, name="c")
