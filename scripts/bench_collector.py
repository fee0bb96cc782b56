"""Collector ingestion over HTTP: gunicorn (2 workers) on loopback, 2-4 client processes posting
batches of 500 OLH reports (GRR if OLH is not registered), against the ceiling of inserting the
same rows directly through ``collector.storage`` in one process.

Targets (issue 3): >= 20,000 reports/s over HTTP, and HTTP >= 1/4 of the direct-insert ceiling.
Also prints p50/p99 latency per batch, and the same ingest with 4 slow sockets held open (idle:
connected and silent; half: half a request sent, then silence) with the health probes answered
meanwhile (issue 10, part 9: gunicorn's sync workers answered none with two idle sockets).
The clients build their request bodies before the clock starts, so the figure is the
collector's ingestion rate (parse, validate every report with the mechanism's ``parse_wire``,
one transaction per batch), not the clients' randomization.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import socket
import tempfile
import threading
import time
from typing import Any

import numpy as np
import requests

from client_sdk.mechanisms import MECHANISMS, mechanism_from_config
from collector.process import CollectorProcess
from collector.storage import Storage

BATCH = 500
TARGET_RATE = 20_000
TARGET_FRACTION = 0.25


def _config() -> dict[str, Any]:
    name = "olh" if "olh" in MECHANISMS else "grr"
    return {"mechanism": name, "epsilon": 2.0, "k": 1024}


def _make_rows(config: dict[str, Any], n: int, seed: int) -> list[tuple[str, str]]:
    mechanism = mechanism_from_config(config)
    values = np.random.default_rng(seed).integers(0, mechanism_k(config), size=n)
    payloads = mechanism.to_wire(mechanism.perturb(values, rng=np.random.default_rng(seed + 1)))
    return [(secrets.token_hex(16), json.dumps(p, separators=(",", ":"))) for p in payloads]


def mechanism_k(config: dict[str, Any]) -> int:
    return int(config["k"])


def _client(
    url: str,
    config_id: str,
    config: dict[str, Any],
    batches: int,
    seed: int,
    ready: Any,
    start: Any,
    results: Any,
) -> None:
    rows = _make_rows(config, batches * BATCH, seed)
    bodies = []
    for b in range(batches):
        chunk = rows[b * BATCH : (b + 1) * BATCH]
        reports = ",".join(f'{{"id":"{i}","payload":{p}}}' for i, p in chunk)
        bodies.append(f'{{"config_id":"{config_id}","reports":[{reports}]}}'.encode())
    session = requests.Session()
    headers = {"Content-Type": "application/json"}
    ready.release()
    start.wait()
    latencies = []
    began = time.perf_counter()
    retried = 0
    for body in bodies:
        t = time.perf_counter()
        for _attempt in range(5):
            # Uploads are idempotent (report ids): resend, as the SDK does, after a connection
            # reset (a kept-alive connection closed by its idle timeout as the batch went out)
            # or a 503 (database busy; wait Retry-After).
            try:
                response = session.post(
                    f"{url}/v1/campaigns/bench/reports", data=body, headers=headers
                )
            except requests.ConnectionError:
                retried += 1
                continue
            if response.status_code != 503:
                break
            retried += 1
            time.sleep(float(response.headers.get("Retry-After", "1")))
        latencies.append(time.perf_counter() - t)
        if (
            response.status_code != 200
            or response.json()["accepted"] + response.json()["duplicate"] != BATCH
        ):
            raise RuntimeError(f"upload failed: {response.status_code} {response.text[:300]}")
    results.put((began, time.perf_counter(), latencies, retried))


SLOW_SOCKETS = 4
RETRIED: list[int] = []
"""Batches resent per HTTP run (connection reset or 503), as printed."""
_HALF_REQUEST = b"POST /v1/campaigns/bench/reports HTTP/1.1\r\nContent-Length: 99\r\n\r\n{"


def _open_slow_sockets(url: str, count: int, kind: str) -> list[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sockets = [socket.create_connection((host, int(port))) for _ in range(count)]
    if kind == "half":
        for sock in sockets:
            sock.sendall(_HALF_REQUEST)
    time.sleep(0.5)
    return sockets


def _probe(url: str, stop: threading.Event, outcomes: list[bool]) -> None:
    while not stop.is_set():
        try:
            outcomes.append(requests.get(f"{url}/healthz", timeout=1).status_code == 200)
        except requests.RequestException:
            outcomes.append(False)
        stop.wait(0.1)


def _http_rate(
    workdir: str,
    config: dict[str, Any],
    clients: int,
    batches: int,
    synchronous: str,
    slow: str = "",
    probes: list[bool] | None = None,
) -> tuple[float, list[float]]:
    db = os.path.join(workdir, f"http-{synchronous}-{clients}-{slow or 'none'}.db")
    os.environ["LDP_SYNCHRONOUS"] = synchronous
    try:
        collector = CollectorProcess(db, workers=2, log_dir=workdir).start()
    finally:
        del os.environ["LDP_SYNCHRONOUS"]
    held: list[socket.socket] = []
    stop = threading.Event()
    prober = threading.Thread(target=_probe, args=(collector.url, stop, probes), daemon=True)
    try:
        domain = [str(i) for i in range(config["k"])]
        created = collector.create_campaign(
            {"name": "bench", "mechanism": config, "domain": domain}
        )
        context = multiprocessing.get_context("spawn")
        ready, start, results = context.Semaphore(0), context.Event(), context.Queue()
        processes = [
            context.Process(
                target=_client,
                args=(
                    collector.url,
                    created["config_id"],
                    config,
                    batches,
                    100 + i,
                    ready,
                    start,
                    results,
                ),
            )
            for i in range(clients)
        ]
        for p in processes:
            p.start()
        for _ in processes:
            ready.acquire()
        if slow:
            held = _open_slow_sockets(collector.url, SLOW_SOCKETS, slow)
        if probes is not None:
            prober.start()
        start.set()
        outcomes = [results.get(timeout=600) for _ in processes]
        for p in processes:
            p.join()
    finally:
        stop.set()
        if prober.is_alive():
            prober.join()
        for sock in held:
            sock.close()
        collector.stop()
    began = min(o[0] for o in outcomes)
    ended = max(o[1] for o in outcomes)
    latencies = [lat for o in outcomes for lat in o[2]]
    RETRIED.append(sum(o[3] for o in outcomes))
    return clients * batches * BATCH / (ended - began), latencies


def _ceiling(workdir: str, config: dict[str, Any], n: int) -> float:
    rows = _make_rows(config, n, 7)
    domain = [str(i) for i in range(config["k"])]
    with Storage(os.path.join(workdir, "direct.db")) as storage:
        storage.create_campaign({"name": "bench", "mechanism": config, "domain": domain})
        began = time.perf_counter()
        for b in range(0, n, BATCH):
            storage.insert_reports("bench", rows[b : b + BATCH])
        return n / (time.perf_counter() - began)


def run(args: argparse.Namespace) -> None:
    config = _config()
    quick = bool(getattr(args, "quick", False))
    batches = 30 if quick else 100
    client_counts = [2, 4] if not quick else [4]
    print(f"mechanism {config}, batches of {BATCH}, gunicorn 2 gthread workers x 4, loopback")
    with tempfile.TemporaryDirectory(prefix="bench-collector-") as workdir:
        ceiling = _ceiling(workdir, config, max(client_counts) * batches * BATCH)
        print(
            f"ceiling (direct storage insert, 1 process, synchronous=FULL): {ceiling:,.0f} rows/s"
        )
        for synchronous in ("FULL", "NORMAL"):
            for clients in client_counts:
                rate, latencies = _http_rate(workdir, config, clients, batches, synchronous)
                p50, p99 = np.percentile(np.asarray(latencies) * 1000, [50, 99])
                print(
                    f"HTTP synchronous={synchronous:<6} clients={clients}: {rate:>8,.0f} reports/s "
                    f"(target {TARGET_RATE:,}: x{rate / TARGET_RATE:.2f}; "
                    f"/ceiling {rate / ceiling:.2f}, target >= {TARGET_FRACTION}) "
                    f"latency per batch p50 {p50:.1f} ms, p99 {p99:.1f} ms, resent {RETRIED[-1]}"
                )
        clients = max(client_counts)
        for slow in ("", "idle", "half"):
            probes: list[bool] = []
            rate, latencies = _http_rate(
                workdir, config, clients, batches, "FULL", slow=slow, probes=probes
            )
            p50, p99 = np.percentile(np.asarray(latencies) * 1000, [50, 99])
            held = f"{SLOW_SOCKETS} {slow} slow sockets" if slow else "no slow sockets"
            print(
                f"HTTP synchronous=FULL   clients={clients}, {held:<20}: {rate:>8,.0f} reports/s, "
                f"latency per batch p50 {p50:.1f} ms, p99 {p99:.1f} ms; health probes answered "
                f"within 1 s: {sum(probes)}/{len(probes)}, resent {RETRIED[-1]}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args())
