"""Benchmark: epsilon at delta = 1e-6 after T reports, exact accounting against the classical
bounds, and how long each takes.

Rows: k-ary randomized response at epsilon = 1 (exact discrete PLD, KOV's optimal composition of
the pure-epsilon worst case, advanced and basic composition) and Gaussian reports with sigma = 5,
sensitivity 1 (exact Gaussian DP against Renyi DP). Nothing here is asserted by the tests.

``--calibrate`` times ``calibrate`` on the calibration example instead (issue 21, item 11): the
noise multiplier at which ``--rounds`` (1000) rounds of a Gaussian step on 8 workers' disjoint
shards, each Poisson-sampled at 1%, are (1, 1e-5)-DP, searched on [0.5, 10]:

    calibrate(epsilon_budget(1.0, delta=1e-5),
              lambda m: parallel_poisson(gaussian(m), 0.01, num_workers=8) * 1000,
              param_min=0.5, param_max=10.0)

It prints the wall and CPU time (and the load average), the parameter, the epsilon it achieves,
the accounts built and, with ``--check``, dp-accounting's epsilon at that parameter (an
independent upper bound).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable

from analysis.accounting import (
    PrivacyAccount,
    advanced_composition_epsilon,
    basic_composition,
    calibrate,
    epsilon_budget,
    gaussian,
    kov_epsilon,
    parallel_poisson,
    randomized_response,
)

DELTA = 1e-6


def _timed(fn: Callable[[], float]) -> tuple[float, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def _fmt(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.4f}"


def run(args: argparse.Namespace) -> None:
    counts = [1, 10, 100] if getattr(args, "quick", False) else [1, 10, 100, 1000]
    print(f"epsilon at delta = {DELTA:g} after T reports (time of each computation in ms)")
    header = f"{'mechanism':<22}{'T':>6}  {'method':<10}{'epsilon':>12}{'ms':>10}{'/ exact':>10}"
    print(header)
    print("-" * len(header))
    for k in (2, 16):
        step = randomized_response(1.0, k)
        eps0 = step.terms[0][0].claim[0] if step.terms[0][0].claim else 1.0
        for t in counts:
            exact, t_exact = _timed(lambda s=step, t=t: (s * t).epsilon_at(DELTA))
            claim = [(eps0, 0.0, t)]
            rows = [
                ("exact", exact, t_exact),
                ("kov", *_timed(lambda e=eps0, t=t: kov_epsilon(e, 0.0, t, DELTA))),
                ("advanced", *_timed(lambda c=claim: advanced_composition_epsilon(c, DELTA))),
                ("basic", *_timed(lambda c=claim: basic_composition(c)[0])),
            ]
            for method, value, seconds in rows:
                ratio = value / exact if exact > 0 else math.nan
                print(
                    f"{f'GRR eps=1 k={k}':<22}{t:>6}  {method:<10}{_fmt(value):>12}"
                    f"{seconds * 1e3:>10.2f}{ratio:>10.3f}"
                )
    for t in counts:
        account = gaussian(sigma=5.0) * t
        exact, t_exact = _timed(lambda a=account: a.epsilon_at(DELTA))
        rdp, t_rdp = _timed(lambda a=account: a.rdp_epsilon(DELTA))
        for method, value, seconds in (("exact", exact, t_exact), ("rdp", rdp, t_rdp)):
            print(
                f"{'Gaussian sigma=5':<22}{t:>6}  {method:<10}{_fmt(value):>12}"
                f"{seconds * 1e3:>10.2f}{value / exact:>10.3f}"
            )
    # A device across campaigns: the exact discrete + Gaussian composition.
    big = counts[-1]
    mixed = randomized_response(1.0, 16) * big + gaussian(sigma=5.0) * big
    value, seconds = _timed(lambda: mixed.epsilon_at(DELTA))
    print(
        f"{'GRR k=16 + Gaussian':<22}{2 * big:>6}  {'exact':<10}{_fmt(value):>12}"
        f"{seconds * 1e3:>10.2f}"
    )
    value, seconds = _timed(lambda: (randomized_response(1.0, 16) * 100_000).epsilon_at(DELTA))
    print(
        f"{'GRR eps=1 k=16':<22}{100_000:>6}  {'exact':<10}{_fmt(value):>12}{seconds * 1e3:>10.2f}"
    )


def calibration(rounds: int = 1000, *, check: bool = False) -> None:
    """Time ``calibrate`` on the calibration example (see the module docstring)."""
    budget = epsilon_budget(1.0, delta=1e-5)
    builds = 0

    def build(multiplier: float) -> PrivacyAccount:
        nonlocal builds
        builds += 1
        return parallel_poisson(gaussian(multiplier), 0.01, num_workers=8) * rounds

    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    result = calibrate(budget, build, param_min=0.5, param_max=10.0)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"calibrate: {seconds:.1f} s ({cpu:.1f} s CPU, load average {load:.1f} on "
        f"{os.cpu_count()} cores), {builds} accounts built, noise_multiplier "
        f"{result.param:.10g}, achieved epsilon {result.achieved:.8g} "
        f"(target {budget.epsilon:g} at delta {budget.delta:g}, {rounds} rounds)"
    )
    if check:
        from dp_accounting import dp_event, pld

        accountant = pld.PLDAccountant()
        event = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(result.param))
        accountant.compose(event, rounds)
        print(f"dp-accounting at that noise multiplier: {accountant.get_epsilon(budget.delta):.6g}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--calibrate", action="store_true", help="time calibrate instead")
    parser.add_argument("--rounds", type=int, default=1000, help="with --calibrate")
    parser.add_argument("--check", action="store_true", help="with --calibrate: dp-accounting")
    args = parser.parse_args()
    if args.calibrate:
        calibration(args.rounds, check=args.check)
    else:
        run(args)
