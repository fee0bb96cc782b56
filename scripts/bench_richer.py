"""Figures for the richer-data mechanisms (docs/math/richer-data.md); printed, never asserted.

    .venv/bin/python scripts/bench_richer.py [--n N] [--trials T]

* Distributions, ranges (B-ary and Haar), key-value (PCKV-GRR and -UE) and their throughput:
  ``bench_richer_values.py`` (run from here; its docstring lists the figures).
* Marginals: 6 attributes (k from 2 to 20), eps 1/2/4, n = 10^6: the mean absolute error over
  every cell of the 15 2-way marginals by CALM (tables chosen by its rule, consistent), beside
  multi-freq-ldpy 0.2.5's SPL, SMP and RS+FD over the pairs (in the venv of bench_peers.py, at
  ``--peer-n``: its per-report Python loop), and the time per report; and 16 binary attributes
  by Fourier (order 2) beside CALM. The peer's results are stored under the peers' venv folder
  (``results/marginals-<hash>.json``, with the load of the run) and read back by later runs,
  which re-time only ours; ``--refresh-peers`` runs the peer again.
* Throughput of each new estimator (perturb and estimate) at n = 10^6.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path

import bench_richer_values  # scripts/ is on sys.path when this script runs
import numpy as np

from analysis.kinds.fourier.estimate import estimate_fourier
from analysis.kinds.multi.estimate import estimate_multi
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.fourier import Fourier
from client_sdk.mechanisms.multi import Multi

PEER_DRIVER = """
import json, sys, time
from pathlib import Path
import numpy as np
from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution
folder = Path(sys.argv[1])
job = json.loads((folder / "job.json").read_text())
x = np.load(folder / "tuples.npy")
ks, d = job["ks"], len(job["ks"])
funcs = {
    "spl": (SPL_solution.SPL_GRR_Client, SPL_solution.SPL_GRR_Aggregator_MI),
    "smp": (SMP_solution.SMP_GRR_Client, SMP_solution.SMP_GRR_Aggregator_MI),
    "rsfd": (RSpFD_solution.RSpFD_GRR_Client, RSpFD_solution.RSpFD_GRR_Aggregator_MI),
}
out = {}
for eps in job["eps"]:
    for name, (client, aggregator) in funcs.items():
        client(list(x[0]), ks, d, eps)  # numba compiles here, outside the timing
        cpu = float("inf")
        for _ in range(job["repeats"]):  # the least CPU time: the machine is shared
            start = time.process_time()
            reports = [client(list(row), ks, d, eps) for row in x]
            est = aggregator(reports, ks, d, eps)
            cpu = min(cpu, time.process_time() - start)
        estimates = [np.asarray(e, dtype=float).tolist() for e in est]
        out[f"{name}:{eps:g}"] = dict(est=estimates, cpu=cpu)
(folder / "result.json").write_text(json.dumps(out))
"""
"""multi-freq-ldpy's SPL, SMP and RS+FD (GRR) over the pairs as attributes; CPU seconds of
encoding and aggregating, the least of ``repeats`` runs (process time: the machine is shared,
wall time is not comparable)."""

REPEATS = 5
"""Timed runs per (method, eps), ours and the peer's alike; the least CPU time is reported."""


def _correlated_tuples(ks: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """A shared latent class shifts every attribute's (geometric) distribution."""
    latent = rng.integers(0, 3, n)
    return np.stack(
        [np.minimum((rng.geometric(0.3, n) - 1 + latent * (k // 3)) % k, k - 1) for k in ks], 1
    )


def _two_way_mae(
    tables: dict[tuple[int, int], np.ndarray], x: np.ndarray, ks: tuple[int, ...]
) -> float:
    errors = []
    for (a, b), got in tables.items():
        truth = np.bincount(x[:, a] * ks[b] + x[:, b], minlength=ks[a] * ks[b]) / len(x)
        errors.append(np.abs(np.ravel(got) - truth))
    return float(np.concatenate(errors).mean())


def _ours(
    epsilon: float,
    x: np.ndarray,
    ks: tuple[int, ...],
    replicates: int = 200,
    seeded: bool = False,
) -> tuple[float, float, float, int]:
    """CALM tables chosen by the rule, devices on the OS CSPRNG (``rng=None``, as on devices)
    or, with ``seeded``, on numpy's PCG64 (a fast non-cryptographic generator, the kind the
    peer draws from: its global Mersenne Twister); (MAE, CPU seconds of perturb + aggregate +
    consistent tables + the 15 marginals, CPU seconds of the bootstrap of the post-processed
    cells, tables)."""
    names = [f"a{j}" for j in range(len(ks))]
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": epsilon,
            "protocol": "smp",
            "attributes": [{"name": nm, "k": k} for nm, k in zip(names, ks, strict=True)],
            "marginals": {"cover": 2},
        }
    )
    assert isinstance(m, Multi)
    elapsed = math.inf
    for repeat in range(REPEATS):  # the least CPU time; the MAE is the last run's
        generator = np.random.default_rng(repeat) if seeded else None
        start = time.process_time()
        est = estimate_multi(m, m.perturb(x, rng=generator), replicates=0)  # bootstrap apart
        tables = {
            (a, b): est.marginal(names[a], names[b]).frequencies
            for a, b in itertools.combinations(range(len(ks)), 2)
        }
        elapsed = min(elapsed, time.process_time() - start)
    start = time.process_time()
    if replicates:
        _ = dataclasses.replace(est, replicates=replicates)._replicate_tables
    booted = time.process_time() - start
    kinds = [o.name for o in m.oracles]
    _ORACLES_USED[epsilon] = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
    return _two_way_mae(tables, x, ks), elapsed, booted, m.u


_ORACLES_USED: dict[float, str] = {}
"""The table oracles of each epsilon's run (printed under the figure)."""


def marginal_figures(
    n: int, peer_n: int, rng: np.random.Generator, peers: bool, refresh: bool = False
) -> None:
    """2-way marginals of 6 attributes: CALM (ours) beside multi-freq-ldpy's SPL, SMP and RS+FD
    (GRR) run over the 15 pairs as attributes (the peer has no marginal protocol: a pair's
    combined value is one attribute), in the peers' venv of scripts/bench_peers.py."""
    ks = (2, 4, 6, 10, 15, 20)
    pairs = list(itertools.combinations(range(len(ks)), 2))
    x = _correlated_tuples(ks, n, rng)
    small = x[:peer_n]
    cells = sum(ks[a] * ks[b] for a, b in pairs)
    print(
        f"\nMarginals: 6 attributes, k = {ks}; MAE over all {cells} cells of the 15 2-way "
        f"marginals; ours n = {n:,} and {peer_n:,}, multi-freq-ldpy n = {peer_n:,} (its first "
        "tuples)"
    )
    peer: dict[str, dict[str, object]] = {}
    if peers:
        import bench_peers  # scripts/ is on sys.path when this script runs

        python = bench_peers.ensure_venv(bench_peers.DEFAULT_VENV)
        pair_x = np.stack([small[:, a] * ks[b] + small[:, b] for a, b in pairs], axis=1)
        job = {"eps": [1.0, 2.0, 4.0], "ks": [ks[a] * ks[b] for a, b in pairs], "repeats": REPEATS}
        # the peer's results (and CPU times) are kept under the hash of the pins, the driver,
        # the job and the data: later runs re-time only ours (the load of the run that made
        # the file is printed with it)
        digest = hashlib.sha256("\n".join(bench_peers.PINS).encode() + PEER_DRIVER.encode())
        digest.update(json.dumps(job, sort_keys=True).encode() + pair_x.tobytes())
        stored = (
            bench_peers.DEFAULT_VENV.parent
            / "results"
            / f"marginals-{digest.hexdigest()[:16]}.json"
        )
        if stored.exists() and not refresh:
            peer = json.loads(stored.read_text())
            print(f"(peer results from {stored}, measured at load {peer.pop('load')})")
        else:
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="ldp-marginal-peer-") as tmp:
                folder = Path(tmp)
                (folder / "driver.py").write_text(PEER_DRIVER)
                np.save(folder / "tuples.npy", pair_x)
                (folder / "job.json").write_text(json.dumps(job))
                before = os.getloadavg()[0]
                subprocess.run([str(python), str(folder / "driver.py"), str(folder)], check=True)
                peer = json.loads((folder / "result.json").read_text())
            load = f"{max(before, os.getloadavg()[0]):.2f}"
            stored.parent.mkdir(parents=True, exist_ok=True)
            stored.write_text(json.dumps({**peer, "load": load}))
            print(f"(peer subprocess {time.perf_counter() - started:.0f} s, load {load})")
    header = (
        f"{'eps':>4} {'tables':>6} {'ours':>9} {'ours@peer n':>11} {'SPL':>9} {'SMP':>9} "
        f"{'RS+FD':>9} {'ours us':>7} {'@peer n':>7} {'seeded':>7} {'peer us':>7} {'ratio':>6} "
        f"{'@peer n':>7} {'seeded':>6} {'+boot':>6} {'boot s':>6}"
    )
    print(header)
    for epsilon in (1.0, 2.0, 4.0):
        mae, seconds, booted, count = _ours(epsilon, x, ks)
        mae_small, seconds_small, _, _ = _ours(epsilon, small, ks, replicates=0)
        _, seconds_seeded, _, _ = _ours(epsilon, x, ks, replicates=0, seeded=True)
        peer_mae, peer_rate = {}, {}
        for protocol in ("spl", "smp", "rsfd"):
            entry = peer.get(f"{protocol}:{epsilon:g}")
            if entry is None:
                continue
            est = [np.asarray(e, dtype=float) for e in entry["est"]]  # type: ignore[attr-defined]
            peer_mae[protocol] = _two_way_mae(dict(zip(pairs, est, strict=True)), small, ks)
            peer_rate[protocol] = float(entry["cpu"]) / peer_n * 1e6  # type: ignore[arg-type]
        ours_rate = seconds / n * 1e6
        small_rate = seconds_small / len(small) * 1e6
        seeded_rate = seconds_seeded / n * 1e6
        booted_rate = (seconds + booted) / n * 1e6
        best = min(peer_mae, key=lambda p: peer_mae[p]) if peer_mae else None
        fastest = min(peer_rate.values()) if peer_rate else float("nan")
        print(
            f"{epsilon:>4g} {count:>6} {mae:>9.5f} {mae_small:>11.5f} "
            + " ".join(f"{peer_mae.get(p, float('nan')):>9.5f}" for p in ("spl", "smp", "rsfd"))
            + f" {ours_rate:>7.3f} {small_rate:>7.3f} {seeded_rate:>7.3f} {fastest:>7.2f}"
            + f" {fastest / ours_rate:>6.1f} {fastest / small_rate:>7.1f}"
            + f" {fastest / seeded_rate:>6.1f} {fastest / booted_rate:>6.1f} {booted:>6.2f}"
            + (f"  (best peer: {best})" if best else "")
        )
    print(
        f"CPU microseconds per report, the least of {REPEATS} runs on each side. ours: perturb on\n"
        "the OS CSPRNG + aggregate + consistent"
        " tables + the 15 marginals, at n and at the peer's n (fixed costs weigh more there);\n"
        "peers: encode + aggregate with their MI post-processing (clip, renormalise), at their n\n"
        "(a per-report loop: time per report does not fall with n). ratio: the fastest peer's\n"
        "time per report over ours at n; @peer n: at equal n; seeded: ours at n with the\n"
        "devices on numpy's PCG64 instead of the OS CSPRNG (the peer's kind of generator:\n"
        "the same work, without the kernel's cryptographic randomness); +boot: ours at n with the\n"
        "200-replicate bootstrap of the post-processed cells (boot s: its CPU seconds, about\n"
        "the same at any n: it draws statistics, not reports). The peer's RS+FD uses its\n"
        "amplified epsilon' (not eps-LDP on whole tuples)."
    )
    print(
        "Table oracles (cost-aware, written to the config as table_oracles): "
        + "; ".join(f"eps {e:g}: {used}" for e, used in _ORACLES_USED.items())
    )


def binary_marginal_figures(n: int, rng: np.random.Generator) -> None:
    """16 binary attributes: Fourier (order 2) beside CALM (tables chosen by its rule) on the
    same data; MAE over all 2-way cells and CPU seconds."""
    d = 16
    latent = rng.random(n) < 0.4
    base = rng.random((n, d)) < np.linspace(0.1, 0.6, d)
    x = np.where(rng.random((n, d)) < 0.3, latent[:, None], base).astype(np.int64)
    names = [f"b{j}" for j in range(d)]
    pairs = list(itertools.combinations(range(d), 2))
    truth = {(a, b): np.bincount(x[:, a] * 2 + x[:, b], minlength=4) / n for a, b in pairs}
    print(
        f"\nBinary marginals: {d} attributes, n = {n:,}; MAE over the {4 * len(pairs)} 2-way cells"
    )
    print(
        f"{'eps':>4} {'Fourier':>9} {'CALM':>9} {'CALM tables':>11} {'Fourier s':>9} {'CALM s':>7}"
    )
    attributes = [{"name": nm} for nm in names]
    for epsilon in (1.0, 2.0, 4.0):
        fourier = mechanism_from_config(
            {"mechanism": "fourier", "epsilon": epsilon, "attributes": attributes, "order": 2}
        )
        start = time.process_time()
        assert isinstance(fourier, Fourier)
        est_f = estimate_fourier(fourier, fourier.perturb(x, rng=rng), replicates=0)
        got_f = {p: est_f.marginal(names[p[0]], names[p[1]]) for p in pairs}
        seconds_f = time.process_time() - start
        calm = mechanism_from_config(
            {
                "mechanism": "multi",
                "epsilon": epsilon,
                "protocol": "smp",
                "attributes": [{"name": nm, "k": 2} for nm in names],
                "marginals": {"cover": 2},
            }
        )
        assert isinstance(calm, Multi)
        start = time.process_time()
        est_c = estimate_multi(calm, calm.perturb(x, rng=rng), replicates=0)
        got_c = {p: est_c.marginal(names[p[0]], names[p[1]]) for p in pairs}
        seconds_c = time.process_time() - start
        mae_f = np.mean([np.abs(got_f[p].frequencies.ravel() - truth[p]).mean() for p in pairs])
        mae_c = np.mean([np.abs(got_c[p].frequencies.ravel() - truth[p]).mean() for p in pairs])
        print(
            f"{epsilon:>4g} {mae_f:>9.5f} {mae_c:>9.5f} {calm.u:>11} {seconds_f:>9.2f} "
            f"{seconds_c:>7.2f}"
        )


def throughput(n: int, rng: np.random.Generator) -> None:
    print(f"\nThroughput at n = {n:,} (seconds; perturb includes the sampler, estimate the fit)")
    ks = (2, 4, 6, 10, 15, 20)
    names = [f"a{j}" for j in range(len(ks))]
    tuples = np.stack([rng.integers(0, k, n) for k in ks], axis=1)
    for protocol, marginals in (("rsfd", None), ("smp", list(itertools.combinations(names, 2)))):
        config: dict[str, object] = {
            "mechanism": "multi",
            "epsilon": 2.0,
            "protocol": protocol,
            "attributes": [{"name": nm, "k": k} for nm, k in zip(names, ks, strict=True)],
        }
        if marginals is not None:
            config["marginals"] = [list(pair) for pair in marginals]
        multi = mechanism_from_config(config)
        assert isinstance(multi, Multi)
        t6 = time.perf_counter()
        reports = multi.perturb(tuples, rng=rng)
        t7 = time.perf_counter()
        result = estimate_multi(multi, reports)
        if marginals is not None:
            _ = result.tables
        t8 = time.perf_counter()
        label = "multi smp, 15 tables" if marginals else "multi rsfd"
        print(f"{label}: perturb {t7 - t6:.2f}, aggregate + estimate {t8 - t7:.2f}")
    bench_richer_values.throughput(n, rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, nargs="+", default=[100_000])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--throughput-n", type=int, default=1_000_000)
    parser.add_argument("--marginals-only", action="store_true")
    parser.add_argument("--marginal-n", type=int, default=1_000_000)
    parser.add_argument("--peer-n", type=int, default=100_000)
    parser.add_argument("--no-peers", action="store_true", help="skip multi-freq-ldpy")
    parser.add_argument(
        "--refresh-peers", action="store_true", help="re-run the peer (not its stored results)"
    )
    parser.add_argument("--throughput-only", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(2020)
    if args.throughput_only:
        throughput(args.throughput_n, rng)
        return
    if not args.marginals_only:
        for n in args.n:
            bench_richer_values.distribution_figures(n, rng)
        bench_richer_values.range_figures(args.n[0], args.trials, rng)
        bench_richer_values.key_value_figures(args.n[0], args.trials, rng)
    marginal_figures(args.marginal_n, args.peer_n, rng, not args.no_peers, args.refresh_peers)
    binary_marginal_figures(args.marginal_n, rng)
    if not args.marginals_only:
        throughput(args.throughput_n, rng)


if __name__ == "__main__":
    main()
