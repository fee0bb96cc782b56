"""The shuffle model, measured: throughput device -> shuffler -> collector over loopback, and
the error of local-only vs shuffled collection at the same central guarantee.

    .venv/bin/python scripts/bench_shuffle.py [--reports 20000] [--skip-throughput]

Accuracy: k = 100 items (a Zipf(1.1) population), central (eps, delta) = (1, 1e-6). Local-only
collection must randomize at eps = 1 itself; shuffled collection randomizes at the epsilon0 that
``client_sdk.amplification.calibrate_local_epsilon`` allows for a batch of n (Feldman, McMillan,
Talwar, FOCS 2021; docs/shuffler.md). Each side uses the frequency oracle of least total
variance among grr, oue, olh, hr and ss at its epsilon; "exact" is that total variance
(sum over items of Var[f_v]), "measured" the squared error of one simulated run.

Throughput: one SDK client records and flushes ``--reports`` reports of a shuffled campaign
to a shuffler (gunicorn, 2 workers) that forwards to a collector (gunicorn, 2 workers), timed
until the collector stores them all; and the same reports of an unshuffled campaign uploaded
to the collector directly.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis.estimation import estimate
from client_sdk.amplification import calibrate_local_epsilon
from client_sdk.mechanisms import Mechanism, mechanism_from_config

K, CENTRAL_EPSILON, DELTA = 100, 1.0, 1e-6
ORACLES = ("grr", "oue", "olh", "hr", "ss")


def best_oracle(epsilon: float, n: int) -> Mechanism:
    candidates = [
        mechanism_from_config({"mechanism": m, "epsilon": epsilon, "k": K}) for m in ORACLES
    ]
    return min(candidates, key=lambda m: m.total_variance(n))


def accuracy(n: int, rng: np.random.Generator) -> None:
    weights = 1.0 / np.arange(1, K + 1) ** 1.1
    truth = weights / weights.sum()
    values = rng.choice(K, size=n, p=truth)
    true_f = np.bincount(values, minlength=K) / n
    epsilon0 = calibrate_local_epsilon(CENTRAL_EPSILON, n, DELTA)
    rows = []
    for label, epsilon in (("local-only", CENTRAL_EPSILON), ("shuffled", epsilon0)):
        mechanism = best_oracle(epsilon, n)
        exact = mechanism.total_variance(n)
        reports = mechanism.perturb(values, rng=rng)
        measured = float(np.sum((estimate(mechanism, reports).frequencies - true_f) ** 2))
        rows.append((label, epsilon, mechanism.to_config()["mechanism"], exact, measured))
    for label, epsilon, name, exact, measured in rows:
        print(
            f"  n={n:>8} {label:<10} eps={epsilon:6.3f} {name:<4} "
            f"MSE exact {exact:.3e} measured {measured:.3e}"
        )
    print(
        f"  n={n:>8} local/shuffled MSE: exact {rows[0][3] / rows[1][3]:,.0f}x, "
        f"measured {rows[0][4] / rows[1][4]:,.0f}x"
    )


def throughput(reports: int) -> None:
    from client_sdk.client import TelemetryClient
    from collector.process import CollectorProcess
    from shuffler.process import ShufflerProcess

    with tempfile.TemporaryDirectory() as root_text:
        root = Path(root_text)
        collector = CollectorProcess(root / "collector.db", workers=2, log_dir=root)
        collector.env["LDP_SHUFFLER_TOKEN"] = token = os.urandom(24).hex()
        collector.start()
        shuffler = ShufflerProcess(root / "shuffler.db", collector.url, token=token, log_dir=root)
        shuffler.start()
        try:
            labels = [str(i) for i in range(4)]
            base = {"mechanism": {"mechanism": "grr", "k": 4}, "domain": labels}
            collector.create_campaign(
                {
                    **base,
                    "name": "shuffled",
                    "shuffle": {"min_batch": 1000, "central_epsilon": 1.0, "delta": DELTA},
                }
            )
            collector.create_campaign(
                {
                    **base,
                    "name": "direct",
                    "mechanism": {"mechanism": "grr", "k": 4, "epsilon": 1.0},
                }
            )
            values = [labels[i % 4] for i in range(reports)]
            rates = {}
            for name in ("direct", "shuffled"):
                with TelemetryClient(
                    collector.url,
                    state_dir=root / f"device-{name}",
                    shuffler_url=shuffler.url,
                    batch_size=5000,
                ) as client:
                    client.record_many(name, values)
                    start = time.perf_counter()
                    client.flush()
                    while _stored(collector.db, name) < reports - (
                        reports % 1000 if name == "shuffled" else 0
                    ):
                        time.sleep(0.02)
                    rates[name] = reports / (time.perf_counter() - start)
            print(
                f"  {reports} reports: direct {rates['direct']:,.0f}/s, shuffled "
                f"{rates['shuffled']:,.0f}/s end to end "
                f"(ratio {rates['shuffled'] / rates['direct']:.2f})"
            )
        finally:
            shuffler.stop()
            collector.stop()


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=20_000)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(20261201)  # the simulated population; devices use the CSPRNG
    print(f"accuracy at central (eps, delta) = ({CENTRAL_EPSILON}, {DELTA:g}), k = {K}:")
    for n in (int(s) for s in args.sizes.split(",")):
        accuracy(n, rng)
    if not args.skip_throughput:
        print("throughput over loopback (gunicorn, 2 workers each):")
        throughput(args.reports)


if __name__ == "__main__":
    main()
