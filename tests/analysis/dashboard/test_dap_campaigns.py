"""A secure-aggregation campaign stored by the collector (docs/collector.md, "Secure-aggregation
campaigns") is listed by the dashboard with its status and a note, without n or an estimate, and
its page and JSON say where its result is instead of failing."""

from __future__ import annotations

from flask.testing import FlaskClient

from collector.storage import Storage
from tests.analysis.dashboard.conftest import sign_in
from tests.collector.test_dap_campaign_storage import dap_campaign


def test_a_dap_campaign_is_listed_with_its_status_and_no_estimate(
    client: FlaskClient, seeded_db: str
) -> None:
    with Storage(seeded_db) as storage:
        storage.create_campaign(dap_campaign("crashes", description="app crashes"))
        storage.close_campaign("crashes")
    sign_in(client)
    listed = client.get("/api/campaigns")
    assert listed.status_code == 200, listed.get_data(as_text=True)
    campaigns = {c["name"]: c for c in listed.get_json()["campaigns"]}
    assert {"colors", "crashes"} <= set(campaigns)
    crashes = campaigns["crashes"]
    assert crashes["status"] == "closed" and crashes["mechanism"] == "dap:histogram"
    assert crashes["n"] is None and crashes["estimate_status"] is None
    assert "https://leader.example/dap/" in crashes["note"]
    assert "ldp-analyze collect" in crashes["note"]
    assert campaigns["colors"]["estimate_status"] == "released"  # the others as before
    api = client.get("/api/campaigns/crashes")
    assert api.status_code == 409 and "ldp-analyze collect" in api.get_json()["detail"]
    assert client.get("/campaigns/crashes").status_code == 409
