"""The device trusts no one: a collector cannot lower the app's privacy policy, a changed
campaign is noticed, and losing or altering a file never grants more budget.

Each test reproduces a finding of the hardening issue: a real collector process (or a hostile
test server that serves whatever campaign documents it likes, with valid config ids) and real
SDK processes where a crash matters.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flask
import numpy as np
import pytest
from werkzeug.serving import make_server

from client_sdk import TelemetryClient
from client_sdk.budget import LEDGER_FILE, BudgetExceededError
from client_sdk.client import (
    Campaign,
    CampaignChangedError,
    CampaignClosedError,
    CampaignVerificationError,
    memo_scope,
)
from client_sdk.ledger_mac_chain import HEAD_FILE
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.outbox import OUTBOX_FILE, OutboxError
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from client_sdk.protocol import campaign_config_id, problem_type
from client_sdk.state import StateDirLockedError
from tests.security.conftest import StartCollector

DAY = 86_400
LABELS = ["red", "green", "blue", "other"]
MEMO = {"epsilon_permanent": 2.0}
BUDGET = {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": DAY}


def document(name: str, mechanism: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A campaign document with a correct config id, as any collector could serve it."""
    domain = fields.get("domain", LABELS if "k" in mechanism else None)
    policy = fields.get("policy")
    min_batch_size = fields.get("min_batch_size", 1)
    return {
        "name": name,
        "mechanism": mechanism_from_config(mechanism).to_config(),
        "domain": domain,
        "policy": policy,
        "min_batch_size": min_batch_size,
        "config_id": campaign_config_id(
            mechanism=mechanism_from_config(mechanism).to_config(),
            domain=domain,
            policy=policy,
            min_batch_size=min_batch_size,
        ),
    }


class HostileCollector:
    """Serves the campaign documents a test sets, and answers uploads as told."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.raw: dict[str, bytes] = {}
        self.upload_status = 200
        self.retry_after: str | None = None
        self.uploads = 0
        app = flask.Flask("hostile")

        @app.get("/v1/campaigns/<name>")
        def campaign(name: str) -> Any:
            if name in self.raw:
                return flask.Response(self.raw[name], mimetype="application/json")
            return flask.jsonify(self.documents[name])

        @app.post("/v1/campaigns/<name>/reports")
        def reports(name: str) -> Any:
            self.uploads += 1
            body = flask.request.get_json()
            if self.upload_status == 410:
                problem = {"type": problem_type("campaign-closed"), "status": 410}
                return flask.Response(
                    json.dumps(problem), status=410, mimetype="application/problem+json"
                )
            if self.upload_status != 200:
                headers = {"Retry-After": self.retry_after} if self.retry_after else {}
                return flask.Response("{}", status=self.upload_status, headers=headers)
            return flask.jsonify({"accepted": len(body["reports"]), "duplicate": 0, "rejected": []})

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join()


@pytest.fixture
def hostile() -> Iterator[HostileCollector]:
    server = HostileCollector()
    try:
        yield server
    finally:
        server.stop()


# ---- 1. the app sets the floor ------------------------------------------------------------------


@pytest.mark.parametrize(
    "mechanism",
    [
        {"mechanism": "grr", "epsilon": 10.0, "k": 4},
        {"mechanism": "laplace", "epsilon": 30.0, "lower": 0.0, "upper": 1000.0},
    ],
)
def test_a_served_campaign_weaker_than_the_policy_sends_nothing(
    start_collector: StartCollector, tmp_path: Path, mechanism: dict[str, Any]
) -> None:
    """Today's finding: eps = 50 sent 200 of 200 values truthfully, laplace at eps = 1e9 sent
    123.456789 as 123.45695. Both are now refused when the config is built (eps > 40); below
    that, the collector accepts a campaign the app's policy forbids, and the device refuses it."""
    collector = start_collector()
    body = document("weak", mechanism)
    collector.create_campaign({k: v for k, v in body.items() if k != "config_id"})
    value = LABELS[1] if "k" in mechanism else 123.456789
    with TelemetryClient(collector.url, state_dir=tmp_path / "device") as client:
        with pytest.raises(PolicyViolation) as caught:
            client.record("weak", value)
        assert caught.value.field == "max_epsilon"
        assert caught.value.policy_value == 4.0
        assert client.pending() == 0
        assert any("refused by the app's policy" in (e.event or "") for e in client.privacy_log())
        # An app that allows it says so in code.
        generous = PrivacyPolicy(max_epsilon=40.0)
    with TelemetryClient(collector.url, state_dir=tmp_path / "d2", policy=generous) as client:
        client.record("weak", value)
        assert client.pending() == 1


def test_a_memoized_campaign_with_a_deterministic_pseudonym_needs_the_apps_consent(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    """Memoized OLH sends the permanent report's hash seed with every report of a value (a
    pseudonym of device, campaign and value; docs/math/memoization.md): refused, nothing
    randomized, unless the app's policy sets allow_pseudonymous_memoization. L-GRR is not."""
    olh = {"mechanism": "olh", "epsilon": 1.0, "k": 4, "longitudinal": {"epsilon_permanent": 2.0}}
    grr = {**olh, "mechanism": "grr"}
    hostile.documents["seeded"] = document("seeded", olh)
    hostile.documents["plain"] = document("plain", grr)
    with TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client:
        with pytest.raises(PolicyViolation) as caught:
            client.record("seeded", LABELS[1])
        assert caught.value.field == "allow_pseudonymous_memoization"
        assert client.pending() == 0
        client.record("plain", LABELS[1])
        assert client.pending() == 1
    consent = PrivacyPolicy(allow_pseudonymous_memoization=True)
    with TelemetryClient(hostile.url, state_dir=tmp_path / "d2", policy=consent) as client:
        client.record("seeded", LABELS[1])
        client.record("seeded", LABELS[1])
        assert client.pending() == 2


def test_the_app_budget_caps_the_campaign_budget(
    start_collector: StartCollector, tmp_path: Path
) -> None:
    """Today's finding: a campaign's policy overrode default_policy (200 reports instead of 4)."""
    collector = start_collector()
    generous = {"epsilon_per_report": 1.0, "reports_per_period": 200, "period_seconds": DAY}
    collector.create_campaign(
        {
            "name": "c",
            "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 4},
            "domain": LABELS,
            "policy": generous,
            "min_batch_size": 1,
        }
    )
    with TelemetryClient(collector.url, state_dir=tmp_path / "d", default_policy=BUDGET) as client:
        for _ in range(4):
            client.record("c", "red")
        with pytest.raises(BudgetExceededError):
            client.record("c", "red")
        assert client.pending() == 4
        assert client.budget_status("c").charges_per_period == 4


# ---- 2. a changed campaign is noticed -----------------------------------------------------------


def test_a_campaign_changed_mid_period_is_refused_until_the_app_accepts_it(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    """Today's finding: eps 1 -> 50 mid-period was accepted and 100 values went out truthfully.
    (50 is refused by the policy anyway; eps 1 -> 3 shows the change is refused as such.)"""
    hostile.documents["c"] = document("c", {"mechanism": "grr", "epsilon": 1.0, "k": 4})
    with TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client:
        client.record("c", "red")
        assert client.flush() == 1
        hostile.documents["c"] = document("c", {"mechanism": "grr", "epsilon": 3.0, "k": 4})
        client.record("c", "red")
        hostile.upload_status = 409  # not the stale-config type: plain refusal
        assert client.flush() == 0  # never raised into the app: reported in status()
        assert client.status()["last_error"]["status"] == 409
        hostile.upload_status = 200
        # A refresh (as after a stale-config answer) sees the change and refuses it.
        with pytest.raises(CampaignChangedError):
            client.campaign("c", refresh=True)
        with pytest.raises(CampaignChangedError):
            client.campaign("c")
        assert client.record("c", "red") is None  # dropped and counted, not randomized
        assert client.status()["dropped"] == {"c": {"campaign-changed": 1}}
        events = [e.event for e in client.privacy_log("c") if e.event]
        assert any("campaign changed" in e for e in events)
        accepted = client.accept_campaign_change("c")
        assert isinstance(accepted, Campaign)
        assert accepted.mechanism.privacy_epsilon == 3.0
        client.record("c", "red")


def test_memoization_is_keyed_by_what_determines_the_permanent_response() -> None:
    """A cosmetic change (min_batch_size, the budget) keeps the permanent responses, so it
    cannot buy fresh ones; another campaign name or other parameters get their own."""
    config = {
        "mechanism": "grr",
        "epsilon": 1.0,
        "k": 4,
        "longitudinal": {"epsilon_permanent": 2.0},
    }
    mechanism = mechanism_from_config(config)
    same = mechanism_from_config(dict(config))
    stronger = mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": 3.0}})
    assert memo_scope("c", mechanism) == memo_scope("c", same)
    assert memo_scope("c", mechanism) != memo_scope("other", mechanism)
    assert memo_scope("c", mechanism) != memo_scope("c", stronger)


def test_a_cosmetic_change_spends_no_new_permanent_response(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    config = {
        "mechanism": "grr",
        "epsilon": 1.0,
        "k": 4,
        "longitudinal": {"epsilon_permanent": 2.0},
    }
    budget = {"epsilon_per_report": 2.0, "reports_per_period": 10, "period_seconds": DAY}
    hostile.documents["m"] = document("m", config, policy=budget, min_batch_size=1)
    with TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client:
        client.record("m", "blue")
        hostile.documents["m"] = document("m", config, policy=budget, min_batch_size=500)
        client.accept_campaign_change("m")
        client.record("m", "blue")
        charged = [e.epsilon_charged for e in client.privacy_log("m") if e.event is None]
    assert charged == [2.0, 0.0]  # the second report of the value is a memoized repeat


# ---- 3. the budget cannot be reset by losing a file ---------------------------------------------


def _budgeted(hostile: HostileCollector) -> None:
    hostile.documents["c"] = document(
        "c", {"mechanism": "grr", "epsilon": 1.0, "k": 4}, policy=BUDGET
    )


def _spend(hostile: HostileCollector, state: Path, reports: int = 4) -> None:
    with TelemetryClient(hostile.url, state_dir=state) as client:
        for _ in range(reports):
            client.record("c", "red")
        with pytest.raises(BudgetExceededError):
            client.record("c", "red")


def _refuses_for_the_period(hostile: HostileCollector, state: Path) -> str:
    with TelemetryClient(hostile.url, state_dir=state) as client:
        assert client.ledger_damage is not None
        queued = client.pending()
        with pytest.raises(BudgetExceededError) as caught:
            client.record("c", "green")
        assert "damaged" in str(caught.value)
        renews = caught.value.renews_at
        assert renews is not None and renews == (time.time() // DAY + 1) * DAY
        assert client.pending() == queued
        return client.ledger_damage


def _delete(state: Path) -> None:
    for name in (LEDGER_FILE, f"{LEDGER_FILE}-wal", f"{LEDGER_FILE}-shm"):
        (state / name).unlink(missing_ok=True)


def _truncate(state: Path) -> None:
    (state / LEDGER_FILE).write_bytes(b"")


def _delete_rows(state: Path) -> None:
    connection = sqlite3.connect(state / LEDGER_FILE)
    with connection:
        connection.execute("DELETE FROM spends")
    connection.close()


def _delete_last_row(state: Path) -> None:
    connection = sqlite3.connect(state / LEDGER_FILE)
    with connection:
        connection.execute("DELETE FROM spends WHERE id = (SELECT max(id) FROM spends)")
    connection.close()


def _restore_older_copy(state: Path) -> None:
    """Put back the ledger as it was before any spend (a backup, or a lost WAL's effect)."""
    older = state.parent / "older"
    for name in (LEDGER_FILE, f"{LEDGER_FILE}-wal", f"{LEDGER_FILE}-shm"):
        source = older / name
        if source.exists():
            (state / name).write_bytes(source.read_bytes())
        else:
            (state / name).unlink(missing_ok=True)


def _delete_head(state: Path) -> None:
    (state / HEAD_FILE).unlink()


@pytest.mark.parametrize(
    "tamper",
    [_delete, _truncate, _delete_rows, _delete_last_row, _restore_older_copy, _delete_head],
)
def test_losing_or_altering_the_ledger_grants_no_budget(
    hostile: HostileCollector, tmp_path: Path, tamper: Any
) -> None:
    _budgeted(hostile)
    state = tmp_path / "device"
    with TelemetryClient(hostile.url, state_dir=state) as client:
        client.campaign("c")
    older = tmp_path / "older"
    older.mkdir()
    for name in (LEDGER_FILE, f"{LEDGER_FILE}-wal"):
        if (state / name).exists():
            (older / name).write_bytes((state / name).read_bytes())
    _spend(hostile, state)
    tamper(state)
    reason = _refuses_for_the_period(hostile, state)
    assert reason
    # Deleting the new ledger again does not end the lock-out either.
    _delete(state)
    _refuses_for_the_period(hostile, state)


def test_a_lost_write_ahead_log_after_a_crash_grants_no_budget(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    """An SDK process killed after spending leaves its spends in the ledger's WAL; losing that
    file must not give the budget back."""
    _budgeted(hostile)
    state = tmp_path / "device"
    script = textwrap.dedent(
        f"""
        import os, signal
        from client_sdk import TelemetryClient
        client = TelemetryClient({hostile.url!r}, state_dir={str(state)!r})
        for _ in range(4):
            client.record("c", "red")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    process = subprocess.run([sys.executable, "-c", script], timeout=120, check=False)
    assert process.returncode == -signal.SIGKILL
    wal = state / f"{LEDGER_FILE}-wal"
    assert wal.exists() and wal.stat().st_size > 0
    wal.unlink()
    (state / f"{LEDGER_FILE}-shm").unlink(missing_ok=True)
    with TelemetryClient(hostile.url, state_dir=state) as client:
        assert client.ledger_damage is not None
        with pytest.raises(BudgetExceededError):
            client.record("c", "green")


def test_a_new_device_starts_clean(hostile: HostileCollector, tmp_path: Path) -> None:
    _budgeted(hostile)
    with TelemetryClient(hostile.url, state_dir=tmp_path / "new") as client:
        assert client.ledger_damage is None
        client.record("c", "red")


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 50])
def test_an_empty_or_unreadable_outbox_is_an_error(
    hostile: HostileCollector, tmp_path: Path, content: bytes
) -> None:
    _budgeted(hostile)
    state = tmp_path / "device"
    with TelemetryClient(hostile.url, state_dir=state) as client:
        client.record("c", "red")
    (state / OUTBOX_FILE).write_bytes(content)
    for name in (f"{OUTBOX_FILE}-wal", f"{OUTBOX_FILE}-shm"):
        (state / name).unlink(missing_ok=True)
    with pytest.raises(OutboxError):
        TelemetryClient(hostile.url, state_dir=state)


# ---- 4. one process per state_dir ---------------------------------------------------------------


def test_a_second_client_on_a_state_dir_is_refused_in_another_process(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    """Today's finding: three processes sharing a state_dir lost 10 of 1,200 reports."""
    _budgeted(hostile)
    state = tmp_path / "device"
    ready = tmp_path / "ready"
    holder = textwrap.dedent(
        f"""
        import pathlib, time
        from client_sdk import TelemetryClient
        client = TelemetryClient({hostile.url!r}, state_dir={str(state)!r})
        pathlib.Path({str(ready)!r}).write_text("ok")
        time.sleep(60)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", holder])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        with pytest.raises(StateDirLockedError, match="in use"):
            TelemetryClient(hostile.url, state_dir=state)
    finally:
        process.kill()
        process.wait()
    with TelemetryClient(hostile.url, state_dir=state) as client:  # the lock died with it
        client.record("c", "red")


def test_outbox_sequence_numbers_are_never_reused(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    hostile.documents["c"] = document("c", {"mechanism": "grr", "epsilon": 1.0, "k": 4})
    state = tmp_path / "device"
    with TelemetryClient(hostile.url, state_dir=state) as client:
        client.record_many("c", ["red", "blue"])
        before = _outbox_seqs(state)
        assert client.flush() == 2
        client.record("c", "red")
        after = _outbox_seqs(state)
    assert min(after) > max(before)


def _outbox_seqs(state: Path) -> list[int]:
    connection = sqlite3.connect(state / OUTBOX_FILE)
    try:
        return [row[0] for row in connection.execute("SELECT seq FROM outbox")]
    finally:
        connection.close()


# ---- 6. hygiene ---------------------------------------------------------------------------------


def test_state_files_are_private(hostile: HostileCollector, tmp_path: Path) -> None:
    hostile.documents["m"] = document(
        "m",
        {"mechanism": "grr", "epsilon": 1.0, "k": 4, "longitudinal": {"epsilon_permanent": 2.0}},
    )
    state = tmp_path / "device"
    old_umask = os.umask(0o022)
    try:
        with TelemetryClient(hostile.url, state_dir=state) as client:
            client.record("m", "red")
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir()}
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert modes and all(mode == 0o600 for mode in modes.values()), modes


def test_plain_http_only_to_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="allow_insecure_http"):
        TelemetryClient("http://collector.example", state_dir=tmp_path / "d")
    TelemetryClient("https://collector.example", state_dir=tmp_path / "e").close()
    TelemetryClient(
        "http://collector.example", state_dir=tmp_path / "f", allow_insecure_http=True
    ).close()


def test_a_huge_campaign_document_is_refused_unread(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    """Today's finding: a 47 MB document cost 758 MiB on the device."""
    hostile.raw["big"] = b'{"name": "big", "domain": [' + b'"x",' * 2_000_000 + b'"y"]}'
    with (
        TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client,
        pytest.raises(CampaignVerificationError, match="larger than"),
    ):
        client.campaign("big")


def test_flush_has_a_total_deadline(hostile: HostileCollector, tmp_path: Path) -> None:
    """Today's finding: more than 40 s blocked on Retry-After."""
    hostile.documents["c"] = document("c", {"mechanism": "grr", "epsilon": 1.0, "k": 4})
    with TelemetryClient(
        hostile.url, state_dir=tmp_path / "d", flush_deadline=2.0, batch_size=1
    ) as client:
        client.record_many("c", ["red"] * 3)
        hostile.upload_status, hostile.retry_after = 503, "30"
        started = time.monotonic()
        assert client.flush() == 0
        assert time.monotonic() - started < 10
        assert client.status()["next_attempt"] >= time.time() + 25  # Retry-After kept
        assert client.pending() == 3


def test_epsilon_where_the_arithmetic_breaks_is_refused() -> None:
    """Today's finding: eps >= ~709.8 overflowed exp in grr.py and the estimate answered 500."""
    for epsilon in (709.8, 1e6, float("inf")):
        with pytest.raises(ValueError, match="epsilon"):
            mechanism_from_config({"mechanism": "grr", "epsilon": epsilon, "k": 4})


def test_unknown_labels_are_not_echoed(hostile: HostileCollector, tmp_path: Path) -> None:
    hostile.documents["c"] = document("c", {"mechanism": "grr", "epsilon": 1.0, "k": 4})
    secret_value = "user@example.com"
    with (
        TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client,
        pytest.raises(ValueError) as caught,
    ):
        client.record("c", secret_value)
    assert secret_value not in str(caught.value)
    assert json.dumps(secret_value) not in str(caught.value)
    assert np.isfinite(len(str(caught.value)))


def test_a_device_keeps_one_discovery_level_per_campaign(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    """PEM's level comes from the device's keyed source: the same in every report of one
    campaign (so reports cannot be steered level by level by the values), whatever the value."""
    pem = {"mechanism": "pem", "epsilon": 2.0, "max_length": 4}
    hostile.documents["words"] = document("words", pem, domain=None)
    levels = set()
    with TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client:
        client.record_many("words", ["ab", "cd", "xyz", "", "abcd"] * 4)
        # Too long: queued as the reserved symbol at the device's level (issue 21, item 14),
        # counted in the status, the value kept nowhere.
        client.record("words", "much too long")
        assert client.status()["reserved_values"] == {"words": 1}
        assert client.pending("words") == 21
        files = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
        assert files and b"much too long" not in b"".join(files)
        connection = sqlite3.connect(tmp_path / "d" / OUTBOX_FILE)
        try:
            for (payload,) in connection.execute("SELECT payload FROM outbox"):
                levels.add(json.loads(payload)["level"])
        finally:
            connection.close()
    assert len(levels) == 1


def test_a_closed_campaign_drops_its_queue_and_records_nothing_more(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    hostile.documents["c"] = document("c", {"mechanism": "grr", "epsilon": 1.0, "k": 4})
    with TelemetryClient(hostile.url, state_dir=tmp_path / "d") as client:
        client.record_many("c", ["red", "blue"])
        hostile.upload_status = 410
        assert client.flush() == 0
        assert client.pending() == 0
        assert any("closed" in (e.event or "") for e in client.privacy_log("c"))
        with pytest.raises(CampaignClosedError):
            client.campaign("c")
        assert client.record("c", "red") is None
        assert client.status()["dropped"] == {"c": {"campaign-closed": 3}}  # 2 queued, 1 new
        assert client.status()["ended_campaigns"] == {"c": "campaign-closed"}
