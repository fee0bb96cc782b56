"""Secure-aggregation campaign documents stored and served by the collector service
(docs/dap.md, "Where the device gets it"; docs/collector.md): created through the admin API
and ``ldp-collector campaign create``, verified by the device's own parser, served at
``GET /v1/campaigns/<name>`` and fetched by a real ``TelemetryClient`` that uploads to a real
Leader and Helper; documents edited on the collector's side are refused by the device.

The Leader process is also the collector that serves the documents (one ``ldp-collector
serve`` holds both), as a small deployment would run it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from client_sdk import (
    CampaignVerificationError,
    PolicyViolation,
    PrivacyPolicy,
    TelemetryClient,
)
from client_sdk.config import config_id as content_id
from client_sdk.dap.campaign import DapCampaign, b64encode, dap_campaign_content
from client_sdk.protocol import problem_type
from collector.process import entry_point
from tests.client_sdk_ts.conftest import DIST, require_node, ts_build  # noqa: F401 (a fixture)
from tests.client_sdk_ts.test_node_dap import trusted
from tests.collector.dap.conftest import COLLECTOR_TOKEN, TIME_PRECISION, DapPair, run
from tests.collector.dap.test_device import campaign_document, trusting

TS_TESTS = Path(__file__).resolve().parents[2] / "client_sdk_ts"

LABELS = ["none", "one", "few", "many"]
HISTOGRAM = ({"type": "histogram", "length": 4, "chunk_length": 2}, 10, "none")
LOCAL = {"mechanism": "grr", "epsilon": 40.0, "k": 4}
"""grr at epsilon 40 on 4 labels keeps each value but with probability 3/(e^40 + 3) < 1.3e-17,
so with the Aggregators' ``dp`` "none" the collected histogram is the truth (30 reports: a
flip has probability < 4e-16; the client's randomness is seeded besides)."""


BUDGET = {"epsilon_per_report": 40.0, "reports_per_period": 10, "period_seconds": 86400}


def _policy(pair: DapPair) -> PrivacyPolicy:
    """The app's policy: the pair's two Aggregators by URL and key; ``local`` at epsilon 40
    is the guarantee accepted (the task adds no noise)."""
    return trusting(pair, max_epsilon=40.0)


def _create(pair: DapPair, document: dict[str, Any]) -> requests.Response:
    return requests.post(
        f"{pair.leader.url}/v1/campaigns", json=document, headers=pair.leader.admin(), timeout=30
    )


def _content(document: dict[str, Any]) -> dict[str, Any]:
    """What an admin posts: the document without its ``config_id`` and ``protocol``."""
    return {k: v for k, v in document.items() if k not in ("config_id", "protocol")}


@pytest.mark.parametrize("dap_pair", [HISTOGRAM], indirect=True)
def test_a_fetched_campaign_is_recorded_uploaded_and_collected_exactly(
    dap_pair: DapPair, tmp_path: Path
) -> None:
    pair = dap_pair
    name = f"crashes-{pair.spec.task_id_text[:8].lower().replace('_', 'x').replace('-', 'y')}"
    pinned = campaign_document(pair, name, domain=LABELS, local=LOCAL, description="crashes")
    answer = _create(pair, _content(pinned))
    assert answer.status_code == 201, answer.text
    assert answer.headers["Location"].endswith(f"/v1/campaigns/{name}")
    served = requests.get(f"{pair.leader.url}/v1/campaigns/{name}", timeout=10).json()
    # Served as the device verifies it: the same content, config_id and metadata as the
    # document an app would pin, plus when it was created and its status.
    assert {k: v for k, v in served.items() if k not in ("created", "status")} == pinned
    assert served["status"] == "open"
    assert DapCampaign.from_document(served, name=name).config_id == pinned["config_id"]
    assert _create(pair, _content(pinned)).status_code == 200  # the same body again
    listed = requests.get(f"{pair.leader.url}/v1/campaigns", timeout=10).json()["campaigns"]
    assert [c for c in listed if c["name"] == name] == [served]

    fleet = [[LABELS[(3 * d + r) % 4] for r in range(5)] for d in range(6)]
    truth = [sum(values.count(label) for values in fleet) for label in LABELS]
    for device, values in enumerate(fleet):
        with TelemetryClient(
            pair.leader.url,  # no pinned document: fetched from the collector
            state_dir=tmp_path / f"device-{device}",
            policy=_policy(pair),
            rng=np.random.default_rng(device),
        ) as client:
            assert len(client.record_many(name, values)) == 5
            assert client.flush() == 5
            assert client.pending() == 0 and client.status()["last_error"] is None
    assert pair.drive() == {"aggregated": 30, "rejected": 0, "jobs": 1}
    # The Collector reads the result through the served document.
    (tmp_path / "campaign.json").write_text(json.dumps(served))
    done = pair.collect(campaign=tmp_path / "campaign.json", process=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["campaign"] == name and result["report_count"] == 30
    assert result["collected"] == truth  # dp none; grr keeps all but with p < 4e-16

    # Reports, estimates and exports of it are the Leader's business, not the collector's.
    upload = requests.post(
        f"{pair.leader.url}/v1/campaigns/{name}/reports",
        json={"config_id": served["config_id"], "reports": []},
        timeout=10,
    )
    assert upload.status_code == 409
    assert upload.headers["Content-Type"] == "application/problem+json"
    problem = upload.json()
    assert problem["type"] == problem_type("secure-aggregation-campaign")
    assert problem["leader"] == pair.spec.leader and problem["task_id"] == pair.spec.task_id_text
    assert pair.spec.leader in problem["detail"]
    for route in ("estimate", "reports"):
        refused = requests.get(
            f"{pair.leader.url}/v1/campaigns/{name}/{route}", headers=pair.leader.admin()
        )
        assert refused.status_code == 409, refused.text
        assert "ldp-analyze collect" in refused.json()["detail"]
    estimate = subprocess.run(
        [
            *entry_point("ldp-analyze", "analysis.cli"), "estimate",
            "--db", str(pair.leader.db), "--campaign", name, "--format", "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert estimate.returncode == 2
    assert "ldp-analyze collect --task" in estimate.stderr and pair.spec.leader in estimate.stderr


@pytest.mark.parametrize("dap_pair", [HISTOGRAM], indirect=True)
def test_documents_edited_on_the_collector_are_refused_by_the_device(
    dap_pair: DapPair, tmp_path: Path
) -> None:
    pair = dap_pair
    stem = pair.spec.task_id_text[:6].lower().replace("_", "x").replace("-", "y")
    names = {edit: f"{edit}-{stem}" for edit in ("key", "endpoint", "rehashed", "leader")}
    for name in names.values():
        document = campaign_document(pair, name, domain=LABELS, local=LOCAL)
        assert _create(pair, _content(document)).status_code == 201
    other_key = b64encode(bytes(range(32)))
    attacker = "http://127.0.0.1:9/dap/"

    def edit(name: str, change: Any, *, rehash: bool) -> None:
        """Change a stored document's dap object in the database, as a compromised collector
        would serve it; ``rehash``: with the config_id of the new content."""
        with sqlite3.connect(pair.leader.db) as conn:
            (text, domain, local) = conn.execute(
                "SELECT dap, domain, local FROM campaigns WHERE name = ?", [name]
            ).fetchone()
            dap = json.loads(text)
            change(dap)
            values: list[Any] = [json.dumps(dap)]
            sql = "UPDATE campaigns SET dap = ?"
            if rehash:
                content = dap_campaign_content(
                    dap=dap, local=json.loads(local), domain=json.loads(domain), policy=None
                )
                sql += ", config_id = ?"
                values.append(content_id(content))
            conn.execute(f"{sql} WHERE name = ?", [*values, name])
        conn.close()

    edit(names["key"], lambda d: d["helper_hpke_config"].update(public_key=other_key), rehash=False)
    edit(names["endpoint"], lambda d: d.update(leader=attacker), rehash=False)
    edit(names["rehashed"], lambda d: d["helper_hpke_config"].update(public_key=other_key), rehash=True)  # noqa: E501  # fmt: skip
    edit(names["leader"], lambda d: d.update(leader=attacker), rehash=True)

    with TelemetryClient(
        pair.leader.url, state_dir=tmp_path / "device", policy=_policy(pair)
    ) as client:
        for edited in ("key", "endpoint"):  # the content no longer hashes to its config_id
            assert client.record(names[edited], "one") is None  # dropped, counted, not queued
            status = client.status()
            assert status["dropped"][names[edited]] == {"campaign-unverifiable": 1}
            assert status["last_error"]["type"] == CampaignVerificationError.__name__
            assert "does not match the content" in status["last_error"]["message"]
        # Consistent documents that name a key or a Leader the app does not trust.
        with pytest.raises(PolicyViolation, match="trusted_aggregators") as refusal:
            client.record(names["rehashed"], "one")
        assert "helper" in str(refusal.value)
        with pytest.raises(PolicyViolation, match="trusted_aggregators") as refusal:
            client.record(names["leader"], "one")
        assert "leader" in str(refusal.value)
        assert client.pending() == 0  # nothing sharded, nothing queued
    assert "report_replayed" not in _refusals(pair)


def _refusals(pair: DapPair) -> str:
    return requests.get(f"{pair.leader.url}/metrics", timeout=10).text


@pytest.mark.parametrize("dap_pair", [HISTOGRAM], indirect=True)
def test_bad_documents_are_refused_at_creation_naming_the_field(
    dap_pair: DapPair, tmp_path: Path
) -> None:
    pair = dap_pair
    good = _content(campaign_document(pair, "bad-docs", domain=LABELS))
    dap = good["dap"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({**good, "dap": "a task"}, "dap must be a JSON object"),
        ({**good, "dap": {**dap, "leader": dap["leader"].rstrip("/")}}, "dap is not in canonical"),
        ({**good, "dap": {**dap, "dp": "laplace:-1"}}, "dap.dp"),
        ({**good, "dap": {**dap, "task_id": "short"}}, "dap.task_id"),
        ({**good, "domain": LABELS[:3]}, "domain must list the task's 4 labels"),
        ({**good, "local": {"mechanism": "oue", "epsilon": 1.0, "k": 4}}, "local must be a grr"),
        ({**good, "local": {"mechanism": "grr", "epsilon": "big", "k": 4}}, "local:"),
        ({**good, "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 4}}, "mechanism"),
        ({**good, "config_id": "0" * 32}, "config_id '0000"),
        ({**good, "protocol": 2}, "protocol must be 1"),
        (
            {**good, "local": LOCAL, "policy": {**BUDGET, "epsilon_per_report": 1.0}},
            "policy.epsilon_per_report",
        ),
    ]
    for document, expected in cases:
        answer = _create(pair, document)
        assert answer.status_code == 400, (expected, answer.text)
        assert answer.headers["Content-Type"] == "application/problem+json"
        problem = answer.json()
        assert problem["type"] == problem_type("malformed-request")
        assert expected in problem["detail"], (expected, problem["detail"])
        path = tmp_path / "campaign.json"
        path.write_text(json.dumps(document))
        done = subprocess.run(
            [
                *entry_point("ldp-collector", "collector.cli"), "campaign", "create",
                "--db", str(tmp_path / "cli.db"), "--file", str(path),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, (expected, done.stderr)
        assert expected in done.stderr, (expected, done.stderr)
    names = [c["name"] for c in requests.get(f"{pair.leader.url}/v1/campaigns").json()["campaigns"]]
    assert "bad-docs" not in names
    # A different document under an existing name is a conflict, as for any campaign.
    assert _create(pair, good).status_code == 201
    conflict = _create(pair, {**good, "domain": LABELS[::-1]})
    assert conflict.status_code == 409
    assert conflict.json()["type"] == problem_type("campaign-conflict")


@pytest.mark.parametrize("dap_pair", [HISTOGRAM], indirect=True)
def test_the_campaign_commands_handle_a_dap_campaign(dap_pair: DapPair, tmp_path: Path) -> None:
    pair = dap_pair
    db = str(tmp_path / "commands.db")
    document = campaign_document(pair, "cli-dap", domain=LABELS, local=LOCAL, owner="ops")
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(document))  # the pinned form, config_id included, is accepted
    created = json.loads(run("campaign", "create", "--db", db, "--file", str(path)))
    assert {k: v for k, v in created.items() if k != "created"} == document
    listing = run("campaign", "list", "--db", db).splitlines()
    assert listing[1].split() == [
        "cli-dap", "dap:histogram", "none,local:40", "-", "10", "open"
    ]  # fmt: skip
    shown = json.loads(run("campaign", "show", "--db", db, "--name", "cli-dap"))
    assert shown["status"] == "open" and "reports" not in shown
    assert pair.spec.leader in shown["note"]
    run("campaign", "close", "--db", db, "--name", "cli-dap")
    assert (
        json.loads(run("campaign", "show", "--db", db, "--name", "cli-dap"))["status"] == "closed"
    )
    assert "deleted with its 0 stored reports" in run(
        "campaign", "delete", "--db", db, "--name", "cli-dap"
    )
    assert run("campaign", "list", "--db", db).splitlines()[1:] == []


@pytest.mark.usefixtures("ts_build")
@pytest.mark.parametrize("dap_pair", [HISTOGRAM], indirect=True)
def test_node_devices_fetch_the_served_document(dap_pair: DapPair, tmp_path: Path) -> None:
    """The TypeScript client (Node, the built package) fetches the same served document,
    verifies it, records, uploads to the Leader; the result is the truth."""
    pair = dap_pair
    name = f"ts-{pair.spec.task_id_text[:8].lower().replace('_', 'x').replace('-', 'y')}"
    document = campaign_document(pair, name, domain=LABELS, local=LOCAL)
    assert _create(pair, _content(document)).status_code == 201
    devices = [[LABELS[(d + r) % 4] for r in range(4)] for d in range(3)]
    job = {
        "package": str(DIST / "src" / "index.js"),
        "url": pair.leader.url,
        "name": name,  # no document: each device fetches it
        "policy": {"trusted_aggregators": trusted(pair), "max_epsilon": 40},
        "devices": devices,
        "state": str(tmp_path / "devices"),
        "seed": "5d" * 32,
    }
    done = subprocess.run(
        [require_node(), str(TS_TESTS / "record_dap.mjs")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"the Node devices failed:\n{done.stdout}\n{done.stderr}"
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["recorded"] == outcome["acknowledged"] == 12, outcome
    assert outcome["left"] == 0 and outcome["errors"] == [] and outcome["dropped"] == []
    assert pair.drive() == {"aggregated": 12, "rejected": 0, "jobs": 1}
    served = requests.get(f"{pair.leader.url}/v1/campaigns/{name}", timeout=10).json()
    (tmp_path / "campaign.json").write_text(json.dumps(served))
    truth = [sum(values.count(label) for values in devices) for label in LABELS]
    collected = subprocess.run(
        [
            *entry_point("ldp-analyze", "analysis.cli"), "collect",
            "--task", str(pair.task_file), "--leader", pair.leader_dap,
            "--collector-key", str(pair.collector_key), "--token", COLLECTOR_TOKEN,
            "--interval", f"{int(time.time()) // TIME_PRECISION - 1},3",
            "--campaign", str(tmp_path / "campaign.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stderr
    assert json.loads(collected.stdout)["collected"] == truth
