"""Smoke test of the package as users install it: a wheel, installed without ``-e``.

    .venv-wheel/bin/python scripts/smoke_installed.py      # run from a folder outside the repo

``.ci/run`` builds the wheel, installs it with the ``[all]`` extra (``pip install
"ldp_telemetry-...whl[all]"``: every role below) into a fresh virtual environment and runs this
script from a temporary folder, so the source tree cannot shadow the installed package (the
script refuses to run when it would, and when an extra is missing). It drives the installed
console scripts as real processes:

* ``ldp-collector serve``: ``/healthz``, ``/readyz``, ``/metrics`` and ``/openapi.json`` (a data
  file of the package: a missing one answers 500);
* ``ldp-demo --collector`` feeds one of its campaigns through the SDK over HTTP;
* ``ldp-analyze dashboard`` on that database: the login page and every page's template, the
  static files and the vendored Chart.js, a sign-in;
* ``ldp-demo`` on a small fleet (its own collector, the HTML report) and ``ldp-demo --shuffle``
  (collector, ``ldp-shuffler`` and fleet).

Every check runs; the failures are listed at the end and the exit status is 1 if any failed.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

REPOSITORY = Path(__file__).resolve().parents[1]
PACKAGES = ("client_sdk", "collector", "analysis", "shuffler")
STATIC_FILES = ("dashboard.css", "dashboard.js", "vendor/chart.umd.min.js")
COLORS: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 2.0, "k": 4},
    "domain": ["red", "green", "blue", "cyan"],
    "min_batch_size": 50,
}
TIMEOUT = 30


class Checks:
    """Named checks that all run; :meth:`failures` lists the ones that did not hold."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []

    def __call__(self, condition: bool, what: str, detail: object = "") -> bool:
        if condition:
            self.passed += 1
            print(f"  ok    {what}", flush=True)
        else:
            self.failed.append(f"{what}: {detail}" if detail != "" else what)
            print(f"  FAIL  {what} {detail}".rstrip(), flush=True)
        return condition

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        """Checks that may raise (a process that does not start): the error is a failure."""
        try:
            yield
        except Exception as error:
            self(False, f"{name} raised", f"{type(error).__name__}: {error}")


def installed_outside_the_tree() -> list[str]:
    """The packages that would be imported from the repository instead of the installation."""
    shadowed = []
    for package in PACKAGES:
        path = Path(importlib.import_module(package).__file__ or "").resolve()
        if path.is_relative_to(REPOSITORY):
            shadowed.append(f"{package} from {path.parent}")
    return shadowed


def run(command: list[str], cwd: Path, what: str, check: Checks) -> str:
    """Run a console script; record whether it exited 0; return its stdout."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    check(
        done.returncode == 0,
        f"{what} exits 0 ({time.perf_counter() - start:.1f} s)",
        f"exit {done.returncode}: {done.stderr[-2000:]}",
    )
    return done.stdout


def smoke_collector(check: Checks, root: Path, collector: Any) -> None:
    """The installed collector (a started ``CollectorProcess``): its documents, and a campaign
    fed by ``ldp-demo``."""
    from collector.process import entry_point

    for path in ("/healthz", "/readyz", "/metrics"):
        status = requests.get(f"{collector.url}{path}", timeout=TIMEOUT).status_code
        check(status == 200, f"collector GET {path} is 200", status)
    answer = requests.get(f"{collector.url}/openapi.json", timeout=TIMEOUT)
    if check(answer.status_code == 200, "collector GET /openapi.json is 200", answer.status_code):
        document = answer.json()
        check(
            answer.headers["Content-Type"].startswith("application/json")
            and str(document.get("openapi", "")).startswith("3.")
            and "/v1/campaigns" in document.get("paths", {}),
            "/openapi.json is the OpenAPI document of the routes",
            answer.headers["Content-Type"],
        )
    collector.create_campaign(COLORS)
    run(
        [
            *entry_point("ldp-demo", "analysis.demo"),
            "--collector",
            collector.url,
            "--campaign",
            COLORS["name"],
            "--devices",
            "400",
        ],
        root,
        "ldp-demo --collector (the SDK uploads to the installed collector)",
        check,
    )


def smoke_dashboard(check: Checks, root: Path, db: str) -> None:
    """The installed dashboard: templates, static files, sign-in, the campaign's pages."""
    from analysis.dashboard.process import DashboardProcess

    token = secrets.token_urlsafe(24)
    with DashboardProcess(db, token, root) as dashboard:
        url, browser = dashboard.url, requests.Session()
        for name in STATIC_FILES:
            with check.section(f"dashboard GET /static/{name}"):
                answer = browser.get(f"{url}/static/{name}", timeout=TIMEOUT)
                check(
                    answer.status_code == 200 and len(answer.content) > 100,
                    f"dashboard GET /static/{name} is 200",
                    answer.status_code,
                )
        with check.section("dashboard GET /login (templates/login.html)"):
            login = browser.get(f"{url}/login", timeout=TIMEOUT)
            check(
                login.status_code == 200 and 'name="csrf"' in login.text,
                "dashboard GET /login renders the form (templates/login.html)",
                login.status_code,
            )
            marker = 'name="csrf" value="'
            start = login.text.find(marker) + len(marker)
            csrf = login.text[start : login.text.find('"', start)]
            form = {"csrf": csrf, "token": token}
            signed = browser.post(f"{url}/login", data=form, allow_redirects=False, timeout=30)
            check(signed.status_code == 303, "dashboard sign-in with the token is 303", signed.text)
        pages = {
            "/": 'data-page="campaigns"',
            f"/campaigns/{COLORS['name']}": 'data-page="campaign"',
            "/no-such-page": "<h1>404</h1>",
        }
        for path, expected in pages.items():
            with check.section(f"dashboard GET {path}"):
                answer = browser.get(f"{url}{path}", timeout=TIMEOUT)
                check(
                    answer.status_code == (404 if path == "/no-such-page" else 200)
                    and answer.headers["Content-Type"].startswith("text/html")
                    and expected in answer.text,
                    f"dashboard GET {path} renders its template",
                    f"{answer.status_code} {answer.text[:200]!r}",
                )
        with check.section("dashboard GET /api/campaigns/colors"):
            data = browser.get(f"{url}/api/campaigns/{COLORS['name']}", timeout=TIMEOUT)
            check(
                data.status_code == 200 and json.loads(data.text).get("name") == COLORS["name"],
                "dashboard GET /api/campaigns/colors is the campaign's JSON",
                f"{data.status_code} {data.text[:200]!r}",
            )


def smoke_demo(check: Checks, root: Path) -> None:
    """``ldp-demo`` on a small fleet, direct and through the installed shuffler."""
    from collector.process import entry_point

    demo = entry_point("ldp-demo", "analysis.demo")
    report = root / "demo-report.html"
    out = run(
        [*demo, "--devices", "2000", "--clients", "2", "--report", str(report)],
        root,
        "ldp-demo --devices 2000",
        check,
    )
    check("stored 2,000" in out, "ldp-demo stored every report", out[-500:])
    check(
        report.exists() and "<html" in report.read_text(encoding="utf-8")[:500].lower(),
        "ldp-demo wrote its HTML report",
    )
    out = run(
        [*demo, "--devices", "2000", "--clients", "1", "--shuffle", "--report", ""],
        root,
        "ldp-demo --shuffle --devices 2000",
        check,
    )
    check("stored 2,000" in out, "ldp-demo --shuffle stored every report", out[-500:])


def main() -> int:
    from client_sdk._extras import EXTRAS, missing_modules

    missing = sorted({module for extra in EXTRAS for module in missing_modules(extra)})
    if missing:
        print(
            f"smoke_installed: the installation lacks {', '.join(missing)}: install the wheel "
            'with every extra ("ldp_telemetry-...whl[all]")',
            file=sys.stderr,
        )
        return 2
    shadowed = installed_outside_the_tree()
    if shadowed:
        print(
            "smoke_installed: the repository's tree shadows the installed package "
            f"({', '.join(shadowed)}): install the wheel into a fresh virtual environment and "
            "run this script from a folder outside the repository",
            file=sys.stderr,
        )
        return 2
    from collector.process import CollectorProcess

    check = Checks()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ldp-smoke-") as folder:
        root = Path(folder)
        os.chdir(root)
        collector = CollectorProcess(root / "collector.db", workers=1, log_dir=root)
        try:
            with check.section("the installed collector"):
                collector.start(timeout=60)
                smoke_collector(check, root, collector)
            with check.section("the installed dashboard"):
                smoke_dashboard(check, root, collector.db)
        finally:
            collector.stop()
        with check.section("ldp-demo"):
            smoke_demo(check, root)
    seconds = time.perf_counter() - start
    if check.failed:
        print(
            f"smoke_installed: {len(check.failed)} of {check.passed + len(check.failed)} checks "
            f"failed ({seconds:.0f} s):",
            file=sys.stderr,
        )
        for failure in check.failed:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    print(f"smoke_installed: {check.passed} checks passed ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
