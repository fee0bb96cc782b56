"""Numeric mechanisms: sampler rates, encode throughput, accuracy of the mean, variance table
(issue 4, section 6).

Targets:
- the exact discrete Laplace and discrete Gaussian samplers, driven by the OS CSPRNG:
  >= 10^5 samples/s (at the noise scales the mechanisms really use: about 2**20/eps grid steps
  for Laplace, 2**22 for the Gaussian);
- the mean's empirical MSE / exact variance within 0.9-1.1 for every mechanism (a fixed population
  of n users re-randomized R times; the exact variance is sum_i Var(x_i)/n^2 from each
  mechanism's exact per-report formula; the ratio's standard error sqrt(2/R) is shown);
- the variance table: the worst case over inputs on [-1, 1] of each scalar mechanism at
  eps in {0.5, 1, 2, 4}, with the pick (lowest variance among the pure eps-LDP ones), checked
  against docs/math/numeric.md (hybrid: 1.042 at eps = 2, 0.219 at eps = 4).

Encode throughput is reported per mechanism (scalars, and vectors of dimension 16) with the
CSPRNG (``rng=None``, what devices run) and with a seeded numpy generator (simulations), as
reports/s of wall-clock time, with the CPU seconds of this process beside them (``--quick``:
10x fewer reports and seeds; about a minute).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.numeric import NumericMechanism
from client_sdk.sampling import DiscreteGaussian, DiscreteLaplace, floor_fraction

SAMPLER_TARGET = 1e5
MSE_RANGE = (0.9, 1.1)
EPSILONS = (0.5, 1.0, 2.0, 4.0)
REFERENCE_HYBRID = {2.0: 1.042, 4.0: 0.219}

SCALARS: list[dict[str, Any]] = [
    {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
    {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 100.0},
    {"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
    {"mechanism": "piecewise", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
    {"mechanism": "hybrid", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
]
VECTORS: list[dict[str, Any]] = [
    {"mechanism": "gaussian", "epsilon": 4.0, "delta": 1e-6, "dim": 16, "clip_norm": 1.0},
    {"mechanism": "duchi", "epsilon": 4.0, "lower": -1.0, "upper": 1.0, "dim": 16},
    {"mechanism": "piecewise", "epsilon": 4.0, "lower": -1.0, "upper": 1.0, "dim": 16},
    {"mechanism": "hybrid", "epsilon": 4.0, "lower": -1.0, "upper": 1.0, "dim": 16},
]


def label(config: dict[str, Any]) -> str:
    shape = f"d={config['dim']}" if "dim" in config else "scalar"
    return f"{config['mechanism']:<9} {shape:<6} eps={config['epsilon']:g}"


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall, cpu) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def population(m: NumericMechanism, n: int, seed: int) -> np.ndarray:
    """A fixed, spread-out population (some values outside the bounds, to exercise clipping)."""
    rng = np.random.default_rng(seed)
    if m.value_shape:
        clip = getattr(m, "clip_norm", None)
        if clip is not None:
            x = rng.normal(size=(n, m.width))
            return x * (1.2 * clip / math.sqrt(m.width))
        return rng.uniform(-1.1, 1.1, size=(n, m.width))
    return rng.uniform(-10.0, 110.0, size=n)


def bench_samplers(n: int) -> None:
    print(f"\n-- exact samplers ({n:,} draws; target >= {SAMPLER_TARGET:,.0f}/s with the CSPRNG)")
    laplace = DiscreteLaplace(1 / floor_fraction(Fraction(1.0) / 2**20, 2**40))
    gaussian = DiscreteGaussian.at_least(float(2**22) ** 2)
    print(f"{'sampler':<38}{'CSPRNG /s':>14}{'seeded /s':>14}{'vs target':>11}")
    for name, dist in (
        (f"discrete Laplace, scale {float(laplace.scale):.3g}", laplace),
        (f"discrete Gaussian, sigma {math.sqrt(gaussian.sigma2):.3g}", gaussian),
    ):
        wall_c, _ = timed(lambda d=dist: d.sample(None, n))  # type: ignore[misc]
        wall_s, _ = timed(lambda d=dist: d.sample(np.random.default_rng(0), n))  # type: ignore[misc]
        rate = n / wall_c
        print(f"{name:<38}{rate:>14,.0f}{n / wall_s:>14,.0f}{rate / SAMPLER_TARGET:>10.1f}x")


def bench_encode(n_scalar: int, n_vector: int) -> None:
    print(
        f"\n-- encode throughput (perturb; {n_scalar:,} scalar / {n_vector:,} vector reports), "
        "and the server side (wire decode, aggregate)"
    )
    header = (
        f"{'mechanism':<28}{'CSPRNG rep/s':>14}{'(cpu s)':>9}{'seeded rep/s':>14}"
        f"{'(cpu s)':>9}{'from_wire/s':>13}{'aggregate/s':>13}"
    )
    print(header)
    for config in SCALARS + VECTORS:
        m = mechanism_from_config(config)
        assert isinstance(m, NumericMechanism)
        n = n_vector if m.value_shape else n_scalar
        x = population(m, n, seed=1)
        wall_c, cpu_c = timed(lambda m=m, x=x: m.perturb(x))  # type: ignore[misc]
        reports = m.perturb(x, rng=np.random.default_rng(0))
        wall_s, cpu_s = timed(lambda m=m, x=x: m.perturb(x, rng=np.random.default_rng(0)))  # type: ignore[misc]
        wire_n = min(n, 100_000)
        payloads = m.to_wire(reports[:wire_n])
        wall_w, _ = timed(lambda m=m, p=payloads: m.from_wire(p))  # type: ignore[misc]
        wall_a, _ = timed(lambda m=m, r=reports: m.aggregate(r))  # type: ignore[misc]
        print(
            f"{label(config):<28}{n / wall_c:>14,.0f}{cpu_c:>9.2f}{n / wall_s:>14,.0f}"
            f"{cpu_s:>9.2f}{wire_n / wall_w:>13,.0f}{n / wall_a:>13,.0f}"
        )


def bench_mse(users: int, seeds: int) -> None:
    se = math.sqrt(2 / seeds)
    print(
        f"\n-- mean: empirical MSE / exact variance ({users:,} users, a fifth of that for vectors,"
        f" x {seeds:,} re-randomizations;\n   standard error {se:.3f}; target "
        f"{MSE_RANGE[0]}-{MSE_RANGE[1]}; for vectors, averaged over the coordinates)"
    )
    print(f"{'mechanism':<28}{'MSE/exact':>11}{'exact Var[mean]':>17}{'  check':>8}")
    for config in SCALARS + VECTORS:
        m = mechanism_from_config(config)
        assert isinstance(m, NumericMechanism)
        n = users // 5 if m.value_shape else users
        x = population(m, n, seed=2)
        truth = _clipped_mean(m, x)
        exact = m.variance(x).reshape(n, -1).sum(axis=0) / n**2
        rng = np.random.default_rng(3)
        squared = np.zeros(m.width)
        batch = max(1, 2_000_000 // (n * m.width))
        done = 0
        while done < seeds:
            b = min(batch, seeds - done)
            tiled = np.concatenate([x] * b)
            estimates = m.estimates(m.perturb(tiled, rng=rng)).reshape(b, n, m.width)
            squared += ((estimates.mean(axis=1) - truth) ** 2).sum(axis=0)
            done += b
        ratio = float(np.mean(squared / seeds / exact))
        check = "ok" if MSE_RANGE[0] <= ratio <= MSE_RANGE[1] else "MISS"
        print(f"{label(config):<28}{ratio:>11.3f}{float(exact.mean()):>17.4g}{check:>8}")


def _clipped_mean(m: NumericMechanism, x: np.ndarray) -> np.ndarray:
    clip = getattr(m, "clip_norm", None)
    if clip is not None:
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return np.asarray((x * np.minimum(1.0, clip / norms)).mean(axis=0))
    lower, upper = m.lower, m.upper  # type: ignore[attr-defined]
    return np.atleast_1d(np.clip(x, lower, upper).mean(axis=0))


def variance_table() -> None:
    print(
        "\n-- worst-case variance of one report on [-1, 1] (max over inputs of the exact formula "
        "of the implemented, discretized mechanism)"
    )
    names = ("laplace", "duchi", "piecewise", "hybrid")
    print(f"{'eps':>5}" + "".join(f"{n:>11}" for n in names) + f"{'gaussian*':>12}  pick")
    for eps in EPSILONS:
        row = {}
        for name in names:
            m = mechanism_from_config({"mechanism": name, "epsilon": eps, "lower": -1, "upper": 1})
            row[name] = float(m.worst_case_variance()[0])  # type: ignore[attr-defined]
        gauss = mechanism_from_config(
            {"mechanism": "gaussian", "epsilon": eps, "delta": 1e-5, "lower": -1, "upper": 1}
        )
        best = min(row.values())
        pick = " = ".join(n for n in names if row[n] <= best * (1 + 1e-9))
        cells = "".join(f"{row[n]:>11.4g}" for n in names)
        gvar = float(gauss.worst_case_variance()[0])  # type: ignore[attr-defined]
        print(f"{eps:>5g}{cells}{gvar:>12.4g}  {pick}")
        if eps in REFERENCE_HYBRID:
            ref = REFERENCE_HYBRID[eps]
            status = "ok" if round(row["hybrid"], 3) == ref else "MISMATCH"
            print(f"{'':>5}  hybrid {row['hybrid']:.4f} vs docs/math/numeric.md {ref}: {status}")
    print(
        "  * gaussian is (eps, delta=1e-5)-LDP, not pure eps-LDP, so it is not eligible for the "
        "pick.\n  Pick: hybrid wherever eps > 0.61 (where it matches Duchi's below); piecewise is "
        "close at large eps;\n  Laplace is never the best on a bounded range."
    )
    print(
        "\n-- coordinates sampled per vector report (d = 16): exact optimum vs Wang et al.'s rule"
    )
    print(f"{'eps':>5}{'duchi':>8}{'piecewise':>11}{'hybrid':>8}{'floor(eps/2.5)':>16}")
    for eps in (1.0, 4.0, 8.0, 16.0):
        ks = []
        for name in ("duchi", "piecewise", "hybrid"):
            config = {"mechanism": name, "epsilon": eps, "lower": -1, "upper": 1, "dim": 16}
            ks.append(mechanism_from_config(config).sampled_coordinates)  # type: ignore[attr-defined]
        rule = max(1, min(16, math.floor(eps / 2.5)))
        print(f"{eps:>5g}{ks[0]:>8}{ks[1]:>11}{ks[2]:>8}{rule:>16}")


def run(args: argparse.Namespace) -> None:
    quick = bool(getattr(args, "quick", False))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    print(f"load average (1 min): {load:.2f}; quick={quick}")
    bench_samplers(200_000 if quick else 1_000_000)
    bench_encode(100_000 if quick else 1_000_000, 20_000 if quick else 200_000)
    bench_mse(users=200 if quick else 1000, seeds=1000 if quick else 4000)
    variance_table()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args())
