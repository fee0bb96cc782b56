"""Three real processes: a collector and a shuffler (gunicorn, real SQLite, real HTTP) and the
SDK in this process. Devices seal each randomized report to the collector's key; the shuffler
sees only envelopes, forwards at least ``min_batch`` at once with fresh ids in a CSPRNG order;
the collector opens, validates and stores them with the batch size."""

from __future__ import annotations

import base64
import json
import math
import secrets
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.public import PublicKey, SealedBox

from client_sdk.amplification import closed_form_epsilon, numerical_epsilon
from client_sdk.client import TelemetryClient
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.sealing import seal_payloads
from shuffler.process import ShufflerProcess
from tests.e2e.conftest import stored_ids
from tests.shuffler.deployment import Deployment

CENTRAL_EPSILON, DELTA, MIN_BATCH = 1.0, 1e-6, 200
CAMPAIGN: dict[str, Any] = {
    "name": "theme-shuffled",
    "mechanism": {"mechanism": "grr", "k": 4},
    "domain": ["light", "dark", "system", "contrast"],
    "shuffle": {"min_batch": MIN_BATCH, "central_epsilon": CENTRAL_EPSILON, "delta": DELTA},
}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with Deployment(tmp_path_factory.mktemp("shuffle"), campaign=CAMPAIGN) as deployment:
        yield deployment


def _wait_for(predicate: Any, timeout: float = 60.0) -> bool:
    """Poll ``predicate`` every 0.1 s until it holds (``True``) or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def oldest_waiting(shuffler_url: str, name: str) -> float:
    """Seconds the oldest report of campaign ``name`` has waited, by the shuffler's own clock
    (its ``ldp_shuffler_oldest_pending_seconds``); 0 when none waits. A test that shows
    nothing leaves waits on this, not on a sleep that a loaded machine may stretch."""
    prefix = f'ldp_shuffler_oldest_pending_seconds{{campaign="{name}"}} '
    text = requests.get(f"{shuffler_url}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return 0.0


def test_the_campaign_is_calibrated_to_its_central_target(deployment: Deployment) -> None:
    epsilon0 = deployment.document["mechanism"]["epsilon"]
    assert deployment.document["shuffle"] == CAMPAIGN["shuffle"]
    assert {"key_id", "key"} <= deployment.document["public_key"].keys()
    # Meets the target at min_batch, and 1% more local epsilon would not.
    assert numerical_epsilon(epsilon0, MIN_BATCH, DELTA) <= CENTRAL_EPSILON * (1 + 1e-4)
    assert numerical_epsilon(epsilon0 * 1.01, MIN_BATCH, DELTA) > CENTRAL_EPSILON
    assert epsilon0 > 1.5  # amplification buys a larger local epsilon than the central one
    closed, reason = closed_form_epsilon(epsilon0, MIN_BATCH, DELTA)
    assert closed is None or closed >= CENTRAL_EPSILON, reason  # the looser bound


def test_devices_through_the_shuffler_to_the_collector(
    deployment: Deployment, tmp_path: Path
) -> None:
    name = CAMPAIGN["name"]
    labels = CAMPAIGN["domain"]
    with TelemetryClient(
        deployment.collector.url,
        state_dir=tmp_path / "device",
        shuffler_url=deployment.shuffler.url,
    ) as client:
        first = client.record_many(name, [labels[i % 4] for i in range(150)])
        assert client.flush() == 150
        # Below min_batch: nothing forwarded while the shuffler's forwarder goes round (every
        # 0.1 s) for 1.5 s of its clock, and /metrics says how many wait.
        assert _wait_for(lambda: oldest_waiting(deployment.shuffler.url, name) >= 1.5)
        assert stored_ids(deployment.collector.db, name) == []
        metrics = requests.get(f"{deployment.shuffler.url}/metrics", timeout=10).text
        assert f'ldp_shuffler_pending_reports{{campaign="{name}"}} 150' in metrics
        second = client.record_many(name, [labels[i % 4] for i in range(100)])
        assert client.flush() == 100
    assert _wait_for(lambda: len(stored_ids(deployment.collector.db, name)) == 250)
    stored = stored_ids(deployment.collector.db, name)
    device_ids = set(first) | set(second)
    assert len(set(stored)) == 250 and not set(stored) & device_ids  # fresh ids
    conn = sqlite3.connect(deployment.collector.db)
    sizes = [row[0] for row in conn.execute("SELECT size FROM batches")]
    conn.close()
    assert sizes == [250]
    # The shuffler keeps neither a device id nor a plaintext payload, in its database or logs.
    assert _wait_for(lambda: "ldp_shuffler_in_flight_reports 0" in _metrics(deployment))
    texts = [p.read_bytes() for p in deployment.root.glob("shuffler*")]
    blob = b"".join(texts)
    assert not any(report_id.encode() in blob for report_id in device_ids)
    # (That it holds no plaintext either: test_the_shuffler_keeps_only_ciphertext.)


def seal_for(document: dict[str, Any], payloads: list[Any], **binding: str) -> list[Any]:
    """``payloads`` sealed as a device seals them for the campaign ``document`` (``binding``:
    another ``campaign`` or ``config_id`` to bind instead of the document's)."""
    key = document["public_key"]
    return seal_payloads(
        payloads,
        public_key=key["key"],
        key_id=key["key_id"],
        campaign=binding.get("campaign", document["name"]),
        config_id=binding.get("config_id", document["config_id"]),
        mechanism=mechanism_from_config(document["mechanism"]),
    )


def seal_any(document: dict[str, Any], payload: Any) -> dict[str, str]:
    """Any payload, however long, in a well-bound plaintext: what a hostile device can seal."""
    key = document["public_key"]
    box = SealedBox(PublicKey(base64.urlsafe_b64decode(key["key"] + "=" * (-len(key["key"]) % 4))))
    plaintext = json.dumps(
        {
            "campaign": document["name"],
            "config_id": document["config_id"],
            "nonce": secrets.token_hex(16),
            "payload": payload,
        }
    ).encode()
    return {
        "key_id": key["key_id"],
        "sealed": base64.urlsafe_b64encode(box.encrypt(plaintext)).decode(),
    }


def _upload_sealed(deployment: Deployment, name: str, plaintexts: list[Any], per: int) -> list[str]:
    """Seal ``plaintexts`` (payloads) to the collector's key as a device does and upload them
    to the shuffler in order, ``per`` to an upload; the device report ids."""
    document = requests.get(f"{deployment.collector.url}/v1/campaigns/{name}", timeout=10).json()
    if all(isinstance(p, int) for p in plaintexts):
        envelopes = seal_for(document, plaintexts)
    else:
        envelopes = [seal_any(document, p) for p in plaintexts]
    ids = [secrets.token_hex(16) for _ in plaintexts]
    for start in range(0, len(ids), per):
        body = {
            "config_id": document["config_id"],
            "reports": [
                {"id": i, "payload": e}
                for i, e in zip(
                    ids[start : start + per], envelopes[start : start + per], strict=True
                )
            ],
        }
        answer = requests.post(
            f"{deployment.shuffler.url}/v1/campaigns/{name}/reports", json=body, timeout=30
        )
        assert answer.status_code == 200 and answer.json()["accepted"] == len(body["reports"])
    return ids


def test_the_order_the_collector_stores_is_independent_of_the_arrival_order(
    deployment: Deployment,
) -> None:
    """Reports i = 0 .. n-1 arrive in that order in 20 uploads; the collector stores the batch
    in the order the shuffler forwarded it. Spearman's rho between the two orders: under
    independence rho sqrt(n - 1) is about N(0, 1), so the test fails with probability 6.3e-5
    (|z| > 4) for a uniformly random order; an arrival-ordered batch gives rho = 1, z = 31.6."""
    n = 1000
    campaign = {
        "name": "order",
        "mechanism": {"mechanism": "grr", "k": n},
        "domain": [f"v{i}" for i in range(n)],
        "shuffle": {"min_batch": n, "central_epsilon": CENTRAL_EPSILON, "delta": DELTA},
    }
    deployment.collector.create_campaign(campaign)
    _upload_sealed(deployment, "order", list(range(n)), 50)
    assert _wait_for(lambda: len(stored_ids(deployment.collector.db, "order")) == n)
    conn = sqlite3.connect(deployment.collector.db)
    payloads = [
        json.loads(row[0])
        for row in conn.execute(
            "SELECT r.payload FROM reports r JOIN campaigns c ON c.id = r.campaign_id "
            "WHERE c.name = 'order' ORDER BY r.rowid"
        )
    ]
    conn.close()
    assert sorted(payloads) == list(range(n))
    rho = np.corrcoef(np.array(payloads), np.arange(n))[0, 1]
    assert abs(rho * math.sqrt(n - 1)) < 4.0


def test_the_shuffler_keeps_only_ciphertext(deployment: Deployment) -> None:
    """Distinctive plaintexts (the collector rejects them: not grr payloads) never appear in the
    shuffler's database files or logs, nor do the device's report ids."""
    markers = [f"plaintext-marker-{i:04d}" for i in range(MIN_BATCH)]
    ids = _upload_sealed(deployment, CAMPAIGN["name"], markers, 40)
    assert _wait_for(lambda: "ldp_shuffler_in_flight_reports 0" in _metrics(deployment))
    assert _wait_for(lambda: f'campaign="{CAMPAIGN["name"]}"' not in _metrics(deployment))
    blob = b"".join(p.read_bytes() for p in deployment.root.glob("shuffler*"))
    assert b"plaintext-marker" not in blob
    assert not any(i.encode() in blob or bytes.fromhex(i) in blob for i in ids)


def _metrics(deployment: Deployment) -> str:
    return requests.get(f"{deployment.shuffler.url}/metrics", timeout=10).text


def test_direct_uploads_to_a_shuffled_campaign_are_refused(deployment: Deployment) -> None:
    response = requests.post(
        f"{deployment.collector.url}/v1/campaigns/{CAMPAIGN['name']}/reports",
        json={"config_id": deployment.document["config_id"], "reports": []},
        timeout=10,
    )
    assert response.status_code == 409
    assert response.json()["type"] == "urn:ldp-telemetry:problem:shuffled-campaign"


def test_the_sdk_never_sends_a_shuffled_campaign_to_the_collector(
    deployment: Deployment, tmp_path: Path
) -> None:
    """Without a shuffler_url the sealed report stays queued (the upload fails before any
    request); the same device with one sends it through the shuffler."""
    name = CAMPAIGN["name"]
    with TelemetryClient(deployment.collector.url, state_dir=tmp_path / "device") as client:
        client.record(name, "dark")
        assert client.flush() == 0  # never raised into the app: reported in status()
        assert "give TelemetryClient a shuffler_url" in client.status()["last_error"]["message"]
        assert client.pending() == 1
    with TelemetryClient(
        deployment.collector.url,
        state_dir=tmp_path / "device",
        shuffler_url=deployment.shuffler.url,
    ) as client:
        assert client.flush() == 1 and client.pending() == 0
    assert f'ldp_shuffler_pending_reports{{campaign="{name}"}} 1' in _metrics(deployment)


def test_a_tampered_envelope_is_rejected_alone_and_batches_are_idempotent(
    deployment: Deployment,
) -> None:
    key = deployment.document["public_key"]
    good, bad = seal_for(deployment.document, [2, 1])
    sealed = bytearray(bad["sealed"].encode())
    sealed[40] = ord("A") if sealed[40] != ord("A") else ord("B")
    bad = {**bad, "sealed": sealed.decode()}
    out_of_range = seal_for(deployment.document, [7])[0]
    rest = seal_for(deployment.document, [i % 4 for i in range(197)])
    envelopes = [good, bad, out_of_range, *rest]
    ids = [f"{i:032x}" for i in range(1, MIN_BATCH + 1)]
    body = {
        "batch_id": "ab" * 16,
        "config_id": deployment.document["config_id"],
        "reports": [{"id": i, "payload": p} for i, p in zip(ids, envelopes, strict=True)],
    }
    url = f"{deployment.collector.url}/v1/campaigns/{CAMPAIGN['name']}/batches"
    unauthorized = requests.post(url, json=body, timeout=10)
    assert unauthorized.status_code == 401
    headers = {"Authorization": f"Bearer {deployment.shuffler.token}"}
    small = {**body, "batch_id": "cd" * 16, "reports": body["reports"][: MIN_BATCH - 1]}
    too_small = requests.post(url, json=small, headers=headers, timeout=10)
    assert too_small.status_code == 422 and too_small.json()["min_batch"] == MIN_BATCH
    for credentials, field in (
        ({"per_credential": 0, "uncredentialed": 0}, "credentials.per_credential"),
        ({"per_credential": 1, "uncredentialed": MIN_BATCH + 1}, "credentials.uncredentialed"),
        ({"per_credential": 1}, "credentials has exactly"),
    ):
        malformed = {**body, "batch_id": "ef" * 16, "credentials": credentials}
        refused = requests.post(url, json=malformed, headers=headers, timeout=10)
        assert refused.status_code == 400 and field in refused.json()["detail"]
    answer = requests.post(url, json=body, headers=headers, timeout=10).json()
    assert answer["accepted"] == MIN_BATCH - 2 and not answer["replayed"]
    assert [(r["index"], r["code"]) for r in answer["rejected"]] == [
        (1, "invalid_envelope"),
        (2, "invalid_payload"),
    ]
    again = requests.post(url, json=body, headers=headers, timeout=10).json()
    assert again["replayed"] and again["accepted"] == MIN_BATCH - 2
    # A device may seal anything: deeply nested or non-UTF-8 plaintexts are rejected alone.
    box = SealedBox(PublicKey(base64.urlsafe_b64decode(key["key"] + "=" * (-len(key["key"]) % 4))))
    odd = [b"[" * 60_000, b"\xff\xfe"]
    sealed_odd = [
        {"key_id": key["key_id"], "sealed": base64.urlsafe_b64encode(box.encrypt(p)).decode()}
        for p in odd
    ]
    sealed_odd.append(seal_any(deployment.document, {}))  # well bound, not a grr payload
    fresh = seal_for(deployment.document, [i % 4 for i in range(MIN_BATCH - 3)])
    hostile = {
        **body,
        "batch_id": "ef" * 16,
        "reports": [
            {"id": f"{i + 1000:032x}", "payload": p} for i, p in enumerate(sealed_odd + fresh)
        ],
    }
    answer = requests.post(url, json=hostile, headers=headers, timeout=10)
    assert answer.status_code == 200
    assert [(r["index"], r["code"]) for r in answer.json()["rejected"]] == [
        (0, "invalid_envelope"),
        (1, "invalid_envelope"),
        (2, "invalid_payload"),
    ]
    assert stored_ids(deployment.collector.db, CAMPAIGN["name"]).count(ids[0]) == 1


def _forward_batch(deployment: Deployment, name: str, payloads: list[int]) -> int:
    """Seal ``payloads`` for campaign ``name`` and POST them to the collector as one batch, as
    the shuffler does (its token, a fresh batch id); how many the collector accepted."""
    document = requests.get(f"{deployment.collector.url}/v1/campaigns/{name}", timeout=30).json()
    body = {
        "batch_id": secrets.token_hex(16),
        "config_id": document["config_id"],
        "reports": [
            {"id": secrets.token_hex(16), "payload": e} for e in seal_for(document, payloads)
        ],
    }
    answer = requests.post(
        f"{deployment.collector.url}/v1/campaigns/{name}/batches",
        json=body,
        headers={"Authorization": f"Bearer {deployment.shuffler.token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[:300]
    return int(answer.json()["accepted"])


def test_the_estimate_states_the_central_guarantee_of_the_batches_received(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batches of 250, 198 and 197 valid reports (of 250, 200 and 200: payload 7 is out of
    range, so rejected alone) in a campaign of its own; the smallest one binds."""
    from analysis.cli import main

    name = "estimated"
    created = deployment.collector.create_campaign({**CAMPAIGN, "name": name})
    for valid, size in ((250, 250), (MIN_BATCH - 2, MIN_BATCH), (MIN_BATCH - 3, MIN_BATCH)):
        payloads = [i % 4 for i in range(valid)] + [7] * (size - valid)
        assert _forward_batch(deployment, name, payloads) == valid
    assert (
        main(["estimate", "--db", deployment.collector.db, "--campaign", name, "--format", "json"])
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    central = document["central"]
    epsilon0 = created["mechanism"]["epsilon"]
    assert central["delta"] == DELTA and central["local_epsilon"] == epsilon0
    assert central["batches"] == 3 and central["smallest_batch"] == MIN_BATCH - 3
    assert central["epsilon"] == numerical_epsilon(epsilon0, MIN_BATCH - 3, DELTA)
    # Three reports fewer than the target's min_batch: slightly above the central target.
    assert CENTRAL_EPSILON < central["epsilon"] < CENTRAL_EPSILON * 1.05
    # This shuffler takes uploads without credentials: the estimate says what that leaves.
    assert central["one_report_per_device"].startswith("not enforced")
    assert "not enforced" in central["assumption"]
    assert central["honest_reports"] == MIN_BATCH - 3
    assert central["if_assumption_fails"]["epsilon"] == epsilon0


def test_hostile_input_to_the_shuffler_answers_problems_never_5xx(
    deployment: Deployment,
) -> None:
    plain = {"name": "plain", "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2}}
    plain["domain"] = ["a", "b"]
    deployment.collector.create_campaign(plain)
    base = f"{deployment.shuffler.url}/v1/campaigns"
    config_id = deployment.document["config_id"]
    envelope = {"key_id": "0" * 16, "sealed": "AAAA"}
    cases: list[tuple[str, Any, int]] = [
        (CAMPAIGN["name"], b"not json", 400),
        (CAMPAIGN["name"], [], 400),
        (CAMPAIGN["name"], {"config_id": config_id}, 400),
        (CAMPAIGN["name"], {"config_id": 5, "reports": []}, 400),
        (CAMPAIGN["name"], {"config_id": "x", "reports": []}, 409),
        ("no-such-campaign", {"config_id": config_id, "reports": []}, 404),
        ("plain", {"config_id": config_id, "reports": []}, 409),
        (CAMPAIGN["name"], {"config_id": config_id, "reports": [{"id": "x"}] * 20_000}, 413),
    ]
    for name, body, status in cases:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = requests.post(
            f"{base}/{name}/reports",
            data=data,
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert response.status_code == status, (name, body if len(data) < 200 else "...")
        assert response.headers["Content-Type"] == "application/problem+json"
    reports = [
        {"id": "f" * 32, "payload": envelope},
        {"id": "F" * 32, "payload": envelope},
        {"id": "e" * 32, "payload": {"key_id": "0" * 16}},
        {"id": "d" * 32, "payload": {**envelope, "sealed": "x" * 70_000}},
        {"id": "c" * 32, "payload": envelope, "extra": 1},
        "not an object",
    ]
    answer = requests.post(
        f"{base}/{CAMPAIGN['name']}/reports",
        json={"config_id": config_id, "reports": reports},
        timeout=10,
    ).json()
    assert answer["accepted"] == 1
    assert [r["code"] for r in answer["rejected"]] == [
        "invalid_id",
        "invalid_envelope",
        "invalid_envelope",
        "malformed_report",
        "malformed_report",
    ]
    assert requests.get(f"{deployment.shuffler.url}/nope", timeout=10).status_code == 404
    assert requests.get(f"{deployment.shuffler.url}/readyz", timeout=10).status_code == 200


def test_a_maximum_wait_forwards_bigger_batches_and_never_below_min_batch(
    deployment: Deployment,
) -> None:
    """A second shuffler with ``--max-wait 3``: 250 waiting reports (min_batch 200, max_batch
    10,000) stay until the oldest has waited 3 s, then leave as one batch; 150 more never
    leave, however long they wait."""
    campaign = {**CAMPAIGN, "name": "waiting"}
    deployment.collector.create_campaign(campaign)
    patient = ShufflerProcess(
        deployment.root / "patient.db",
        deployment.collector.url,
        token=deployment.shuffler.token,
        workers=1,
        max_wait=3.0,
        log_dir=deployment.root,
    )
    patient.start()
    try:
        original, deployment.shuffler = deployment.shuffler, patient
        try:
            started = time.monotonic()
            _upload_sealed(deployment, "waiting", [i % 4 for i in range(250)], 50)
            # min_batch waits, but not max_batch: the batch is seen only once the oldest has
            # waited 3 s (seen at or after it left; under load, maybe later, never earlier).
            assert _wait_for(lambda: len(stored_ids(deployment.collector.db, "waiting")) == 250)
            assert time.monotonic() - started >= 3.0
            _upload_sealed(deployment, "waiting", [i % 4 for i in range(150)], 50)
            # Past the maximum wait by 1.5 s of the shuffler's clock: still below min_batch.
            assert _wait_for(lambda: oldest_waiting(patient.url, "waiting") >= 4.5)
            assert len(stored_ids(deployment.collector.db, "waiting")) == 250
            assert 'ldp_shuffler_pending_reports{campaign="waiting"} 150' in _metrics(deployment)
        finally:
            deployment.shuffler = original
    finally:
        patient.stop()
    conn = sqlite3.connect(deployment.collector.db)
    sizes = conn.execute(
        "SELECT b.size FROM batches b JOIN campaigns c ON c.id = b.campaign_id "
        "WHERE c.name = 'waiting'"
    ).fetchall()
    conn.close()
    assert sizes == [(250,)]


ANY_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=40),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
REPORT = st.fixed_dictionaries(
    {
        "id": st.one_of(st.just("a" * 32), st.text(max_size=40), ANY_JSON),
        "payload": st.one_of(
            st.fixed_dictionaries(
                {
                    "key_id": st.one_of(st.just("0" * 16), st.text(max_size=20)),
                    "sealed": st.one_of(
                        st.text(alphabet="AB-_=", min_size=1, max_size=60), st.text(max_size=60)
                    ),
                }
            ),
            ANY_JSON,
        ),
    }
)
BODIES = st.one_of(
    ANY_JSON,
    st.fixed_dictionaries(
        {
            "config_id": st.one_of(st.sampled_from(["current", "stale"]), ANY_JSON),
            "reports": st.one_of(st.lists(st.one_of(REPORT, ANY_JSON), max_size=6), ANY_JSON),
        }
    ),
)


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.one_of(
        st.sampled_from([CAMPAIGN["name"], "plain", "no-such-campaign"]), st.text(max_size=12)
    ),
    body=BODIES,
    media_type=st.sampled_from(
        ["application/json", "text/plain", "application/json; charset=latin-1"]
    ),
)
def test_fuzzed_uploads_to_the_shuffler_never_answer_5xx(
    deployment: Deployment, name: str, body: Any, media_type: str
) -> None:
    """Arbitrary JSON, odd report and envelope shapes, wrong media types and campaign names
    (derandomized: the same 120 requests every run): every answer is below 500, and an error
    is a problem document."""
    if isinstance(body, dict) and body.get("config_id") == "current":
        body = {**body, "config_id": deployment.document["config_id"]}
    quoted = urllib.parse.quote(name, safe="") or "%20"
    response = requests.post(
        f"{deployment.shuffler.url}/v1/campaigns/{quoted}/reports",
        data=json.dumps(body).encode(),
        headers={"Content-Type": media_type},
        timeout=30,
    )
    assert response.status_code < 500, response.text[:300]
    if response.status_code >= 400:
        assert response.headers["Content-Type"] == "application/problem+json"


def test_odd_raw_requests_to_the_shuffler_are_problem_json(deployment: Deployment) -> None:
    """The collector's odd-request catalogue (tests/security/test_errors.py) and a body over the
    16 MiB limit, sent to the shuffler: every answer a 4xx/5xx problem document from gunicorn's
    worker, never an HTML page, and below 500 but for the transfer coding HTTP says to answer
    501; and the shuffler's logs carry no client address."""
    from tests.security.conftest import raw_request
    from tests.security.test_errors import ADDRESS, ODD_REQUESTS, parse_response

    oversized = (
        f"POST /v1/campaigns/{CAMPAIGN['name']}/reports HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/json\r\nContent-Length: {17 * 1024 * 1024}\r\n\r\n"
    ).encode() + b"[" * 1024
    for name, data in {**ODD_REQUESTS, "body over the limit": oversized}.items():
        raw = raw_request(deployment.shuffler.url, data)
        status, headers, body = parse_response(raw)
        # RFC 9112 section 6.1: an unknown transfer coding is answered 501 Not Implemented.
        expected = (501, 502) if name == "unknown transfer coding" else (400, 500)
        assert expected[0] <= status < expected[1], (name, raw[:200])
        assert headers["content-type"] == "application/problem+json", (name, raw[:300])
        if headers.get("content-length"):
            body = body[: int(headers["content-length"])]
        assert json.loads(body)["status"] == status, name
    logs = "".join(p.read_text(errors="replace") for p in deployment.root.glob("shuffler-*.err"))
    assert ADDRESS.search(logs) is None
