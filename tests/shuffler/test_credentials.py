"""Device credentials against n-1 flooding (issue 21, items 2 and 13), with real processes: a
collector, an ``ldp-shuffler serve --credentials-key`` that takes uploads only from installs
the operator issued a token to, and SDK clients that send theirs.

The attack: one uploader sends ``min_batch - 1`` self-made reports so the next device's report
is alone among known ones. With the quota (one waiting report per credential and campaign), one
credential holds one place in a batch however much it uploads."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from client_sdk.amplification import numerical_epsilon
from client_sdk.client import TelemetryClient
from client_sdk.protocol import problem_type
from shuffler.credentials import (
    InvalidCredential,
    issue_token,
    load_signing_key,
    load_verifier,
    write_signing_key,
)
from tests.e2e.conftest import stored_ids
from tests.shuffler.deployment import Deployment
from tests.shuffler.hostile import HostileCollector
from tests.shuffler.test_e2e import _wait_for, oldest_waiting, seal_for

MIN_BATCH, DELTA = 20, 1e-6
CAMPAIGN = {
    "name": "metered",
    "mechanism": {"mechanism": "grr", "k": 4},
    "domain": ["a", "b", "c", "d"],
    "min_batch_size": MIN_BATCH,
    "shuffle": {"min_batch": MIN_BATCH, "central_epsilon": 1.0, "delta": DELTA},
}


class CredentialedDeployment(Deployment):
    """The deployment with device credentials: the operator's signing key, its public half
    given to the shuffler, and devices holding tokens it issued."""

    def __init__(self, root: Path) -> None:
        self.key = root / "operator.key"
        write_signing_key(self.key)
        super().__init__(
            root,
            campaign=CAMPAIGN,
            interval=0.1,
            min_batch_floor=MIN_BATCH,
            credentials_key=f"{self.key}.pub",
        )

    def token(self) -> str:
        return issue_token(load_signing_key(self.key))

    def device(self, name: str, collector: str | None = None) -> TelemetryClient:
        return TelemetryClient(
            collector or self.collector.url,
            state_dir=self.root / "devices" / name,
            shuffler_url=self.shuffler.url,
            shuffler_token=self.token(),
        )


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CredentialedDeployment]:
    with CredentialedDeployment(tmp_path_factory.mktemp("credentials")) as deployment:
        yield deployment


def _sealed_upload(
    deployment: CredentialedDeployment, n: int, token: str | None
) -> requests.Response:
    """``n`` self-made sealed reports (anyone can seal: the key is public), one upload."""
    envelopes = seal_for(deployment.document, [0] * n)
    body = {
        "config_id": deployment.document["config_id"],
        "reports": [{"id": secrets.token_hex(16), "payload": e} for e in envelopes],
    }
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return requests.post(
        f"{deployment.shuffler.url}/v1/campaigns/metered/reports",
        json=body,
        headers=headers,
        timeout=30,
    )


def _pending(deployment: CredentialedDeployment) -> float | None:
    """The shuffler's ``ldp_shuffler_pending_reports`` of the campaign (``None``: none wait)."""
    text = requests.get(f"{deployment.shuffler.url}/metrics", timeout=10).text
    prefix = 'ldp_shuffler_pending_reports{campaign="metered"} '
    values = [float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    return values[0] if values else None


def test_tokens_verify_only_under_the_operator_key(tmp_path: Path) -> None:
    write_signing_key(tmp_path / "a.key")
    write_signing_key(tmp_path / "b.key")
    verifier = load_verifier(tmp_path / "a.key.pub")
    signing = load_signing_key(tmp_path / "a.key")
    assert (tmp_path / "a.key").stat().st_mode & 0o777 == 0o600
    one, two = issue_token(signing), issue_token(signing)
    assert verifier.verify(one) == verifier.verify(one) != verifier.verify(two)
    forged = issue_token(load_signing_key(tmp_path / "b.key"))
    flipped = one[:-2] + ("A" if one[-2] != "A" else "B") + one[-1]
    for bad in (forged, flipped, "ldp1.", "Bearer x", one + "AAAA", "ldp1." + "A" * 300):
        with pytest.raises(InvalidCredential):
            verifier.verify(bad)
    with pytest.raises(FileExistsError):
        write_signing_key(tmp_path / "a.key")  # never replaced


def test_uploads_without_a_valid_credential_are_refused(deployment: CredentialedDeployment) -> None:
    """401 problem+json, before anything is stored."""
    other = deployment.root / "other.key"
    write_signing_key(other)
    for token in (None, "ldp1.nonsense", issue_token(load_signing_key(other))):
        answer = _sealed_upload(deployment, 1, token)
        assert answer.status_code == 401
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert answer.json()["type"] == problem_type("unauthorized")
    assert _pending(deployment) is None


def test_one_credential_cannot_flood_a_batch_to_isolate_a_device(
    deployment: CredentialedDeployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attacker uploads ``min_batch - 1`` reports under one credential (at once, then one
    by one): one is taken, the rest deferred. The victim's report then waits with one other,
    not 19 known ones, and nothing leaves; 18 more devices fill the batch, which holds one
    report per credential. The estimate says so, and what A adversary credentials cost."""
    attacker = deployment.token()
    first = _sealed_upload(deployment, MIN_BATCH - 1, attacker)
    assert first.status_code == 200
    assert first.json()["accepted"] == 1
    assert first.json()["deferred"] == list(range(1, MIN_BATCH - 1))
    for _ in range(5):
        again = _sealed_upload(deployment, 1, attacker).json()
        assert again["accepted"] == 0 and again["deferred"] == [0]

    with (
        HostileCollector(deployment.collector.url, lambda document: document) as recorder,
        deployment.device("victim", recorder.url) as victim,
    ):
        victim.record_many("metered", ["d", "d"])  # two reports: one waits in the SDK
        assert recorder.authorizations == [None]  # the token goes to the shuffler only
        assert victim.flush() == 1
        assert victim.pending("metered") == 1
        # Below min_batch: 1.5 s more of waiting by the shuffler's clock, nothing forwarded.
        start = oldest_waiting(deployment.shuffler.url, "metered")
        assert _wait_for(lambda: oldest_waiting(deployment.shuffler.url, "metered") >= start + 1.5)
        assert stored_ids(deployment.collector.db, "metered") == []
        assert _pending(deployment) == 2

        for index in range(MIN_BATCH - 2):
            with deployment.device(f"honest-{index}") as device:
                device.record("metered", "abc"[index % 3])
                assert device.flush() == 1
        deadline = time.monotonic() + 60
        while len(stored_ids(deployment.collector.db, "metered")) < MIN_BATCH:
            assert time.monotonic() < deadline, "the batch of 20 never arrived"
            time.sleep(0.1)
        assert len(stored_ids(deployment.collector.db, "metered")) == MIN_BATCH
        assert victim.flush() == 1  # its second report, once the first left in a batch
        assert victim.pending("metered") == 0

    epsilon0 = deployment.document["mechanism"]["epsilon"]
    for adversary, honest in ((0, MIN_BATCH), (1, MIN_BATCH - 1), (MIN_BATCH, 0)):
        central = _estimate(deployment, capsys, adversary)["central"]
        assert central["batches"] == 1 and central["smallest_batch"] == MIN_BATCH
        assert central["honest_reports"] == honest
        assert central["reports_per_device_per_batch"] == 1
        assert central["one_report_per_device"].startswith("enforced")
        assert f"at least {honest} honest reports" in central["assumption"]
        assert central["if_assumption_fails"]["epsilon"] == epsilon0
        expected = numerical_epsilon(epsilon0, honest, DELTA) if honest else epsilon0
        assert central["epsilon"] == pytest.approx(expected, rel=1e-12)
    command = [sys.executable, "-m", "analysis.cli", "estimate", "--db", deployment.collector.db]
    table = subprocess.run(
        [*command, "--campaign", "metered", "--format", "table"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "assuming at least 20 honest reports in every batch" in table
    assert "one report per device per batch: enforced" in table


def _estimate(
    deployment: CredentialedDeployment, capsys: pytest.CaptureFixture[str], adversary: int
) -> dict[str, Any]:
    from analysis.cli import main

    arguments = ["estimate", "--db", deployment.collector.db, "--campaign", "metered"]
    arguments += ["--format", "json", "--adversary-credentials", str(adversary)]
    assert main(arguments) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_the_sdk_takes_only_a_token_that_fits_a_header(tmp_path: Path) -> None:
    for bad in ("two words", "line\nbreak", "", "x" * 257, 5):
        with pytest.raises(ValueError, match="shuffler_token"):
            TelemetryClient(
                "http://127.0.0.1:9",
                state_dir=tmp_path / "device",
                shuffler_url="http://127.0.0.1:9",
                shuffler_token=bad,  # type: ignore[arg-type]
            )


def test_the_cli_makes_a_key_and_issues_tokens(tmp_path: Path) -> None:
    key = tmp_path / "operator.key"
    run = [sys.executable, "-m", "shuffler.cli", "credentials"]
    made = subprocess.run([*run, "keygen", "--key", str(key)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "operator.key.pub").read_text().strip() in made.stdout
    again = subprocess.run([*run, "keygen", "--key", str(key)], capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr
    issued = subprocess.run(
        [*run, "issue", "--key", str(key), "--count", "3"], capture_output=True, text=True
    )
    tokens = issued.stdout.split()
    verifier = load_verifier(f"{key}.pub")
    assert len(set(tokens)) == 3 and len({verifier.verify(t) for t in tokens}) == 3
