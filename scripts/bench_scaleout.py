"""Scale-out figures: OLH (k = 1024) reports in Parquet, aggregated in one process and on Dask.

    .venv/bin/python scripts/bench_scaleout.py [--reports 100000000] [--sqlite-reports 1000000]
    .venv/bin/python scripts/bench_scaleout.py --keep /tmp/lake-1e8 [--reuse] [--repeats 1]

In a temporary directory (deleted afterwards unless ``--keep DIR``; ``--reuse`` aggregates again
what an earlier run kept there, skipping steps 1 and 2; 10^8 reports take about 2.75 GB):

1. ``--sqlite-reports`` OLH reports uploaded into a collector database (``Storage``), exported
   with ``ldp-collector export``'s function: the export rate (reports/s) and the bytes per report
   in SQLite and in the exported Parquet.
2. ``--reports`` OLH reports generated straight into an export directory (files of
   ``--file-rows`` reports, one day each, sorted by id, in the export's schema).
3. Their aggregation (``analysis.sources``: id-range partitions, de-duplication, tree merge) in
   one process, then on a LocalCluster of 1 and of 2 worker processes (one thread each): the
   wall times (the fastest of ``--repeats``), the scaling efficiency T1 / (2 T2) and the peak
   resident memory of each worker. All three statistics are checked to be identical. On a
   machine shared with other jobs wall times measure the contention, so the CPU seconds of
   each worker (and the efficiency the busiest one gives) are printed too, with the load
   average.

Figures depend on the machine; the README and docs/scale-out.md quote a run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from analysis import distributed, sources
from client_sdk.mechanisms import mechanism_from_config
from collector import export
from collector.storage import Storage, StoredCampaign

CONFIG = {"mechanism": "olh", "epsilon": 1.0, "k": 1024}
NAME = "bench-olh"


def campaign_document() -> dict[str, Any]:
    return {
        "name": NAME,
        "mechanism": CONFIG,
        "domain": [f"item-{i}" for i in range(CONFIG["k"])],
        "min_batch_size": 1,
    }


def sqlite_figures(directory: Path, n: int, rng: np.random.Generator) -> dict[str, float]:
    """Upload n reports into SQLite, export them; bytes per report and the export rate."""
    db = directory / "collector.db"
    with Storage(db, synchronous="NORMAL") as storage:
        storage.create_campaign(campaign_document())
        mechanism = storage.get_campaign(NAME).mechanism
        for start in range(0, n, 100_000):
            size = min(100_000, n - start)
            reports = mechanism.perturb(rng.integers(0, CONFIG["k"], size), rng=rng)
            payloads = [json.dumps(p, separators=(",", ":")) for p in mechanism.to_wire(reports)]
            ids = [secrets.token_hex(16) for _ in range(size)]
            storage.insert_reports(NAME, list(zip(ids, payloads, strict=True)), day="2026-05-01")
        storage.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sqlite_bytes = db.stat().st_size
    out = directory / "exported"
    result = export.export_campaign(db, NAME, out)
    parquet_bytes = sum(p.stat().st_size for p in out.rglob("*.parquet"))
    return {
        "sqlite_reports": n,
        "sqlite_bytes_per_report": sqlite_bytes / n,
        "export_reports_per_s": result.exported / result.seconds,
        "export_seconds": result.seconds,
        "exported_parquet_bytes_per_report": parquet_bytes / n,
    }


def generate_lake(
    directory: Path, stored: StoredCampaign, n: int, file_rows: int, rng: np.random.Generator
) -> tuple[Path, float]:
    """n OLH reports straight into an export directory; returns it and its seconds."""
    started = time.perf_counter()
    lake = directory / "lake"
    lake.mkdir()
    (lake / export.CAMPAIGN_DOCUMENT).write_text(json.dumps(stored.document()))
    mechanism = stored.mechanism
    files = []
    for index, start in enumerate(range(0, n, file_rows)):
        size = min(file_rows, n - start)
        reports = mechanism.perturb(rng.integers(0, CONFIG["k"], size), rng=rng)
        ids = rng.integers(0, 256, (size, export.ID_BYTES), dtype=np.uint8).view("V16")[:, 0]
        table, _ = export.build_table(stored, ids, reports)
        day = f"2026-05-{1 + index % 28:02d}"
        relative = f"day={day}/part-{start + 1:016d}-{start + size:016d}.parquet"
        (lake / relative).parent.mkdir(exist_ok=True)
        export.write_table(pq, table, lake / relative)
        files.append({"path": relative, "day": day, "rows": size})
    export.Manifest(
        campaign=stored.name, config_id=stored.config_id, source="generated", scans=[], files=files
    ).save(lake)
    return lake, time.perf_counter() - started


def _peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM: per address space, so not inherited through
    fork and exec as ``ru_maxrss`` is), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak_rss() -> None:
    """Start the peak over from the current resident set (Linux >= 4.0)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def on_cluster(
    work: sources.Plan, workers: int, repeats: int
) -> tuple[Any, float, list[float], list[float]]:
    """The merged statistic, the fastest wall time, each worker's CPU seconds in the run with
    the least CPU on its busiest worker, and each worker's peak memory."""
    with distributed.connect(f"local:{workers}") as client:
        client.wait_for_workers(workers)
        client.run(lambda: mechanism_from_config(CONFIG))  # imports and warm-up, not timed
        client.run(_reset_peak_rss)
        times: list[float] = []
        cpu: list[list[float]] = []
        for _ in range(repeats):
            before = client.run(time.process_time)
            started = time.perf_counter()
            merged = distributed.aggregate_distributed(client, work)
            times.append(time.perf_counter() - started)
            after = client.run(time.process_time)
            cpu.append(sorted((after[w] - before[w] for w in after), reverse=True))
        peaks = sorted(client.run(_peak_rss_mib).values())
    return merged, min(times), min(cpu, key=max), peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=100_000_000)
    parser.add_argument("--sqlite-reports", type=int, default=1_000_000)
    parser.add_argument("--file-rows", type=int, default=1_000_000)
    parser.add_argument("--keep", default=None, help="keep the data in this directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs each (the fastest)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep DIR: aggregate the reports an earlier run left there (no SQLite "
        "figures, no generation)",
    )
    args = parser.parse_args()
    if args.reuse and not args.keep:
        parser.error("--reuse needs --keep DIR")
    rng = np.random.default_rng(args.seed)
    directory = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    directory.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"reports": args.reports, "k": CONFIG["k"], "cpus": os.cpu_count()}
    figures["load_average_at_start"] = os.getloadavg()
    try:
        lake = directory / "lake"
        if args.reuse:
            manifest = export.Manifest.load(lake)
            if manifest is None or manifest.rows != args.reports:
                raise SystemExit(f"--reuse: {lake} does not hold {args.reports} reports")
        else:
            shutil.rmtree(directory / "exported", ignore_errors=True)
            shutil.rmtree(lake, ignore_errors=True)
            for stale in directory.glob("collector.db*"):
                stale.unlink()
            figures.update(sqlite_figures(directory, args.sqlite_reports, rng))
            print(json.dumps(figures, indent=1), flush=True)
            stored = sources.SqliteSource(str(directory / "collector.db")).campaign(NAME)
            lake, seconds = generate_lake(directory, stored, args.reports, args.file_rows, rng)
            figures["generate_seconds"] = seconds
        lake_bytes = sum(p.stat().st_size for p in lake.rglob("*.parquet"))
        figures["parquet_bytes_per_report"] = lake_bytes / args.reports
        print(json.dumps(figures, indent=1), flush=True)
        work = sources.plan(NAME, parquets=[str(lake)])
        figures["partitions"] = 1 << work.bits
        _reset_peak_rss()
        times, cpu = [], []
        for _ in range(args.repeats):
            started, started_cpu = time.perf_counter(), time.process_time()
            local = sources.aggregate_local(work)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        figures["one_process_seconds"] = min(times)
        figures["one_process_cpu_seconds"] = min(cpu)
        figures["one_process_peak_rss_mib"] = _peak_rss_mib()
        print(json.dumps(figures, indent=1), flush=True)
        for workers in (1, 2):
            merged, seconds, per_worker, peaks = on_cluster(work, workers, args.repeats)
            assert merged.statistic == local.statistic, "Dask differs from one process"
            figures[f"dask_{workers}_seconds"] = seconds
            figures[f"dask_{workers}_worker_cpu_seconds"] = per_worker
            figures[f"dask_{workers}_busiest_worker_cpu_seconds"] = max(per_worker)
            figures[f"dask_{workers}_worker_peak_rss_mib"] = peaks
        figures["scaling_efficiency_1_to_2"] = figures["dask_1_seconds"] / (
            2 * figures["dask_2_seconds"]
        )
        # On a machine shared with other jobs the wall times measure the contention; the CPU
        # seconds of the busiest worker are what the job would take on dedicated cores.
        figures["cpu_scaling_efficiency_1_to_2"] = figures["dask_1_busiest_worker_cpu_seconds"] / (
            2 * figures["dask_2_busiest_worker_cpu_seconds"]
        )
        figures["reports_per_s_one_process"] = args.reports / figures["one_process_seconds"]
        figures["load_average_1_5_15"] = os.getloadavg()
        print(json.dumps(figures, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
