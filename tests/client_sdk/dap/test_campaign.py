"""Secure-aggregation campaign documents (client_sdk/dap/campaign.py) and the policy that
accepts them (``PrivacyPolicy.check_dap``), without a network: docs/dap.md, "The device"."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from scipy import optimize

from client_sdk import PolicyViolation, PrivacyPolicy, TelemetryClient, mechanism_from_config
from client_sdk.budget import BudgetExceededError
from client_sdk.client import CampaignVerificationError
from client_sdk.config import config_id
from client_sdk.dap.campaign import (
    DapCampaign,
    b64decode,
    b64encode,
    dap_campaign_document,
    dap_object,
)
from client_sdk.dap.hpke import generate_key_pair
from client_sdk.dap.messages import (
    HpkeConfig,
    Report,
    ReportError,
    ReportUploadStatus,
    UploadErrors,
    UploadRequest,
)
from client_sdk.zcdp import zcdp_epsilon
from tests.client_sdk.dap.test_upload import aggregate

LEADER_URL = "https://leader.example/dap/"
HELPER_URL = "https://helper.example/dap/"
LABELS = ["a", "b", "c", "d"]
LEADER_PAIR = generate_key_pair()
HELPER_PAIR = generate_key_pair()
LEADER = HpkeConfig(1, 0x20, 1, 1, LEADER_PAIR.public_key)
HELPER = HpkeConfig(7, 0x20, 1, 1, HELPER_PAIR.public_key)


def task(vdaf: dict[str, Any] | None = None, dp: str = "laplace:1") -> dict[str, Any]:
    return {
        "task_id": b64encode(bytes(range(32))),
        "task_info": "tests",
        "leader": LEADER_URL,
        "helper": HELPER_URL.rstrip("/"),  # dap_object writes the endpoints canonically
        "vdaf": vdaf or {"type": "histogram", "length": 4, "chunk_length": 2},
        "min_batch_size": 10,
        "time_precision": 3600,
        "dp": dp,
    }


def document(name: str = "c", **fields: Any) -> dict[str, Any]:
    vdaf, dp = fields.pop("vdaf", None), fields.pop("dp", "laplace:1")
    if "domain" not in fields and (vdaf or {"type": "histogram"})["type"] == "histogram":
        fields["domain"] = LABELS
    return dap_campaign_document(name, dap_object(task(vdaf, dp), LEADER, HELPER), **fields)


def trusting(**fields: Any) -> PrivacyPolicy:
    trusted = {
        LEADER_URL: b64encode(LEADER.public_key),
        HELPER_URL: b64encode(HELPER.public_key),
    }
    return PrivacyPolicy(trusted_aggregators=trusted, **fields)


def verified(doc: dict[str, Any]) -> DapCampaign:
    return DapCampaign.from_document(doc, name=doc["name"])


# -- the document


def test_document_round_trip_and_config_id() -> None:
    doc = document(local={"mechanism": "grr", "epsilon": 2, "k": 4})
    assert doc["dap"]["helper"] == HELPER_URL and doc["protocol"] == 1
    content = {k: doc[k] for k in ("dap", "local", "domain", "policy")}
    assert doc["config_id"] == config_id(content)
    assert doc["local"] == {"mechanism": "grr", "epsilon": 2.0, "k": 4}  # canonical
    campaign = verified(json.loads(json.dumps(doc)))
    assert campaign.task.configuration.helper_aggregator_endpoint == HELPER_URL.encode()
    assert campaign.central_epsilon == 1 and campaign.local_epsilon == 2.0
    assert campaign.charge_at(1e-6) == 1.0  # the smaller of the two guarantees


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(config_id="0" * 32), "config_id"),
        (lambda d: d["dap"].update(leader=LEADER_URL.rstrip("/")), "canonical"),
        (lambda d: d["dap"].update(extra=1), "unknown \\['extra'\\]"),
        (lambda d: d["dap"]["helper_hpke_config"].update(kem_id=16), "kem_id"),
        (lambda d: d["dap"]["leader_hpke_config"].update(public_key="AAAA"), "32 bytes"),
        (lambda d: d["dap"].update(dp="gaussian:0"), "dap.dp"),
        (lambda d: d["dap"]["vdaf"].update(type="poplar1"), "dap.vdaf.type"),
        (lambda d: d.update(domain=["a", "b"]), "4 labels"),
        (lambda d: d.update(mechanism={"mechanism": "grr", "epsilon": 1, "k": 4}), "mechanism"),
        (lambda d: d.update(protocol=2), "protocol"),
        (lambda d: d.update(local={"mechanism": "grr", "epsilon": 1, "k": 3}), "k = 4"),
        (
            lambda d: d.update(
                policy={"epsilon_per_report": 0.5, "reports_per_period": 1, "period_seconds": 60}
            ),
            "below what a report costs \\(1,",
        ),
    ],
)
def test_a_bad_document_is_refused_naming_the_field(edit: Any, message: str) -> None:
    doc = copy.deepcopy(document())
    edit(doc)
    with pytest.raises(ValueError, match=message):
        verified(doc)


def test_local_randomization_is_for_histograms_and_counts_only() -> None:
    with pytest.raises(ValueError, match="local randomization"):
        document(
            vdaf={"type": "sum", "max_measurement": 7},
            local={"mechanism": "grr", "epsilon": 1, "k": 2},
        )
    count = document(vdaf={"type": "count"}, local={"mechanism": "grr", "epsilon": 1, "k": 2})
    assert verified(count).local == mechanism_from_config(count["local"])


def test_measurements_clip_and_never_echo_a_value() -> None:
    histogram = verified(document())
    assert histogram.measurements(["d", "a"]) == ([3, 0], 0)
    with pytest.raises(ValueError, match="position 1 \\(a str of 6 characters\\)") as caught:
        histogram.measurements(["a", "secret"])
    assert "secret" not in str(caught.value)
    summed = verified(document(vdaf={"type": "sum", "max_measurement": 7}))
    assert summed.measurements([3, 9, -1]) == ([3, 7, 0], 2)
    vector = verified(
        document(vdaf={"type": "sumvec", "length": 2, "max_measurement": 3, "chunk_length": 1})
    )
    assert vector.measurements([[1, 5]]) == ([[1, 3]], 1)
    with pytest.raises(ValueError, match="must have 2 entries"):
        vector.measurements([[1, 2, 3]])
    count = verified(document(vdaf={"type": "count"}))
    assert count.measurements([True, False, 1]) == ([1, 0, 1], 0)
    with pytest.raises(ValueError, match="True or False"):
        count.measurements([2])


# -- the policy


def test_the_default_policy_accepts_no_secure_aggregation() -> None:
    with pytest.raises(PolicyViolation, match="accepts no secure aggregation") as caught:
        PrivacyPolicy().check_dap(verified(document()))
    assert caught.value.field == "trusted_aggregators"


def test_an_untrusted_aggregator_or_key_is_refused() -> None:
    campaign = verified(document())
    only_leader = PrivacyPolicy(
        trusted_aggregators={LEADER_URL: b64encode(LEADER.public_key)}, max_central_epsilon=1
    )
    with pytest.raises(PolicyViolation, match="the helper is not trusted"):
        only_leader.check_dap(campaign)
    trusted = {**trusting().trusted_aggregators}
    trusted[LEADER_URL] = b64encode(generate_key_pair().public_key)
    other_key = PrivacyPolicy(trusted_aggregators=trusted, max_central_epsilon=1)
    with pytest.raises(PolicyViolation, match=r"leader .*HPKE public key is not the trusted"):
        other_key.check_dap(campaign)
    trusting(max_central_epsilon=1).check_dap(campaign)  # the same campaign, trusted


def test_one_party_holding_both_shares_is_refused() -> None:
    doc = dap_campaign_document(
        "c", dap_object({**task(), "helper": LEADER_URL}, LEADER, HELPER), domain=LABELS
    )
    policy = trusting(max_central_epsilon=1)
    with pytest.raises(PolicyViolation, match="two parties"):
        policy.check_dap(verified(doc))
    same_key = dap_campaign_document(
        "c", dap_object(task(), LEADER, HpkeConfig(2, 0x20, 1, 1, LEADER.public_key)), domain=LABELS
    )
    both = PrivacyPolicy(
        trusted_aggregators={
            LEADER_URL: b64encode(LEADER.public_key),
            HELPER_URL: b64encode(LEADER.public_key),
        },
        max_central_epsilon=1,
    )
    with pytest.raises(PolicyViolation, match="two parties"):
        both.check_dap(verified(same_key))


def test_a_guarantee_within_a_ceiling_is_required() -> None:
    noisy = verified(document(dp="laplace:2"))
    with pytest.raises(PolicyViolation, match="needs the app's max_central_epsilon") as caught:
        trusting().check_dap(noisy)
    assert caught.value.field == "max_epsilon" and caught.value.campaign_value == math.inf
    with pytest.raises(PolicyViolation) as caught:
        trusting(max_central_epsilon=1).check_dap(noisy)
    assert caught.value.field == "max_central_epsilon" and caught.value.campaign_value == 2.0
    trusting(max_central_epsilon=2).check_dap(noisy)
    exact = verified(document(dp="none"))  # the bare sum is no differential privacy
    with pytest.raises(PolicyViolation, match="max_central_epsilon"):
        trusting(max_central_epsilon=40).check_dap(exact)
    # Local randomized response within max_epsilon is a guarantee of its own.
    local = verified(document(dp="none", local={"mechanism": "grr", "epsilon": 1, "k": 4}))
    trusting().check_dap(local)
    with pytest.raises(PolicyViolation, match="allowed_mechanisms"):
        trusting(allowed_mechanisms={"olh"}).check_dap(local)


def _cks_epsilon(rho: float, delta: float) -> float:
    """Canonne, Kamath, Steinke 2020, Corollary 13 solved for epsilon, minimised over a
    continuous alpha by scipy (independent of the code's grid of orders)."""

    def epsilon(alpha: float) -> float:
        return (
            alpha * rho + math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
        )

    best = optimize.minimize_scalar(epsilon, bounds=(1 + 1e-9, 1e6), method="bounded")
    return float(best.fun)


@pytest.mark.parametrize(("rho", "delta"), [(0.125, 1e-6), (0.02, 1e-6), (0.5, 1e-9), (1, 1e-3)])
def test_a_gaussian_task_is_held_to_the_central_ceiling_at_max_central_delta(
    rho: float, delta: float
) -> None:
    """The boundary of "gaussian:RHO" against (max_central_epsilon, max_central_delta): the
    converted epsilon is the CKS 2020 one (the grid within 1e-3 of the continuous optimum, and
    never below it, nor above Bun & Steinke's rho + 2 sqrt(rho ln(1/delta))), accepted at it,
    refused just below it naming max_central_epsilon."""
    campaign = verified(document(dp=f"gaussian:{rho}"))
    assert campaign.central_rho == Fraction(str(rho)) and campaign.central_epsilon is None
    epsilon = campaign.central_epsilon_at(delta)
    continuous = _cks_epsilon(rho, delta)
    assert continuous * (1 - 1e-9) <= epsilon <= continuous * (1 + 1e-3)
    assert epsilon < rho + 2 * math.sqrt(rho * math.log(1 / delta))
    trusting(max_central_epsilon=epsilon * (1 + 1e-9), max_central_delta=delta).check_dap(campaign)
    below = trusting(max_central_epsilon=epsilon * (1 - 1e-9), max_central_delta=delta)
    with pytest.raises(PolicyViolation, match=f"gaussian:{rho}.*max_central_delta") as caught:
        below.check_dap(campaign)
    assert caught.value.field == "max_central_epsilon"
    assert caught.value.campaign_value == epsilon
    # the same ceiling at a larger delta: the conversion gives a smaller epsilon, accepted
    assert campaign.central_epsilon_at(min(0.5, delta * 1000)) < epsilon * (1 - 1e-9)
    trusting(
        max_central_epsilon=epsilon * (1 - 1e-9), max_central_delta=min(0.5, delta * 1000)
    ).check_dap(campaign)
    # without a central ceiling, only a local guarantee within max_epsilon would do
    with pytest.raises(PolicyViolation, match="needs the app's max_central_epsilon") as caught:
        trusting().check_dap(campaign)
    assert caught.value.field == "max_epsilon"


def test_a_gaussian_task_with_local_randomization_needs_no_central_ceiling() -> None:
    campaign = verified(
        document(dp="gaussian:0.01", local={"mechanism": "grr", "epsilon": 1, "k": 4})
    )
    trusting().check_dap(campaign)  # local epsilon 1 <= max_epsilon 4
    # the ledger's charge: the smaller guarantee, the central one read at the app's delta
    central = campaign.central_epsilon_at(1e-6)
    assert central == zcdp_epsilon(0.01, 1e-6) < 1.0
    assert campaign.charge_at(1e-6) == central
    assert campaign.charge_at(1e-20) == 1.0  # at a tiny delta the local epsilon is smaller


def test_trusted_aggregators_are_validated() -> None:
    with pytest.raises(ValueError, match="not an http"):
        PrivacyPolicy(trusted_aggregators={"leader.example": b64encode(bytes(32))})
    with pytest.raises(ValueError, match="32 bytes"):
        PrivacyPolicy(trusted_aggregators={LEADER_URL: "AAAA"})
    policy = PrivacyPolicy(trusted_aggregators={LEADER_URL.rstrip("/"): b64encode(bytes(32))})
    assert set(policy.trusted_aggregators) == {LEADER_URL}


# -- the client, offline


def test_record_queues_only_sealed_reports_and_charges_the_ledger(tmp_path: Path) -> None:
    doc = document(
        dp="laplace:0.5",
        local={"mechanism": "grr", "epsilon": 3, "k": 4},
        policy={"epsilon_per_report": 0.5, "reports_per_period": 3, "period_seconds": 86400},
    )
    with TelemetryClient(
        "http://127.0.0.1:9",
        state_dir=tmp_path,
        campaigns=[doc],
        policy=trusting(max_central_epsilon=1),
        rng=np.random.default_rng(0),
        retries=0,
        close_deadline=0.5,  # leaving the block flushes; leader.example does not exist
    ) as client:
        ids = client.record_many("c", ["b", "c", "b"])
        with pytest.raises(BudgetExceededError):  # reports_per_period = 3
            client.record("c", "a")
        assert client.pending("c") == 3
        spent = [e.epsilon_charged for e in client.privacy_log("c") if e.event is None]
        assert spent == [0.5] * 3  # min(local 3, central 0.5) per report
        with sqlite3.connect(tmp_path / "outbox.sqlite3") as conn:
            rows = dict(conn.execute("SELECT report_id, payload FROM outbox").fetchall())
        assert set(rows) == set(ids)
        # Each queued payload is a Report; the Aggregators' keys open, verify and sum them:
        # valid one-hot histograms (randomized response keeps them so), three reports.
        campaign = verified(doc)
        reports = [Report.decode(b64decode(json.loads(p), "payload")) for p in rows.values()]
        assert {r.report_metadata.report_id.hex() for r in reports} == set(ids)
        body = UploadRequest(tuple(reports)).encode()
        histogram, n = aggregate(campaign.task, LEADER_PAIR, HELPER_PAIR, body, bytes(32))
        assert n == 3 and sum(histogram) == 3 and all(c >= 0 for c in histogram)


def test_a_gaussian_campaign_is_charged_its_epsilon_at_the_apps_delta(tmp_path: Path) -> None:
    """A budget set in epsilon: each report of a "gaussian:RHO" task costs RHO's epsilon at
    max_central_delta (the ledger adds epsilons: basic composition). The document's budget
    cannot be checked without the device's delta, so a device whose delta makes a report too
    dear refuses it at record, and nothing is queued."""
    budget = {"epsilon_per_report": 2.5, "reports_per_period": 2, "period_seconds": 86400}
    doc = document(dp="gaussian:0.125", policy=budget)
    epsilon = zcdp_epsilon(0.125, 1e-6)  # about 2.42
    with TelemetryClient(
        "http://127.0.0.1:9",
        state_dir=tmp_path / "a",
        campaigns=[doc],
        policy=trusting(max_central_epsilon=2.5),
        retries=0,
        close_deadline=0.5,
    ) as client:
        client.record_many("c", ["a", "b"])
        spent = [e.epsilon_charged for e in client.privacy_log("c") if e.event is None]
        assert spent == [epsilon, epsilon]
        with pytest.raises(BudgetExceededError):  # reports_per_period = 2
            client.record("c", "c")
    # at max_central_delta 1e-9 one report is (3.06, 1e-9)-DP: above the 2.5 per report
    strict = trusting(max_central_epsilon=3.1, max_central_delta=1e-9)
    assert zcdp_epsilon(0.125, 1e-9) > 2.5
    with TelemetryClient(
        "http://127.0.0.1:9",
        state_dir=tmp_path / "b",
        campaigns=[doc],
        policy=strict,
        retries=0,
        close_deadline=0.5,
    ) as client:
        with pytest.raises(BudgetExceededError):
            client.record("c", "a")
        assert client.pending("c") == 0


def test_a_plain_http_leader_is_refused_off_loopback(tmp_path: Path) -> None:
    doc = document()
    doc_http = dap_campaign_document(
        "c",
        dap_object({**task(), "leader": "http://leader.example/dap/"}, LEADER, HELPER),
        domain=LABELS,
    )
    policy = PrivacyPolicy(
        trusted_aggregators={
            "http://leader.example/dap/": b64encode(LEADER.public_key),
            HELPER_URL: b64encode(HELPER.public_key),
        },
        max_central_epsilon=1,
    )
    with pytest.raises(CampaignVerificationError, match="plain http"):
        TelemetryClient(
            "http://127.0.0.1:9", state_dir=tmp_path / "a", campaigns=[doc_http], policy=policy
        )
    TelemetryClient(
        "http://127.0.0.1:9",
        state_dir=tmp_path / "b",
        campaigns=[doc],
        policy=trusting(max_central_epsilon=1),
    ).close()


# -- the upload's answers (docs/dap.md, "Upload and answers"), against a scripted Leader


class ScriptedLeader(requests.Session):
    """Answers each upload with ``answer(request)``: a status and a body (DAP's
    ``UploadErrors``, or a problem document)."""

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer, self.uploads = answer, []  # type: ignore[var-annotated]

    def post(self, url: Any, data: Any = None, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        request = UploadRequest.decode(data)
        self.uploads.append((url, kwargs["headers"]["Content-Type"], request))
        status, body, media = self.answer(request)
        response = requests.Response()
        response.status_code, response._content = status, body
        response.headers["Content-Type"] = media
        return response


def errors(*refused: tuple[bytes, ReportError]) -> tuple[int, bytes, str]:
    body = UploadErrors(tuple(ReportUploadStatus(rid, e) for rid, e in refused)).encode()
    return 200, body, UploadErrors.MEDIA_TYPE


def scripted_client(tmp_path: Path, leader: ScriptedLeader) -> TelemetryClient:
    return TelemetryClient(
        "http://127.0.0.1:9",
        state_dir=tmp_path,
        campaigns=[document()],
        policy=trusting(max_central_epsilon=1),
        session=leader,
    )


def test_upload_errors_keep_too_early_and_drop_what_can_never_be_delivered(
    tmp_path: Path,
) -> None:
    def answer(request: UploadRequest) -> tuple[int, bytes, str]:
        ids = [r.report_metadata.report_id for r in request.reports]
        if len(ids) == 4:
            return errors(
                (ids[0], ReportError.REPORT_TOO_EARLY),
                (ids[1], ReportError.HPKE_DECRYPT_ERROR),
                (ids[2], ReportError.REPORT_REPLAYED),
            )
        return errors()

    leader = ScriptedLeader(answer)
    with scripted_client(tmp_path, leader) as client:
        ids = client.record_many("c", ["a", "b", "c", "d"])
        assert client.flush() == 2  # stored now, and stored by an earlier upload (replayed)
        assert client.pending_ids() == {ids[0]}  # too early: kept for a later flush
        assert client.status()["dropped"] == {"c": {"dap:hpke_decrypt_error": 1}}
        assert client.flush() == 1 and client.pending() == 0
    url, media, request = leader.uploads[0]
    assert url == f"{LEADER_URL}tasks/{b64encode(bytes(range(32)))}/reports"
    assert media == UploadRequest.MEDIA_TYPE  # DAP-18's: the Leader refuses any other
    assert [r.report_metadata.report_id.hex() for r in request.reports] == ids


def test_a_refused_upload_keeps_its_reports_and_a_too_large_one_is_split(tmp_path: Path) -> None:
    problem = {
        "type": "urn:ietf:params:ppm:dap:error:unrecognizedTask",
        "title": "unrecognizedTask",
        "status": 404,
        "detail": "no task here",
    }
    refused = (404, json.dumps(problem).encode(), "application/problem+json")
    state: dict[str, Any] = {"answer": refused}

    def answer(request: UploadRequest) -> tuple[int, bytes, str]:
        if state["answer"] == "split" and len(request.reports) > 1:
            return 413, b"", "text/plain"
        return errors() if state["answer"] == "split" else refused

    leader = ScriptedLeader(answer)
    with scripted_client(tmp_path, leader) as client:
        client.record_many("c", ["a", "b", "c"])
        assert client.flush() == 0 and client.pending() == 3
        last = client.status()["last_error"]
        assert last["status"] == 404 and "no task here" in last["message"]
        assert client.status()["next_attempt"] is not None  # backoff, no retry loop
        state["answer"] = "split"
        assert client.flush(force=True) == 3 and client.pending() == 0
    assert [len(r.reports) for _, _, r in leader.uploads] == [3, 3, 1, 1, 1]
