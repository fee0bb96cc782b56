"""Figures for ranges, key-value pairs and distributions (docs/math/richer-data.md); printed,
never asserted. ``scripts/bench_richer.py`` runs these beside the marginal figures.

    .venv/bin/python scripts/bench_richer_values.py [--n N [N ...]] [--trials T]
        [--throughput-n N] [--only distributions|ranges|key-value|throughput]

* Distributions: Square Wave + EMS, Wasserstein-1 and the absolute errors of the 50th/90th/99th
  percentiles on a log-normal and a bimodal population on [0, 10], beside a hierarchical
  histogram (B-ary and Haar) over the same values bucketed into 1024 buckets (its CDF linear
  inside a bucket). The hybrid mechanism reports only a mean: it has no quantiles to compare.
* Ranges at k = 1024: the MSE of 40 random range queries over repeated runs divided by their
  exact variance (0.9-1.1 expected), for the B-ary tree (B by the variance formula) and the
  Haar wavelet, beside the exact variance of flat OUE summed over the same ranges.
* Key-value: PCKV-GRR and PCKV-UE, mean squared error of the key frequencies and of the
  per-key means against the truth, and the mean reported standard errors against the spread.
* Throughput at n = 10^6: encode (perturb) and estimate, for every estimator here.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from analysis.kinds.distribution.estimate import estimate_distribution
from analysis.kinds.key_value.estimate import estimate_key_value
from analysis.kinds.ranges.estimate import estimate_ranges
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.hierarchical import RangeMechanism
from client_sdk.mechanisms.pckv import PCKV
from client_sdk.mechanisms.square_wave import SquareWave
from client_sdk.mechanisms.unary import OUE

LOWER, UPPER, BUCKETS, K = 0.0, 10.0, 1024, 1024
QUANTILES = (0.5, 0.9, 0.99)


def populations(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    lognormal = np.clip(rng.lognormal(0.0, 0.75, n), LOWER, UPPER)
    bimodal = np.clip(
        np.where(rng.random(n) < 0.6, rng.normal(2.5, 0.6, n), rng.normal(7.0, 0.8, n)),
        LOWER,
        UPPER,
    )
    return {"log-normal": lognormal, "bimodal": bimodal}


def range_mechanism(epsilon: float, k: int, variant: str | None) -> RangeMechanism:
    config: dict[str, Any] = {"mechanism": "hierarchical", "epsilon": epsilon, "k": k}
    if variant is not None:
        config["variant"] = variant
    m = mechanism_from_config(config)
    assert isinstance(m, RangeMechanism)
    return m


def square_wave(epsilon: float) -> SquareWave:
    m = mechanism_from_config(
        {"mechanism": "square_wave", "epsilon": epsilon, "lower": LOWER, "upper": UPPER, "bins": 64}
    )
    assert isinstance(m, SquareWave)
    return m


GRID = np.linspace(LOWER, UPPER, 4001)


def w1_from_cdf(values: np.ndarray, cdf: np.ndarray) -> float:
    """Wasserstein-1 = the integral of |F - F_true| over [LOWER, UPPER], on GRID."""
    truth = np.searchsorted(np.sort(values), GRID, side="right") / values.size
    return float(np.abs(truth - cdf).mean() * (UPPER - LOWER))


def bucket_cdf(leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CDF on GRID (linear inside a bucket) and its knots at the bucket edges, from the
    unbiased consistent leaves: their running sums (exact-variance prefixes, as
    ``RangeEstimate.cdf``), made monotone and clipped to [0, 1] (projecting the 1024 noisy
    leaves onto the simplex first would smear mass over every bucket)."""
    edges = np.linspace(LOWER, UPPER, leaves.size + 1)
    knots = np.clip(np.maximum.accumulate(np.concatenate([[0.0], np.cumsum(leaves)])), 0, 1)
    knots[-1] = 1.0
    return np.interp(GRID, edges, knots), knots


def bucket_quantile(knots: np.ndarray, q: float) -> float:
    edges = np.linspace(LOWER, UPPER, knots.size)
    j = int(np.clip(np.searchsorted(knots, q, side="left"), 1, knots.size - 1))
    low, high = knots[j - 1], knots[j]
    share = 0.0 if high <= low else (q - low) / (high - low)
    return float(edges[j - 1] + share * (edges[j] - edges[j - 1]))


def distribution_figures(n: int, rng: np.random.Generator) -> None:
    print(f"\nDistributions on [{LOWER:g}, {UPPER:g}], n = {n:,}: W1 and |quantile error|")
    print(
        f"{'population':>11} {'eps':>4} {'method':>22} {'W1':>7} "
        + " ".join(f"{f'p{round(100 * q)} err':>8}" for q in QUANTILES)
        + f" {'seconds':>8}"
    )
    for name, values in populations(n, rng).items():
        truth = [float(np.quantile(values, q)) for q in QUANTILES]
        buckets = np.minimum((values - LOWER) / (UPPER - LOWER) * BUCKETS, BUCKETS - 1)
        items = buckets.astype(np.int64)
        for epsilon in (1.0, 2.0, 4.0):
            rows: list[tuple[str, float, list[float], float]] = []
            t0 = time.perf_counter()
            sw = square_wave(epsilon)
            est = estimate_distribution(sw, sw.perturb(values, rng=rng), replicates=0)
            cdf = np.array([est.cdf(x) for x in GRID])
            errors = [abs(est.quantile(q) - t) for q, t in zip(QUANTILES, truth, strict=True)]
            rows.append(("square wave + EMS", w1_from_cdf(values, cdf), errors, t0))
            for variant, label in ((None, "B-ary tree, 1024 bkts"), ("haar", "Haar, 1024 buckets")):
                t0 = time.perf_counter()
                m = range_mechanism(epsilon, BUCKETS, variant)
                leaves = m.estimate_leaves(m.aggregate(m.perturb(items, rng=rng)))
                cdf, knots = bucket_cdf(leaves)
                errors = [
                    abs(bucket_quantile(knots, q) - t)
                    for q, t in zip(QUANTILES, truth, strict=True)
                ]
                rows.append((label, w1_from_cdf(values, cdf), errors, t0))
            for label, w1, errors, t0 in rows:
                print(
                    f"{name:>11} {epsilon:>4g} {label:>22} {w1:>7.4f} "
                    + " ".join(f"{e:>8.4f}" for e in errors)
                    + f" {time.perf_counter() - t0:>8.1f}"
                )
    print("(hybrid reports a mean only: no distribution, so no W1 or quantiles to compare)")


def range_figures(n: int, trials: int, rng: np.random.Generator) -> None:
    print(f"\nRanges at k = {K}, n = {n:,}, {trials} runs, 40 random ranges")
    values = np.minimum(rng.geometric(0.004, n) - 1, K - 1)
    truth = np.bincount(values, minlength=K) / n
    starts = rng.integers(0, K - 1, 40)
    stops = np.array([rng.integers(s + 1, K + 1) for s in starts])
    want = np.array([truth[a:b].sum() for a, b in zip(starts, stops, strict=True)])
    print(
        f"{'eps':>4} {'method':>10} {'MSE/Var':>8} {'mean Var':>10} {'flat OUE Var':>13} "
        f"{'OUE/this':>9}"
    )
    for epsilon in (1.0, 2.0, 4.0):
        oue = OUE(epsilon, K)
        flat = np.array(
            [
                ((b - a) * oue.variance_per_user() + truth[a:b].sum() * oue.frequency_coefficient())
                / n
                for a, b in zip(starts, stops, strict=True)
            ]
        )
        for variant in (None, "haar"):
            m = range_mechanism(epsilon, K, variant)
            w, _ = m.consistency
            cumulative = np.concatenate([np.zeros((1, w.shape[1])), np.cumsum(w, axis=0)])
            weights = cumulative[stops] - cumulative[starts]
            exact = m.functional_variance(weights, truth, n)
            squared = np.zeros(starts.size)
            for _ in range(trials):
                leaves = m.estimate_leaves(m.aggregate(m.perturb(values, rng=rng)))
                prefix = np.concatenate([[0.0], np.cumsum(leaves)])
                squared += (prefix[stops] - prefix[starts] - want) ** 2
            ratio = float(np.mean(squared / trials / exact))
            label = "Haar" if variant else f"B-ary B={m.b}"
            print(
                f"{epsilon:>4g} {label:>10} {ratio:>8.3f} {exact.mean():>10.3g} "
                f"{flat.mean():>13.3g} {flat.mean() / exact.mean():>9.1f}"
            )
    print("(MSE/Var: mean over the ranges of the MSE over runs divided by the exact variance)")


def kv_population(n: int, k: int, rng: np.random.Generator) -> tuple[list[dict[int, float]], Any]:
    """Each user holds 1-2 keys (Zipf-like key popularity), values with a per-key mean."""
    popularity = 1.0 / np.arange(1, k + 1)
    popularity /= popularity.sum()
    first = rng.choice(k, n, p=popularity)
    second = rng.choice(k, n, p=popularity)
    key_means = np.linspace(-0.8, 0.8, k)
    v1 = np.clip(key_means[first] + rng.normal(0, 0.2, n), -1, 1)
    v2 = np.clip(key_means[second] + rng.normal(0, 0.2, n), -1, 1)
    two = (rng.random(n) < 0.5) & (first != second)
    records = [
        {int(a): float(x), int(b): float(y)} if t else {int(a): float(x)}
        for a, b, x, y, t in zip(first, second, v1, v2, two, strict=True)
    ]
    return records, None


def key_value_figures(n: int, trials: int, rng: np.random.Generator) -> None:
    k = 20
    records, _ = kv_population(n, k, rng)
    truth_f = np.zeros(k)
    sums = np.zeros(k)
    for record in records:
        for key, value in record.items():
            truth_f[key] += 1
            sums[key] += value
    truth_m = sums / np.maximum(truth_f, 1)
    truth_f /= n
    print(f"\nKey-value, k = {k}, padding 2, n = {n:,}, {trials} runs")
    top = np.argsort(truth_f)[::-1][:5]  # SE/spread over the 5 commonest keys (others clip)
    print(
        f"{'eps':>4} {'variant':>8} {'freq MSE':>10} {'mean MSE':>10} {'freq SE/spread':>15} "
        f"{'mean SE/spread':>15} {'top-5 mean MSE':>15}"
    )
    for epsilon in (1.0, 2.0, 4.0):
        for variant in ("grr", "ue"):
            m = mechanism_from_config(
                {"mechanism": "pckv", "epsilon": epsilon, "k": k, "padding": 2, "variant": variant}
            )
            assert isinstance(m, PCKV)
            pairs = m.pack(records)
            f_runs, m_runs, f_se, m_se = [], [], [], []
            for _ in range(trials):
                est = estimate_key_value(m, m.perturb(pairs, rng=rng))
                f_runs.append(est.frequencies)
                m_runs.append(est.means)
                f_se.append(est.frequency_std_errors)
                m_se.append(est.mean_std_errors)
            fr, mr = np.array(f_runs), np.array(m_runs)
            print(
                f"{epsilon:>4g} {variant:>8} {np.mean((fr - truth_f) ** 2):>10.3g} "
                f"{np.mean((mr - truth_m) ** 2):>10.3g} "
                f"{np.mean(np.mean(f_se, 0) / fr.std(0, ddof=1)):>15.3f} "
                f"{np.mean(np.mean(m_se, 0)[top] / mr[:, top].std(0, ddof=1)):>15.3f} "
                f"{np.mean((mr[:, top] - truth_m[top]) ** 2):>15.3g}"
            )


def _timed(label: str, n: int, encode: Any, estimate: Any) -> None:
    t0 = time.perf_counter()
    reports = encode()
    t1 = time.perf_counter()
    estimate(reports)
    t2 = time.perf_counter()
    print(
        f"{label:>34} {t1 - t0:>8.2f} {n / (t1 - t0):>12,.0f} {t2 - t1:>9.2f} "
        f"{n / (t2 - t1):>12,.0f}"
    )


def throughput(n: int, rng: np.random.Generator) -> None:
    print(f"\nThroughput at n = {n:,} (seconds and reports/s; one process, loaded machine)")
    print(f"{'estimator':>34} {'encode':>8} {'encode/s':>12} {'estimate':>9} {'estimate/s':>12}")
    values = populations(n, rng)["bimodal"]
    sw = square_wave(1.0)
    _timed(
        "square_wave + EMS (20 bootstrap)",
        n,
        lambda: sw.perturb(values, rng=rng),
        lambda r: estimate_distribution(sw, r, replicates=20),
    )
    _timed(
        "square_wave + EMS (no bootstrap)",
        n,
        lambda: sw.perturb(values, rng=rng),
        lambda r: estimate_distribution(sw, r, replicates=0),
    )
    items = np.minimum(rng.geometric(0.004, n) - 1, K - 1)
    for variant in (None, "haar"):
        m = range_mechanism(1.0, K, variant)
        _ = m.consistency  # the one-time solve (per campaign), timed apart
        label = "Haar" if variant else f"B-ary B={m.b}"
        _timed(
            f"hierarchical {label}, k = {K}",
            n,
            lambda m=m: m.perturb(items, rng=rng),
            lambda r, m=m: estimate_ranges(m, r),
        )
    records, _ = kv_population(n, 64, rng)
    for variant in ("grr", "ue"):
        pk = mechanism_from_config(
            {"mechanism": "pckv", "epsilon": 2.0, "k": 64, "padding": 2, "variant": variant}
        )
        assert isinstance(pk, PCKV)
        _timed(
            f"pckv-{variant} k = 64 (from mappings)",
            n,
            lambda pk=pk: pk.perturb(records, rng=rng),
            lambda r, pk=pk: estimate_key_value(pk, r),
        )
        pairs = pk.pack(records)
        _timed(
            f"pckv-{variant} k = 64 (from Pairs)",
            n,
            lambda pk=pk, pairs=pairs: pk.perturb(pairs, rng=rng),
            lambda r, pk=pk: estimate_key_value(pk, r),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, nargs="+", default=[100_000])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--throughput-n", type=int, default=1_000_000)
    parser.add_argument(
        "--only", choices=["distributions", "ranges", "key-value", "throughput"], default=None
    )
    args = parser.parse_args()
    rng = np.random.default_rng(2020)
    run = {args.only} if args.only else {"distributions", "ranges", "key-value", "throughput"}
    if "distributions" in run:
        for n in args.n:
            distribution_figures(n, rng)
    if "ranges" in run:
        range_figures(args.n[0], args.trials, rng)
    if "key-value" in run:
        key_value_figures(args.n[0], args.trials, rng)
    if "throughput" in run:
        throughput(args.throughput_n, rng)


if __name__ == "__main__":
    main()
