"""Time ``calibrate`` on the calibration example of issue 21 (item 11).

The example: the noise multiplier at which 1000 rounds of a Gaussian step on 8 workers' disjoint
shards, each Poisson-sampled at 1%, are (1, 1e-5)-DP, searched on [0.5, 10]:

    calibrate(epsilon_budget(1.0, delta=1e-5),
              lambda m: parallel_poisson(gaussian(m), 0.01, num_workers=8) * 1000,
              param_min=0.5, param_max=10.0)

Prints the wall time, the parameter, the epsilon it achieves, the number of accounts built and,
with ``--check``, dp-accounting's epsilon at that parameter (an independent upper bound).
Usage: ``python scripts/bench_accounting.py [--rounds 1000] [--check]``.
"""

from __future__ import annotations

import argparse
import time

from analysis.accounting import (
    PrivacyAccount,
    calibrate,
    epsilon_budget,
    gaussian,
    parallel_poisson,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--check", action="store_true", help="compare with dp-accounting")
    args = parser.parse_args()
    builds = 0

    def build(multiplier: float) -> PrivacyAccount:
        nonlocal builds
        builds += 1
        step = parallel_poisson(gaussian(multiplier), args.rate, num_workers=args.workers)
        return step * args.rounds

    start = time.perf_counter()
    result = calibrate(
        epsilon_budget(args.epsilon, delta=args.delta), build, param_min=0.5, param_max=10.0
    )
    seconds = time.perf_counter() - start
    print(
        f"calibrate: {seconds:.1f} s, {builds} accounts built, noise_multiplier "
        f"{result.param:.8g}, achieved epsilon {result.achieved:.6g} "
        f"(target {args.epsilon:g} at delta {args.delta:g})"
    )
    if args.check:
        from dp_accounting import dp_event, pld

        accountant = pld.PLDAccountant()
        event = dp_event.PoissonSampledDpEvent(args.rate, dp_event.GaussianDpEvent(result.param))
        accountant.compose(event, args.rounds)
        print(f"dp-accounting at that noise multiplier: {accountant.get_epsilon(args.delta):.6g}")


if __name__ == "__main__":
    main()
