"""Prio3 (client_sdk.vdaf), measured: per variant the device's shard time, each Aggregator's
verify_init time one report at a time and per report in batches (client_sdk.vdaf.batch), and
the bytes of every message; beside the draft's reference implementation where it can run.

    .venv/bin/python scripts/bench_prio3.py [--batch 1000] [--reps 5] [--only hist1024]
        [--reference /path/to/draft-irtf-cfrg-vdaf/poc --reference-python /path/to/python3.12]

"shard" is ``vdaf.shard`` (the draft's algorithm on Python ints), "shard v" the vectorized
``client_sdk.vdaf.device.shard_encoded`` (same bytes). Variants (the issue's list): Count; Sum
with max_measurement 255; SumVec of length 1000 with max_measurement 1; Histogram of length 100
and 1024; MultihotCountVec of length 1024 (max_weight 32); chunk lengths near the square root of
the encoded length, as the draft recommends. Times
are CPU seconds of this process (``time.process_time``: on a shared machine the wall clock says
more about the neighbours), the one-at-a-time figures the median of ``--reps`` runs, the
batched ones the median of ``min(--reps, 3)`` batches (after one to warm the caches). The
reference (draft-irtf-cfrg-vdaf, poc/, Python >= 3.12, pycryptodomex) is run by the same script
in a subprocess with ``--as-reference`` and times shard and verify_init one at a time only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

CTX = b"bench_prio3"

# name -> (class name, constructor args, measurement)
VARIANTS: dict[str, tuple[str, tuple[int, ...], Any]] = {
    "count": ("Prio3Count", (2,), 1),
    "sum255": ("Prio3Sum", (2, 255), 200),
    "sumvec1000": ("Prio3SumVec", (2, 1000, 1, 32), [i % 2 for i in range(1000)]),
    "hist100": ("Prio3Histogram", (2, 100, 10), 42),
    "hist1024": ("Prio3Histogram", (2, 1024, 32), 700),
    "multihot1024": (
        "Prio3MultihotCountVec",
        (2, 1024, 32, 32),
        [i % 97 == 0 for i in range(1024)],
    ),
}


def _median_time(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def measure_single(module: Any, name: str, reps: int) -> dict[str, Any]:
    """shard and verify_init one at a time (works with client_sdk.vdaf and the reference)."""
    cls_name, args, measurement = VARIANTS[name]
    vdaf = getattr(module, cls_name)(*args)
    key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    nonce = os.urandom(vdaf.NONCE_SIZE)
    rand = os.urandom(vdaf.RAND_SIZE)
    public, inputs = vdaf.shard(CTX, measurement, nonce, rand)
    out: dict[str, Any] = {
        "shard_ms": 1e3 * _median_time(lambda: vdaf.shard(CTX, measurement, nonce, rand), reps)
    }
    for j in range(vdaf.SHARES):
        out[f"verify{j}_ms"] = 1e3 * _median_time(
            lambda j=j: vdaf.verify_init(key, CTX, j, None, nonce, public, inputs[j]), reps
        )
    return out


def measure_ours(name: str, batch: int, reps: int) -> dict[str, Any]:
    import client_sdk.vdaf as ours
    from client_sdk.vdaf.batch import verify_init_batch
    from client_sdk.vdaf.device import shard_encoded

    out = measure_single(ours, name, reps)
    cls_name, args, measurement = VARIANTS[name]
    vdaf = getattr(ours, cls_name)(*args)
    nonce, rand = os.urandom(vdaf.NONCE_SIZE), os.urandom(vdaf.RAND_SIZE)
    shard_encoded(vdaf, CTX, measurement, nonce, rand)  # warm the cached linear maps
    out["shard_vec_ms"] = 1e3 * _median_time(
        lambda: shard_encoded(vdaf, CTX, measurement, nonce, rand), reps
    )
    key = os.urandom(vdaf.VERIFY_KEY_SIZE)
    distinct = 20  # shard a few reports, repeat them (verification cost is the same)
    nonces = [os.urandom(vdaf.NONCE_SIZE) for _ in range(distinct)]
    sharded = [vdaf.shard(CTX, measurement, n, os.urandom(vdaf.RAND_SIZE)) for n in nonces]
    nonces = (nonces * (batch // distinct + 1))[:batch]
    sharded = (sharded * (batch // distinct + 1))[:batch]
    publics = [vdaf.encode_public_share(p) for p, _ in sharded]
    for j in range(vdaf.SHARES):
        inputs = [vdaf.encode_input_share(s[j]) for _, s in sharded]
        result = verify_init_batch(vdaf, key, CTX, j, nonces, publics, inputs)
        out[f"batch{j}_ms"] = (
            1e3
            * _median_time(
                lambda j=j, inputs=inputs: verify_init_batch(
                    vdaf, key, CTX, j, nonces, publics, inputs
                ),
                min(reps, 3),
            )
            / batch
        )
    public, inputs = sharded[0]
    vshare = result.verifier_shares[0]
    out["bytes"] = {
        "public_share": len(vdaf.encode_public_share(public)),
        "leader_input_share": len(vdaf.encode_input_share(inputs[0])),
        "helper_input_share": len(vdaf.encode_input_share(inputs[1])),
        "verifier_share": len(vdaf.encode_verifier_share(vshare)),
        "verifier_message": vdaf.xof.SEED_SIZE if vdaf.flp.JOINT_RAND_LEN else 0,
        "agg_share": len(vdaf.encode_agg_share(vdaf.agg_init(None))),
    }
    return out


def run_reference(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    cmd = [
        args.reference_python,
        __file__,
        "--as-reference",
        "--reference",
        args.reference,
        "--reps",
        str(args.reps),
        "--only",
        *names,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        print(f"reference run failed: {done.stderr.strip()[-400:]}", file=sys.stderr)
        return {}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", nargs="*", choices=sorted(VARIANTS), default=None)
    parser.add_argument("--reference", help="path to draft-irtf-cfrg-vdaf's poc/ directory")
    parser.add_argument("--reference-python", default="python3.12")
    parser.add_argument("--as-reference", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    names = args.only or list(VARIANTS)
    if args.as_reference:  # inside the reference interpreter: no numpy, no client_sdk
        sys.path.insert(0, args.reference)
        from vdaf_poc import vdaf_prio3

        print(json.dumps({n: measure_single(vdaf_prio3, n, args.reps) for n in names}))
        return
    ours = {n: measure_ours(n, args.batch, args.reps) for n in names}
    ref = run_reference(args, names) if args.reference else {}
    if args.json:
        print(json.dumps({"ours": ours, "reference": ref}, indent=2))
        return
    print(
        f"CPU ms; batches of {args.batch}; medians of {args.reps} (one at a time) "
        f"and {min(args.reps, 3)} (batches)"
    )
    head = (
        f"{'variant':<13}{'shard':>8}{'shard v':>8}{'verify L':>10}{'verify H':>10}{'batch L':>9}"
        f"{'batch H':>9}{'reports/s':>11}   bytes: public / leader / helper / verifier"
    )
    print(head)
    for n in names:
        o = ours[n]
        rate = 1e3 / max(o["batch0_ms"], o["batch1_ms"])
        b = o["bytes"]
        print(
            f"{n:<13}{o['shard_ms']:>8.2f}{o['shard_vec_ms']:>8.2f}{o['verify0_ms']:>10.2f}{o['verify1_ms']:>10.2f}"
            f"{o['batch0_ms']:>9.3f}{o['batch1_ms']:>9.3f}{rate:>11.0f}   "
            f"{b['public_share']} / {b['leader_input_share']} / {b['helper_input_share']} / "
            f"{b['verifier_share']}"
        )
        if n in ref:
            r = ref[n]
            print(
                f"{'  reference':<13}{r['shard_ms']:>8.2f}{'':>8}{r['verify0_ms']:>10.2f}"
                f"{r['verify1_ms']:>10.2f}"
            )


if __name__ == "__main__":
    main()
