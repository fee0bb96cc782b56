"""Categorical frequency oracles: encode throughput, aggregation+estimation time, peak memory and
accuracy for every registered oracle, at n = 10^6, k in {64, 1024}, eps in {1, 4} (issue 2, 6).

Targets (one core of this machine; issue 2 section 6):
- encode with a seeded numpy generator: >= 10^6 reports/s for GRR, HR, OLH (and BLH, also a
  hashing report); >= 10^8 output bits/s for SUE, OUE and SS (whose report is a k-bit vector; SS
  also shows subset members/s); with the CSPRNG default (rng=None) at least a fifth of those;
- OLH aggregation+estimation of 10^6 reports at k = 1024: <= 10 s;
- empirical MSE / exact variance within 0.9-1.1 (averaged over seeds);
- streaming: 10^7 OUE reports at k = 1024, generated and aggregated chunk by chunk, peak memory
  under 1 GiB.

Method. The population is fixed (Zipf-like counts, every item present) and the exact variance is
the fixed-population formula of each oracle (its docs/math page). Each step is timed as CPU
seconds of this process (``time.process_time``, user + system: the work of the one core it ran
on, which is what the targets are judged on, as other processes may share the cores) and as
wall-clock seconds, shown beside it; the load average is printed first. Peak memory per row is
``tracemalloc``'s peak of Python and numpy allocations during the step (measured on a run other
than the timed one, so tracing costs no time); "agg MiB" excludes the reports, which are streamed
in chunks of 10^5 through ``analysis.estimate``. The streaming check runs in a fresh process and
reports its whole peak resident set (``resource.getrusage(...).ru_maxrss``), interpreter and
numpy included. MSE ratio: sum over items of squared errors over the sum of exact variances,
averaged over seeds (enough that k * seeds >= 2000: its standard error, shown after +-, is
about 0.03; --quick uses n = 10^5, k * seeds >= 1000 and 10^6 streamed reports).
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis import estimate
from client_sdk.mechanisms import MECHANISMS, mechanism_class, mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle

EXPECTED = ("grr", "sue", "oue", "blh", "olh", "hr", "ss")
REPORT_RATE = {"grr": 1e6, "hr": 1e6, "olh": 1e6, "blh": 1e6}
BIT_RATE = {"sue": 1e8, "oue": 1e8, "ss": 1e8}
CSPRNG_FRACTION = 0.2
OLH_AGGREGATION_SECONDS = 10.0
MSE_RANGE = (0.9, 1.1)
STREAM_LIMIT_BYTES = 1 << 30
CHUNK = 100_000
MIB = 1 << 20


@dataclass
class Clock:
    """Wall-clock and CPU seconds of one step (CPU: this process only, i.e. one core's work)."""

    wall: float = math.nan
    cpu: float = math.nan


@dataclass
class Row:
    name: str
    k: int
    epsilon: float
    detail: str = ""
    encode_seeded: Clock = field(default_factory=Clock)  # for n reports
    encode_csprng: Clock = field(default_factory=Clock)
    aggregate: Clock = field(default_factory=Clock)
    encode_peak: float = math.nan  # bytes
    aggregate_peak: float = math.nan
    ratios: list[float] = field(default_factory=list)
    ratio_se: float = math.nan


def population(k: int, n: int) -> np.ndarray:
    """A fixed population of n users with Zipf(1.1)-like counts, every item present."""
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    counts = np.maximum(1, np.floor(weights / weights.sum() * n)).astype(np.int64)
    counts[0] += n - counts.sum()
    values = np.repeat(np.arange(k), counts)
    return np.random.default_rng(0).permutation(values)


def chunks(reports: np.ndarray) -> Iterator[np.ndarray]:
    for start in range(0, len(reports), CHUNK):
        yield reports[start : start + CHUNK]


def timed(fn: Callable[[], Any]) -> tuple[Any, Clock]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, Clock(time.perf_counter() - wall, time.process_time() - cpu)


def traced(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run fn under tracemalloc; return its value and the peak bytes allocated meanwhile."""
    tracemalloc.start()
    try:
        value = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return value, float(peak)


def squared_error_ratio(m: FrequencyOracle, reports: np.ndarray, truth: np.ndarray) -> float:
    est = estimate(m, chunks(reports))
    return float(((est.frequencies - truth) ** 2).sum() / m.variance(est.n, truth).sum())


def bench_one(m: FrequencyOracle, n: int, seeds: int) -> Row:
    values = population(m.k, n)
    truth = np.bincount(values, minlength=m.k) / n
    config = m.to_config()
    detail = ", ".join(
        f"{key}={v}" for key, v in config.items() if key not in {"mechanism", "epsilon", "k"}
    )
    row = Row(m.name, m.k, m.epsilon, detail)
    # Seed 0: timed encode and timed aggregation+estimation (no tracing).
    seeded, row.encode_seeded = timed(lambda: m.perturb(values, rng=np.random.default_rng(0)))
    est, row.aggregate = timed(lambda: estimate(m, chunks(seeded)))
    row.ratios.append(float(((est.frequencies - truth) ** 2).sum() / m.variance(n, truth).sum()))
    seeded = None
    # The CSPRNG: timed encode; its aggregation is traced for memory.
    default, row.encode_csprng = timed(lambda: m.perturb(values))
    ratio, row.aggregate_peak = traced(lambda: squared_error_ratio(m, default, truth))
    row.ratios.append(ratio)
    default = None
    # Seed 1: traced encode (output included); further seeds untimed.
    for seed in range(1, seeds - 1):
        rng = np.random.default_rng(seed)
        if seed == 1:
            reports, row.encode_peak = traced(functools.partial(m.perturb, values, rng=rng))
        else:
            reports = m.perturb(values, rng=rng)
        row.ratios.append(squared_error_ratio(m, reports, truth))
    variances = m.variance(n, truth)
    # Var of sum of squared normal errors: 2 * sum(var^2) (items treated as independent).
    row.ratio_se = (
        math.sqrt(2 * (variances**2).sum()) / variances.sum() / math.sqrt(len(row.ratios))
    )
    return row


def status(value: float, ok: bool) -> str:
    return "-" if math.isnan(value) else ("PASS" if ok else "MISS")


def encode_lines(row: Row, n: int) -> list[str]:
    """Rates per CPU second (one core's work; judged against the target) and per wall second."""
    lines = []
    for label, clock, fraction in (
        ("seeded", row.encode_seeded, 1.0),
        ("CSPRNG", row.encode_csprng, CSPRNG_FRACTION),
    ):
        per_cpu, per_wall = n / clock.cpu, n / clock.wall
        figures = f"    {label:<7}{per_cpu:>10.3g} rep/s (wall {per_wall:.3g})"
        if row.name in BIT_RATE:
            target = BIT_RATE[row.name] * fraction
            bits = per_cpu * row.k
            figures += f"{bits:>10.3g} bits/s"
            ok = bits >= target
            if row.name == "ss":
                members = per_cpu * _subset_size(row)
                figures += f" {members:>9.3g} members/s"
                ok = ok or members >= target
            lines.append(f"{figures}   target >= {target:.3g}  {'PASS' if ok else 'MISS'}")
        elif row.name in REPORT_RATE:
            target = REPORT_RATE[row.name] * fraction
            verdict = "PASS" if per_cpu >= target else "MISS"
            lines.append(f"{figures}   target >= {target:.3g} rep/s  {verdict}")
        else:
            lines.append(f"{figures}   (no target)")
    return lines


def _subset_size(row: Row) -> int:
    return int(row.detail.split("d=")[1].split(",")[0])


def print_rows(rows: list[Row], n: int) -> None:
    print(
        f"\nEncode throughput, n = {n:,}: per CPU second of this process (wall clock in brackets)"
    )
    for row in rows:
        print(f"  {row.name:<5} k={row.k:<5} eps={row.epsilon:g} {row.detail}")
        for line in encode_lines(row, n):
            print(line)
    print(f"\nAggregation + estimation (streamed in chunks of {CHUNK:,}), peak memory, accuracy")
    header = (
        f"  {'mech':<5}{'k':>6}{'eps':>5}{'cpu s':>9}{'wall s':>9}{'target':>9}{'':>6}"
        f"{'enc MiB':>9}{'agg MiB':>9}{'MSE/Var':>9}{'+-':>7}{'seeds':>6}  0.9-1.1"
    )
    print(header)
    for row in rows:
        target, verdict = "-", ""
        if row.name == "olh" and row.k == 1024:
            target = f"<= {OLH_AGGREGATION_SECONDS:g}"
            verdict = status(row.aggregate.cpu, row.aggregate.cpu <= OLH_AGGREGATION_SECONDS)
        ratio = float(np.mean(row.ratios))
        ok = MSE_RANGE[0] <= ratio <= MSE_RANGE[1]
        print(
            f"  {row.name:<5}{row.k:>6}{row.epsilon:>5g}{row.aggregate.cpu:>9.3g}"
            f"{row.aggregate.wall:>9.3g}{target:>9}{verdict:>6}{row.encode_peak / MIB:>9.1f}"
            f"{row.aggregate_peak / MIB:>9.1f}{ratio:>9.3f}{row.ratio_se:>7.3f}"
            f"{len(row.ratios):>6}  {status(ratio, ok)}"
        )


def stream_oue(total: int, k: int, chunk: int, queue: Any) -> None:
    """In a fresh process: generate and aggregate ``total`` OUE reports chunk by chunk."""
    m = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": k})
    assert isinstance(m, FrequencyOracle)
    rng = np.random.default_rng(7)
    values = np.arange(chunk, dtype=np.int64) % k

    def generate() -> Iterator[np.ndarray]:
        for _ in range(total // chunk):
            yield m.perturb(values, rng=rng)

    started = time.perf_counter()
    est = estimate(m, generate())
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    worst = float(np.max(np.abs(est.frequencies - 1 / k) / est.std_errors))
    queue.put((est.n, seconds, peak_kib * 1024, worst))


def streaming_check(total: int, k: int = 1024, chunk: int = 200_000) -> None:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=stream_oue, args=(total, k, chunk, queue))
    process.start()
    n, seconds, peak, worst = queue.get()
    process.join()
    verdict = "PASS" if peak < STREAM_LIMIT_BYTES else "MISS"
    print(
        f"\nStreaming: {n:,} OUE reports at k={k}, generated and aggregated in chunks of "
        f"{chunk:,}: {seconds:.1f} s ({n / seconds:.3g} rep/s end to end), peak RSS of the "
        f"process {peak / MIB:.0f} MiB (target < 1024 MiB) {verdict}; "
        f"max |z| of the estimate {worst:.2f}"
    )


def run(args: argparse.Namespace) -> None:
    quick = bool(getattr(args, "quick", False))
    n = 100_000 if quick else 1_000_000
    stream_total = 1_000_000 if quick else 10_000_000
    min_samples = 1000 if quick else 2000
    print(
        f"n = {n:,}; cpus = {os.cpu_count()}; load average {os.getloadavg()[0]:.2f} "
        "(targets are judged on CPU time; wall clock is shown beside it)"
    )
    names = []
    for name in MECHANISMS:
        cls = mechanism_class(name)
        if name != "auto" and issubclass(cls, FrequencyOracle):
            names.append(name)
    missing = [name for name in EXPECTED if name not in MECHANISMS]
    if missing:
        print(f"note: not registered, skipped: {', '.join(missing)}")
    rows: list[Row] = []
    for name in names:
        for k in (64, 1024):
            for epsilon in (1.0, 4.0):
                try:
                    m = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": k})
                except ValueError as error:
                    print(f"note: skipped {name} (k={k}, eps={epsilon:g}): {error}")
                    continue
                assert isinstance(m, FrequencyOracle)
                seeds = max(3, math.ceil(min_samples / k))
                rows.append(bench_one(m, n, seeds))
                print(
                    f"  done {name} k={k} eps={epsilon:g} ({len(rows[-1].ratios)} seeds)",
                    file=sys.stderr,
                    flush=True,
                )
    print_rows(rows, n)
    for k in (64, 1024):
        for epsilon in (1.0, 4.0):
            pick = mechanism_from_config({"mechanism": "auto", "epsilon": epsilon, "k": k})
            print(f"auto for k={k}, eps={epsilon:g}: {pick.to_config()}")
    streaming_check(stream_total)
