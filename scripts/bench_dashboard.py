"""Dashboard latency with 10 campaigns and 10^6 stored reports (issue 15: under 1 s per update).

A real dashboard process (``ldp-analyze dashboard``, gunicorn) over a collector database filled
through ``collector.storage``, measured over HTTP after signing in:

* **first view** (``--no-warm``): the first ``/api/campaigns`` (reports per day of every
  campaign, from scratch) and the first ``/api/campaigns/<name>`` of each campaign (its whole
  history aggregated once);
* **poll**: the same endpoint again with nothing new (what a page asks every 2 s);
* **update**: ``--update`` new reports stored, then the endpoint (the new reports aggregated,
  merged into the cached statistic, the estimate document remade);
* **from scratch**: what each update would cost without the cache (``ldp-analyze estimate``'s
  ``load_estimate`` over the whole campaign), for comparison;
* **warm-up** (the default): how long after start every campaign is aggregated in the
  background, and the first view after that;
* **page load** in headless Chromium (when ``/usr/bin/chromium`` and Playwright are there): from
  navigation until the estimate table is filled, the cache warm.

Layouts: ``spread`` (10 campaigns of 10^5 reports), ``one-large`` (one campaign of 10^6 and
nine of 10^4) and ``shards`` (the large campaign over two databases sharing a tenth of its
reports, served merged: each update recomputes the merge). ``--kinds`` makes half the campaigns
of the richer kinds (distribution, ranges, marginals, key-value, count-mean sketch), whose
views cost more per update (EMS with its bootstrap, consistency maps). ``--quick`` uses a tenth
of the reports.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import requests

from analysis.loading import load_estimate
from client_sdk.mechanisms import mechanism_from_config
from collector.process import ServerProcess, entry_point
from collector.storage import Storage

TOKEN = secrets.token_urlsafe(32)
TARGET_SECONDS = 1.0
CONFIGS: list[dict[str, Any]] = [
    {"mechanism": "grr", "epsilon": 1.0, "k": 16},
    {"mechanism": "oue", "epsilon": 1.0, "k": 64},
    {"mechanism": "olh", "epsilon": 2.0, "k": 256},
    {"mechanism": "sue", "epsilon": 1.0, "k": 32},
    {"mechanism": "blh", "epsilon": 1.0, "k": 128},
    {"mechanism": "hr", "epsilon": 1.0, "k": 64},
    {"mechanism": "ss", "epsilon": 1.0, "k": 64},
    {"mechanism": "grr", "epsilon": 4.0, "k": 8},
    {"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
    {"mechanism": "piecewise", "epsilon": 2.0, "lower": 0.0, "upper": 100.0},
]
KIND_CONFIGS: list[dict[str, Any]] = [
    *CONFIGS[:4],
    CONFIGS[8],
    {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0.0, "upper": 100.0, "bins": 32},
    {"mechanism": "hierarchical", "epsilon": 2.0, "k": 64},
    {
        "mechanism": "multi",
        "epsilon": 2.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 4}, {"name": "version", "k": 8}],
        "marginals": [["os", "version"]],
    },
    {"mechanism": "pckv", "epsilon": 2.0, "k": 16, "padding": 2},
    {"mechanism": "cms", "epsilon": 4.0, "m": 1024, "hashes": 16, "max_length": 8},
]
"""``--kinds``: half the campaigns of the richer kinds (distribution, ranges, marginals,
key-value, a count-mean sketch against its candidates)."""
DAYS = ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"]


class Dashboard(ServerProcess):
    name = "dashboard"
    ready_prefix = "ldp-analyze dashboard: serving"

    def __init__(self, db: Path | list[Path], log_dir: Path, *, warm: bool) -> None:
        super().__init__(log_dir=log_dir, env={"LDP_ADMIN_TOKEN": TOKEN})
        self.dbs = db if isinstance(db, list) else [db]
        self.warm = warm

    def arguments(self) -> list[str]:
        return [
            *entry_point("ldp-analyze", "analysis.cli"),
            "dashboard",
            *[part for db in self.dbs for part in ("--db", str(db))],
            "--port",
            str(self.port),
            "--no-access-log",
            *([] if self.warm else ["--no-warm"]),
        ]


def _values(config: dict[str, Any], n: int, rng: np.random.Generator) -> Any:
    kind = config["mechanism"]
    if kind == "multi":
        return np.stack([rng.zipf(1.5, n) % 4, rng.integers(0, 8, n)], axis=1)
    if kind == "pckv":
        keys, numbers = rng.zipf(1.3, n) % 16, rng.uniform(-1, 1, n)
        return [{int(k): float(v)} for k, v in zip(keys, numbers, strict=True)]
    if kind == "cms":
        return [f"w{v}" for v in rng.zipf(1.3, n) % 200]
    if "k" in config:
        return rng.zipf(1.3, size=n) % int(config["k"])
    return rng.uniform(10, 60, size=n)


def _rows(config: dict[str, Any], n: int, seed: int) -> list[tuple[str, str]]:
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(seed)
    values = _values(config, n, rng)
    payloads = mechanism.to_wire(mechanism.perturb(values, rng=rng))
    return [(secrets.token_hex(16), json.dumps(p, separators=(",", ":"))) for p in payloads]


def _fill(db: Path, sizes: list[int]) -> list[str]:
    names = []
    with Storage(db, synchronous="OFF") as storage:
        for index, (config, n) in enumerate(zip(CONFIGS, sizes, strict=True)):
            name = f"c{index:02d}-{config['mechanism']}"
            document = {"name": name, "mechanism": config, "domain": _domain(config)}
            storage.create_campaign({**document, "min_batch_size": 100})
            rows = _rows(config, n, seed=index)
            for day, part in zip(DAYS, np.array_split(np.arange(n), len(DAYS)), strict=True):
                for start in range(0, part.size, 50_000):
                    chunk = part[start : start + 50_000]
                    storage.insert_reports(name, [rows[i] for i in chunk], day=day)
            names.append(name)
    return names


def _domain(config: dict[str, Any]) -> list[str] | None:
    if config["mechanism"] == "cms":
        return [f"w{v}" for v in range(20)]
    if config["mechanism"] == "pckv":
        return None
    return [f"item-{v}" for v in range(int(config["k"]))] if "k" in config else None


def _session(url: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{url}/login", timeout=30).text
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    csrf = page[start : page.index('"', start)]
    response = session.post(
        f"{url}/login", data={"csrf": csrf, "token": TOKEN}, allow_redirects=False, timeout=30
    )
    assert response.status_code == 303, response.text
    return session


def _timed_get(session: requests.Session, url: str) -> float:
    start = time.perf_counter()
    response = session.get(url, timeout=300)
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, response.text[:300]
    return elapsed


def _catch_up(session: requests.Session, url: str) -> float:
    """Seconds until the served estimate covers every stored report (0 when it already did:
    slow estimates are remade in the background while polls get the previous one)."""
    start = time.perf_counter()
    first = True
    while True:
        body = session.get(url, timeout=300).json()
        if body.get("estimate", {}).get("n", body["n"]) == body["n"]:
            return 0.0 if first else time.perf_counter() - start
        first = False
        time.sleep(0.1)


def _page_load(url: str, campaign: str, repeats: int) -> list[float] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path("/usr/bin/chromium").exists():
        return None
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        context = browser.new_context(base_url=url)
        page = context.new_page()
        page.goto("/login")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("#campaigns tbody tr")
        for _ in range(repeats):
            start = time.perf_counter()
            page.goto(f"/campaigns/{campaign}")
            page.wait_for_selector("#estimate-table tbody tr", timeout=60_000)
            times.append(time.perf_counter() - start)
        browser.close()
    return times


def _fmt(seconds: float) -> str:
    return f"{1000 * seconds:8.1f} ms"


def run_layout(label: str, sizes: list[int], update: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        root = Path(tmp)
        db = root / "collector.db"
        start = time.perf_counter()
        names = _fill(db, sizes)
        print(
            f"\n== {label}: {len(names)} campaigns, {sum(sizes):,} reports "
            f"(stored in {time.perf_counter() - start:.1f} s)"
        )
        with Dashboard(db, root, warm=False) as dashboard:
            session = _session(dashboard.url)
            base = f"{dashboard.url}/api/campaigns"
            first_list = _timed_get(session, base)
            print(f"first /api/campaigns (per-day counts of all): {_fmt(first_list)}")
            poll_list = _timed_get(session, base)
            print(f"poll  /api/campaigns:                          {_fmt(poll_list)}")
            largest = max(range(len(names)), key=lambda i: sizes[i])
            print("campaign                n    first view      poll    update  from scratch")
            worst_update = 0.0
            for index, name in enumerate(names):
                first = _timed_get(session, f"{base}/{name}")
                polls = [_timed_get(session, f"{base}/{name}") for _ in range(repeats)]
                updates = []
                for r in range(repeats):
                    rows = _rows(CONFIGS[index], update, seed=1000 + 17 * index + r)
                    with Storage(db, synchronous="OFF") as storage:
                        storage.insert_reports(name, rows, day="2026-12-01")
                    updates.append(_timed_get(session, f"{base}/{name}"))
                behind = _catch_up(session, f"{base}/{name}")
                t0 = time.perf_counter()
                load_estimate(db, name, confidence=0.95)
                scratch = time.perf_counter() - t0
                update_median = statistics.median(updates)
                worst_update = max(worst_update, update_median)
                print(
                    f"{name:18s} {sizes[index]:>9,} {_fmt(first)} {_fmt(statistics.median(polls))} "
                    f"{_fmt(update_median)} {_fmt(scratch)}"
                    + (f"  (estimate caught up {_fmt(behind).strip()} later)" if behind else "")
                )
            verdict = "ok" if worst_update < TARGET_SECONDS else "ABOVE TARGET"
            print(
                f"slowest median update ({update} new reports): {_fmt(worst_update)} "
                f"(target < {TARGET_SECONDS:.0f} s: {verdict})"
            )
            loads = _page_load(dashboard.url, names[largest], repeats)
            if loads is None:
                print("page load: skipped (no Playwright or no /usr/bin/chromium)")
            else:
                print(
                    f"page load in Chromium, {names[largest]} (warm cache, until the table is "
                    f"filled): median {_fmt(statistics.median(loads))}, max {_fmt(max(loads))}"
                )
        # The default: every campaign aggregated in the background once the server is up.
        started = time.perf_counter()
        with Dashboard(db, root, warm=True) as dashboard:
            up = time.perf_counter() - started
            out = root / f"{dashboard.name}-1.out"
            while "dashboard: warm (" not in out.read_text():
                time.sleep(0.05)
            warm = time.perf_counter() - started
            session = _session(dashboard.url)
            first = _timed_get(session, f"{dashboard.url}/api/campaigns/{names[largest]}")
            print(
                f"with warm-up (the default): serving after {up:.1f} s, every campaign "
                f"aggregated after {warm:.1f} s; then the first view of {names[largest]}: "
                f"{_fmt(first).strip()}"
            )


def run_shards(total: int, update: int, repeats: int) -> None:
    """One campaign of ``total`` reports over two databases that share a tenth of them (and
    nine small campaigns in both): the merged view, recomputed whenever a shard changes."""
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        root = Path(tmp)
        a, b = root / "a.db", root / "b.db"
        start = time.perf_counter()
        sizes = [0] + [total // 100] * 9
        _fill(a, sizes)
        names = _fill(b, sizes)
        large = names[0]
        rows = _rows(CONFIGS[0], total, seed=0)
        shared = total // 10
        half = (total - shared) // 2
        with Storage(a, synchronous="OFF") as storage:
            storage.insert_reports(large, rows[: half + shared], day=DAYS[0])
        with Storage(b, synchronous="OFF") as storage:
            storage.insert_reports(large, rows[half:], day=DAYS[1])
        print(
            f"\n== shards: {large} with {total:,} reports over 2 databases sharing {shared:,} "
            f"(+9 campaigns of {total // 100:,} in both; stored in "
            f"{time.perf_counter() - start:.1f} s)"
        )
        with Dashboard([a, b], root, warm=False) as dashboard:
            session = _session(dashboard.url)
            url = f"{dashboard.url}/api/campaigns/{large}"
            first = _timed_get(session, url)
            polls = [_timed_get(session, url) for _ in range(repeats)]
            updates = []
            for r in range(repeats):
                with Storage(b, synchronous="OFF") as storage:
                    storage.insert_reports(large, _rows(CONFIGS[0], update, seed=500 + r))
                updates.append(_timed_get(session, url))
            window = _timed_get(session, f"{url}?since={DAYS[1]}&until={DAYS[1]}")
            listed = _timed_get(session, f"{dashboard.url}/api/campaigns")
            print(
                f"first view {_fmt(first).strip()}, poll (no change) "
                f"{_fmt(statistics.median(polls)).strip()}, update ({update} new in one shard) "
                f"median {_fmt(statistics.median(updates)).strip()} max "
                f"{_fmt(max(updates)).strip()}, one-day window {_fmt(window).strip()}, "
                f"campaign list {_fmt(listed).strip()}"
            )
            loads = _page_load(dashboard.url, large, repeats)
            if loads is not None:
                print(f"page load in Chromium: median {_fmt(statistics.median(loads)).strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the reports")
    parser.add_argument("--update", type=int, default=1000, help="new reports per update (1000)")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions per figure (5)")
    parser.add_argument(
        "--layout",
        choices=["spread", "one-large", "both", "shards"],
        default="both",
        help="(both: spread and one-large)",
    )
    parser.add_argument(
        "--kinds",
        action="store_true",
        help="half the campaigns of the richer kinds (distribution, ranges, marginals, ...)",
    )
    args = parser.parse_args()
    if args.kinds:
        CONFIGS[:] = KIND_CONFIGS
    total = 100_000 if args.quick else 1_000_000
    if args.layout == "shards":
        run_shards(total, args.update, args.repeats)
        return 0
    if args.layout in ("spread", "both"):
        run_layout("spread", [total // 10] * 10, args.update, args.repeats)
    if args.layout in ("one-large", "both"):
        run_layout("one-large", [total] + [total // 100] * 9, args.update, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
