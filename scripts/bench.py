#!/usr/bin/env python3
"""Benchmarks: prints figures and ratios against the targets of the issues.

Run all sections, or some: ``python scripts/bench.py [--only categorical,numeric] [--quick]``.
Each section lives in its own module ``scripts/bench_<section>.py`` with ``run(args)``.
Timings are wall-clock on this machine; nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SECTIONS: dict[str, str] = {
    "categorical": "bench_categorical",
    "accounting": "bench_accounting",
    "collector": "bench_collector",
    "rappor": "bench_rappor",
    "numeric": "bench_numeric",
    "longitudinal": "bench_longitudinal",
    "analysis": "bench_analysis",
    "shuffle": "bench_shuffle",
    "peers": "bench_peers",  # pure-ldp, multi-freq-ldpy in their own venv (bench_peers.py)
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only", default="", help="comma-separated sections: " + ", ".join(SECTIONS)
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    chosen = [s for s in args.only.split(",") if s] or list(SECTIONS)
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    for section in chosen:
        print(f"\n=== {section} ===", flush=True)
        started = time.perf_counter()
        importlib.import_module(SECTIONS[section]).run(args)
        print(f"--- {section} done in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
