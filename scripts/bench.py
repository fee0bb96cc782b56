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
import subprocess
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

SCRIPTS: dict[str, tuple[str, list[str]]] = {
    # section: (script run as its own process, its arguments under --quick)
    "heavy-hitters": ("bench_heavy_hitters.py", ["--quick"]),
    "richer": (
        "bench_richer.py",
        [
            "--n",
            "20000",
            "--trials",
            "5",
            "--throughput-n",
            "100000",
            "--marginal-n",
            "100000",
            "--no-peers",
        ],
    ),
    "scaleout": ("bench_scaleout.py", ["--reports", "2000000", "--sqlite-reports", "200000"]),
    "dashboard": ("bench_dashboard.py", ["--quick"]),
}
"""The issues' later figures live in scripts of their own (each with its own options; run one
directly for more); ``bench.py`` runs them with their defaults, or small sizes under --quick."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated sections: " + ", ".join([*SECTIONS, *SCRIPTS]),
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    chosen = [s for s in args.only.split(",") if s] or [*SECTIONS, *SCRIPTS]
    unknown = sorted(set(chosen) - set(SECTIONS) - set(SCRIPTS))
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    for section in chosen:
        print(f"\n=== {section} ===", flush=True)
        started = time.perf_counter()
        if section in SCRIPTS:
            script, quick = SCRIPTS[section]
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
            subprocess.run([sys.executable, path, *(quick if args.quick else [])], check=True)
        else:
            importlib.import_module(SECTIONS[section]).run(args)
        print(f"--- {section} done in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
