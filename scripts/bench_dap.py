"""DAP (docs/dap.md), measured: upload throughput at the Leader, the pair's aggregation
throughput against Prio3's batched verification, one collection end to end, and the accuracy
of the three trust models at the issue's point. Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_dap.py [--quick] [--e2e 10000] [--json]

- **upload**: a Leader and a Helper (``collector.process.CollectorProcess``: real gunicorn
  processes, real SQLite files), a task provisioned on each through ``ldp-collector dap``;
  reports prepared beforehand by the device code (``client_sdk.dap.upload.prepare_report``:
  shard, seal to both aggregators; its time is given apart), then posted to the Leader one per
  request from ``--clients`` threads (what a fleet does) and 100 per request. Histogram of
  length 16 and 1024. Wall clock (on a shared machine it includes the neighbours: the load is
  printed).
- **aggregation**: the Leader's driver (``collector.dap.aggregator.drive``, run in this process:
  decrypt, batched ``verify_init``, one job to the Helper per ``--job-size`` reports, finish,
  add into buckets) over the uploaded Histogram-16 reports; CPU seconds of this process plus the
  Helper's processes (``/proc``), so reports/s per core. Beside it, Prio3's own batched
  ``verify_init`` for both aggregators (``client_sdk.vdaf.batch.verify_init_batch``, the figure
  ``bench_prio3.py`` prints per report) on the same VDAF: their ratio is the protocol's overhead
  (HPKE, encoding, SQLite, HTTP).
- **end to end**: ``--e2e`` Histogram-16 reports (default 10^4; 10^5 supported) uploaded, driven
  and collected (``analysis.dap_collect.collect`` against the Leader, noise ``laplace:1``).
- **accuracy**: epsilon 1, Histogram length 100, n = 10^5 and 10^6 (``--quick``: 10^5): the
  standard error of one bucket's frequency under local OLH, shuffled OLH and DAP, beside the
  Laplace curator's, and the share of the log distance to the curator each closes
  (``analysis.kinds.frequencies.gap.trust_models``); measured in a seeded simulation too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from client_sdk.dap.messages import HpkeConfigList, Interval, Report, UploadErrors, UploadRequest
from client_sdk.dap.upload import DapTask, prepare_report, select_hpke_config
from collector.dap.task import TaskSpec, b64encode
from collector.process import CollectorProcess

TIME_PRECISION = 3600
AGGREGATOR_TOKEN = "bench-aggregator-token-" + "a" * 16
COLLECTOR_TOKEN = "bench-collector-token-" + "c" * 16
UPLOAD_MEDIA = {"Content-Type": UploadRequest.MEDIA_TYPE}


def _cli(*args: str) -> str:
    """``ldp-collector ARGS`` in this process (``collector.cli.main``, the command's own code,
    without a Python start per call); its stdout."""
    from collector.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    if code != 0:
        raise RuntimeError(f"ldp-collector {' '.join(args[:3])} exited with {code}")
    return out.getvalue()


class Pair:
    """A Leader and a Helper process; :meth:`task` provisions a task on both (docs/dap.md)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        # serve's own driver off: the benchmark drives, and times, the aggregation itself.
        off = ["--dap-drive-interval", "0"]
        self.leader = CollectorProcess(
            tmp / "leader.db", workers=2, log_dir=tmp, extra_args=off
        ).start()
        try:
            self.helper = CollectorProcess(
                tmp / "helper.db", workers=1, log_dir=tmp, extra_args=off
            ).start()
        except BaseException:
            self.leader.stop()
            raise
        collector_key = tmp / "collector-key.json"
        self.collector_config = _cli("dap", "keygen", "--out", str(collector_key)).strip()
        self.collector_private_key = _private_key(collector_key)
        for role in ("leader", "helper"):
            _cli("dap", "keygen", "--out", str(tmp / f"{role}-key.json"))

    def task(self, vdaf: dict[str, Any], *, dp: str, min_batch_size: int) -> Task:
        document = {
            "task_id": b64encode(os.urandom(32)),
            "task_info": "bench_dap",
            "leader": f"{self.leader.url}/dap/",
            "helper": f"{self.helper.url}/dap/",
            "vdaf": vdaf,
            "min_batch_size": min_batch_size,
            "time_precision": TIME_PRECISION,
            "dp": dp,
        }
        task_file = self.tmp / f"task-{document['task_id']}.json"
        task_file.write_text(json.dumps(document))
        spec = TaskSpec.load(str(task_file))
        verify_key = b64encode(os.urandom(spec.build_vdaf().VERIFY_KEY_SIZE))
        for role, server in (("leader", self.leader), ("helper", self.helper)):
            _cli(
                "dap", "task", "add", "--db", server.db, "--task", str(task_file),
                "--role", role, f"--verify-key={verify_key}",
                "--hpke-key", str(self.tmp / f"{role}-key.json"),
                f"--collector-hpke-config={self.collector_config}",
                "--aggregator-token", AGGREGATOR_TOKEN,
                "--collector-token", COLLECTOR_TOKEN if role == "leader" else "",
            )  # fmt: skip
        return Task(self, spec)

    def stop(self) -> None:
        self.leader.stop()
        self.helper.stop()


class Task:
    """One provisioned task: what devices upload to and the Collector collects."""

    def __init__(self, pair: Pair, spec: TaskSpec) -> None:
        self.pair = pair
        self.spec = spec
        self.url = f"{pair.leader.url}/dap/tasks/{spec.task_id_text}/reports"

    def device_task(self) -> DapTask:
        """What a device builds: each aggregator's HpkeConfig fetched over HTTP."""
        configs = []
        for name, server in (("leader", self.pair.leader), ("helper", self.pair.helper)):
            answer = requests.get(
                f"{server.url}/dap/hpke_config",
                params={"task_id": self.spec.task_id_text},
                timeout=30,
            )
            answer.raise_for_status()
            configs.append(select_hpke_config(HpkeConfigList.decode(answer.content), name))
        return DapTask(
            self.spec.task_id,
            self.spec.configuration(),
            self.spec.build_vdaf(),
            configs[0],
            configs[1],
        )

    def post(self, session: requests.Session, reports: Sequence[Report]) -> None:
        answer = session.post(
            self.url, data=UploadRequest(tuple(reports)).encode(), headers=UPLOAD_MEDIA, timeout=60
        )
        if answer.status_code != 200 or UploadErrors.decode(answer.content).status:
            raise RuntimeError(f"upload refused: {answer.status_code} {answer.content[:300]!r}")


def _private_key(path: Path) -> bytes:
    from collector.dap.cli import read_key

    return read_key(str(path))[1]


def _session_cpu(pid: int) -> float:
    """CPU seconds (user + system) of every live process in the session ``pid`` leads (a
    ``CollectorProcess`` runs in its own session: the gunicorn master and its workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == pid:  # field 6 of stat, the session id
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _prepare(task: DapTask, values: Sequence[int]) -> tuple[list[Report], float]:
    """Reports for ``values`` and the CPU seconds per report the device code took."""
    start = time.process_time()
    reports = [prepare_report(task, v) for v in values]
    return reports, (time.process_time() - start) / max(1, len(values))


def _upload(task: Task, reports: Sequence[Report], *, per_request: int, clients: int) -> float:
    """Post ``reports`` from ``clients`` threads, ``per_request`` each; wall seconds."""
    chunks = [reports[i : i + per_request] for i in range(0, len(reports), per_request)]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        with requests.Session() as session:
            try:
                for chunk in chunks[index::clients]:
                    task.post(session, chunk)
            except BaseException as error:  # reported below, the bench stops
                errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def bench_upload(pair: Pair, length: int, count: int, clients: int) -> dict[str, Any]:
    chunk = max(1, math.isqrt(length))
    task = pair.task(
        {"type": "histogram", "length": length, "chunk_length": chunk}, dp="none", min_batch_size=1
    )
    reports, prepare_cpu = _prepare(task.device_task(), [i % length for i in range(2 * count)])
    single = _upload(task, reports[:count], per_request=1, clients=clients)
    batched = _upload(task, reports[count:], per_request=100, clients=clients)
    return {
        "histogram_length": length,
        "reports": count,
        "report_bytes": len(reports[0].encode()),
        "device_prepare_ms": 1e3 * prepare_cpu,
        "one_per_request_per_s": count / single,
        "hundred_per_request_per_s": count / batched,
        "clients": clients,
        "leader_workers": 2,
    }


def _drive(task: Task, job_size: int) -> tuple[dict[str, int], float, float, float]:
    """Run the Leader's driver here; (totals, wall s, Leader CPU s, Helper CPU s)."""
    from collector.dap import aggregator
    from collector.dap.api import send
    from collector.storage import Storage

    helper_pid = task.pair.helper.process.pid  # type: ignore[union-attr]
    helper_before = _session_cpu(helper_pid)
    cpu, wall = time.process_time(), time.perf_counter()
    with Storage(task.pair.leader.db, create=False) as storage:
        conn = storage.db.conn
        leader_task = aggregator.load_task(conn, task.spec.task_id_text, "leader")
        totals = aggregator.drive(conn, leader_task, send, job_size=job_size)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    helper = _session_cpu(helper_pid) - helper_before
    return totals, wall, cpu, helper


def prio3_batch_per_s(length: int, batch: int) -> float:
    """Reports/s per core of Prio3's batched verify_init for both aggregators (the batch figure
    of bench_prio3.py, on a Histogram of this length)."""
    from client_sdk.vdaf import Prio3Histogram
    from client_sdk.vdaf.batch import verify_init_batch

    vdaf = Prio3Histogram(2, length, max(1, math.isqrt(length)))
    ctx, key = b"bench_dap", os.urandom(vdaf.VERIFY_KEY_SIZE)
    distinct = 20  # verification costs the same for repeated reports
    nonces = [os.urandom(vdaf.NONCE_SIZE) for _ in range(distinct)]
    sharded = [vdaf.shard(ctx, i % length, n, os.urandom(vdaf.RAND_SIZE)) for i, n in
               enumerate(nonces)]  # fmt: skip
    nonces = (nonces * (batch // distinct + 1))[:batch]
    sharded = (sharded * (batch // distinct + 1))[:batch]
    publics = [vdaf.encode_public_share(p) for p, _ in sharded]
    inputs = [[vdaf.encode_input_share(s[j]) for _, s in sharded] for j in range(2)]
    verify_init_batch(vdaf, key, ctx, 0, nonces[:50], publics[:50], inputs[0][:50])  # warm up
    start = time.process_time()
    for j in range(2):
        verify_init_batch(vdaf, key, ctx, j, nonces, publics, inputs[j])
    return batch / (time.process_time() - start)


def bench_end_to_end(pair: Pair, count: int, clients: int, job_size: int) -> dict[str, Any]:
    """``count`` Histogram-16 reports uploaded, aggregated and collected (noise laplace:1)."""
    from analysis.dap_collect import collect

    task = pair.task(
        {"type": "histogram", "length": 16, "chunk_length": 4},
        dp="laplace:1",
        min_batch_size=min(count, 100),
    )
    values = [i % 16 for i in range(count)]
    reports, prepare_cpu = _prepare(task.device_task(), values)
    start = time.perf_counter()
    upload = _upload(task, reports, per_request=100, clients=clients)
    totals, drive_wall, leader_cpu, helper_cpu = _drive(task, job_size)
    unit = int(time.time()) // TIME_PRECISION
    collect_start = time.perf_counter()
    result = collect(
        task.spec,
        leader=f"{pair.leader.url}/dap",
        token=COLLECTOR_TOKEN,
        private_key=pair.collector_private_key,
        interval=Interval(unit - 1, 3),
        timeout=600,
    )
    end = time.perf_counter()
    truth = [values.count(b) for b in range(16)]
    errors = [e - t for e, t in zip(result["estimate"], truth, strict=True)]
    return {
        "reports": count,
        "device_prepare_s": prepare_cpu * count,
        "upload_s": upload,
        "aggregate_s": drive_wall,
        "collect_s": end - collect_start,
        "uploaded_to_collected_s": end - start,
        "aggregated": totals["aggregated"],
        "rejected": totals["rejected"],
        "jobs": totals["jobs"],
        "aggregation_per_s_per_core": totals["aggregated"] / (leader_cpu + helper_cpu),
        "leader_cpu_s": leader_cpu,
        "helper_cpu_s": helper_cpu,
        "report_count": result["report_count"],
        "noise_std_error": result["std_errors"][0],
        "observed_errors": errors,
    }


def bench_accuracy(sizes: Sequence[int], seed: int) -> list[dict[str, Any]]:
    """The trust models at epsilon 1, Histogram length 100, exact and simulated (Zipf 1.1)."""
    from analysis.gap import GapOptions, parse_simulation, simulated_kind_gap
    from analysis.kinds.frequencies.gap import TRUST_MODELS
    from client_sdk.mechanisms import mechanism_from_config

    olh = mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": 100})
    rows = []
    for n in sizes:
        document = simulated_kind_gap(
            olh, n, parse_simulation("zipf"), GapOptions(repetitions=10), seed=seed
        )
        exact = document["trust_models"]["models"]
        measured = document["simulation"]["trust_models_measured"]
        row: dict[str, Any] = {
            "n": n,
            "local_epsilon_shuffled": exact["shuffled"]["local_epsilon"],
        }
        # the DAP row's discrete Gaussian alternative at the same (epsilon, delta)
        named = [(name, exact[name], measured[name]) for name in TRUST_MODELS]
        gaussian = exact["secure_aggregation"]["gaussian"]
        named.append(("dap_gaussian", gaussian, measured["secure_aggregation"]["gaussian"]))
        row["dap_gaussian_rho"] = gaussian["rho"]
        for name, figures, observed in named:
            row[name] = {
                "std_error": figures["std_error"],
                "measured_rmse": math.sqrt(observed["mse"]),
                "expected_rmse": math.sqrt(observed["expected"]),
                "share_of_gap_closed": figures["share_of_gap_closed"],
                "std_error_over_curator": figures["std_error_over_curator"],
            }
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (under a minute)")
    parser.add_argument("--e2e", type=int, default=None, help="end-to-end reports (10^4)")
    parser.add_argument("--clients", type=int, default=4, help="upload threads (4)")
    parser.add_argument("--job-size", type=int, default=1000, help="reports per job (1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the accuracy simulation")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(argv)
    quick = args.quick
    e2e = args.e2e if args.e2e is not None else (500 if quick else 10_000)
    load = {"before": os.getloadavg(), "cpus": os.cpu_count()}
    out: dict[str, Any] = {"quick": quick, "seed": args.seed}
    with tempfile.TemporaryDirectory(prefix="bench_dap_") as tmp:
        pair = Pair(Path(tmp))
        try:
            out["upload"] = [
                bench_upload(pair, 16, 300 if quick else 2000, args.clients),
                bench_upload(pair, 1024, 40 if quick else 300, args.clients),
            ]
            out["end_to_end"] = bench_end_to_end(pair, e2e, args.clients, args.job_size)
        finally:
            pair.stop()
    out["prio3_batch_per_s_per_core"] = prio3_batch_per_s(16, 200 if quick else 1000)
    out["protocol_overhead"] = (
        out["prio3_batch_per_s_per_core"] / out["end_to_end"]["aggregation_per_s_per_core"]
    )
    out["accuracy"] = bench_accuracy([100_000] if quick else [100_000, 1_000_000], args.seed)
    load["after"] = os.getloadavg()
    out["load"] = load
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print(out)
    return 0


def _print(out: dict[str, Any]) -> None:
    load = out["load"]
    print(
        f"load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after, "
        f"{load['cpus']} CPUs"
    )
    print("upload at the Leader (reports/s, wall clock)")
    for row in out["upload"]:
        print(
            f"  Histogram {row['histogram_length']:>5}: {row['one_per_request_per_s']:8.0f} "
            f"one per request, {row['hundred_per_request_per_s']:8.0f} 100 per request "
            f"({row['reports']} reports of {row['report_bytes']} bytes, {row['clients']} "
            f"clients; the device prepared each in {row['device_prepare_ms']:.1f} ms CPU)"
        )
    e2e = out["end_to_end"]
    print(
        f"aggregation (Histogram 16): {e2e['aggregation_per_s_per_core']:.0f} reports/s per core "
        f"(Leader {e2e['leader_cpu_s']:.1f} s + Helper {e2e['helper_cpu_s']:.1f} s CPU); Prio3 "
        f"batched verify_init of both aggregators {out['prio3_batch_per_s_per_core']:.0f}/s: "
        f"overhead x{out['protocol_overhead']:.2f}"
    )
    print(
        f"end to end, {e2e['reports']} Histogram-16 reports: upload {e2e['upload_s']:.1f} s, "
        f"aggregate {e2e['aggregate_s']:.1f} s ({e2e['jobs']} jobs), collect "
        f"{e2e['collect_s']:.1f} s: {e2e['uploaded_to_collected_s']:.1f} s uploaded to collected "
        f"(devices' preparation {e2e['device_prepare_s']:.1f} s CPU apart); "
        f"{e2e['report_count']} counted, noise std error {e2e['noise_std_error']:.2f}, "
        f"observed errors {e2e['observed_errors']}"
    )
    print(
        "accuracy, epsilon 1, Histogram 100, Zipf(1.1) population, seed "
        f"{out['seed']} (standard error of one bucket's frequency; measured: root mean squared "
        "error over the buckets, DAP and curator over 10 runs)"
    )
    for row in out["accuracy"]:
        print(f"  n = {row['n']:,} (shuffled: OLH at local epsilon "
              f"{row['local_epsilon_shuffled']:.2f})")  # fmt: skip
        for name in ("local", "shuffled", "secure_aggregation", "dap_gaussian", "curator"):
            figures = row[name]
            print(
                f"    {name:<19} exact {figures['std_error']:.3e}  measured "
                f"{figures['measured_rmse']:.3e} (expected {figures['expected_rmse']:.3e} at the "
                f"true frequencies)  x{figures['std_error_over_curator']:.2f} the "
                f"curator's  gap closed {100 * figures['share_of_gap_closed']:.1f}%"
            )


if __name__ == "__main__":
    raise SystemExit(main())
