"""Hypothesis: malformed requests of every shape get 4xx problem documents, never a 5xx, and
store nothing. Report-level garbage inside a well-formed batch gets 200 with every report
rejected by index, and stores nothing either."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_sdk.protocol import PROBLEM_TYPES, is_report_id
from collector import create_app
from tests.collector.conftest import ADMIN, ADMIN_TOKEN, CAMPAIGN

MAX_BATCH = 20
HYPOTHESIS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
bad_ids = json_values.filter(lambda v: not is_report_id(v)) | st.text(
    alphabet="0123456789abcdefABCDEF", min_size=31, max_size=33
).filter(lambda v: not is_report_id(v))
good_ids = st.binary(min_size=16, max_size=16).map(bytes.hex)
bad_payloads = json_values.filter(
    lambda v: not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 5)
)


class Env:
    def __init__(self, tmp: Path) -> None:
        self.db = tmp / "c.db"
        app = create_app(
            {
                "DB": str(self.db),
                "ADMIN_TOKEN": ADMIN_TOKEN,
                "MAX_BATCH": MAX_BATCH,
                "SYNCHRONOUS": "NORMAL",
            }
        )
        self.client: FlaskClient = app.test_client()
        created = self.client.post("/v1/campaigns", json=CAMPAIGN, headers=ADMIN)
        self.config_id = created.get_json()["config_id"]

    def report_count(self) -> int:
        conn = sqlite3.connect(self.db)
        try:
            return int(conn.execute("SELECT count(*) FROM reports").fetchone()[0])
        finally:
            conn.close()

    def campaign_count(self) -> int:
        return len(self.client.get("/v1/campaigns").get_json()["campaigns"])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield Env(tmp_path_factory.mktemp("malformed"))


def assert_4xx_problem(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.data[:300])
    assert response.mimetype == "application/problem+json"
    body = json.loads(response.data)
    assert body["type"] in PROBLEM_TYPES.values()
    assert body["status"] == response.status_code
    assert body["detail"]


def not_an_upload_body(value: Any) -> bool:
    return not (
        isinstance(value, dict)
        and set(value) == {"config_id", "reports"}
        and isinstance(value["reports"], list)
    )


@HYPOTHESIS
@given(body=json_values.filter(not_an_upload_body))
def test_random_json_bodies_are_400(env: Env, body: Any) -> None:
    before = env.report_count()
    response = env.client.post("/v1/campaigns/colors/reports", json=body)
    assert_4xx_problem(response)
    assert env.report_count() == before


@HYPOTHESIS
@given(
    data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
    content_type=st.sampled_from(
        [
            "application/json",
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/json; charset=utf-16",
            "",
            "multipart/form-data; boundary=x",
        ]
    ),
)
def test_random_bytes_and_content_types_are_4xx(env: Env, data: bytes, content_type: str) -> None:
    try:
        json.loads(data)
        parses = content_type == "application/json"
    except ValueError:
        parses = False
    before = env.report_count()
    response = env.client.post(
        "/v1/campaigns/colors/reports", data=data, headers={"Content-Type": content_type}
    )
    if parses and response.status_code == 200:  # bytes that happen to be a valid empty upload
        return
    assert_4xx_problem(response)
    assert env.report_count() == before


@HYPOTHESIS
@given(
    config_id=json_values,
    reports=st.lists(st.fixed_dictionaries({"id": good_ids, "payload": st.just(1)}), max_size=3),
)
def test_wrong_or_stale_config_ids_are_4xx(env: Env, config_id: Any, reports: Any) -> None:
    before = env.report_count()
    response = env.client.post(
        "/v1/campaigns/colors/reports", json={"config_id": config_id, "reports": reports}
    )
    assert_4xx_problem(response)
    assert response.status_code in (400, 409)
    assert env.report_count() == before


@settings(HYPOTHESIS, max_examples=15)
@given(extra=st.integers(min_value=1, max_value=3 * MAX_BATCH))
def test_huge_batches_are_413(env: Env, extra: int) -> None:
    before = env.report_count()
    reports = [{"id": "0" * 32, "payload": 1}] * (MAX_BATCH + extra)
    response = env.client.post(
        "/v1/campaigns/colors/reports", json={"config_id": env.config_id, "reports": reports}
    )
    assert_4xx_problem(response)
    assert response.status_code == 413
    assert env.report_count() == before


@settings(HYPOTHESIS, max_examples=60)
@given(
    reports=st.lists(
        st.one_of(
            json_values.filter(lambda v: not isinstance(v, dict)),
            st.fixed_dictionaries({"id": bad_ids, "payload": st.just(1)}),
            st.fixed_dictionaries({"id": good_ids, "payload": bad_payloads}),
            st.fixed_dictionaries({"id": good_ids}),
            st.fixed_dictionaries({"id": good_ids, "payload": st.just(1), "x": json_values}),
        ),
        max_size=MAX_BATCH,
    )
)
def test_garbage_reports_are_each_rejected_and_nothing_is_stored(env: Env, reports: Any) -> None:
    before = env.report_count()
    response = env.client.post(
        "/v1/campaigns/colors/reports", json={"config_id": env.config_id, "reports": reports}
    )
    assert response.status_code == 200, response.data[:300]
    body = response.get_json()
    assert body["accepted"] == 0 and body["duplicate"] == 0
    assert [r["index"] for r in body["rejected"]] == list(range(len(reports)))
    assert all(r["code"] and r["reason"] for r in body["rejected"])
    assert env.report_count() == before


@settings(HYPOTHESIS, max_examples=80)
@given(body=json_values)
def test_random_campaign_bodies_are_4xx_and_create_nothing(env: Env, body: Any) -> None:
    before = env.campaign_count()
    response = env.client.post("/v1/campaigns", json=body, headers=ADMIN)
    assert_4xx_problem(response)
    assert env.campaign_count() == before


@HYPOTHESIS
@given(
    path=st.sampled_from(["/v1/campaigns/colors/reports", "/v1/campaigns/colors/estimate"]),
    query=st.dictionaries(
        st.sampled_from(["after", "limit", "confidence"]), st.text(max_size=25), max_size=3
    ),
)
def test_random_admin_queries_never_fail_server_side(env: Env, path: str, query: Any) -> None:
    response = env.client.get(path, query_string=query, headers=ADMIN)
    assert response.status_code < 500, response.data[:300]
    if response.status_code >= 400:
        assert_4xx_problem(response)
