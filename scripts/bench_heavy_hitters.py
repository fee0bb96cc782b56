"""Benchmark: heavy hitters over an unknown vocabulary (docs/math/heavy-hitters.md).

A Zipf(1.1) population over a vocabulary of random strings of 1 to 8 bytes, n devices, at each
epsilon: PEM (UTF-8 bytes; and "pem a-z", the device alphabet of the vocabulary's letters) and
SFP recall of the true top 20 and top 50 among the significant items, false discoveries
(significant strings nobody holds), decode time, and the encode rate on the OS CSPRNG. Then CMS
and HCMS: the mean squared error of candidate estimates over fresh hash seeds divided by the
exact random-hash variance (1 expected), and their encode rates.

    python scripts/bench_heavy_hitters.py [--n 1000000] [--vocabulary 100000] [--eps 2 4 8]
    python scripts/bench_heavy_hitters.py --quick    # n = 200,000, vocabulary 20,000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from analysis.kinds.discovery.estimate import discover_pem, discover_sfp, estimate_sketch
from analysis.selection import top_k
from client_sdk.mechanisms.pem import PEM
from client_sdk.mechanisms.sfp import SFP
from client_sdk.mechanisms.sketch import CMS, HCMS, StringSketch

LETTERS = "abcdefghijklmnopqrstuvwxyz"
"""The vocabulary's characters: the device alphabet of the 'pem a-z' rows."""


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """``size`` distinct random lowercase strings of 1 to 8 bytes."""
    words: dict[str, None] = {}
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    while len(words) < size:
        lengths = rng.integers(1, 9, size=size)
        chars = letters[rng.integers(0, 26, size=(size, 8))]
        for row, length in zip(chars, lengths, strict=True):
            words.setdefault(row[:length].tobytes().decode(), None)
    return list(words)[:size]


def population(rng: np.random.Generator, words: list[str], n: int) -> tuple[list[str], np.ndarray]:
    weights = np.arange(1, len(words) + 1, dtype=np.float64) ** -1.1
    drawn = rng.choice(len(words), size=n, p=weights / weights.sum())
    return [words[i] for i in drawn], np.bincount(drawn, minlength=len(words))


def discovery_figures(name: str, result: object, words: list[str], counts: np.ndarray) -> str:
    significant = {item.value for item in result.items if item.significant}  # type: ignore[attr-defined]
    order = np.argsort(-counts, kind="stable")
    truth = {words[i] for i in np.flatnonzero(counts)}
    top20 = {words[i] for i in order[:20]}
    top50 = {words[i] for i in order[:50]}
    false = len(significant - truth)
    return (
        f"{name}: recall top20 {len(top20 & significant) / 20:.2f}, top50 "
        f"{len(top50 & significant) / 50:.2f}, significant {len(significant)}, false {false}"
    )


def encode_rate(mechanism: object, values: list[str]) -> float:
    start = time.perf_counter()
    mechanism.perturb(values)  # type: ignore[attr-defined]  # rng=None: the OS CSPRNG
    return len(values) / (time.perf_counter() - start)


def sketch_ratio(cls: type[StringSketch], words: list[str], n: int, runs: int) -> float:
    """Mean over runs (fresh hash seeds) and the top 20 strings of squared error / variance."""
    rng = np.random.default_rng(5)
    values, counts = population(rng, words, n)
    top = np.argsort(-counts, kind="stable")[:20]
    candidates = [words[i] for i in top]
    held = counts[np.flatnonzero(counts)]
    ratios = []
    for seed in range(runs):
        m = cls(epsilon=4.0, m=1024, hashes=16, max_length=8, seed=seed)
        estimate = m.estimate_counts(m.aggregate(m.perturb(values, rng=rng)), candidates)
        n_d = counts[top].astype(np.float64)
        others = float(np.sum(held.astype(np.float64) ** 2)) - n_d**2
        variance = m.count_variance(n, n_d, others)
        ratios.append((estimate - n_d) ** 2 / variance)
    return float(np.mean(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--vocabulary", type=int, default=100_000)
    parser.add_argument("--eps", type=float, nargs="+", default=[2.0, 4.0, 8.0])
    parser.add_argument("--sketch-n", type=int, default=100_000)
    parser.add_argument("--sketch-runs", type=int, default=12)
    parser.add_argument("--central-only", action="store_true", help="skip the local protocols")
    parser.add_argument("--quick", action="store_true", help="n 200,000, vocabulary 20,000")
    args = parser.parse_args()
    if args.quick:
        args.n, args.vocabulary, args.sketch_runs = 200_000, 20_000, 6
    rng = np.random.default_rng(20261201)
    words = vocabulary(rng, args.vocabulary)
    values, counts = population(rng, words, args.n)
    print(f"n = {args.n}, vocabulary {len(words)}, distinct held {np.count_nonzero(counts)}")
    order = np.argsort(-counts, kind="stable")
    for epsilon in args.eps:
        for k in (20, 50):
            # The central curator at the same total epsilon: k peeling exponential mechanisms at
            # epsilon / k each over the public vocabulary (the law of one-shot Gumbel top-k).
            picked = set(top_k(counts, k, epsilon / k, rng=rng))
            recall = len(picked & set(order[:k].tolist())) / k
            print(f"eps {epsilon:g} central top-{k} (exponential mechanism): recall {recall:.2f}")
        if args.central_only:
            continue
        for label, pem in (
            ("pem", PEM(epsilon=epsilon, max_length=8)),
            ("pem a-z", PEM(epsilon=epsilon, max_length=8, alphabet=LETTERS)),
        ):
            # the device alphabet's run on its own generator: the other rows draw as before
            source = rng if pem.alphabet is None else np.random.default_rng([20261201, 1])
            reports = pem.perturb(values, rng=source)
            start, cpu = time.perf_counter(), time.process_time()
            result = discover_pem(pem, reports)
            decode, decode_cpu = time.perf_counter() - start, time.process_time() - cpu
            rate = encode_rate(pem, values[:100_000])
            print(
                f"eps {epsilon:g} "
                + discovery_figures(label, result, words, counts)
                + f", decode {decode:.1f} s ({decode_cpu:.1f} CPU-s), encode {rate:,.0f}/s"
                " (CSPRNG)"
            )
        sfp = SFP(epsilon=epsilon, max_length=8)
        reports = sfp.perturb(values, rng=rng)
        statistic = sfp.aggregate(reports)
        start, cpu = time.perf_counter(), time.process_time()
        result = discover_sfp(sfp, statistic)
        decode, decode_cpu = time.perf_counter() - start, time.process_time() - cpu
        rate = encode_rate(sfp, values[:100_000])
        print(
            f"eps {epsilon:g} "
            + discovery_figures("sfp", result, words, counts)
            + f", decode {decode:.1f} s ({decode_cpu:.1f} CPU-s; aggregate excluded), encode "
            f"{rate:,.0f}/s (CSPRNG)"
        )
    if args.central_only:
        return
    for cls in (CMS, HCMS):
        ratio = sketch_ratio(cls, words, args.sketch_n, args.sketch_runs)
        print(
            f"{cls.name} eps 4, m 1024, 16 rows, n {args.sketch_n}: MSE / exact variance over "
            f"{args.sketch_runs} hash seeds x top 20 = {ratio:.3f}"
        )
        for epsilon in args.eps:
            rate = encode_rate(cls(epsilon, 1024, 16, 8), values[:100_000])
            print(f"{cls.name} eps {epsilon:g}, m 1024: encode {rate:,.0f}/s (CSPRNG)")
    m = HCMS(epsilon=4.0, m=1024, hashes=16, max_length=8)
    sample = m.perturb(values[:200_000], rng=rng)
    result = estimate_sketch(m, sample, [words[i] for i in np.argsort(-counts)[:5]])
    print("hcms top-5 estimate (n = 200000):")
    print(result.format_table())


if __name__ == "__main__":
    main()
