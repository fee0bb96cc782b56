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

``ldp-demo --collector URL --campaign NAME [--devices N] [--reports-per-device R]`` instead
feeds a campaign of a running collector with a simulated fleet (:func:`feed_collector`): each
simulated device sends at most the campaign policy's ``reports_per_period`` reports, randomized
with the OS CSPRNG by the campaign's own mechanism, and uploaded in batches over HTTP.

The collector runs as ``collector.process.CollectorProcess`` (a collector subprocess you can
start, kill and restart), which the end-to-end tests and the benchmark use too.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from client_sdk import TelemetryClient
from client_sdk.mechanisms import MECHANISMS
from collector.process import CollectorProcess

CAMPAIGN_NAME = "demo-labels"
DEFAULT_LABELS = 100
ZIPF_EXPONENT = 1.1


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


FEED_BATCH = 500


@dataclasses.dataclass(frozen=True)
class FeedResult:
    """What :func:`feed_collector` sent."""

    campaign: str
    devices: int
    reports: int
    accepted: int
    seconds: float

    def summary(self) -> str:
        rate = self.reports / self.seconds if self.seconds > 0 else float("nan")
        return (
            f"campaign {self.campaign}: {self.devices:,} simulated devices sent {self.reports:,} "
            f"reports, {self.accepted:,} accepted ({self.seconds:.1f} s, {rate:,.0f} reports/s)"
        )


def simulated_values(mechanism: Any, domain: Sequence[str] | None, n: int, *, seed: int) -> Any:
    """``n`` raw values a simulated fleet holds: a Zipf population over the domain's labels,
    or numbers from a Beta(2, 5) on the mechanism's ``[lower, upper]`` (a simulation: seeded)."""
    rng = np.random.default_rng(seed)
    if mechanism.value_kind == "number":
        if getattr(mechanism, "dim", None) is not None:
            raise ValueError("ldp-demo --collector simulates scalar numeric campaigns only")
        lower, upper = float(mechanism.lower), float(mechanism.upper)
        return list(lower + (upper - lower) * rng.beta(2.0, 5.0, size=n))
    if not domain:
        raise ValueError(
            f"campaign mechanism {mechanism.name!r} has no domain to draw simulated values from"
        )
    index = zipf_population(n, len(domain), seed=seed)
    return [domain[i] for i in index]


def feed_collector(
    url: str,
    campaign_name: str,
    *,
    devices: int = 1_000,
    reports_per_device: int = 1,
    seed: int = 0,
) -> FeedResult:
    """Send a simulated fleet's reports to a campaign of a running collector.

    Each device holds one value (:func:`simulated_values`) and reports it ``reports_per_device``
    times, never more than the campaign policy's ``reports_per_period`` (what its ledger would
    allow in one period). Reports are randomized with the OS CSPRNG by the campaign's mechanism,
    exactly as ``TelemetryClient`` does, and uploaded with fresh random ids. Memoized campaigns
    need each device's own secret: simulate them through ``TelemetryClient`` instead.
    """
    import secrets

    import requests

    from client_sdk.client import Campaign
    from client_sdk.mechanisms.memoization import is_memoized

    if devices < 1:
        raise ValueError(f"--devices must be at least 1; got {devices}")
    if reports_per_device < 1:
        raise ValueError(f"--reports-per-device must be at least 1; got {reports_per_device}")
    started = time.perf_counter()
    base = url.rstrip("/")
    with requests.Session() as session:
        try:
            response = session.get(f"{base}/v1/campaigns/{campaign_name}", timeout=10)
        except requests.RequestException as error:
            raise RuntimeError(f"--collector {url}: cannot reach the collector ({error})") from None
        if response.status_code == 404:
            raise LookupError(
                f"--campaign: the collector at {url} has no campaign {campaign_name!r}"
            )
        response.raise_for_status()
        campaign = Campaign.from_document(response.json(), name=campaign_name)
        mechanism = campaign.mechanism
        if is_memoized(mechanism):
            raise ValueError(
                f"campaign {campaign_name!r} is memoized ({mechanism.name}): each device needs "
                "its own secret; simulate it with TelemetryClient, one state_dir per device"
            )
        per_device = reports_per_device
        if campaign.policy is not None:
            per_device = min(per_device, int(campaign.policy["reports_per_period"]))
        values = simulated_values(mechanism, campaign.domain, devices, seed=seed)
        encoded = campaign.encode([v for v in values for _ in range(per_device)])
        accepted = 0
        for start in range(0, len(encoded), FEED_BATCH):
            chunk = encoded[start : start + FEED_BATCH]
            payloads = mechanism.to_wire(mechanism.perturb(chunk))  # rng=None: the OS CSPRNG
            body = {
                "config_id": campaign.config_id,
                "reports": [{"id": secrets.token_hex(16), "payload": p} for p in payloads],
            }
            answer = session.post(
                f"{base}/v1/campaigns/{campaign_name}/reports", json=body, timeout=60
            )
            if answer.status_code != 200:
                raise RuntimeError(
                    f"--collector {url}: upload refused with {answer.status_code}: "
                    f"{answer.text[:300]}"
                )
            accepted += int(answer.json()["accepted"])
    return FeedResult(
        campaign=campaign_name,
        devices=devices,
        reports=len(encoded),
        accepted=accepted,
        seconds=time.perf_counter() - started,
    )


def print_summary(result: DemoResult, *, top: int = 15, file: Any = None) -> None:
    """The demo's final summary: the top items beside the truth, coverage, the gap to the central
    model, run time (the one place it is printed)."""
    print("\n".join(summary_lines(result, top=top)), file=file or sys.stdout)


def summary_lines(result: DemoResult, *, top: int = 15) -> list[str]:
    """The lines of :func:`print_summary`."""
    est = result.estimate
    lines = [
        f"\nmechanism {result.mechanism}  devices {result.devices:,}  stored {result.stored:,}  "
        f"acknowledged {result.acknowledged:,}  ({result.clients} client processes over HTTP)",
        f"\n{'item':<10} {'true':>8} {'estimate':>9} {'95% interval':>22}  in",
    ]
    for index in np.argsort(-result.truth)[:top]:
        inside = est.ci_low[index] <= result.truth[index] <= est.ci_high[index]
        lines.append(
            f"{result.labels[index]:<10} {result.truth[index]:>8.4f} {est.frequencies[index]:>9.4f}"
            f"   [{est.ci_low[index]:>8.4f}, {est.ci_high[index]:>8.4f}]  "
            f"{'yes' if inside else 'NO'}"
        )
    lines.append(
        f"\ncoverage of the 95% intervals over all {len(result.labels)} items: "
        f"{result.coverage:.0%}   (median std error {np.median(est.std_errors):.4f})"
    )
    if result.gap is not None:
        lines += gap_lines(result)
    rate = result.stored / result.upload_seconds if result.upload_seconds > 0 else float("nan")
    lines.append(
        f"record + upload {result.upload_seconds:.1f} s ({rate:,.0f} reports/s), "
        f"total {result.total_seconds:.1f} s"
    )
    if result.report_path:
        lines.append(f"report written to {result.report_path}")
    if result.db_path:
        lines.append(f"database kept at {result.db_path}")
    return lines


def gap_lines(result: DemoResult) -> list[str]:
    """The price of locality at this campaign's epsilon and n (analysis.gap)."""
    gap = result.gap.to_dict()
    seen = result.empirical_gap
    rows = [
        ("local (this mechanism)", gap["ldp_std_error"], seen.ldp_mse),
        (
            "central Laplace on the histogram",
            gap["central_laplace_std_error"],
            seen.central_laplace_mse,
        ),
        ("central analytic Gaussian", gap["central_gaussian_std_error"], seen.central_gaussian_mse),
    ]
    if gap.get("shuffle_epsilon") is not None:
        shuffle = (
            f"shuffled, the same reports are ({gap['shuffle_epsilon']:.3g}, {gap['delta']:g})-DP "
            "centrally (Feldman, McMillan, Talwar 2021, Thm 3.1)"
        )
    else:
        shuffle = f"shuffle model: {gap.get('shuffle_epsilon_reason', 'no bound')}"
    return [
        f"\nthe gap to a trusted central curator at the same epsilon ({gap['epsilon']:g}, "
        f"n = {gap['n']:,}; replacement neighbours; Gaussian at delta {gap['delta']:g}):",
        f"{'model':<34} {'std error (exact)':>18} {'RMSE observed':>14}",
        *(f"{label:<34} {exact:>18.2e} {mse**0.5:>14.2e}" for label, exact, mse in rows),
        f"price of locality: {gap['variance_ratio']:,.0f}x the central Laplace variance; the "
        f"local model needs {gap['ldp_users_for_central_laplace_error']:,.0f} users to match "
        f"the curator's error at n = {gap['n']:,}",
        shuffle,
    ]


def build_parser() -> argparse.ArgumentParser:
    """The ``ldp-demo`` options; their destinations are :func:`run_demo`'s parameters."""
    parser = argparse.ArgumentParser(
        prog="ldp-demo",
        description="End-to-end demo: collector, simulated fleet over HTTP, estimates.",
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        help="fleet size (100,000; with --collector 1,000)",
    )
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
        "--collector",
        default=None,
        metavar="URL",
        help="feed this running collector's --campaign with a simulated fleet instead",
    )
    parser.add_argument("--campaign", default=None, help="the campaign to feed (with --collector)")
    parser.add_argument(
        "--reports-per-device",
        type=int,
        default=1,
        help="reports each simulated device sends, at most the policy's reports_per_period (1)",
    )
    parser.add_argument(
        "--report",
        dest="report_path",
        type=_optional_path,
        default="ldp-demo-report.html",
        help="where to write the HTML report (ldp-demo-report.html; '' for none)",
    )
    return parser


def _optional_path(text: str) -> str | None:
    return text or None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options = vars(args)
    collector, campaign = options.pop("collector"), options.pop("campaign")
    reports_per_device = options.pop("reports_per_device")
    if (collector is None) != (campaign is None):
        print("ldp-demo: error: --collector and --campaign go together", file=sys.stderr)
        return 2
    if collector is not None:
        try:
            fed = feed_collector(
                collector,
                campaign,
                devices=1_000 if args.devices is None else args.devices,
                reports_per_device=reports_per_device,
                seed=args.seed,
            )
        except (ValueError, LookupError, RuntimeError, OSError) as error:
            print(f"ldp-demo: error: {error}", file=sys.stderr)
            return 2
        print(fed.summary())
        return 0
    if options["devices"] is None:
        options["devices"] = 100_000
    try:
        result = run_demo(**options)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"ldp-demo: error: {error}", file=sys.stderr)
        return 2
    print_summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
