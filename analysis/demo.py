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

``ldp-demo --shuffle`` runs the shuffle model instead (docs/shuffler.md): three processes, the
collector, an ``ldp-shuffler`` between it and the fleet, and the fleet. The campaign declares a
central target (``--epsilon`` becomes the central epsilon, at delta 1e-6) for batches of
``min_batch`` reports (the fleet cut into equal batches of at most 10,000); the collector
calibrates the local epsilon; the devices accept it through their ``PrivacyPolicy``'s central
ceiling, seal each report to the collector's key and send it to the shuffler, which forwards
shuffled batches. The printed gap then shows local-only collection at the same central guarantee,
the shuffled campaign, and the trusted curator, and how much of the distance to the curator the
shuffler closes (``analysis.gap``, the shuffled column).

``ldp-demo --collector URL --campaign NAME [--devices N] [--reports-per-device R] [--values FILE]
[--db DB]`` instead feeds a campaign of a running collector with a simulated fleet
(:func:`feed_collector`), whatever its kind: labels, numbers, strings, several attributes,
key-value, distributions and ranges (``analysis.demo_population`` draws each kind's population;
``--values FILE``, a string campaign's own values, one a line). Each simulated device sends at
most the campaign policy's ``reports_per_period`` reports, randomized with the OS CSPRNG by the
campaign's own mechanism (with its own random device secret where the mechanism keys on one:
RAPPOR, PEM, multi, fourier, hierarchical), and uploaded in batches over HTTP. It then prints the
simulated truth beside the estimate: the collector's own (``GET .../estimate``, with
``LDP_ADMIN_TOKEN`` set), or, with ``--db``, ``ldp-analyze estimate``'s from the collector's
database (every kind; string campaigns test the simulated words as candidates).

Each run of the whole demo writes its own report, ``ldp-demo-report-<mechanism>.html``
(``-shuffled`` with ``--shuffle``), so a second demo never overwrites the first; ``--report PATH``
chooses another file, ``--report ''`` none.

The collector runs as ``collector.process.CollectorProcess`` (a collector subprocess you can
start, kill and restart), which the end-to-end tests and the benchmark use too.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import dataclasses
import json
import multiprocessing
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.demo_population import read_values, zipf_population
from analysis.progress import add_quiet_argument, progress
from client_sdk import PrivacyPolicy, TelemetryClient
from client_sdk._extras import closed_pipe
from client_sdk._version import __version__
from client_sdk.mechanisms import MECHANISMS
from collector.process import CollectorProcess

CAMPAIGN_NAME = "demo-labels"
DEFAULT_LABELS = 100
SHUFFLE_DELTA = 1e-6
MAX_SHUFFLED_BATCH = 10_000
"""The largest batch the demo's shuffler forwards (the collector's default ``LDP_MAX_BATCH``)."""


def run_shard(
    url: str,
    campaign: str,
    state_dir: str,
    labels: list[str],
    chunk: int = 10_000,
    shuffler_url: str | None = None,
    central_ceiling: tuple[float, float] | None = None,
) -> tuple[int, int]:
    """One client process: record its devices' labels (CSPRNG) and flush; (recorded, acked).

    ``shuffler_url`` routes a shuffled campaign through the shuffler; ``central_ceiling``
    ``(epsilon, delta)`` is the app policy's central ceiling that accepts its local epsilon."""
    acknowledged = 0
    policy = None
    if central_ceiling is not None:
        policy = PrivacyPolicy(
            max_central_epsilon=central_ceiling[0], max_central_delta=central_ceiling[1]
        )
    with TelemetryClient(
        url, state_dir=state_dir, shuffler_url=shuffler_url, policy=policy
    ) as client:
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
    shuffled: dict[str, Any] | None = None  # the shuffle model's figures (shuffle_summary)

    @property
    def coverage(self) -> float:
        inside = (self.estimate.ci_low <= self.truth) & (self.truth <= self.estimate.ci_high)
        return float(np.mean(inside))


def default_mechanism(*, shuffle: bool = False) -> str:
    """olh (grr without it); grr when shuffled: at the large calibrated local epsilon GRR has
    the least variance over 100 labels (k - 2 < 3 e^epsilon)."""
    return "olh" if "olh" in MECHANISMS and not shuffle else "grr"


def shuffle_batches(devices: int) -> tuple[int, int]:
    """``(min_batch, batches)``: the fleet cut into equal batches of at most
    :data:`MAX_SHUFFLED_BATCH` (``devices % batches`` reports then wait below min_batch)."""
    if devices < 2:
        raise ValueError(f"--shuffle needs at least 2 devices; got {devices}")
    batches = -(-devices // MAX_SHUFFLED_BATCH)
    return devices // batches, batches


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
    shuffle: bool = False,
    quiet: bool = False,
) -> DemoResult:
    """Run the whole pipeline and return what it measured (the CLI prints it).

    ``report_path``: also write the campaign's HTML report there (with the true histogram, so
    it shows the observed errors of the local and the central models side by side).
    ``shuffle``: through a shuffler, ``epsilon`` the central target (module docstring).
    ``quiet``: no progress bar on stderr (none anyway when stderr is not a terminal).
    """
    from analysis.dataset import count_reports, iter_report_chunks, load_campaign
    from analysis.estimation import estimate
    from analysis.gap import empirical_gap, utility_gap
    from analysis.report import build_report, render_html

    if devices < 1:
        raise ValueError(f"devices must be at least 1; got {devices}")
    started = time.perf_counter()
    name = mechanism or default_mechanism(shuffle=shuffle)
    root = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="ldp-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    db = root / "collector.db"
    domain = [f"item-{i:03d}" for i in range(labels)]
    values = zipf_population(devices, labels, seed=seed)
    config: dict[str, Any] = {"mechanism": name, "epsilon": epsilon, "k": labels}
    body: dict[str, Any] = {"name": CAMPAIGN_NAME, "domain": domain, "min_batch_size": 100}
    fleet: dict[str, Any] = {}
    collector = CollectorProcess(db, workers=2, log_dir=root)
    shuffler: Any = contextlib.nullcontext()
    expected = devices
    if shuffle:
        from shuffler.process import ShufflerProcess

        min_batch, batches = shuffle_batches(devices)
        expected = min_batch * batches
        del config["epsilon"]  # the collector calibrates it from the central target
        body["shuffle"] = {
            "min_batch": min_batch,
            "central_epsilon": epsilon,
            "delta": SHUFFLE_DELTA,
        }
        collector.env["LDP_SHUFFLER_TOKEN"] = token = secrets.token_urlsafe(32)
        # max_batch = min_batch: only full batches leave, so the fleet forms exactly `batches`;
        # the demo's operator runs the shuffler too, so its floor is the campaign's min_batch.
        shuffler = ShufflerProcess(
            root / "shuffler.db",
            "",
            token=token,
            log_dir=root,
            max_batch=min_batch,
            min_batch_floor=min_batch,
        )
        fleet["central_ceiling"] = (epsilon, SHUFFLE_DELTA)
    body["mechanism"] = config
    stages = ["collector", "upload", "estimate", *(["report"] if report_path else [])]
    bar = progress(desc="ldp-demo", total=len(stages), unit="step", quiet=quiet)
    bar.set_postfix_str(stages[0])
    try:
        with collector:
            if shuffle:
                shuffler.collector = collector.url
            with shuffler:
                if shuffle:
                    fleet["shuffler_url"] = shuffler.url
                collector.create_campaign(body)
                bar.update()
                bar.set_postfix_str(f"upload: {devices} devices, {clients} clients")
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
                            **fleet,
                        )
                        for i, shard in enumerate(shards)
                    ]
                    results = [f.result() for f in futures]
                if shuffle:
                    _wait_for_batches(db, expected, timeout=max(60.0, devices / 500))
                upload_seconds = time.perf_counter() - upload_started
                bar.update()
                bar.set_postfix_str("estimate")
        campaign = load_campaign(db, CAMPAIGN_NAME)
        stored = count_reports(db, CAMPAIGN_NAME)
        result = estimate(campaign.mechanism, iter_report_chunks(db, CAMPAIGN_NAME))
        true_counts = np.bincount(values, minlength=labels)
        shuffled = None
        if shuffle:
            shuffled = shuffle_summary(db, campaign, result, true_counts, seed=seed)
            shuffled["waiting"] = devices - stored
        bar.update()
        written = None
        if report_path is not None:
            bar.set_postfix_str("report")
            report = build_report(campaign, result, true_counts=true_counts, seed=seed)
            Path(report_path).write_text(render_html(report), encoding="utf-8")
            written = str(report_path)
            bar.update()
    finally:
        bar.close()
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
        shuffled=shuffled,
    )


def _wait_for_batches(db: Path, expected: int, *, timeout: float) -> None:
    """Until the collector stored ``expected`` reports (the shuffler forwards asynchronously);
    ``RuntimeError`` after ``timeout`` seconds."""
    from analysis.dataset import count_reports

    deadline = time.monotonic() + timeout
    while count_reports(db, CAMPAIGN_NAME) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the shuffler forwarded {count_reports(db, CAMPAIGN_NAME):,} of {expected:,} "
                f"reports within {timeout:.0f} s"
            )
        time.sleep(0.2)


def shuffle_summary(
    db: Path, campaign: Any, result: Any, true_counts: npt.NDArray[np.int64], *, seed: int
) -> dict[str, Any]:
    """The shuffled column of ``analysis.gap`` for this campaign (its real batch sizes), with the
    observed error of the real estimate beside the exact and measured figures."""
    from analysis.gap import GapOptions, kind_gap, measured_kind_gap
    from collector.storage import Storage

    with Storage(db, create=False) as storage:
        sizes = tuple(storage.batch_sizes(CAMPAIGN_NAME))
    options = GapOptions(delta=float(campaign.shuffle["delta"]), batch_sizes=sizes)
    exact = kind_gap(campaign.mechanism, result.n, options)["shuffled_column"]
    measured = measured_kind_gap(campaign.mechanism, result, true_counts, options, seed=seed)
    truth = true_counts / true_counts.sum()
    return {
        "column": exact,
        "measured": measured.get("shuffled_column_measured"),
        "observed_mse": float(np.mean((result.frequencies - truth) ** 2)),
        "batch_sizes": list(sizes),
    }


FEED_BATCH = 500


@dataclasses.dataclass(frozen=True)
class FeedResult:
    """What :func:`feed_collector` sent."""

    campaign: str
    devices: int
    reports: int
    accepted: int
    seconds: float
    truth: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    kind: str = ""
    estimate: dict[str, Any] | None = None  # the collector's estimate document, if read

    def summary(self) -> str:
        rate = self.reports / self.seconds if self.seconds > 0 else float("nan")
        return (
            f"campaign {self.campaign}: {self.devices:,} simulated devices sent {self.reports:,} "
            f"reports, {self.accepted:,} accepted ({self.seconds:.1f} s, {rate:,.0f} reports/s)"
        )

    def truth_lines(self) -> list[str]:
        """The simulated truth ({kind}), each quantity beside the collector's estimate and its
        interval when :attr:`estimate` has it."""
        rows = [
            (name, value, None if self.estimate is None else estimated(self.estimate, name))
            for name, value in self.truth
        ]
        width = max((len(name) for name, _, _ in rows), default=8)
        lines = [
            f"the simulated truth ({self.kind}) beside the collector's estimate:",
            f"  {'quantity':<{width}} {'true':>9} {'estimate':>9} {'95% interval':>22}",
        ]
        for name, value, found in rows:
            shown = "" if found is None else f"{found[0]:>9.4f}"
            interval = (
                ""
                if found is None or found[1] != found[1]
                else (f"[{found[1]:>8.4f}, {found[2]:>8.4f}]")
            )
            lines.append(f"  {name:<{width}} {value:>9.4f} {shown:>9} {interval:>22}")
        if self.estimate is None:
            lines.append(
                "  (set LDP_ADMIN_TOKEN to read the collector's estimate here, or give the "
                "collector's --db)"
            )
        elif all(found is None for _, _, found in rows):
            lines.append(
                "  (the collector does not estimate this kind: give ldp-demo the collector's "
                f"--db, or run ldp-analyze estimate --db DB --campaign {self.campaign})"
            )
        return lines


def feed_collector(
    url: str,
    campaign_name: str,
    *,
    devices: int = 1_000,
    reports_per_device: int = 1,
    seed: int = 0,
    values: Sequence[str] | None = None,
    token: str | None = None,
    db: str | None = None,
    rng: np.random.Generator | None = None,
    quiet: bool = False,
) -> FeedResult:
    """Send a simulated fleet's reports to a campaign of a running collector.

    Each device holds one value (:func:`analysis.demo_population.simulate`: every kind a campaign
    can have; ``values``, a string campaign's own population) and reports it
    ``reports_per_device`` times, never more than the campaign policy's ``reports_per_period``
    (what its ledger would allow in one period). Reports are randomized with the OS CSPRNG by the
    campaign's mechanism, exactly as ``TelemetryClient`` does; mechanisms with memoized responses
    or device choices get each simulated device its own random secret (``DeviceKeys``), as each
    device has. Uploads carry fresh random ids. ``token``: the admin token, to read the
    collector's estimate back beside the truth (:attr:`FeedResult.estimate`); ``db``: the
    collector's database on this machine, estimated instead (:func:`estimate_from_db`).
    ``rng``: tests inject a seeded generator for the randomization and the device secrets;
    ``None`` (the default, and the CLI's) is the OS CSPRNG. ``quiet``: no progress bars on
    stderr (none anyway when stderr is not a terminal); they count devices and reports, never
    a value.
    """
    import secrets

    import requests

    from analysis.demo_population import simulate
    from client_sdk.client import Campaign, memo_scope
    from client_sdk.mechanisms.memoization import is_memoized
    from client_sdk.secrets_store import DeviceKeys

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
        per_device = reports_per_device
        if campaign.policy is not None:
            per_device = min(per_device, int(campaign.policy["reports_per_period"]))
        if per_device < reports_per_device:
            print(
                f"ldp-demo: --reports-per-device {reports_per_device} is above the "
                f"policy.reports_per_period {per_device} of campaign {campaign_name!r} (what a "
                f"device's ledger allows per period): each device sends {per_device}, "
                f"{per_device * devices} reports in all",
                file=sys.stderr,
            )
        population = simulate(mechanism, campaign.domain, devices, seed=seed, values=values)
        payloads: list[Any] = []
        if is_memoized(mechanism) or mechanism.uses_device_choices:
            # Each device's permanent responses and choices come from its own secret.
            scope = memo_scope(campaign_name, mechanism)
            keyed: Any = mechanism  # perturb(..., permanent=keys): the keyed mechanisms' own
            devices_bar = progress(
                population.values, desc="randomizing", unit="device", quiet=quiet
            )
            for value in devices_bar:
                secret = secrets.token_bytes(32) if rng is None else rng.bytes(32)
                keys = DeviceKeys(secret, scope)
                encoded = campaign.encode([value] * per_device)
                payloads += mechanism.to_wire(keyed.perturb(encoded, permanent=keys, rng=rng))
        else:
            encoded = campaign.encode([v for v in population.values for _ in range(per_device)])
            for start in range(0, len(encoded), FEED_BATCH):
                chunk = encoded[start : start + FEED_BATCH]
                payloads += mechanism.to_wire(mechanism.perturb(chunk, rng=rng))
        accepted = 0
        uploading = progress(desc="uploading", total=len(payloads), unit="report", quiet=quiet)
        for start in range(0, len(payloads), FEED_BATCH):
            body = {
                "config_id": campaign.config_id,
                "reports": [
                    {"id": secrets.token_hex(16), "payload": p}
                    for p in payloads[start : start + FEED_BATCH]
                ],
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
            uploading.update(len(body["reports"]))
        uploading.close()
        estimate = None
        if db is not None:
            estimate = estimate_from_db(db, campaign_name, population.truth)
        elif token:
            answer = session.get(
                f"{base}/v1/campaigns/{campaign_name}/estimate",
                headers={"Authorization": f"Bearer {token}"},
                timeout=120,
            )
            estimate = answer.json() if answer.status_code == 200 else None
    return FeedResult(
        campaign=campaign_name,
        devices=devices,
        reports=len(payloads),
        accepted=accepted,
        seconds=time.perf_counter() - started,
        truth=population.truth,
        kind=population.kind,
        estimate=estimate,
    )


def _attribute_labels(document: dict[str, Any], name: str) -> list[str] | None:
    for attribute in document.get("mechanism", {}).get("attributes", []):
        if attribute.get("name") == name:
            labels = attribute.get("labels")
            return None if labels is None else list(labels)
    return None


def estimate_from_db(db: str, campaign: str, truth: Sequence[tuple[str, float]]) -> dict[str, Any]:
    """``ldp-analyze estimate``'s document of ``campaign`` from the collector's database (every
    kind, those the collector's endpoint does not estimate included). String campaigns test the
    simulated words as candidates (the simulation knows them; PEM and SFP discover their own)."""
    from analysis.dataset import iter_report_chunks, load_campaign
    from analysis.documents import series_point
    from analysis.estimation import estimate

    stored = load_campaign(db, campaign)
    candidates = None
    if stored.mechanism.value_kind == "string":
        candidates = [ast.literal_eval(name.removeprefix("frequency of ")) for name, _ in truth]
    result = estimate(stored.mechanism, iter_report_chunks(db, campaign), candidates=candidates)
    document = {"mechanism": stored.config, **series_point(stored, result)}
    if stored.domain:  # the range estimate names its leaves by index
        for item in document.get("items", []):
            if isinstance(item["value"], int):
                item["value"] = stored.domain[item["value"]]
    return document


def estimated(document: dict[str, Any], quantity: str) -> tuple[float, float, float] | None:
    """``(estimate, ci_low, ci_high)`` of a truth quantity (``analysis.demo_population``'s names)
    in an estimate document (the collector's ``collector.estimates.summarize``, or
    ``ldp-analyze estimate``'s ``to_dict``), or ``None`` when the document has no such quantity.
    A median has no interval here (``nan``)."""
    for find in (_from_items, _from_attributes, _from_means):
        found = find(document, quantity)
        if found is not None:
            return found
    return None


def _from_items(document: dict[str, Any], quantity: str) -> tuple[float, float, float] | None:
    """Frequencies of labels or strings (``items``) and of keys with their means (``keys``)."""
    for item in document.get("items", []):
        if quantity == f"frequency of {item['value']!r}":
            return item["frequency"], item["ci_low"], item["ci_high"]
    for entry in document.get("keys", []):
        for field in ("frequency", "mean"):
            if quantity == f"key {entry['key']} {field}":
                low, high = entry[f"{field}_ci"]
                return entry[field], low, high
    return None


def _from_attributes(document: dict[str, Any], quantity: str) -> tuple[float, float, float] | None:
    """One attribute's marginal (``marginals``: items by label index) or a cell of two
    attributes' joint table (``tables``)."""
    for marginal in document.get("marginals", []):
        labels = _attribute_labels(document, marginal["attribute"])
        for item in marginal["items"]:
            label = item["value"] if labels is None else labels[int(item["value"])]
            if quantity == f"{marginal['attribute']} = {label!r}":
                return item["frequency"], item["ci_low"], item["ci_high"]
    for table in document.get("tables", []):
        names = table.get("attributes", [])
        if len(names) == 2 and quantity.startswith(f"{names[0]}, {names[1]} = "):
            i, j = (int(x) for x in quantity.rsplit(" = ", 1)[1].split(", "))
            return table["frequencies"][i][j], table["ci_low"][i][j], table["ci_high"][i][j]
    return None


def _from_means(document: dict[str, Any], quantity: str) -> tuple[float, float, float] | None:
    """A mean (scalar, per coordinate, or a distribution's) or a distribution's median."""
    mean = document.get("mean")
    if quantity == "mean" and isinstance(mean, dict):
        return mean["value"], mean["ci_low"], mean["ci_high"]
    if quantity == "mean" and isinstance(mean, (int, float)):
        return float(mean), document["ci_low"], document["ci_high"]
    if quantity.startswith("mean of coordinate ") and isinstance(mean, list):
        j = int(quantity.rsplit(" ", 1)[1])
        return mean[j], document["ci_low"][j], document["ci_high"][j]
    if quantity == "median":
        for q in document.get("quantiles", []):
            if q["q"] == 0.5:
                return q["value"], float("nan"), float("nan")
    return None


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
    if result.shuffled is not None:
        lines += shuffle_lines(result)
    elif result.gap is not None:
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


def shuffle_lines(result: DemoResult) -> list[str]:
    """The shuffle model's gap: local-only collection at the same central guarantee, this
    shuffled campaign, and the trusted curator (``analysis.gap``'s shuffled column)."""
    assert result.shuffled is not None
    column, measured = result.shuffled["column"], result.shuffled["measured"] or {}
    if not column.get("applies"):
        return [f"\nshuffle model: {column.get('reason')}"]
    exact = column["exact"]
    sizes = result.shuffled["batch_sizes"]
    central, delta = column["central_epsilon"], column["delta"]
    rows = [
        (
            f"local only (each report {central:.3g}-LDP)",
            exact["local_only_variance"],
            measured.get("local_only_mse"),
        ),
        (
            f"shuffled (each report {column['local_epsilon']:.3g}-LDP)",
            exact["shuffled_variance"],
            result.shuffled["observed_mse"],
        ),
        (
            "central Laplace on the histogram",
            exact["central_laplace_variance"],
            measured.get("central_laplace_mse"),
        ),
        (
            "central analytic Gaussian",
            exact["central_gaussian_variance"],
            measured.get("central_gaussian_mse"),
        ),
    ]
    waiting = result.shuffled["waiting"]
    return [
        f"\nthrough the shuffler: {len(sizes)} batch(es) of {min(sizes):,}-{max(sizes):,} reports "
        f"(smallest binds); {waiting:,} still wait in the shuffler (below min_batch, never "
        "forwarded)",
        f"the gap at the same central guarantee ({central:.3g}, {delta:g})-DP, n = "
        f"{result.stored:,} (measured: local only and the curator simulated on the true "
        "histogram; shuffled: this campaign's estimate):",
        f"{'model':<34} {'std error (exact)':>18} {'RMSE observed':>14}",
        *(
            f"{label:<34} {variance**0.5:>18.2e} "
            f"{'' if mse is None else format(mse**0.5, '.2e'):>14}"
            for label, variance, mse in rows
        ),
        f"local-only / shuffled variance: {exact['local_over_shuffled']:,.0f}x; the shuffler "
        f"closes {exact['share_of_gap_closed']:.0%} of the distance (log scale) from local-only "
        "collection to the curator's analytic Gaussian",
        "(the central guarantee assumes a shuffler that neither colludes with the collector nor "
        f"injects reports; each report is {column['local_epsilon']:.3g}-LDP regardless)",
    ]


def build_parser() -> argparse.ArgumentParser:
    """The ``ldp-demo`` options; their destinations are :func:`run_demo`'s parameters."""
    parser = argparse.ArgumentParser(
        prog="ldp-demo",
        description="End-to-end demo: collector, simulated fleet over HTTP, estimates.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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
    parser.add_argument(
        "--epsilon",
        type=float,
        default=2.0,
        help="privacy parameter (2); with --shuffle the central target",
    )
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="through an anonymizing shuffler (collector, shuffler, fleet: three processes)",
    )
    parser.add_argument(
        "--dap",
        action="store_true",
        help="secure aggregation instead: a DAP Leader and Helper, the fleet sharding with "
        "Prio3 (--epsilon: each aggregator's noise; devices default 1,000)",
    )
    parser.add_argument(
        "--local-epsilon",
        type=float,
        default=None,
        help="with --dap: randomized response on each device before sharding, at this epsilon",
    )
    parser.add_argument(
        "--local-mechanism",
        choices=("grr", "sue", "oue"),
        default=None,
        help="with --dap --local-epsilon: grr (the default; a Histogram task), or sue/oue whose "
        "bit vector is sharded (a MultihotCountVec task)",
    )
    parser.add_argument(
        "--dp",
        default=None,
        metavar="NOISE",
        help='with --dap: the aggregators\' noise, "laplace:EPSILON" (the default, at --epsilon), '
        '"gaussian:RHO" (the discrete Gaussian, rho-zCDP) or "none"',
    )
    parser.add_argument("--json", action="store_true", help="with --dap: print one JSON document")
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
        "--db",
        default=None,
        help="with --collector: the collector's database on this machine; the estimate beside "
        "the truth is read from it (every kind) instead of the collector's estimate endpoint",
    )
    parser.add_argument(
        "--values",
        default=None,
        metavar="FILE",
        help="with --collector and a string campaign: the devices' values, one a line "
        "(default: a Zipf over generated words)",
    )
    parser.add_argument(
        "--report",
        dest="report_path",
        type=_optional_path,
        default=DEFAULT_REPORT,
        help="where to write the HTML report (default ldp-demo-report-<mechanism>.html, "
        "-shuffled with --shuffle, so demos never overwrite each other; '' for none)",
    )
    add_quiet_argument(parser)
    return parser


DEFAULT_REPORT = "default"
"""The ``--report`` default: :func:`report_name` of the run."""


def report_name(mechanism: str, *, shuffle: bool) -> str:
    """The default report file of a demo: its own name per mechanism and mode."""
    return f"ldp-demo-report-{mechanism}{'-shuffled' if shuffle else ''}.html"


def _optional_path(text: str) -> str | None:
    return text or None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options = vars(args)
    dap, as_json, local_epsilon, dp, local_mechanism = (
        options.pop(k) for k in ("dap", "json", "local_epsilon", "dp", "local_mechanism")
    )
    if local_mechanism is not None and (not dap or local_epsilon is None):
        print("ldp-demo: error: --local-mechanism goes with --dap --local-epsilon", file=sys.stderr)
        return 2
    if dap:
        return _main_dap(
            args,
            local_epsilon=local_epsilon,
            local_mechanism=local_mechanism or "grr",
            dp=dp,
            as_json=as_json,
        )
    if as_json or local_epsilon is not None or dp is not None:
        print("ldp-demo: error: --json, --local-epsilon and --dp go with --dap", file=sys.stderr)
        return 2
    collector, campaign = options.pop("collector"), options.pop("campaign")
    reports_per_device = options.pop("reports_per_device")
    if (collector is None) != (campaign is None):
        print("ldp-demo: error: --collector and --campaign go together", file=sys.stderr)
        return 2
    if collector is not None and options["shuffle"]:
        print(
            "ldp-demo: error: --shuffle runs its own collector; drop --collector", file=sys.stderr
        )
        return 2
    values_file, db = options.pop("values"), options.pop("db")
    if (values_file is not None or db is not None) and collector is None:
        print(
            "ldp-demo: error: --values and --db go with --collector and --campaign",
            file=sys.stderr,
        )
        return 2
    if collector is not None:
        try:
            fed = feed_collector(
                collector,
                campaign,
                devices=1_000 if args.devices is None else args.devices,
                reports_per_device=reports_per_device,
                seed=args.seed,
                values=None if values_file is None else read_values(values_file),
                token=os.environ.get("LDP_ADMIN_TOKEN") or None,
                db=db,
                quiet=args.quiet,
            )
        except BrokenPipeError:  # an OSError: the reader of stdout left (``| head``)
            return closed_pipe()
        except (ValueError, LookupError, RuntimeError, OSError) as error:
            print(f"ldp-demo: error: {error}", file=sys.stderr)
            return 2
        print(fed.summary())
        print("\n".join(fed.truth_lines()))
        return 0
    if options["devices"] is None:
        options["devices"] = 100_000
    if options["report_path"] == DEFAULT_REPORT:
        mechanism = options["mechanism"] or default_mechanism(shuffle=options["shuffle"])
        options["report_path"] = report_name(mechanism, shuffle=options["shuffle"])
    try:
        result = run_demo(**options)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"ldp-demo: error: {error}", file=sys.stderr)
        return 2
    print_summary(result)
    return 0


def _main_dap(
    args: argparse.Namespace,
    *,
    local_epsilon: float | None,
    local_mechanism: str,
    dp: str | None,
    as_json: bool,
) -> int:
    """``ldp-demo --dap`` (``analysis.demo_dap``)."""
    from analysis.demo_dap import dap_lines, run_dap_demo

    if args.collector is not None or args.shuffle or args.mechanism is not None:
        print(
            "ldp-demo: error: --dap runs its own Leader and Helper over a histogram; drop "
            "--collector, --shuffle and --mechanism",
            file=sys.stderr,
        )
        return 2
    try:
        result = run_dap_demo(
            devices=1_000 if args.devices is None else args.devices,
            epsilon=args.epsilon,
            local_epsilon=local_epsilon,
            local_mechanism=local_mechanism,
            dp=dp,
            seed=args.seed,
            clients=args.clients,
            keep=args.keep,
        )
    except (ValueError, RuntimeError, OSError) as error:
        print(f"ldp-demo: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result) if as_json else "\n".join(dap_lines(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
