"""The shuffle model, measured: throughput device -> shuffler -> collector over loopback, and
the error of local-only vs shuffled collection at the same central guarantee.

    .venv/bin/python scripts/bench_shuffle.py [--reports 60000] [--clients 2] [--skip-throughput]
    .venv/bin/python scripts/bench.py --only shuffle [--quick]

Accuracy: k = 100 items (a Zipf(1.1) population), central (eps, delta) = (1, 1e-6). Local-only
collection must randomize at eps = 1 itself; shuffled collection randomizes at the epsilon0 that
``client_sdk.amplification.calibrate_local_epsilon`` allows for a batch of n (Feldman, McMillan,
Talwar, FOCS 2021; docs/shuffler.md). Each side uses the frequency oracle of least total
variance among grr, oue, olh, hr and ss at its epsilon; "exact" is the total variance at the
population's frequencies (sum over items of Var[f_v], the f-dependent term included: at the large
epsilon0 it is about half of it), "measured" the squared error summed over items, averaged over
5 simulated runs.

Throughput: ``--clients`` SDK device processes record ``--reports`` reports of a shuffled
campaign (sealing each at record time, as a device does), then flush at once to a shuffler
(gunicorn, 2 workers, and its forwarder) that forwards to a collector (gunicorn, 2 workers),
timed until the collector stores them all (but what waits below min_batch); and the same
reports of an unshuffled campaign uploaded to the collector directly. Beside the wall-clock
rate, the CPU time each part spent per report (the servers' process groups from /proc, the
devices' flushes), and the rate two idle cores would sustain at that cost: on a shared, loaded
machine the wall-clock rate says more about the neighbours than about the system.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from analysis.estimation import estimate
from client_sdk.amplification import calibrate_local_epsilon
from client_sdk.mechanisms import Mechanism, mechanism_from_config

K, CENTRAL_EPSILON, DELTA = 100, 1.0, 1e-6
MIN_BATCH = 1000
ORACLES = ("grr", "oue", "olh", "hr", "ss")


def best_oracle(epsilon: float, n: int) -> Mechanism:
    candidates = [
        mechanism_from_config({"mechanism": m, "epsilon": epsilon, "k": K}) for m in ORACLES
    ]
    return min(candidates, key=lambda m: m.total_variance(n))


def accuracy(n: int, rng: np.random.Generator, runs: int = 5) -> None:
    weights = 1.0 / np.arange(1, K + 1) ** 1.1
    truth = weights / weights.sum()
    values = rng.choice(K, size=n, p=truth)
    true_f = np.bincount(values, minlength=K) / n
    epsilon0 = calibrate_local_epsilon(CENTRAL_EPSILON, n, DELTA)
    rows = []
    for label, epsilon in (("local-only", CENTRAL_EPSILON), ("shuffled", epsilon0)):
        mechanism = best_oracle(epsilon, n)
        exact = float(np.sum(mechanism.variance(n, true_f)))  # at the population's frequencies
        errors = [
            float(
                np.sum(
                    (estimate(mechanism, mechanism.perturb(values, rng=rng)).frequencies - true_f)
                    ** 2
                )
            )
            for _ in range(runs)
        ]
        rows.append((label, epsilon, mechanism.to_config()["mechanism"], exact, np.mean(errors)))
    for label, epsilon, name, exact, measured in rows:
        print(
            f"  n={n:>8} {label:<10} eps={epsilon:6.3f} {name:<4} "
            f"MSE exact {exact:.3e} measured {measured:.3e} (mean of {runs} runs)"
        )
    print(
        f"  n={n:>8} local/shuffled MSE: exact {rows[0][3] / rows[1][3]:,.0f}x, "
        f"measured {rows[0][4] / rows[1][4]:,.0f}x"
    )


def _group_cpu(pgid: int, command: bytes = b"") -> float:
    """CPU seconds (user + system) of the live processes of a process group (/proc), or of
    those whose command line holds ``command``."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            line = (stat.parent / "cmdline").read_bytes().split(b"\0") if command else []
        except OSError:
            continue
        if int(fields[2]) == pgid and (not command or command in line):
            total += int(fields[11]) + int(fields[12])  # after the name: state, ppid, pgrp, ...
    return total / os.sysconf("SC_CLK_TCK")


def _client(
    url: str, shuffler_url: str, name: str, state_dir: str, values: list[str], barrier: Any
) -> tuple[float, int]:
    """One device process: record (and, shuffled, seal) its reports, wait for the others, flush;
    (CPU seconds of the flush, reports acknowledged)."""
    from client_sdk.client import TelemetryClient

    with TelemetryClient(
        url, state_dir=state_dir, shuffler_url=shuffler_url, batch_size=5000
    ) as client:
        client.record_many(name, values)
        barrier.wait()
        started = time.process_time()
        acknowledged = client.flush()
        return time.process_time() - started, acknowledged


def throughput(reports: int, clients: int) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from collector.process import CollectorProcess
    from shuffler.process import ShufflerProcess

    with tempfile.TemporaryDirectory() as root_text:
        root = Path(root_text)
        collector = CollectorProcess(root / "collector.db", workers=2, log_dir=root)
        collector.env["LDP_SHUFFLER_TOKEN"] = token = os.urandom(24).hex()
        collector.start()
        shuffler = ShufflerProcess(root / "shuffler.db", collector.url, token=token, log_dir=root)
        shuffler.start()
        assert collector.process is not None and shuffler.process is not None
        groups = {
            "collector": (collector.process.pid, b""),
            "shuffler": (shuffler.process.pid, b""),
            "of which forwarder": (shuffler.process.pid, b"forward"),
        }
        try:
            labels = [str(i) for i in range(4)]
            base = {"mechanism": {"mechanism": "grr", "k": 4}, "domain": labels}
            shuffle = {"min_batch": MIN_BATCH, "central_epsilon": 1.0, "delta": DELTA}
            collector.create_campaign({**base, "name": "shuffled", "shuffle": shuffle})
            direct = {"mechanism": "grr", "k": 4, "epsilon": 1.0}
            collector.create_campaign({**base, "name": "direct", "mechanism": direct})
            values = [labels[i % 4] for i in range(reports // clients)]
            total = len(values) * clients
            figures = {}
            context = multiprocessing.get_context("spawn")
            for name in ("direct", "shuffled"):
                barrier = context.Manager().Barrier(clients + 1)
                with ProcessPoolExecutor(clients, mp_context=context) as pool:
                    futures = [
                        pool.submit(
                            _client,
                            collector.url,
                            shuffler.url,
                            name,
                            str(root / f"device-{name}-{i}"),
                            values,
                            barrier,
                        )
                        for i in range(clients)
                    ]
                    barrier.wait()  # every device has recorded (and sealed) its reports
                    cpu = {group: _group_cpu(*where) for group, where in groups.items()}
                    start = time.perf_counter()
                    done = [f.result() for f in futures]
                    while True:
                        stored = _stored(collector.db, name)
                        waiting = _waiting(shuffler.db) if name == "shuffled" else 0
                        if stored + waiting >= total and waiting < MIN_BATCH:
                            break
                        time.sleep(0.1)
                    elapsed = time.perf_counter() - start
                used = {group: _group_cpu(*where) - cpu[group] for group, where in groups.items()}
                used["devices"] = sum(seconds for seconds, _ in done)
                figures[name] = (stored, elapsed, used)
            for name, (stored, elapsed, used) in figures.items():
                per_report = {group: 1e6 * seconds / stored for group, seconds in used.items()}
                parts = ", ".join(f"{group} {us:.0f}" for group, us in per_report.items())
                all_us = sum(us for group, us in per_report.items() if group in _PARTS)
                print(
                    f"  {name:<8} {stored} reports in {elapsed:.2f} s: {stored / elapsed:,.0f}/s "
                    f"end to end; CPU us/report: {parts} (all {all_us:.0f}: "
                    f"{2e6 / all_us:,.0f}/s on 2 idle cores)"
                )
            (s_stored, s_elapsed, _), (d_stored, d_elapsed, _) = (
                figures["shuffled"],
                figures["direct"],
            )
            ratio = (s_stored / s_elapsed) / (d_stored / d_elapsed)
            print(f"  shuffled / direct throughput: {ratio:.2f}")
        finally:
            shuffler.stop()
            collector.stop()


_PARTS = ("collector", "shuffler", "devices")


def _waiting(db: str) -> int:
    """Reports waiting or in flight in the shuffler (read from its database by this process,
    so the servers' CPU figures do not include the polling)."""
    conn = sqlite3.connect(db)
    try:
        waiting = conn.execute("SELECT count(*) FROM waiting").fetchone()[0]
        in_flight = conn.execute("SELECT coalesce(sum(size), 0) FROM batches").fetchone()[0]
        return int(waiting) + int(in_flight)
    finally:
        conn.close()


def _stored(db: str, name: str) -> int:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT count(*) FROM reports r JOIN campaigns c ON c.id = r.campaign_id "
            "WHERE c.name = ?",
            [name],
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


def run(args: argparse.Namespace) -> None:
    """The section of scripts/bench.py (``--quick``: n = 10^5 only, 20,000 reports)."""
    quick = getattr(args, "quick", False)
    sizes = getattr(args, "sizes", "100000" if quick else "100000,1000000")
    rng = np.random.default_rng(20261201)  # the simulated population; devices use the CSPRNG
    print(f"accuracy at central (eps, delta) = ({CENTRAL_EPSILON}, {DELTA:g}), k = {K}:")
    for n in (int(s) for s in sizes.split(",")):
        accuracy(n, rng)
    if not getattr(args, "skip_throughput", False):
        reports = getattr(args, "reports", 20_000 if quick else 60_000)
        clients = getattr(args, "clients", 2)
        print(
            f"throughput over loopback (gunicorn, 2 workers each; {clients} device processes, "
            "sealed at record time, timed from flush to stored):"
        )
        throughput(reports, clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=60_000)
    parser.add_argument("--clients", type=int, default=2, help="device processes (2)")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--skip-throughput", action="store_true")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
