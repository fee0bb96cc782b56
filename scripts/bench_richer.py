"""Figures for the richer-data mechanisms (docs/math/richer-data.md); printed, never asserted.

    .venv/bin/python scripts/bench_richer.py [--n N] [--trials T]

* Square Wave + EMS: Wasserstein-1 distance and the errors of the 50th/90th/99th percentiles on
  a log-normal and a bimodal population (the hybrid mechanism reports only a mean: it has no
  quantiles to compare).
* Ranges at k = 1024: the MSE of random range queries over repeated runs divided by their exact
  variance, and the exact variance of flat OUE summed over the same ranges.
* Marginals: 6 attributes (k from 2 to 20), eps 1/2/4: the mean absolute error over every cell of
  the 15 2-way tables (CALM-style tables, consistent), and of the 1-way marginals by SPL, SMP,
  RS+FD and from the tables.
* Throughput of each new estimator (perturb and estimate) at n = 10^6.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from analysis.distribution import estimate_distribution
from analysis.key_value import estimate_key_value
from analysis.multi import estimate_multi
from analysis.ranges import estimate_ranges
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.hierarchical import Hierarchical
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.pckv import PCKV
from client_sdk.mechanisms.square_wave import SquareWave
from client_sdk.mechanisms.unary import OUE


def populations(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    lognormal = np.clip(rng.lognormal(0.0, 0.75, n), 0.0, 10.0)
    bimodal = np.clip(
        np.where(rng.random(n) < 0.6, rng.normal(2.5, 0.6, n), rng.normal(7.0, 0.8, n)), 0, 10
    )
    return {"log-normal": lognormal, "bimodal": bimodal}


def wasserstein_1(values: np.ndarray, est: object, lower: float, upper: float) -> float:
    grid = np.linspace(lower, upper, 2001)
    truth = np.searchsorted(np.sort(values), grid, side="right") / values.size
    fitted = np.array([est.cdf(x) for x in grid])  # type: ignore[attr-defined]
    return float(np.abs(truth - fitted).mean() * (upper - lower))


def square_wave_figures(n: int, rng: np.random.Generator) -> None:
    print(f"Square Wave + EMS on [0, 10], 64 buckets, n = {n:,}")
    print(f"{'population':>11} {'eps':>4} {'W1':>7} {'p50 err':>8} {'p90 err':>8} {'p99 err':>8}")
    for name, values in populations(n, rng).items():
        for epsilon in (1.0, 2.0, 4.0):
            m = mechanism_from_config(
                {
                    "mechanism": "square_wave",
                    "epsilon": epsilon,
                    "lower": 0,
                    "upper": 10,
                    "bins": 64,
                }
            )
            assert isinstance(m, SquareWave)
            est = estimate_distribution(m, m.perturb(values, rng=rng), replicates=0)
            errors = [abs(est.quantile(q) - np.quantile(values, q)) for q in (0.5, 0.9, 0.99)]
            w1 = wasserstein_1(values, est, 0.0, 10.0)
            print(f"{name:>11} {epsilon:>4g} {w1:>7.4f} " + " ".join(f"{e:>8.4f}" for e in errors))


def range_figures(n: int, trials: int, rng: np.random.Generator) -> None:
    k = 1024
    print(f"\nRanges at k = {k}, n = {n:,}, {trials} runs, 40 random ranges")
    values = np.minimum(rng.geometric(0.004, n) - 1, k - 1)
    truth = np.bincount(values, minlength=k) / n
    starts = rng.integers(0, k - 1, 40)
    stops = np.array([rng.integers(s + 1, k + 1) for s in starts])
    print(f"{'eps':>4} {'B':>3} {'MSE/Var':>8} {'hier var':>10} {'flat OUE var':>13} {'ratio':>6}")
    for epsilon in (1.0, 2.0, 4.0):
        m = mechanism_from_config({"mechanism": "hierarchical", "epsilon": epsilon, "k": k})
        assert isinstance(m, Hierarchical)
        squared = np.zeros(starts.size)
        est = None
        for _ in range(trials):
            est = estimate_ranges(m, m.perturb(values, rng=rng))
            got = np.array(
                [est.range(int(a), int(b))[0] for a, b in zip(starts, stops, strict=True)]
            )
            want = np.array([truth[a:b].sum() for a, b in zip(starts, stops, strict=True)])
            squared += (got - want) ** 2
        assert est is not None
        exact = np.array(
            [est.range_variance(int(a), int(b), truth) for a, b in zip(starts, stops, strict=True)]
        )
        oue = OUE(epsilon, k)
        flat = np.array(
            [
                ((b - a) * oue.variance_per_user() + truth[a:b].sum() * oue.frequency_coefficient())
                / n
                for a, b in zip(starts, stops, strict=True)
            ]
        )
        ratio = float(np.mean(squared / trials / exact))
        print(
            f"{epsilon:>4g} {m.b:>3} {ratio:>8.3f} {exact.mean():>10.3g} {flat.mean():>13.3g} "
            f"{flat.mean() / exact.mean():>6.1f}"
        )


def marginal_figures(n: int, rng: np.random.Generator) -> None:
    ks = (2, 4, 6, 10, 15, 20)
    names = [f"a{j}" for j in range(len(ks))]
    # correlated attributes: a shared latent class shifts every attribute's distribution
    latent = rng.integers(0, 3, n)
    x = np.stack(
        [np.minimum((rng.geometric(0.3, n) - 1 + latent * (k // 3)) % k, k - 1) for k in ks], 1
    )
    pairs = list(itertools.combinations(range(len(ks)), 2))
    attributes = [{"name": nm, "k": k} for nm, k in zip(names, ks, strict=True)]
    print(f"\nMarginals: 6 attributes, k = {ks}, n = {n:,}; mean absolute error")
    print(
        f"{'eps':>4} {'2-way tables':>13} {'1-way tables':>13} {'SPL':>8} {'SMP':>8} {'RS+FD':>8}"
    )
    for epsilon in (1.0, 2.0, 4.0):
        tables = mechanism_from_config(
            {
                "mechanism": "multi",
                "epsilon": epsilon,
                "protocol": "smp",
                "attributes": attributes,
                "marginals": [[names[a], names[b]] for a, b in pairs],
            }
        )
        assert isinstance(tables, Multi)
        est = estimate_multi(tables, tables.perturb(x, rng=rng))
        two_way = []
        for a, b in pairs:
            truth = np.bincount(x[:, a] * ks[b] + x[:, b], minlength=ks[a] * ks[b]) / n
            got = est.marginal(names[a], names[b]).frequencies.ravel()
            two_way.append(np.abs(got - truth))
        one_way = {}
        for protocol in ("tables", "spl", "smp", "rsfd"):
            if protocol == "tables":
                e = est
            else:
                m = mechanism_from_config(
                    {
                        "mechanism": "multi",
                        "epsilon": epsilon,
                        "protocol": protocol,
                        "attributes": attributes,
                    }
                )
                assert isinstance(m, Multi)
                e = estimate_multi(m, m.perturb(x, rng=rng))
            errors = [
                np.abs(e.marginal(nm).frequencies - np.bincount(x[:, j], minlength=ks[j]) / n)
                for j, nm in enumerate(names)
            ]
            one_way[protocol] = float(np.concatenate(errors).mean())
        print(
            f"{epsilon:>4g} {float(np.concatenate(two_way).mean()):>13.5f} "
            f"{one_way['tables']:>13.5f} {one_way['spl']:>8.5f} {one_way['smp']:>8.5f} "
            f"{one_way['rsfd']:>8.5f}"
        )


def throughput(n: int, rng: np.random.Generator) -> None:
    print(f"\nThroughput at n = {n:,} (seconds; perturb includes the sampler, estimate the fit)")
    sw = mechanism_from_config(
        {"mechanism": "square_wave", "epsilon": 1.0, "lower": 0, "upper": 10, "bins": 64}
    )
    assert isinstance(sw, SquareWave)
    values = populations(n, rng)["bimodal"]
    t0 = time.perf_counter()
    reports = sw.perturb(values, rng=rng)
    t1 = time.perf_counter()
    est = estimate_distribution(sw, reports, replicates=20)
    t2 = time.perf_counter()
    print(
        f"square_wave: perturb {t1 - t0:.2f}, aggregate + EMS + 20 bootstrap refits {t2 - t1:.2f}"
        f" ({est.iterations} EM iterations)"
    )
    h = mechanism_from_config({"mechanism": "hierarchical", "epsilon": 1.0, "k": 1024})
    assert isinstance(h, Hierarchical)
    items = np.minimum(rng.geometric(0.004, n) - 1, 1023)
    _ = h.consistency  # the one-time solve, timed apart
    t3 = time.perf_counter()
    reports = h.perturb(items, rng=rng)
    t4 = time.perf_counter()
    estimate_ranges(h, reports)
    t5 = time.perf_counter()
    print(f"hierarchical k=1024: perturb {t4 - t3:.2f}, aggregate + consistency {t5 - t4:.2f}")
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
    pckv = mechanism_from_config({"mechanism": "pckv", "epsilon": 2.0, "k": 64, "padding": 2})
    assert isinstance(pckv, PCKV)
    records = [{int(i % 64): 0.5, int((7 * i) % 64): -0.25} for i in range(n)]
    t9 = time.perf_counter()
    reports = pckv.perturb(records, rng=rng)
    t10 = time.perf_counter()
    estimate_key_value(pckv, reports)
    t11 = time.perf_counter()
    print(
        f"pckv k=64: perturb {t10 - t9:.2f} (a Python loop picks each sampled pair), "
        f"aggregate + estimate {t11 - t10:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--throughput-n", type=int, default=1_000_000)
    parser.add_argument("--marginals-only", action="store_true")
    parser.add_argument("--throughput-only", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(2020)
    if args.throughput_only:
        throughput(args.throughput_n, rng)
        return
    if not args.marginals_only:
        square_wave_figures(args.n, rng)
    if not args.marginals_only:
        range_figures(args.n, args.trials, rng)
    marginal_figures(args.n, rng)
    if not args.marginals_only:
        throughput(args.throughput_n, rng)


if __name__ == "__main__":
    main()
