"""``ldp-demo``: the whole system end to end on this machine, in about a minute.

1. A real collector (``ldp-collector serve``: gunicorn, 2 workers) on a free local port, with a
   temporary SQLite database and a random admin token.
2. A campaign over 100 labels (``olh`` if registered, else ``grr``; epsilon 2).
3. A simulated fleet (100,000 devices by default, a Zipf population over the labels) reporting
   through the real ``TelemetryClient`` over HTTP: several client processes, each owning a shard
   of devices and its own ``state_dir``, randomizing with the OS CSPRNG (``record_many``) and
   uploading (``flush``).
4. Estimates read back from the database (``analysis.dataset`` + ``analysis.estimate``), with
   95% intervals beside the truth, the intervals' coverage and the run time.

``CollectorProcess`` (a collector subprocess you can start, kill and restart) is reused by the
end-to-end tests and the benchmark.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import requests

from client_sdk import TelemetryClient
from client_sdk.mechanisms import MECHANISMS

CAMPAIGN_NAME = "demo-labels"
DEFAULT_LABELS = 100
ZIPF_EXPONENT = 1.1


class CollectorProcess:
    """A real ``ldp-collector serve`` subprocess (gunicorn) on 127.0.0.1.

    ``port=0`` picks a free port; :meth:`restart` reuses the port it got, so clients keep their
    URL. The process runs in its own session, so :meth:`kill` (SIGKILL) takes the gunicorn
    master and its workers down together, as a crash of the machine would.
    """

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        workers: int = 2,
        port: int = 0,
        token: str | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        create: bool = True,
    ) -> None:
        self.db = os.fspath(db)
        self.workers = workers
        self.port = port
        self.token = token or secrets.token_urlsafe(32)
        self.log_dir = Path(log_dir) if log_dir is not None else Path(self.db).parent
        self.extra_args = list(extra_args)
        self.create = create  # pass --create (serve refuses to create a database otherwise)
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._starts = 0

    @staticmethod
    def command() -> list[str]:
        """The installed ``ldp-collector`` entry point (or the module, if not on disk)."""
        script = Path(sys.executable).with_name("ldp-collector")
        if script.exists():
            return [str(script)]
        found = shutil.which("ldp-collector")
        return [found] if found else [sys.executable, "-m", "collector.cli"]

    def start(self, timeout: float = 30.0) -> CollectorProcess:
        self._starts += 1
        out = self.log_dir / f"collector-{self._starts}.out"
        err = self.log_dir / f"collector-{self._starts}.err"
        args = [
            *self.command(),
            "serve",
            "--db",
            self.db,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--no-access-log",
            *(["--create"] if self.create else []),
            *self.extra_args,
        ]
        env = {**os.environ, "LDP_ADMIN_TOKEN": self.token}
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            self.process = subprocess.Popen(
                args, stdout=stdout, stderr=stderr, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the collector exited with {self.process.returncode}: "
                    f"{err.read_text()[-2000:]}"
                )
            for line in out.read_text().splitlines():
                if line.startswith("ldp-collector: serving http://"):
                    self.url = line.split()[2]
                    self.port = int(self.url.rsplit(":", 1)[1])
            if self.url and self._healthy():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the collector did not start within {timeout} s: {err.read_text()}")

    def _healthy(self) -> bool:
        try:
            return requests.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers): a crash, no clean-up."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (gunicorn's graceful shutdown), then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        else:
            # Workers may outlive a master that is already gone; never leave them behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def restart(self, timeout: float = 30.0) -> CollectorProcess:
        self.stop()
        self.url = ""
        return self.start(timeout)

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def create_campaign(self, document: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(
            f"{self.url}/v1/campaigns", json=document, headers=self.admin(), timeout=30
        )
        if response.status_code not in (200, 201):
            raise RuntimeError(f"campaign creation failed: {response.status_code} {response.text}")
        return dict(response.json())

    def __enter__(self) -> CollectorProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def zipf_population(
    devices: int, labels: int, *, seed: int, exponent: float = ZIPF_EXPONENT
) -> npt.NDArray[np.int64]:
    """Each device's value: index ``i`` with probability proportional to ``1/(i+1)**exponent``.

    (A simulated population, not device randomness: a seeded NumPy generator is right here.)
    """
    weights = 1.0 / np.arange(1, labels + 1, dtype=np.float64) ** exponent
    rng = np.random.default_rng(seed)
    return rng.choice(labels, size=devices, p=weights / weights.sum()).astype(np.int64)


def run_shard(
    url: str, campaign: str, state_dir: str, labels: list[str], chunk: int = 10_000
) -> tuple[int, int]:
    """One client process: record its devices' labels (CSPRNG) and flush; (recorded, acked)."""
    acknowledged = 0
    with TelemetryClient(url, state_dir=state_dir) as client:
        for start in range(0, len(labels), chunk):
            client.record_many(campaign, labels[start : start + chunk])
        acknowledged += client.flush()
    return len(labels), acknowledged


@dataclasses.dataclass(frozen=True)
class DemoResult:
    """What a demo run measured (``print_summary`` renders it)."""

    mechanism: dict[str, Any]
    devices: int
    stored: int
    acknowledged: int
    labels: list[str]
    truth: npt.NDArray[np.float64]
    estimate: Any  # analysis.estimation.FrequencyEstimate
    upload_seconds: float
    total_seconds: float
    clients: int
    db_path: str | None
    gap: Any = None  # analysis.gap.UtilityGap of this campaign at its n
    empirical_gap: Any = None  # analysis.gap.EmpiricalGap: observed errors of both models
    report_path: str | None = None

    @property
    def coverage(self) -> float:
        inside = (self.estimate.ci_low <= self.truth) & (self.truth <= self.estimate.ci_high)
        return float(np.mean(inside))


def default_mechanism() -> str:
    return "olh" if "olh" in MECHANISMS else "grr"


def run_demo(
    *,
    devices: int = 100_000,
    mechanism: str | None = None,
    epsilon: float = 2.0,
    seed: int = 0,
    labels: int = DEFAULT_LABELS,
    clients: int = 4,
    keep: bool = False,
    workdir: str | os.PathLike[str] | None = None,
    report_path: str | os.PathLike[str] | None = None,
) -> DemoResult:
    """Run the whole pipeline and return what it measured (the CLI prints it).

    ``report_path``: also write the campaign's HTML report there (with the true histogram, so
    it shows the observed errors of the local and the central models side by side).
    """
    from analysis.dataset import count_reports, iter_report_chunks, load_campaign
    from analysis.estimation import estimate
    from analysis.gap import empirical_gap, utility_gap
    from analysis.report import build_report, render_html

    if devices < 1:
        raise ValueError(f"devices must be at least 1; got {devices}")
    started = time.perf_counter()
    name = mechanism or default_mechanism()
    root = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="ldp-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    db = root / "collector.db"
    domain = [f"item-{i:03d}" for i in range(labels)]
    values = zipf_population(devices, labels, seed=seed)
    try:
        with CollectorProcess(db, workers=2, log_dir=root) as collector:
            collector.create_campaign(
                {
                    "name": CAMPAIGN_NAME,
                    "mechanism": {"mechanism": name, "epsilon": epsilon, "k": labels},
                    "domain": domain,
                    "min_batch_size": 100,
                }
            )
            shards = np.array_split(values, clients)
            upload_started = time.perf_counter()
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(clients, mp_context=context) as pool:
                futures = [
                    pool.submit(
                        run_shard,
                        collector.url,
                        CAMPAIGN_NAME,
                        str(root / f"client-{i}"),
                        [domain[v] for v in shard],
                    )
                    for i, shard in enumerate(shards)
                ]
                results = [f.result() for f in futures]
            upload_seconds = time.perf_counter() - upload_started
        campaign = load_campaign(db, CAMPAIGN_NAME)
        stored = count_reports(db, CAMPAIGN_NAME)
        result = estimate(campaign.mechanism, iter_report_chunks(db, CAMPAIGN_NAME))
        true_counts = np.bincount(values, minlength=labels)
        written = None
        if report_path is not None:
            report = build_report(campaign, result, true_counts=true_counts, seed=seed)
            Path(report_path).write_text(render_html(report), encoding="utf-8")
            written = str(report_path)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    truth = true_counts / devices
    return DemoResult(
        mechanism=campaign.config,
        devices=devices,
        stored=stored,
        acknowledged=sum(acked for _, acked in results),
        labels=domain,
        truth=truth,
        estimate=result,
        upload_seconds=upload_seconds,
        total_seconds=time.perf_counter() - started,
        clients=clients,
        db_path=str(db) if keep else None,
        gap=utility_gap(campaign.mechanism, stored),
        # The central mechanisms run on the true histogram (a simulation: the truth is known).
        empirical_gap=empirical_gap(result, true_counts, rng=seed, repetitions=20),
        report_path=written,
    )


def print_summary(result: DemoResult, *, top: int = 15, file: Any = None) -> None:
    """The demo's final summary: the top items beside the truth, coverage, run time.

    (The one place the summary is printed: the gap to the central model and the HTML report
    are added here.)
    """
    out = file or sys.stdout
    est = result.estimate
    print(
        f"\nmechanism {result.mechanism}  devices {result.devices:,}  stored {result.stored:,}  "
        f"acknowledged {result.acknowledged:,}  ({result.clients} client processes over HTTP)",
        file=out,
    )
    print(f"\n{'item':<10} {'true':>8} {'estimate':>9} {'95% interval':>22}  in", file=out)
    order = np.argsort(-result.truth)[:top]
    for index in order:
        inside = est.ci_low[index] <= result.truth[index] <= est.ci_high[index]
        print(
            f"{result.labels[index]:<10} {result.truth[index]:>8.4f} {est.frequencies[index]:>9.4f}"
            f"   [{est.ci_low[index]:>8.4f}, {est.ci_high[index]:>8.4f}]  "
            f"{'yes' if inside else 'NO'}",
            file=out,
        )
    print(
        f"\ncoverage of the 95% intervals over all {len(result.labels)} items: "
        f"{result.coverage:.0%}   (median std error {np.median(est.std_errors):.4f})",
        file=out,
    )
    if result.gap is not None:
        print_gap(result, file=out)
    rate = result.stored / result.upload_seconds if result.upload_seconds > 0 else float("nan")
    print(
        f"record + upload {result.upload_seconds:.1f} s ({rate:,.0f} reports/s), "
        f"total {result.total_seconds:.1f} s",
        file=out,
    )
    if result.report_path:
        print(f"report written to {result.report_path}", file=out)
    if result.db_path:
        print(f"database kept at {result.db_path}", file=out)


def print_gap(result: DemoResult, *, file: Any = None) -> None:
    """The price of locality at this campaign's epsilon and n (analysis.gap)."""
    out = file or sys.stdout
    gap = result.gap.to_dict()
    seen = result.empirical_gap
    print(
        f"\nthe gap to a trusted central curator at the same epsilon ({gap['epsilon']:g}, "
        f"n = {gap['n']:,}; replacement neighbours; Gaussian at delta {gap['delta']:g}):",
        file=out,
    )
    print(f"{'model':<34} {'std error (exact)':>18} {'RMSE observed':>14}", file=out)
    rows = [
        ("local (this mechanism)", gap["ldp_std_error"], seen.ldp_mse),
        (
            "central Laplace on the histogram",
            gap["central_laplace_std_error"],
            seen.central_laplace_mse,
        ),
        ("central analytic Gaussian", gap["central_gaussian_std_error"], seen.central_gaussian_mse),
    ]
    for label, exact, mse in rows:
        print(f"{label:<34} {exact:>18.2e} {mse**0.5:>14.2e}", file=out)
    print(
        f"price of locality: {gap['variance_ratio']:,.0f}x the central Laplace variance; the "
        f"local model needs {gap['ldp_users_for_central_laplace_error']:,.0f} users to match "
        f"the curator's error at n = {gap['n']:,}",
        file=out,
    )
    if gap.get("shuffle_epsilon") is not None:
        print(
            f"shuffled, the same reports are ({gap['shuffle_epsilon']:.3g}, {gap['delta']:g})-DP "
            "centrally (Feldman, McMillan, Talwar 2021, Thm 3.1)",
            file=out,
        )
    else:
        print(f"shuffle model: {gap.get('shuffle_epsilon_reason', 'no bound')}", file=out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ldp-demo",
        description="End-to-end demo: collector, simulated fleet over HTTP, estimates.",
    )
    parser.add_argument("--devices", type=int, default=100_000, help="fleet size (100,000)")
    parser.add_argument(
        "--mechanism",
        default=None,
        help=f"categorical mechanism (default {default_mechanism()})",
    )
    parser.add_argument("--epsilon", type=float, default=2.0, help="privacy parameter (2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated population")
    parser.add_argument("--clients", type=int, default=4, help="client processes (4)")
    parser.add_argument("--keep", action="store_true", help="keep the database and logs")
    parser.add_argument(
        "--report",
        default="ldp-demo-report.html",
        help="where to write the HTML report (ldp-demo-report.html; '' for none)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = run_demo(
            devices=args.devices,
            mechanism=args.mechanism,
            epsilon=args.epsilon,
            seed=args.seed,
            clients=args.clients,
            keep=args.keep,
            report_path=args.report or None,
        )
    except (ValueError, RuntimeError, OSError) as error:
        print(f"ldp-demo: error: {error}", file=sys.stderr)
        return 2
    print_summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
