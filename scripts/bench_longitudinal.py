"""Benchmark: memoized reports, dBitFlip, 1BitMean and the privacy ledger.

Figures: the device-side cost of one memoized record (HMAC derivation of the permanent response,
then the instantaneous step) against the unmemoized mechanism; simulation and aggregation rates
for a fleet; the cost of one ``BudgetLedger.authorize`` (a durable SQLite transaction). No issue
sets numeric targets for these; the ratio to the unmemoized record is the figure to watch.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import numpy as np

from client_sdk import mechanism_from_config
from client_sdk.budget import BudgetLedger
from client_sdk.mechanisms.memoized_oracle import Memoized
from client_sdk.secrets_store import DeviceKeys

SECRET = bytes(range(32))
SCOPE = "bench-config"


def per_call(function: Callable[[], object], calls: int) -> float:
    """Median seconds per call over three rounds of ``calls`` calls."""
    rounds = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        rounds.append((time.perf_counter() - started) / calls)
    return sorted(rounds)[1]


def run(args: argparse.Namespace) -> None:
    quick = bool(getattr(args, "quick", False))
    calls = 200 if quick else 2000
    fleet = 100_000 if quick else 1_000_000
    rng = np.random.default_rng(0)

    print("device record (one value, OS CSPRNG), memoized vs plain, epsilon 1, E 3:")
    for name, k in (("grr", 16), ("oue", 64), ("olh", 1024), ("ss", 64), ("hr", 1024)):
        m = mechanism_from_config(
            {"mechanism": name, "epsilon": 1.0, "k": k, "longitudinal": {"epsilon_permanent": 3.0}}
        )
        assert isinstance(m, Memoized)
        plain = mechanism_from_config({"mechanism": name, "epsilon": 1.0, "k": k})
        value = [k // 2]
        memo = per_call(
            lambda m=m, v=value: m.perturb(v, permanent=DeviceKeys(SECRET, SCOPE)), calls
        )
        base = per_call(lambda p=plain, v=value: p.perturb(v), calls)
        keys = per_call(
            lambda m=m, v=value: m.memo_keys(v, permanent=DeviceKeys(SECRET, SCOPE)), calls
        )
        values = rng.integers(0, k, fleet)
        started = time.perf_counter()
        reports = m.perturb_independent_devices(values, rng=rng)
        simulate = fleet / (time.perf_counter() - started)
        started = time.perf_counter()
        m.estimate_frequencies(m.aggregate(reports))
        aggregate = fleet / (time.perf_counter() - started)
        print(
            f"  {name:>4} k={k:<5} chain={m.chain:<8} record {memo * 1e6:7.1f} us "
            f"(plain {base * 1e6:6.1f} us, x{memo / base:4.1f}); memo key {keys * 1e6:5.1f} us; "
            f"fleet {simulate / 1e6:5.2f} M reports/s, aggregate {aggregate / 1e6:5.2f} M/s"
        )

    for config in (
        {"mechanism": "dbitflip", "epsilon": 1.0, "k": 1024, "d": 4},
        {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 86400, "buckets": 8},
    ):
        m = mechanism_from_config(config)
        sample = 5.0 if config["mechanism"] == "dbitflip" else 3600.0
        value = int(sample) if config["mechanism"] == "dbitflip" else sample
        record = per_call(
            lambda m=m, v=value: m.perturb([v], permanent=DeviceKeys(SECRET, SCOPE)),  # type: ignore[attr-defined]
            calls,
        )
        values = (
            rng.integers(0, 1024, fleet)
            if config["mechanism"] == "dbitflip"
            else rng.uniform(0, 86400, fleet)
        )
        started = time.perf_counter()
        reports = m.perturb_independent_devices(values, rng=rng)  # type: ignore[attr-defined]
        simulate = fleet / (time.perf_counter() - started)
        started = time.perf_counter()
        m.aggregate(reports)
        aggregate = fleet / (time.perf_counter() - started)
        print(
            f"  {config['mechanism']:>10}: memoized record {record * 1e6:7.1f} us; fleet "
            f"{simulate / 1e6:5.2f} M reports/s; aggregate {aggregate / 1e6:5.2f} M/s"
        )

    policy = {"epsilon_per_report": 1.0, "reports_per_period": 10**9, "period_seconds": 86400}
    with tempfile.TemporaryDirectory() as state, BudgetLedger(state) as ledger:
        spends = 50 if quick else 300
        counter = iter(range(10**9))
        cost = per_call(
            lambda: ledger.authorize("bench", policy, epsilon=0.001, report=next(counter)),
            spends,
        )
        repeat = per_call(
            lambda: ledger.authorize("memo", policy, epsilon=1.0, memo_key="a" * 64, report=1),
            spends,
        )
    print(
        f"  ledger.authorize (WAL, synchronous=FULL): {cost * 1e3:.2f} ms per charged report, "
        f"{repeat * 1e3:.2f} ms per memoized repeat"
    )
