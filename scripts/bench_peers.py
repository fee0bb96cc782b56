"""Benchmark: this project beside its Python peers (pure-ldp, multi-freq-ldpy) on the same data.

The peers are never dependencies of the project. The script makes its own virtual environment
(``--venv``, default ``~/.cache/ldp-bench-peers/venv``; outside the repository) with
``python -m venv`` and ``pip install`` of the pinned versions below, writes a small driver to a
temporary folder and runs the peers' code there in a subprocess, exchanging data through .npy and
.json files; the peers time themselves inside that process. This project's side runs in-process.

Sections (a table each; figures and ratios, nothing asserted):

1. heavy hitters over unknown strings (docs/math/heavy-hitters.md): ``pem`` and ``sfp`` decoded
   by ``analysis.kinds.discovery.estimate`` vs pure-ldp's ``PEMServer``/``SFPServer`` over its Count
   Mean Sketch (its default local hashing loops over the whole domain, 27^8 strings here);
2. multi-attribute 1-way marginals (docs/math/richer-data.md): ``multi`` with spl/smp/rsfd vs
   multi-freq-ldpy's SPL, SMP and RS+FD with GRR;
3. single-attribute frequency oracles at k = 1024: grr/oue/olh vs multi-freq-ldpy's GRR, OUE, OLH.

The peers loop in Python per report, so they run on fewer reports than ours; every table states
both n, and section 1 also runs ours at the peer's n for the side-by-side.

    python scripts/bench_peers.py [--quick] [--only hh,multi,fo] [--venv PATH]
    python scripts/bench.py --only peers [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_heavy_hitters import population, vocabulary

from analysis.kinds.discovery.estimate import discover_pem, discover_sfp
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.pem import PEM
from client_sdk.mechanisms.sfp import SFP

PINS = (
    "pure-ldp==1.2.0",
    "multi-freq-ldpy==0.2.5",
    "numpy==1.26.4",
    "scipy==1.15.3",
    "pandas==2.2.3",
    "statsmodels==0.14.4",
    "scikit-learn==1.9.1",
    "xxhash==3.5.0",
)
"""The peers plus what they need to import and run: pure-ldp imports sklearn and statsmodels
without declaring them and calls np.zeros(None) (refused by numpy 2); xxhash 4 refuses the str
input both peers hash."""
DEFAULT_VENV = Path.home() / ".cache" / "ldp-bench-peers" / "venv"
SEED = 20261201

DRIVER = textwrap.dedent(
    '''
    """Runs one peer job: python driver.py JOB_DIR (job.json in, result.json out)."""
    import json, random, sys, time
    from pathlib import Path
    import numpy as np

    job_dir = Path(sys.argv[1])
    job = json.loads((job_dir / "job.json").read_text())
    random.seed(job["seed"])
    np.random.seed(job["seed"])
    out = {}

    def hh(job):
        from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
        from pure_ldp.heavy_hitters.apple_sfp import SFPClient, SFPServer
        from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
        words = json.loads((job_dir / "values.json").read_text())
        letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
        res = {}
        for eps in job["eps"]:
            for name in ("pem", "sfp"):
                # CMS: the sketch the library pairs with SFP; its hash functions are seeded by
                # index, so client and server agree. PEM/SFP split epsilon themselves.
                server_fo = CMSServer(eps, job["hashes"], job["m"])
                client_fo = CMSClient(eps, server_fo.get_hash_funcs(), job["m"])
                if name == "pem":
                    alphabet = letters + ["*"]
                    kw = dict(start_length=0, max_string_length=8,
                              fragment_length=job["fragment"], alphabet=alphabet,
                              index_mapper=lambda x: x)
                    client = PEMClient(eps, fo_client=client_fo, **kw)
                    server = PEMServer(eps, fo_server=server_fo, **kw)
                else:
                    kw = dict(fragment_length=job["fragment"], max_string_length=8,
                              alphabet=set(letters), index_mapper=lambda x: x)
                    client = SFPClient(eps, fo_client=client_fo, **kw)
                    server = SFPServer(eps, fo_server=server_fo, **kw)
                start = time.perf_counter()
                reports = [client.privatise(w) for w in words]
                encode = time.perf_counter() - start
                start, cpu = time.perf_counter(), time.process_time()
                for r in reports:
                    server.aggregate(r)
                found, freqs = server.find_heavy_hitters(k=job["top"])
                decode = time.perf_counter() - start
                decode_cpu = time.process_time() - cpu
                res[f"{name}:{eps:g}"] = dict(
                    items=[str(s).split("*")[0] for s in found],
                    freqs=np.asarray(freqs, dtype=float).ravel().tolist(), encode=encode,
                    decode=decode, decode_cpu=decode_cpu)
        return res

    def multi(job):
        from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution
        x = np.load(job_dir / "tuples.npy")
        ks, d = job["ks"], len(job["ks"])
        funcs = {
            "spl": (SPL_solution.SPL_GRR_Client, SPL_solution.SPL_GRR_Aggregator_MI),
            "smp": (SMP_solution.SMP_GRR_Client, SMP_solution.SMP_GRR_Aggregator_MI),
            "rsfd": (RSpFD_solution.RSpFD_GRR_Client, RSpFD_solution.RSpFD_GRR_Aggregator_MI),
        }
        res = {}
        for eps in job["eps"]:
            for name, (client, aggregator) in funcs.items():
                client(list(x[0]), ks, d, eps)  # numba compiles here, outside the timing
                start = time.perf_counter()
                reports = [client(list(row), ks, d, eps) for row in x]
                encode = time.perf_counter() - start
                start = time.perf_counter()
                est = aggregator(reports, ks, d, eps)
                decode = time.perf_counter() - start
                res[f"{name}:{eps:g}"] = dict(
                    est=[np.asarray(e, dtype=float).tolist() for e in est],
                    encode=encode, decode=decode)
        return res

    def fo(job):
        from multi_freq_ldpy.pure_frequency_oracles import GRR, LH, UE
        k, eps = job["k"], job["epsilon"]
        funcs = {
            "grr": (lambda v: GRR.GRR_Client(v, k, eps),
                    lambda r: GRR.GRR_Aggregator_MI(r, k, eps)),
            "oue": (lambda v: UE.UE_Client(v, k, eps, True),
                    lambda r: UE.UE_Aggregator_MI(r, eps, True)),
            "olh": (lambda v: LH.LH_Client(v, k, eps, True),
                    lambda r: LH.LH_Aggregator_MI(r, k, eps, True)),
        }
        res = {}
        for name, (client, aggregator) in funcs.items():
            x = np.load(job_dir / f"fo_{name}.npy")
            client(int(x[0]))
            start = time.perf_counter()
            reports = [client(int(v)) for v in x]
            encode = time.perf_counter() - start
            start = time.perf_counter()
            est = aggregator(reports)
            decode = time.perf_counter() - start
            res[name] = dict(est=np.asarray(est, dtype=float).tolist(), encode=encode,
                             decode=decode)
        return res

    out = {"hh": hh, "multi": multi, "fo": fo}[job["task"]](job)
    (job_dir / "result.json").write_text(json.dumps(out))
    '''
)


def ensure_venv(path: Path) -> Path:
    """The peers' interpreter, creating the environment and installing the pins once."""
    python = path / "bin" / "python"
    marker = path / ".pins"
    if python.exists() and marker.exists() and marker.read_text() == "\n".join(PINS):
        return python
    print(f"creating {path} with {', '.join(PINS)} (once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], check=True)
    marker.write_text("\n".join(PINS))
    return python


def run_peer(
    python: Path, task: str, job: dict[str, Any], files: dict[str, Any], cache: Path | None = None
) -> Any:
    """Run one peer task in the venv; ``files``: name -> ndarray (.npy) or JSON-able value.
    With ``cache`` (a folder), a result is kept under the hash of the pins, the driver, the job
    and the data, and read back instead of rerunning the peer (its results and its timings are
    those of the run that made the file)."""
    stored = None
    if cache is not None:
        digest = hashlib.sha256("\n".join(PINS).encode() + DRIVER.encode())
        digest.update(json.dumps({"task": task, "seed": SEED, **job}, sort_keys=True).encode())
        for name in sorted(files):
            data = files[name]
            digest.update(
                data.tobytes() if isinstance(data, np.ndarray) else json.dumps(data).encode()
            )
        stored = cache / f"{task}-{digest.hexdigest()[:16]}.json"
        if stored.exists():
            print(f"(peer results from {stored})")
            return json.loads(stored.read_text())
    with tempfile.TemporaryDirectory(prefix="ldp-peers-") as tmp:
        folder = Path(tmp)
        (folder / "driver.py").write_text(DRIVER)
        (folder / "job.json").write_text(json.dumps({"task": task, "seed": SEED, **job}))
        for name, data in files.items():
            if isinstance(data, np.ndarray):
                np.save(folder / name, data)
            else:
                (folder / name).write_text(json.dumps(data))
        subprocess.run([str(python), str(folder / "driver.py"), str(folder)], check=True)
        result = (folder / "result.json").read_text()
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(result)
    return json.loads(result)


def clip_renormalise(f: np.ndarray) -> np.ndarray:
    """The peers' post-processing (multi-freq-ldpy's MI): clip at 0, divide by the sum."""
    clipped = np.clip(f, 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else clipped


def table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header] + [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for index, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * w for w in widths))


def hh_figures(reported: list[str], words: list[str], counts: np.ndarray) -> list[Any]:
    order = np.argsort(-counts, kind="stable")
    top20 = {words[i] for i in order[:20]}
    top50 = {words[i] for i in order[:50]}
    held = {words[i] for i in np.flatnonzero(counts)}
    got = set(reported)
    return [len(got & top20) / 20, len(got & top50) / 50, len(got), len(got - held)]


LETTERS = "abcdefghijklmnopqrstuvwxyz"


def section_hh(args: argparse.Namespace, python: Path) -> None:
    rng = np.random.default_rng(SEED)
    words = vocabulary(rng, args.vocabulary)
    values, counts = population(rng, words, args.n_hh)
    peer_values, peer_counts = values[: args.n_hh_peer], np.zeros_like(counts)
    index = {w: i for i, w in enumerate(words)}
    np.add.at(peer_counts, [index[v] for v in peer_values], 1)
    k = args.top
    print(
        f"Zipf(1.1) over {len(words)} random strings of 1-8 letters; ours at n = {args.n_hh} and "
        f"at the peer's n = {args.n_hh_peer} (its first reports), eps as listed, max_length 8."
    )
    print(
        f"Peer: {PINS[0]} over its CMS (m {args.m}, {args.hashes} hashes), told the alphabet"
        f" (26 letters + padding), fragments of {args.fragment} letters, k = {k}: PEM keeps its"
        f" top {k} prefixes per group and returns its top {k}; SFP keeps the top {k} fragments"
        " per position and returns every assembled string (no significance test in either)."
    )
    print(
        "Ours: any UTF-8 (length + 8 bits a byte: 68 bits); PEM default config (4 bits a level,"
        f" 16 levels), decoder top {k} (it keeps {k} prefixes a level, the peer's k);"
        f" SFP default config, top {k}. 'ours +alphabet': PEM with step_bits 8, start_bits 12 (one"
        " byte a level) and the decoder told the peer's alphabet (discover_pem(alphabet=)), the"
        " devices not. 'ours, device alphabet': PEM(alphabet=a-z), the peer's knowledge on both"
        " sides: 5 bits a letter (4 + 40 bits), one letter a level (8 levels), its default."
    )
    print(
        "Measures, on the same data: 'top-k': recall of the true top 20/50 by each side's first k"
        f" = {k} returned strings by its own estimate (the peer's protocol; SFP's assembled list"
        " cut to its k best), 'false' = listed but held by nobody; 'significant': ours, the"
        " strings passing the Bonferroni test (E[false] <= 0.05 a run); 'returned': the peer's"
        " whole SFP list."
    )
    started = time.perf_counter()
    peer = run_peer(
        python,
        "hh",
        {"eps": args.eps, "m": args.m, "hashes": args.hashes, "fragment": args.fragment, "top": k},
        {"values.json": peer_values},
        cache=Path(getattr(args, "venv", None) or DEFAULT_VENV).parent / "results",
    )
    print(f"(peer subprocess {time.perf_counter() - started:.0f} s)")
    rows = []
    for eps in args.eps:
        for name in ("pem", "sfp"):
            p = peer[f"{name}:{eps:g}"]
            variants: list[tuple[str, Any, str | None]] = [
                ("ours", PEM(epsilon=eps, max_length=8), None)
                if name == "pem"
                else ("ours", SFP(epsilon=eps, max_length=8), None)
            ]
            if name == "pem":
                alphabet_pem = PEM(epsilon=eps, max_length=8, step_bits=8, start_bits=12)
                variants.append(("ours +alphabet", alphabet_pem, LETTERS))
                device_pem = PEM(epsilon=eps, max_length=8, alphabet=LETTERS)
                variants.append(("ours, device alphabet", device_pem, None))
            for label, m, alphabet in variants:
                for n, vals, cnt in (
                    (args.n_hh, values, counts),
                    (args.n_hh_peer, peer_values, peer_counts),
                ):
                    if label != "ours" and n != args.n_hh_peer:
                        continue
                    # its own generator: the rows before it draw the same randomness as before
                    source = rng if "device" not in label else np.random.default_rng([SEED, n])
                    start = time.perf_counter()
                    reports = m.perturb(vals, rng=source)
                    encode = time.perf_counter() - start
                    decodes = []
                    for _ in range(3 if n == args.n_hh_peer else 1):
                        start, cpu = time.perf_counter(), time.process_time()
                        if isinstance(m, PEM):
                            result = discover_pem(m, reports, top=k, alphabet=alphabet)
                        else:
                            result = discover_sfp(m, m.aggregate(reports), top=k)
                        decodes.append((time.process_time() - cpu, time.perf_counter() - start))
                    decode_cpu, decode = sorted(decodes)[len(decodes) // 2]
                    times: list[Any] = [encode, decode, decode_cpu]
                    if n == args.n_hh_peer:
                        times.append(p["decode_cpu"] / decode_cpu)
                    found = [item.value for item in result.items if item.significant]
                    figures = hh_figures(found, words, cnt)
                    rows.append([f"{eps:g}", name, label, n, "significant", *figures, *times])
                    if n == args.n_hh_peer:
                        listed = [item.value for item in result.items[:k]]
                        figures = hh_figures(listed, words, cnt)
                        rows.append([f"{eps:g}", name, label, n, "top-k", *figures, *times])
            best = np.argsort(-np.asarray(p["freqs"], dtype=float), kind="stable")[:k]
            listed = [p["items"][i] for i in best]
            peer_row = [p["encode"], p["decode"], p["decode_cpu"]]
            figures = hh_figures(listed, words, peer_counts)
            rows.append(
                [f"{eps:g}", name, "pure-ldp", args.n_hh_peer, "top-k", *figures, *peer_row]
            )
            if len(p["items"]) > k:
                figures = hh_figures(p["items"], words, peer_counts)
                rows.append(
                    [f"{eps:g}", name, "pure-ldp", args.n_hh_peer, "returned", *figures, *peer_row]
                )
    header = ["eps", "proto", "impl", "n", "measure", "rec20", "rec50", "items", "false"]
    columns = [*header, "encode s", "decode s", "decode CPU s", "peer/ours CPU"]
    table(columns, [r + [""] * (len(columns) - len(r)) for r in rows])
    print(
        "decode: ours from reports (PEM) or the aggregate (SFP, aggregate included); peer:"
        " per-report aggregate + find_heavy_hitters; wall and CPU seconds of the decoding process"
        " (the machine may be shared: CPU is the fair one; ours at the peer's n: the median of 3"
        " decodes); peer/ours CPU: the peer's decode CPU over that row's, at the same n. Ours"
        " encode on a seeded numpy generator (the CSPRNG rate: bench_heavy_hitters.py)."
    )


def section_multi(args: argparse.Namespace, python: Path) -> None:
    ks = [2, 4, 6, 10, 15, 20]
    rng = np.random.default_rng(SEED + 1)
    columns = []
    for k in ks:  # a skewed categorical per attribute, correlated with the first attribute
        weights = np.arange(1, k + 1, dtype=np.float64) ** -1.0
        columns.append(rng.choice(k, size=args.n_multi, p=weights / weights.sum()))
    x = np.stack(columns, axis=1).astype(np.int64)
    truth = [np.bincount(x[:, j], minlength=k) / len(x) for j, k in enumerate(ks)]
    peer_x = x[: args.n_multi_peer]
    peer_truth = [np.bincount(peer_x[:, j], minlength=k) / len(peer_x) for j, k in enumerate(ks)]
    print(
        f"6 attributes, k = {ks}; ours n = {args.n_multi}, {PINS[1]} "
        f"n = {args.n_multi_peer} (its first tuples). MAE over all {sum(ks)} 1-way cells."
    )
    print("ours raw = unbiased; ours pp = the peer's own post-processing (its MI estimator")
    print("clips at 0 and renormalises) applied to ours. Peer's RS+FD uses its amplified")
    print("epsilon' = ln(d(e^eps - 1) + 1) (not eps-LDP on whole tuples; ours calibrates to eps).")
    print("2-way marginals: the peer has none (ours: smp with 'marginals'), not compared.")
    started = time.perf_counter()
    peer = run_peer(python, "multi", {"eps": args.eps_multi, "ks": ks}, {"tuples.npy": peer_x})
    print(f"(peer subprocess {time.perf_counter() - started:.0f} s)")
    attributes = [{"name": f"a{j}", "k": k} for j, k in enumerate(ks)]
    rows = []
    for eps in args.eps_multi:
        for protocol in ("spl", "smp", "rsfd"):
            m = Multi(epsilon=eps, protocol=protocol, attributes=attributes)
            start = time.perf_counter()
            statistic = m.aggregate(m.perturb(x, rng=rng))
            raw = [m.estimate(statistic, j) for j in range(len(ks))]
            elapsed = time.perf_counter() - start
            proj = [clip_renormalise(f) for f in raw]
            mae_raw = float(np.mean(np.abs(np.concatenate(raw) - np.concatenate(truth))))
            mae_proj = float(np.mean(np.abs(np.concatenate(proj) - np.concatenate(truth))))
            small = m.aggregate(m.perturb(peer_x, rng=rng))
            same_n = [clip_renormalise(m.estimate(small, j)) for j in range(len(ks))]
            mae_same = float(np.mean(np.abs(np.concatenate(same_n) - np.concatenate(peer_truth))))
            p = peer[f"{protocol}:{eps:g}"]
            est = np.concatenate([np.asarray(e) for e in p["est"]])
            mae_peer = float(np.mean(np.abs(est - np.concatenate(peer_truth))))
            peer_time = p["encode"] + p["decode"]
            rows.append(
                [
                    f"{eps:g}",
                    protocol,
                    mae_raw,
                    mae_proj,
                    mae_same,
                    mae_peer,
                    elapsed,
                    peer_time,
                    (peer_time / args.n_multi_peer) / (elapsed / args.n_multi),
                ]
            )
    table(
        [
            "eps",
            "proto",
            "MAE ours raw",
            "ours pp",
            "ours pp @n peer",
            "peer",
            "ours s",
            "peer s",
            "per-report x",
        ],
        rows,
    )
    print("ours pp @n peer: ours on the peer's tuples, post-processed like the peer; ours s:")
    print("encode + aggregate + estimate at ours n. per-report x: peer s per report / ours.")


def section_fo(args: argparse.Namespace, python: Path) -> None:
    k, eps = 1024, args.eps_fo
    rng = np.random.default_rng(SEED + 2)
    weights = np.arange(1, k + 1, dtype=np.float64) ** -1.1
    x = rng.choice(k, size=args.n_fo, p=weights / weights.sum()).astype(np.int64)
    peer_n = {"grr": args.n_fo_peer, "oue": args.n_fo_peer_oue, "olh": args.n_fo_peer_olh}
    print(
        f"k = {k}, Zipf(1.1), eps {eps:g}; ours n = {args.n_fo}; multi-freq-ldpy n = {peer_n} "
        "(its first values). MSE over the k frequencies; /exact: ours raw MSE over the exact mean"
        " variance (1 expected); pp: the peer's clip-and-renormalise applied to ours."
    )
    started = time.perf_counter()
    peer = run_peer(
        python,
        "fo",
        {"k": k, "epsilon": eps},
        {f"fo_{name}.npy": x[:n] for name, n in peer_n.items()},
    )
    print(f"(peer subprocess {time.perf_counter() - started:.0f} s)")
    rows = []
    for name in ("grr", "oue", "olh"):
        m = mechanism_from_config({"mechanism": name, "epsilon": eps, "k": k})
        truth = np.bincount(x, minlength=k) / len(x)
        start = time.perf_counter()
        est = m.estimate_frequencies(m.aggregate(m.perturb(x, rng=rng)))  # type: ignore[attr-defined]
        elapsed = time.perf_counter() - start
        mse = float(np.mean((est - truth) ** 2))
        mse_pp = float(np.mean((clip_renormalise(est) - truth) ** 2))
        exact = float(np.mean(m.variance(len(x), truth)))  # type: ignore[attr-defined]
        n_p = peer_n[name]
        p = peer[name]
        peer_truth = np.bincount(x[:n_p], minlength=k) / n_p
        mse_peer = float(np.mean((np.asarray(p["est"]) - peer_truth) ** 2))
        small = m.estimate_frequencies(m.aggregate(m.perturb(x[:n_p], rng=rng)))  # type: ignore[attr-defined]
        mse_same = float(np.mean((clip_renormalise(small) - peer_truth) ** 2))
        peer_time = p["encode"] + p["decode"]
        rows.append(
            [
                name,
                len(x),
                mse,
                mse / exact,
                mse_pp,
                elapsed,
                n_p,
                mse_same,
                mse_peer,
                peer_time,
                (peer_time / n_p) / (elapsed / len(x)),
            ]
        )
    table(
        [
            "fo",
            "n ours",
            "MSE ours",
            "/exact",
            "ours pp",
            "ours s",
            "n peer",
            "ours pp @n peer",
            "MSE peer",
            "peer s",
            "per-report x",
        ],
        rows,
    )
    print("ours pp @n peer: ours on the peer's values, post-processed like the peer. per-report")
    print("x: peer seconds per report over ours (ours s: encode + aggregate + estimate at ours n).")


SECTIONS = {"hh": section_hh, "multi": section_multi, "fo": section_fo}


def options(quick: bool) -> dict[str, Any]:
    if quick:
        return dict(
            n_hh=200_000,
            n_hh_peer=20_000,
            vocabulary=20_000,
            eps=[2.0, 4.0, 8.0],
            n_multi=100_000,
            n_multi_peer=20_000,
            eps_multi=[1.0, 2.0, 4.0],
            n_fo=200_000,
            n_fo_peer=20_000,
            n_fo_peer_oue=10_000,
            n_fo_peer_olh=3_000,
            eps_fo=2.0,
        )
    return dict(
        n_hh=1_000_000,
        n_hh_peer=100_000,
        vocabulary=100_000,
        eps=[2.0, 4.0, 8.0],
        n_multi=1_000_000,
        n_multi_peer=100_000,
        eps_multi=[1.0, 2.0, 4.0],
        n_fo=1_000_000,
        n_fo_peer=100_000,
        n_fo_peer_oue=20_000,
        n_fo_peer_olh=10_000,
        eps_fo=2.0,
    )


def run(args: argparse.Namespace) -> None:
    """Entry point for scripts/bench.py (uses ``args.quick``)."""
    settings = options(getattr(args, "quick", False))
    for key, value in settings.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    for key, value in dict(m=1024, hashes=16, fragment=2, top=50).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    python = ensure_venv(Path(getattr(args, "venv", None) or DEFAULT_VENV))
    chosen = [s for s in (getattr(args, "sections", "") or "").split(",") if s] or list(SECTIONS)
    for name in chosen:
        print(f"\n--- peers: {name} ---", flush=True)
        SECTIONS[name](args, python)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--only", dest="sections", default="", help="hh,multi,fo")
    parser.add_argument("--venv", default=None, help=f"peers' venv (default {DEFAULT_VENV})")
    args = parser.parse_args()
    unknown = sorted(set(s for s in args.sections.split(",") if s) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    run(args)


if __name__ == "__main__":
    main()
