"""Devices through the real ``TelemetryClient`` to a real DAP pair (docs/dap.md, "The device"):
secure-aggregation campaigns pinned by the app, checked against its policy, sharded, sealed,
queued and uploaded to the Leader; aggregated by the driver and collected.

The tasks add discrete Laplace noise at epsilon 40 (the largest epsilon the SDK's checks take):
scale t = 2/40 for a histogram, 1/40 for a count. A draw is nonzero with probability
1 - tanh(1/(2t)) < 2 exp(-1/t) = 2 exp(-20) < 4.2e-9, so the 8 draws of a length-4 histogram
(two Aggregators) all vanish but with probability < 3.4e-8, and the collected result is
asserted to be the exact sum.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from client_sdk import PolicyViolation, PrivacyPolicy, TelemetryClient
from client_sdk.dap.campaign import b64encode, dap_campaign_document, dap_object
from client_sdk.dap.messages import Report
from collector.dap.cli import read_key
from tests.collector.dap.conftest import (
    DapPair,
    DapServers,
    add_task,
    start_pair,
)
from tests.collector.dap.test_e2e import refused

LABELS = ["none", "one", "few", "many"]
HISTOGRAM = {"type": "histogram", "length": 4, "chunk_length": 2}
EXACT_DP = "laplace:40"


def campaign_document(pair: DapPair, name: str, **fields: Any) -> dict[str, Any]:
    """The document an app pins for the pair's task (its public part and both keys)."""
    leader, _ = read_key(str(pair.tmp / "leader-key.json"))
    helper, _ = read_key(str(pair.tmp / "helper-key.json"))
    return dap_campaign_document(name, dap_object(pair.spec.to_json(), leader, helper), **fields)


def trusting(pair: DapPair, **fields: Any) -> PrivacyPolicy:
    """A policy trusting the pair's two Aggregators, by URL and key."""
    trusted = {}
    for role, url in (("leader", pair.spec.leader), ("helper", pair.spec.helper)):
        config, _ = read_key(str(pair.tmp / f"{role}-key.json"))
        trusted[url] = b64encode(config.public_key)
    return PrivacyPolicy(trusted_aggregators=trusted, max_central_epsilon=40.0, **fields)


@pytest.fixture(scope="module")
def histogram_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DapPair]:
    pair = start_pair(
        tmp_path_factory.mktemp("histogram"), HISTOGRAM, min_batch_size=10, dp=EXACT_DP
    )
    try:
        yield pair
    finally:
        pair.leader.stop()
        pair.helper.stop()


@pytest.fixture(scope="module")
def count_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DapPair]:
    pair = start_pair(
        tmp_path_factory.mktemp("count"), {"type": "count"}, min_batch_size=10, dp=EXACT_DP
    )
    try:
        yield pair
    finally:
        pair.leader.stop()
        pair.helper.stop()


def test_histogram_devices_through_the_sdk(histogram_pair: DapPair, tmp_path: Path) -> None:
    pair = histogram_pair
    document = campaign_document(pair, "crashes", domain=LABELS)
    fleet = [[LABELS[(3 * d + r) % 4] for r in range(5)] for d in range(6)]  # 6 devices
    truth = [0] * 4
    for device, values in enumerate(fleet):
        with TelemetryClient(
            pair.leader.url,
            state_dir=tmp_path / f"device-{device}",
            campaigns=[document],
            policy=trusting(pair),
        ) as client:
            ids = client.record_many("crashes", values)
            assert len(ids) == 5 and client.pending("crashes") == 5
            stored = _outbox_payloads(tmp_path / f"device-{device}")
            # Only sealed reports are queued: each decodes as a DAP Report under its own id.
            reports = [Report.decode(_b64(p)) for p in stored.values()]
            assert {r.report_metadata.report_id.hex() for r in reports} == set(stored) == set(ids)
            assert client.flush() == 5
            assert client.pending() == 0 and client.status()["last_error"] is None
        for value in values:
            truth[LABELS.index(value)] += 1
    assert pair.drive() == {"aggregated": 30, "rejected": 0, "jobs": 1}
    # The Collector reads the result through the campaign the devices pinned.
    (tmp_path / "campaign.json").write_text(json.dumps(document))
    done = pair.collect(campaign=tmp_path / "campaign.json", process=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["campaign"] == "crashes" and result["report_count"] == 30
    assert result["estimate"] == truth  # noise zero but with probability < 3.4e-8


def test_oue_inside_prio3_through_the_sdk_debiased(dap_servers: DapServers, tmp_path: Path) -> None:
    """Randomized response inside Prio3 (MultihotCountVec): devices randomize with OUE at
    epsilon 2, shard the bit vector, the pair aggregates it (laplace:40, sensitivity
    min(2*4, 4) = 4, scale 0.1: 8 draws all zero but with probability < 8 * 2 exp(-10) < 7.3e-4,
    and a nonzero one moves a count by about 1, far inside the tolerance), and the Collector's
    estimate through the campaign is OUE's debiased counts, each within 5 of its standard errors
    of the truth (a two-sided normal miss of 5.7e-7 per bucket)."""
    vdaf = {"type": "multihotcountvec", "length": 4, "max_weight": 4, "chunk_length": 2}
    pair = add_task(dap_servers, vdaf, min_batch_size=10, dp=EXACT_DP)
    local = {"mechanism": "oue", "epsilon": 2.0, "k": 4}
    document = campaign_document(pair, "crashes-oue", domain=LABELS, local=local)
    weights = [0.5, 0.25, 0.15, 0.1]
    truth = [0] * 4
    for device in range(4):
        values = [LABELS[i] for i in np.random.default_rng(40 + device).choice(4, 100, p=weights)]
        with TelemetryClient(
            pair.leader.url,
            state_dir=tmp_path / f"device-{device}",
            campaigns=[document],
            policy=trusting(pair, max_epsilon=2.0, allowed_mechanisms=frozenset({"oue"})),
            rng=np.random.default_rng(device),
        ) as client:
            assert len(client.record_many("crashes-oue", values)) == 100
            assert client.flush() == 100
        for value in values:
            truth[LABELS.index(value)] += 1
    assert pair.drive() == {"aggregated": 400, "rejected": 0, "jobs": 1}
    (tmp_path / "campaign.json").write_text(json.dumps(document))
    done = pair.collect(campaign=tmp_path / "campaign.json", process=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["campaign"] == "crashes-oue" and result["report_count"] == 400
    assert result["local"] == local and result["local_epsilon"] == 2.0
    # the collected support counts are OUE's (a true bit kept w.p. 1/2, a zero set w.p.
    # 1/(e^2 + 1)), not the truth: the first bucket's 200 collect about 100 + 200/8.4
    assert result["collected"][0] < truth[0] - 50
    for estimate, error, true in zip(result["estimate"], result["std_errors"], truth, strict=True):
        assert 10 < error < 40  # OUE at epsilon 2, n = 400: about 4 * 400 e^2 / (e^2 - 1)^2
        assert abs(estimate - true) <= 5 * error


def test_retried_flush_counted_once_and_collected_batch_dropped(
    count_pair: DapPair, tmp_path: Path
) -> None:
    pair = count_pair
    document = campaign_document(pair, "opted-in")
    session = LosesFirstAnswer()
    values = [i % 3 == 0 for i in range(12)]
    with TelemetryClient(
        pair.leader.url,
        state_dir=tmp_path / "device",
        campaigns=[document],
        policy=trusting(pair),
        session=session,
    ) as client:
        client.record_many("opted-in", values)
        assert client.flush() == 0  # the Leader stored them; its answer was lost
        assert client.pending() == 12 and client.status()["last_error"]["status"] is None
        assert client.flush(force=True) == 12  # the retry: refused as replays, i.e. delivered
        assert client.pending() == 0 and session.lost == 1
        assert refused(pair.leader.url, pair.spec.task_id_text) == {"report_replayed": 12}
        assert pair.drive()["aggregated"] == 12  # each report counted once
        done = pair.collect()
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["estimate"] == 4
        # Reports made now fall into the collected interval: the Leader refuses them for good,
        # the client drops and counts them (they can never be delivered).
        client.record_many("opted-in", [True, False])
        assert client.flush(force=True) == 0
        assert client.pending() == 0
        assert client.status()["dropped"] == {"opted-in": {"dap:batch_collected": 2}}


def test_untrusted_aggregator_key_refused_before_anything_is_sharded(
    count_pair: DapPair, tmp_path: Path
) -> None:
    pair = count_pair
    document = campaign_document(pair, "opted-out")
    policy = trusting(pair)
    wrong = dict(policy.trusted_aggregators)
    wrong[pair.spec.helper] = b64encode(bytes(32))  # the app trusts another key for the Helper
    with pytest.raises(PolicyViolation, match="trusted_aggregators") as refusal:
        TelemetryClient(
            pair.leader.url,
            state_dir=tmp_path / "pinned",
            campaigns=[document],
            policy=PrivacyPolicy(trusted_aggregators=wrong, max_central_epsilon=40.0),
        )
    assert "helper" in str(refusal.value)
    # Served rather than pinned: refused at record, nothing queued, nothing uploaded.
    served = FixedDocument(document)
    with TelemetryClient(
        pair.leader.url,
        state_dir=tmp_path / "served",
        policy=PrivacyPolicy(trusted_aggregators=wrong, max_central_epsilon=40.0),
        session=served,
    ) as client:
        with pytest.raises(PolicyViolation, match="trusted_aggregators"):
            client.record("opted-out", True)
        assert client.pending() == 0
    assert served.posts == 0


class LosesFirstAnswer(requests.Session):
    """A session whose first upload reaches the Leader but whose answer is lost."""

    lost = 0

    def post(self, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        response = super().post(url, *args, **kwargs)
        if not self.lost:
            self.lost += 1
            raise requests.ConnectionError("the answer was lost")
        return response


class FixedDocument(requests.Session):
    """Serves one campaign document at every GET (a server the device does not trust)."""

    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__()
        self.document, self.posts = document, 0

    def get(self, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        response = requests.Response()
        response.status_code = 200
        response.raw = io.BytesIO(json.dumps(self.document).encode())
        response.headers["Content-Type"] = "application/json"
        return response

    def post(self, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        self.posts += 1
        return super().post(url, *args, **kwargs)


def _outbox_payloads(state_dir: Path) -> dict[str, str]:
    import sqlite3

    with sqlite3.connect(state_dir / "outbox.sqlite3") as conn:
        return {
            rid: json.loads(p) for rid, p in conn.execute("SELECT report_id, payload FROM outbox")
        }


def _b64(text: str) -> bytes:
    from client_sdk.dap.campaign import b64decode

    return b64decode(text, "payload")
