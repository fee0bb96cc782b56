"""``ldp-analyze dashboard``: refuses to start without the admin token; serves under gunicorn."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from analysis.cli import main
from collector.process import entry_point
from tests.analysis.dashboard.conftest import TOKEN, DashboardProcess


@pytest.mark.parametrize("token", [None, "", "too-short"])
def test_refuses_to_start_without_an_admin_token(
    seeded_db: Path,
    token: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if token is None:
        monkeypatch.delenv("LDP_ADMIN_TOKEN", raising=False)
    else:
        monkeypatch.setenv("LDP_ADMIN_TOKEN", token)
    assert main(["dashboard", "--db", str(seeded_db), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "LDP_ADMIN_TOKEN" in err and "refusing to start" in err
    assert "Traceback" not in err


def test_a_missing_database_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LDP_ADMIN_TOKEN", TOKEN)
    assert main(["dashboard", "--db", str(tmp_path / "missing.db")]) == 2
    err = capsys.readouterr().err
    assert "--db" in err and "missing.db" in err


def test_serves_under_gunicorn(seeded_db: Path, tmp_path: Path) -> None:
    dashboard = DashboardProcess(seeded_db, TOKEN, tmp_path).start(timeout=60)
    try:
        login = requests.get(f"{dashboard.url}/login", timeout=10)
        assert login.status_code == 200
        assert login.headers["Server"].startswith("gunicorn")
        assert TOKEN not in login.text
        assert requests.get(f"{dashboard.url}/api/campaigns", timeout=10).status_code == 401
        vendored = requests.get(f"{dashboard.url}/static/vendor/chart.umd.min.js", timeout=10)
        assert vendored.status_code == 200 and "Chart.js v4" in vendored.text[:200]
        out = dashboard.log_dir / "dashboard-1.out"
        deadline = time.monotonic() + 60
        while "warm (3 campaigns, 3340 reports" not in out.read_text():
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
    finally:
        dashboard.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a test certificate")
def test_over_https_the_session_cookie_is_secure(seeded_db: Path, tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run([*openssl, *subject, *files], check=True, capture_output=True, timeout=60)
    out = tmp_path / "https.out"
    tls = ["--certfile", str(cert), "--keyfile", str(key)]
    command = [*entry_point("ldp-analyze", "analysis.cli"), "dashboard", "--db", str(seeded_db)]
    command += ["--port", "0", "--no-warm", *tls]
    with open(out, "wb") as stdout:
        process = subprocess.Popen(
            command,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LDP_ADMIN_TOKEN": TOKEN},
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "serving https://" not in out.read_text():
            assert process.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        url = out.read_text().split("serving ", 1)[1].split()[0]
        session = requests.Session()
        # verify= on each call: a REQUESTS_CA_BUNDLE in the environment overrides Session.verify.
        page = session.get(f"{url}/login", timeout=10, verify=str(cert)).text
        marker = 'name="csrf" value="'
        csrf = page[page.index(marker) + len(marker) :].split('"', 1)[0]
        response = session.post(
            f"{url}/login",
            data={"csrf": csrf, "token": TOKEN},
            allow_redirects=False,
            timeout=10,
            verify=str(cert),
        )
        assert response.status_code == 303
        header = next(
            h for h in response.raw.headers.getlist("Set-Cookie") if "ldp_dashboard_session" in h
        )
        assert "Secure" in header and "HttpOnly" in header and "SameSite=Strict" in header
        assert session.get(f"{url}/api/campaigns", timeout=10, verify=str(cert)).status_code == 200
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(20)


class _From(HTTPAdapter):
    """Connections from one loopback source address (Linux routes all of 127/8 to lo)."""

    def __init__(self, source: str) -> None:
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


def _browser(source: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", _From(source))
    return session


def _sign_in(browser: requests.Session, url: str, token: str) -> int:
    page = browser.get(f"{url}/login", timeout=10).text
    marker = 'name="csrf" value="'
    csrf = page[page.index(marker) + len(marker) :].split('"', 1)[0]
    answer = browser.post(
        f"{url}/login", data={"csrf": csrf, "token": token}, allow_redirects=False, timeout=10
    )
    return answer.status_code


def test_wrong_tokens_from_one_client_lock_out_neither_another_nor_a_trusted_browser(
    seeded_db: Path, tmp_path: Path
) -> None:
    """The sign-in throttle under gunicorn, clients told apart by their source address."""
    dashboard = DashboardProcess(seeded_db, TOKEN, tmp_path, extra_args=["--no-warm"])
    dashboard.start(timeout=60)
    try:
        admin = _browser("127.0.0.2")
        assert _sign_in(admin, dashboard.url, TOKEN) == 303  # now a trusted browser
        admin.cookies.clear(domain="127.0.0.1", path="/", name="ldp_dashboard_session")
        attacker = _browser("127.0.0.2")  # the admin's address (a shared NAT)
        statuses = [_sign_in(attacker, dashboard.url, "wrong-guess") for _ in range(12)]
        assert statuses == [401] * 10 + [429] * 2
        assert _sign_in(attacker, dashboard.url, TOKEN) == 429  # throttled: no oracle
        # Another client's right token, and the admin's own browser at the attacker's address:
        assert _sign_in(_browser("127.0.0.3"), dashboard.url, TOKEN) == 303
        assert _sign_in(admin, dashboard.url, TOKEN) == 303
        assert admin.get(f"{dashboard.url}/api/campaigns", timeout=10).status_code == 200
    finally:
        dashboard.stop()
