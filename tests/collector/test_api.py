"""Every route of the collector and every error it answers, through Flask's test client."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from flask.testing import FlaskClient

from analysis import estimate
from client_sdk.mechanisms import AggregateStatistic, Mechanism, mechanism_from_config
from client_sdk.mechanisms.grr import GRR
from client_sdk.protocol import PROBLEM_TYPES, campaign_config_id
from collector import create_app
from collector.settings import load_settings
from tests.collector.conftest import ADMIN, ADMIN_TOKEN, CAMPAIGN, LABELS, new_id, stored_rows

PROBLEM = "application/problem+json"


def assert_problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.data
    assert response.mimetype == PROBLEM
    body = response.get_json(force=True)
    assert body["type"] == PROBLEM_TYPES[slug]
    assert body["status"] == status
    assert isinstance(body["title"], str) and isinstance(body["detail"], str) and body["detail"]
    return dict(body)


def upload(client: FlaskClient, config_id: str, reports: list[Any], name: str = "colors") -> Any:
    return client.post(
        f"/v1/campaigns/{name}/reports", json={"config_id": config_id, "reports": reports}
    )


# ---- factory and settings ----------------------------------------------------------------------


def test_settings_come_from_ldp_environment_then_config(
    monkeypatch: pytest.MonkeyPatch, db_path: Path
) -> None:
    monkeypatch.setenv("LDP_DB", str(db_path))
    monkeypatch.setenv("LDP_ADMIN_TOKEN", "from-env")
    monkeypatch.setenv("LDP_MAX_BATCH", "7")
    app = create_app()
    assert app.config["DB"] == str(db_path)
    assert app.config["ADMIN_TOKEN"] == "from-env"
    assert app.config["MAX_BATCH"] == 7
    assert app.config["MAX_CONTENT_LENGTH"] == 16 * 1024 * 1024
    assert create_app({"MAX_BATCH": 3}).config["MAX_BATCH"] == 3
    assert db_path.exists()


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, "LDP_DB"),
        ({"LDP_DB": "x.db", "LDP_MAX_BATCH": "many"}, "LDP_MAX_BATCH must be a positive integer"),
        ({"LDP_DB": "x.db", "LDP_MAX_BATCH": "0"}, "LDP_MAX_BATCH"),
        ({"LDP_DB": "x.db", "LDP_BUSY_TIMEOUT": "-1"}, "LDP_BUSY_TIMEOUT"),
        ({"LDP_DB": "x.db", "LDP_SYNCHRONOUS": "OFF"}, "LDP_SYNCHRONOUS"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_settings(environ=environ)


# ---- campaigns ---------------------------------------------------------------------------------


def test_create_campaign_returns_201_with_config_id(client: FlaskClient) -> None:
    response = client.post("/v1/campaigns", json=CAMPAIGN, headers=ADMIN)
    assert response.status_code == 201
    assert response.headers["Location"] == "/v1/campaigns/colors"
    body = response.get_json()
    assert body["config_id"] == campaign_config_id(
        mechanism=body["mechanism"], domain=LABELS, policy=None, min_batch_size=10
    )
    assert body["mechanism"] == mechanism_from_config(CAMPAIGN["mechanism"]).to_config()
    assert client.get("/v1/campaigns/colors").get_json() == body
    assert client.get("/v1/campaigns").get_json() == {"campaigns": [body]}


def test_campaign_create_is_idempotent_and_a_different_body_conflicts(
    client: FlaskClient, campaign: dict[str, Any]
) -> None:
    again = client.post("/v1/campaigns", json=CAMPAIGN, headers=ADMIN)
    assert again.status_code == 200
    assert again.get_json() == campaign
    changed = dict(CAMPAIGN, mechanism={"mechanism": "grr", "epsilon": 2.0, "k": 5})
    problem = assert_problem(
        client.post("/v1/campaigns", json=changed, headers=ADMIN), 409, "campaign-conflict"
    )
    assert campaign["config_id"] in problem["detail"]
    assert client.get("/v1/campaigns/colors").get_json() == campaign


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"name": "colors"},
        dict(CAMPAIGN, domain=LABELS[:3]),
        dict(CAMPAIGN, mechanism={"mechanism": "grr", "epsilon": "big", "k": 5}),
        dict(CAMPAIGN, name="a/b"),
        dict(CAMPAIGN, surplus=True),
    ],
)
def test_invalid_campaign_is_400_and_creates_nothing(client: FlaskClient, body: Any) -> None:
    assert_problem(client.post("/v1/campaigns", json=body, headers=ADMIN), 400, "malformed-request")
    assert client.get("/v1/campaigns").get_json() == {"campaigns": []}


def test_unknown_campaign_is_404(client: FlaskClient) -> None:
    problem = assert_problem(client.get("/v1/campaigns/absent"), 404, "not-found")
    assert "'absent'" in problem["detail"]
    assert_problem(upload(client, "0" * 32, [], name="absent"), 404, "not-found")
    for path in ("/v1/campaigns/absent/estimate", "/v1/campaigns/absent/reports"):
        assert_problem(client.get(path, headers=ADMIN), 404, "not-found")


def test_unknown_route_and_wrong_method_are_problems(client: FlaskClient) -> None:
    assert_problem(client.get("/v2/nothing"), 404, "not-found")
    problem = client.delete("/v1/campaigns")
    assert_problem(problem, 405, "method-not-allowed")
    assert "POST" in problem.headers["Allow"]


# ---- authentication on every admin route --------------------------------------------------------

ADMIN_ROUTES = [
    ("post", "/v1/campaigns"),
    ("get", "/v1/campaigns/colors/estimate"),
    ("get", "/v1/campaigns/colors/reports"),
]
BAD_CREDENTIALS = [
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": f"Basic {ADMIN_TOKEN}"},
    {"Authorization": "Bearer "},
    {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
]


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
@pytest.mark.parametrize("headers", BAD_CREDENTIALS)
def test_admin_routes_need_the_token(
    client: FlaskClient,
    campaign: dict[str, Any],
    db_path: Path,
    method: str,
    path: str,
    headers: dict[str, str],
) -> None:
    body = dict(CAMPAIGN, name="other") if method == "post" else None
    response = getattr(client, method)(path, json=body, headers=headers)
    assert_problem(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert [c["name"] for c in client.get("/v1/campaigns").get_json()["campaigns"]] == ["colors"]
    assert stored_rows(db_path) == []


def test_without_a_configured_token_admin_routes_refuse_everyone(db_path: Path) -> None:
    app = create_app({"DB": str(db_path), "ADMIN_TOKEN": ""})
    for headers in ({}, {"Authorization": "Bearer "}, ADMIN):
        response = app.test_client().post("/v1/campaigns", json=CAMPAIGN, headers=headers)
        problem = assert_problem(response, 401, "unauthorized")
    assert "LDP_ADMIN_TOKEN" in problem["detail"]


# ---- uploads -----------------------------------------------------------------------------------


def test_upload_accepts_and_counts_duplicates_within_and_across_batches(
    client: FlaskClient, campaign: dict[str, Any], db_path: Path
) -> None:
    a, b, c = new_id(), new_id(), new_id()
    first = upload(
        client,
        campaign["config_id"],
        [{"id": a, "payload": 1}, {"id": b, "payload": 2}, {"id": a, "payload": 3}],
    )
    assert first.status_code == 200
    assert first.get_json() == {"accepted": 2, "duplicate": 1, "rejected": []}
    second = upload(
        client, campaign["config_id"], [{"id": b, "payload": 4}, {"id": c, "payload": 0}]
    )
    assert second.get_json() == {"accepted": 1, "duplicate": 1, "rejected": []}
    # The first copy of each id wins.
    assert stored_rows(db_path) == [(a, "1"), (b, "2"), (c, "0")]
    empty = upload(client, campaign["config_id"], [])
    assert empty.get_json() == {"accepted": 0, "duplicate": 0, "rejected": []}


def test_each_bad_report_is_rejected_with_its_index_and_reason(
    client: FlaskClient, campaign: dict[str, Any], db_path: Path
) -> None:
    good = new_id()
    reports: list[Any] = [
        {"id": good, "payload": 4},
        "not an object",
        {"id": new_id()},
        {"id": new_id(), "payload": 1, "extra": 0},
        {"id": new_id().upper(), "payload": 1},
        {"id": new_id()[:31], "payload": 1},
        {"id": 12345, "payload": 1},
        {"id": new_id(), "payload": 5},
        {"id": new_id(), "payload": "1"},
        {"id": new_id(), "payload": True},
        {"id": new_id(), "payload": [1]},
    ]
    body = upload(client, campaign["config_id"], reports).get_json()
    assert body["accepted"] == 1 and body["duplicate"] == 0
    codes = {r["index"]: r["code"] for r in body["rejected"]}
    assert codes == {
        1: "malformed_report",
        2: "malformed_report",
        3: "malformed_report",
        4: "invalid_id",
        5: "invalid_id",
        6: "invalid_id",
        7: "invalid_payload",
        8: "invalid_payload",
        9: "invalid_payload",
        10: "invalid_payload",
    }
    reasons = {r["index"]: r["reason"] for r in body["rejected"]}
    assert "missing payload" in reasons[2]
    assert "extra" in reasons[3]
    assert "32 lowercase hex" in reasons[4]
    assert "[0, 5)" in reasons[7]
    assert stored_rows(db_path) == [(good, "4")]


def test_a_stale_config_id_is_409_with_the_current_one(
    client: FlaskClient, campaign: dict[str, Any], db_path: Path
) -> None:
    response = upload(client, "f" * 32, [{"id": new_id(), "payload": 1}])
    problem = assert_problem(response, 409, "stale-config")
    assert problem["config_id"] == campaign["config_id"]
    assert stored_rows(db_path) == []


def test_batch_above_the_cap_is_413(
    client: FlaskClient, campaign: dict[str, Any], db_path: Path
) -> None:
    reports = [{"id": new_id(), "payload": 1} for _ in range(51)]
    problem = assert_problem(
        upload(client, campaign["config_id"], reports), 413, "payload-too-large"
    )
    assert problem["max_batch"] == 50
    assert stored_rows(db_path) == []
    assert upload(client, campaign["config_id"], reports[:50]).get_json()["accepted"] == 50


def test_body_above_max_content_length_is_413(db_path: Path) -> None:
    app = create_app({"DB": str(db_path), "ADMIN_TOKEN": ADMIN_TOKEN, "MAX_CONTENT_LENGTH": 2000})
    client = app.test_client()
    config_id = client.post("/v1/campaigns", json=CAMPAIGN, headers=ADMIN).get_json()["config_id"]
    reports = [{"id": new_id(), "payload": 1} for _ in range(50)]
    assert_problem(upload(client, config_id, reports), 413, "payload-too-large")
    assert stored_rows(db_path) == []


@pytest.mark.parametrize(
    ("data", "content_type", "status", "slug"),
    [
        ("{}", "text/plain", 415, "unsupported-media-type"),
        ("{}", None, 415, "unsupported-media-type"),
        ("{}", "application/json; charset=latin-1", 415, "unsupported-media-type"),
        ("{", "application/json", 400, "malformed-request"),
        (b"\xff\xfe", "application/json", 400, "malformed-request"),
        ('{"config_id": NaN, "reports": []}', "application/json", 400, "malformed-request"),
        ('{"config_id": "x", "reports": [1e999]}', "application/json", 400, "malformed-request"),
        ("[" * 100_000 + "]" * 100_000, "application/json", 400, "malformed-request"),
        ("[]", "application/json", 400, "malformed-request"),
        ('{"reports": []}', "application/json", 400, "malformed-request"),
        ('{"config_id": 5, "reports": []}', "application/json", 400, "malformed-request"),
        ('{"config_id": "x", "reports": {}}', "application/json", 400, "malformed-request"),
        (
            '{"config_id": "x", "reports": [], "more": 1}',
            "application/json",
            400,
            "malformed-request",
        ),
        (
            '{"config_id": "x", "reports": [' + "9" * 5000 + "]}",
            "application/json",
            400,
            "malformed-request",
        ),
    ],
)
def test_malformed_uploads_are_4xx_problems(
    client: FlaskClient,
    campaign: dict[str, Any],
    db_path: Path,
    data: Any,
    content_type: str | None,
    status: int,
    slug: str,
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.post("/v1/campaigns/colors/reports", data=data, headers=headers)
    assert_problem(response, status, slug)
    assert stored_rows(db_path) == []


def test_a_busy_database_is_503_with_retry_after_and_stores_nothing(
    db_path: Path,
) -> None:
    app = create_app(
        {"DB": str(db_path), "ADMIN_TOKEN": ADMIN_TOKEN, "BUSY_TIMEOUT": 0.05, "RETRY_AFTER": 2}
    )
    client = app.test_client()
    config_id = client.post("/v1/campaigns", json=CAMPAIGN, headers=ADMIN).get_json()["config_id"]
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        response = upload(client, config_id, [{"id": new_id(), "payload": 1}])
        assert_problem(response, 503, "overloaded")
        assert response.headers["Retry-After"] == "2"
        ready = client.get("/readyz")
        assert_problem(ready, 503, "overloaded")
        assert ready.headers["Retry-After"] == "2"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert stored_rows(db_path) == []
    assert client.get("/readyz").status_code == 200


def test_an_unexpected_error_is_still_a_problem_document(app: Flask) -> None:
    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("bug")

    response = app.test_client().get("/boom")
    body = assert_problem(response, 500, "internal-error")
    assert "bug" not in body["detail"]


# ---- admin estimate and export -----------------------------------------------------------------


def test_estimate_uses_the_mechanisms_own_debiasing(
    client: FlaskClient, campaign: dict[str, Any]
) -> None:
    mechanism = mechanism_from_config(campaign["mechanism"])
    values = np.arange(300) % 5
    reports = mechanism.perturb(values, rng=np.random.default_rng(3))
    payloads = mechanism.to_wire(reports)
    for start in range(0, 300, 50):
        chunk = [{"id": new_id(), "payload": p} for p in payloads[start : start + 50]]
        assert upload(client, campaign["config_id"], chunk).get_json()["accepted"] == 50
    response = client.get("/v1/campaigns/colors/estimate", headers=ADMIN)
    assert response.status_code == 200
    body = response.get_json()
    expected = estimate(mechanism, reports)
    assert body["n"] == 300 and body["campaign"] == "colors"
    assert [item["value"] for item in body["items"]] == LABELS
    np.testing.assert_allclose([i["frequency"] for i in body["items"]], expected.frequencies)
    np.testing.assert_allclose([i["std_error"] for i in body["items"]], expected.std_errors)
    np.testing.assert_allclose([i["ci_low"] for i in body["items"]], expected.ci_low)
    np.testing.assert_allclose([i["ci_high"] for i in body["items"]], expected.ci_high)
    narrower = client.get("/v1/campaigns/colors/estimate?confidence=0.5", headers=ADMIN).get_json()
    assert narrower["items"][0]["ci_high"] < body["items"][0]["ci_high"]
    for bad in ("0", "1", "abc", "nan"):
        assert_problem(
            client.get(f"/v1/campaigns/colors/estimate?confidence={bad}", headers=ADMIN),
            400,
            "malformed-request",
        )


def test_estimate_below_min_batch_size_is_422(
    client: FlaskClient, campaign: dict[str, Any]
) -> None:
    upload(client, campaign["config_id"], [{"id": new_id(), "payload": 1} for _ in range(9)])
    problem = assert_problem(
        client.get("/v1/campaigns/colors/estimate", headers=ADMIN), 422, "unprocessable"
    )
    assert problem["n"] == 9 and "min_batch_size 10" in problem["detail"]


def test_export_streams_ndjson_paged_by_cursor(
    client: FlaskClient, campaign: dict[str, Any]
) -> None:
    sent = [{"id": new_id(), "payload": i % 5} for i in range(23)]
    upload(client, campaign["config_id"], sent)
    received: list[dict[str, Any]] = []
    url = "/v1/campaigns/colors/reports?limit=10"
    pages = 0
    while True:
        response = client.get(url, headers=ADMIN)
        assert response.status_code == 200
        assert response.mimetype == "application/x-ndjson"
        received += [json.loads(line) for line in response.data.decode().splitlines()]
        pages += 1
        if "Link" not in response.headers:
            break
        assert response.headers["Link"].endswith('; rel="next"')
        url = response.headers["Link"][1 : response.headers["Link"].index(">")]
    assert pages == 3
    assert received == sent
    cursor = response.headers["Ldp-Next-Cursor"]
    later = [{"id": new_id(), "payload": 0}]
    upload(client, campaign["config_id"], later)
    response = client.get(f"/v1/campaigns/colors/reports?after={cursor}", headers=ADMIN)
    assert [json.loads(line) for line in response.data.decode().splitlines()] == later


@pytest.mark.parametrize("query", ["after=-1", "after=x", "limit=0", "limit=100001", "after=1e3"])
def test_export_refuses_bad_cursor_or_limit(
    client: FlaskClient, campaign: dict[str, Any], query: str
) -> None:
    response = client.get(f"/v1/campaigns/colors/reports?{query}", headers=ADMIN)
    assert_problem(response, 400, "malformed-request")


# ---- operations --------------------------------------------------------------------------------


def test_health_readiness_and_metrics(client: FlaskClient, campaign: dict[str, Any]) -> None:
    assert client.get("/healthz").get_json() == {"status": "ok"}
    assert client.get("/readyz").get_json() == {"status": "ready"}
    a = new_id()
    upload(
        client,
        campaign["config_id"],
        [
            {"id": a, "payload": 1},
            {"id": a, "payload": 1},
            {"id": "bad", "payload": 1},
            {"id": new_id(), "payload": 9},
        ],
    )
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    text = response.data.decode()
    assert "# TYPE ldp_reports_accepted_total counter" in text
    assert 'ldp_reports_accepted_total{campaign="colors"} 1' in text
    assert 'ldp_reports_duplicate_total{campaign="colors"} 1' in text
    assert 'ldp_reports_rejected_total{campaign="colors",reason="invalid_id"} 1' in text
    assert 'ldp_reports_rejected_total{campaign="colors",reason="invalid_payload"} 1' in text


# ---- numeric campaigns and mechanisms the collector cannot summarise ---------------------------

NUMERIC = {
    "name": "latency",
    "mechanism": {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 10.0},
    "min_batch_size": 10,
}


def test_numeric_campaign_has_no_domain_and_estimates_a_mean(client: FlaskClient) -> None:
    with_domain = dict(NUMERIC, domain=["a"])
    assert_problem(
        client.post("/v1/campaigns", json=with_domain, headers=ADMIN), 400, "malformed-request"
    )
    created = client.post("/v1/campaigns", json=NUMERIC, headers=ADMIN)
    assert created.status_code == 201
    document = created.get_json()
    assert document["domain"] is None
    mechanism = mechanism_from_config(document["mechanism"])
    values = np.linspace(0.0, 10.0, 200)
    reports = mechanism.perturb(values, rng=np.random.default_rng(5))
    payloads = mechanism.to_wire(reports)
    body = upload(
        client,
        document["config_id"],
        [{"id": new_id(), "payload": p} for p in payloads[:49]]
        + [{"id": new_id(), "payload": "not a number"}],
        name="latency",
    ).get_json()
    assert body["accepted"] == 49 and [r["index"] for r in body["rejected"]] == [49]
    for start in range(49, 200, 50):
        chunk = [{"id": new_id(), "payload": p} for p in payloads[start : start + 50]]
        assert upload(client, document["config_id"], chunk, name="latency").status_code == 200
    summary = client.get("/v1/campaigns/latency/estimate", headers=ADMIN).get_json()
    expected = estimate(mechanism, reports)
    assert summary["n"] == 200
    assert summary["mean"] == pytest.approx(expected.mean)
    assert summary["std_error"] == pytest.approx(expected.std_errors)
    assert summary["ci_low"] < summary["mean"] < summary["ci_high"]


def test_a_mechanism_without_a_summary_is_refused_clearly() -> None:
    from collector.estimates import UnsupportedEstimate, summarize
    from collector.storage import StoredCampaign

    class Opaque(Mechanism):  # neither a frequency oracle nor numeric
        name = "opaque"

        def perturb(self, values: Any, *, rng: Any = None) -> Any:
            return np.asarray(values)

        def to_wire(self, reports: Any) -> list[Any]:
            return list(reports)

        def parse_wire(self, payloads: Any) -> Any:
            return np.asarray(payloads), []

        def empty_statistic(self) -> AggregateStatistic:
            return AggregateStatistic(np.zeros(1), 0)

        def aggregate(self, reports: Any) -> AggregateStatistic:
            return AggregateStatistic(np.zeros(1), len(reports))

        @property
        def privacy_epsilon(self) -> float:
            return 1.0

    campaign = StoredCampaign(
        name="x",
        mechanism=Opaque(),
        config={"mechanism": "opaque"},
        domain=None,
        policy=None,
        config_id="0" * 32,
        min_batch_size=1,
        created="2025-01-01T00:00:00Z",
    )
    with pytest.raises(UnsupportedEstimate, match="cannot summarise mechanism 'opaque'"):
        summarize(campaign, AggregateStatistic(np.zeros(1), 5))


def test_the_admin_estimate_is_the_mechanisms_own_summary_after_the_campaigns_head() -> None:
    """The collector asks the mechanism (``Mechanism.summary``): a mechanism it has never heard
    of is summarised by its own method, with the campaign's head and its domain as labels."""
    from collector.estimates import summarize
    from collector.storage import StoredCampaign

    asked: list[tuple[float, Any]] = []

    class Answering(GRR):  # a frequency oracle whose own summary replaces the generic one
        def summary(
            self, statistic: AggregateStatistic, *, confidence: float, labels: Any = None
        ) -> dict[str, Any] | None:
            asked.append((confidence, labels))
            return {"total": int(statistic.n), "labels": list(labels)}

    campaign = StoredCampaign(
        name="x",
        mechanism=Answering(epsilon=1.0, k=2),
        config={"mechanism": "grr", "epsilon": 1.0, "k": 2},
        domain=["a", "b"],
        policy=None,
        config_id="0" * 32,
        min_batch_size=1,
        created="2025-01-01T00:00:00Z",
    )
    document = summarize(campaign, AggregateStatistic(np.array([3.0, 2.0]), 5), confidence=0.9)
    assert document == {
        "campaign": "x",
        "config_id": "0" * 32,
        "mechanism": campaign.config,
        "n": 5,
        "confidence": 0.9,
        "total": 5,
        "labels": ["a", "b"],
    }
    assert asked == [(0.9, ["a", "b"])]


def test_an_upload_reads_its_campaign_once(
    app: Flask, client: FlaskClient, campaign: dict[str, Any]
) -> None:
    """The campaign row brings its id and closing time: one read of the campaigns per upload
    (it was three: the campaign, its id for the closed check, its id again for the insert)."""
    assert client.get("/v1/campaigns/colors").status_code == 200  # this thread's connection
    connection = app.extensions["ldp_storage"].storage.db.conn
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        response = upload(client, campaign["config_id"], [{"id": new_id(), "payload": 1}])
    finally:
        connection.set_trace_callback(None)
    assert response.status_code == 200 and response.get_json()["accepted"] == 1
    reads = [s for s in statements if "FROM campaigns" in s or "FROM closed_campaigns" in s]
    assert len(reads) == 1, reads
