"""The collector on marginal campaigns (CALM tables, Fourier): bad configs refused with the field
and value named, each malformed payload rejected by index with its reason, nothing stored for
them (docs/math/marginals.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.collector.conftest import ADMIN, new_id, stored_rows

FOURIER: dict[str, Any] = {
    "name": "flags",
    "mechanism": {
        "mechanism": "fourier",
        "epsilon": 1.0,
        "attributes": [{"name": "wifi"}, {"name": "dark"}, {"name": "beta"}],
        "order": 2,
    },
}
TABLES: dict[str, Any] = {
    "name": "devices",
    "mechanism": {
        "mechanism": "multi",
        "epsilon": 2.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 5}, {"name": "version", "k": 8}, {"name": "t", "k": 2}],
        "marginals": [["os", "version"], ["version", "t"]],
    },
}


def _create(client: FlaskClient, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/campaigns", json=document, headers=ADMIN)
    assert response.status_code == 201, response.get_json()
    return dict(response.get_json())


def _upload(client: FlaskClient, name: str, config_id: str, payloads: list[Any]) -> Any:
    reports = [{"id": new_id(), "payload": p} for p in payloads]
    response = client.post(
        f"/v1/campaigns/{name}/reports", json={"config_id": config_id, "reports": reports}
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_fourier_payloads_are_checked_one_by_one(client: FlaskClient, db_path: Path) -> None:
    campaign = _create(client, FOURIER)
    body = _upload(
        client, "flags", campaign["config_id"], [[0, 1], [6, 0], [1, 2], [2], "x", [5, 0]]
    )
    assert body["accepted"] == 2
    reasons = {r["index"]: r["reason"] for r in body["rejected"]}
    assert reasons == {
        1: "coefficient must be an integer in [0, 6)",
        2: "bit must be 0 or 1",
        3: "payload must be [coefficient, bit]",
        4: "payload must be [coefficient, bit]",
    }
    assert len(stored_rows(db_path)) == 2


def test_table_payloads_are_checked_one_by_one(client: FlaskClient, db_path: Path) -> None:
    campaign = _create(client, TABLES)
    olh = {"seed": "0000000000000001", "y": 1}
    body = _upload(
        client,
        "devices",
        campaign["config_id"],
        [[0, olh], [1, 3], [2, 0], [0, 3], [1, 16], [0, {"seed": "x", "y": 0}]],
    )
    assert body["accepted"] == 2
    reasons = {r["index"]: r["reason"] for r in body["rejected"]}
    assert set(reasons) == {2, 3, 4, 5}
    assert reasons[2].startswith("attribute must be an integer in [0, 2)")
    assert reasons[4] == "version,t: report must be an integer in [0, 16)"
    assert reasons[3].startswith("os,version: ") and reasons[5].startswith("os,version: ")
    assert len(stored_rows(db_path)) == 2


@pytest.mark.parametrize(
    ("document", "match"),
    [
        (
            {"attributes": [{"name": "os", "k": 1}, {"name": "version", "k": 8}]},
            "attributes[0].k must be",
        ),
        ({"marginals": [["os", "country"]]}, "got 'country'"),
        ({"marginals": {"cover": 3}}, "marginals.cover must be 2"),
        ({"marginals": [["os"]]}, "marginals[0] must list 2 to 8 distinct attributes"),
    ],
)
def test_bad_marginal_configs_are_refused_naming_the_field(
    client: FlaskClient, document: dict[str, Any], match: str
) -> None:
    body = {**TABLES, "mechanism": {**TABLES["mechanism"], **document}}
    if "attributes" in document:
        body["mechanism"].pop("marginals")
    response = client.post("/v1/campaigns", json=body, headers=ADMIN)
    assert response.status_code == 400
    assert response.content_type.startswith("application/problem+json")
    assert match in response.get_json()["detail"]


def test_a_fourier_config_over_a_non_binary_attribute_is_refused(client: FlaskClient) -> None:
    body = {**FOURIER, "mechanism": {**FOURIER["mechanism"], "attributes": [{"name": "a", "k": 3}]}}
    response = client.post("/v1/campaigns", json=body, headers=ADMIN)
    assert response.status_code == 400
    assert "attributes[0].k must be 2" in response.get_json()["detail"]
