"""Behaviour identity across a refactor: every estimate, gap, report and dashboard document of
one campaign of every mechanism config, dumped on fixed seeds, then compared.

    python scripts/compare_outputs.py dump OUT      # writes OUT/<surface>/<case>.<ext>
    python scripts/compare_outputs.py diff A B      # prints the documents that differ; exit 1

``dump`` builds a temporary collector database (real SQLite, through ``collector.storage``)
holding, for each case of :data:`CASES`, a campaign and its seeded reports (report ids and days
fixed too), then reads it only through surfaces that outlive a reorganisation of the analysis
package:

* ``ldp-analyze estimate --format json`` (with the options the case's kind takes), ``ldp-analyze
  gap --format json`` (exact, and ``--simulate``), ``ldp-analyze report`` (the HTML page and its
  ``--json`` numbers), run in this process through the console script's entry point;
* the dashboard's JSON documents (``/api/campaigns``, ``/api/campaigns/<name>`` and a
  ``?since=&until=`` window) through its Flask test client, signed in;
* the collector's admin estimate (``GET /v1/campaigns/<name>/estimate``) through its Flask test
  client (``Mechanism.summary``), or its problem document where it has none.

Outputs are canonicalised: JSON sorted and indented, temporary paths and wall-clock timestamps
replaced by placeholders, embedded PNG images by their SHA-256 (so a changed pixel still shows).
Two dumps of the same tree are identical (a check worth repeating on a new machine: matplotlib's
PNG bytes depend on its version and fonts). Small n keeps a dump within a couple of minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import io
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TOKEN = "compare-outputs-admin-token-" + "z" * 16
DAYS = ("2026-11-30", "2026-12-01")
SEED = 20261203

Values = Callable[[Any, int, np.random.Generator], Any]


def categories(k: int) -> Values:
    """A Zipf(1.1) population over ``k`` categories."""

    def draw(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
        weights = 1.0 / np.arange(1, k + 1) ** 1.1
        return rng.choice(k, size=n, p=weights / weights.sum())

    return draw


def numbers(lower: float, upper: float, dim: int | None = None) -> Values:
    """Beta(2, 5) numbers on ``[lower, upper]`` (``dim`` coordinates each when given)."""

    def draw(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
        shape = (n,) if dim is None else (n, dim)
        return lower + (upper - lower) * rng.beta(2.0, 5.0, size=shape)

    return draw


def ball(dim: int, radius: float) -> Values:
    """Vectors inside the L2 ball of ``radius`` (the Gaussian mechanism's clip norm)."""

    def draw(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
        x = rng.normal(0.3, 0.4, size=(n, dim))
        norms = np.maximum(np.linalg.norm(x, axis=1, keepdims=True) / (0.95 * radius), 1.0)
        return x / norms

    return draw


WORDS = [f"w{i:02d}" for i in range(40)]


def words(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
    """Strings of a Zipf(1.3) population over 40 words (plus a few outside every domain)."""
    weights = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.3
    drawn = [WORDS[i] for i in rng.choice(len(WORDS), size=n, p=weights / weights.sum())]
    return [w if i % 50 else "zz" for i, w in enumerate(drawn)]


def records(cardinalities: Sequence[int]) -> Values:
    """Records of correlated categorical attributes (the second follows the first)."""

    def draw(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
        first = categories(cardinalities[0])(None, n, rng)
        columns = [first]
        for k in cardinalities[1:]:
            noise = rng.integers(0, k, size=n)
            columns.append(np.where(rng.random(n) < 0.6, first % k, noise))
        return np.stack(columns, axis=1).astype(np.int64)

    return draw


def bits(d: int) -> Values:
    """Records of ``d`` correlated bits."""

    def draw(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
        first = rng.random(n) < 0.7
        columns = [first] + [
            np.where(rng.random(n) < 0.5, first, rng.random(n) < 0.2) for _ in range(d - 1)
        ]
        return np.stack(columns, axis=1).astype(np.int64)

    return draw


def key_values(k: int) -> Values:
    """Key-value sets: each device holds one or two keys with values in [-1, 1]."""

    def draw(_mechanism: Any, n: int, rng: np.random.Generator) -> Any:
        out = []
        for _ in range(n):
            keys = rng.choice(k, size=int(rng.integers(1, 3)), replace=False)
            out.append(
                {int(j): float(np.clip(0.3 * j - 0.6 + rng.normal(0, 0.2), -1, 1)) for j in keys}
            )
        return out

    return draw


@dataclass(frozen=True)
class Case:
    """One campaign: its document (without a name), its population and the estimate options
    its kind takes beyond the defaults."""

    name: str
    mechanism: dict[str, Any]
    values: Values
    domain: list[str] | None = None
    estimate_options: tuple[tuple[str, ...], ...] = ()
    n: int = 1500
    extra: dict[str, Any] = field(default_factory=dict)


def labels(k: int) -> list[str]:
    return [f"v{i}" for i in range(k)]


LONGITUDINAL = {"epsilon_permanent": 4.0}
FREQUENCY_OPTIONS = (("--postprocess", "norm-sub", "--top", "3"), ("--by", "day"))

CASES: tuple[Case, ...] = (
    # frequencies: every oracle, memoized ones, dBitFlip
    *(
        Case(
            name,
            {"mechanism": name, "epsilon": 1.0, "k": 8},
            categories(8),
            labels(8),
            FREQUENCY_OPTIONS,
        )
        for name in ("grr", "sue", "oue", "blh", "hr")
    ),
    Case(
        "ss",
        {"mechanism": "ss", "epsilon": 1.0, "k": 8, "d": 3},
        categories(8),
        labels(8),
        FREQUENCY_OPTIONS,
    ),
    Case(
        "olh",
        {"mechanism": "olh", "epsilon": 2.0, "k": 8, "g": 8},
        categories(8),
        labels(8),
        FREQUENCY_OPTIONS,
    ),
    Case("auto", {"mechanism": "auto", "epsilon": 1.0, "k": 8}, categories(8), labels(8)),
    *(
        Case(
            f"{name}-longitudinal",
            {"mechanism": name, "epsilon": 1.0, "k": 8, "longitudinal": LONGITUDINAL},
            categories(8),
            labels(8),
            FREQUENCY_OPTIONS,
        )
        for name in ("grr", "oue", "olh")
    ),
    Case(
        "dbitflip",
        {"mechanism": "dbitflip", "epsilon": 1.0, "k": 16, "d": 4},
        categories(16),
        labels(16),
    ),
    Case(
        "dbitflip-fresh",
        {"mechanism": "dbitflip", "epsilon": 1.0, "k": 16, "d": 4, "memoize": False},
        categories(16),
        labels(16),
    ),
    # means
    Case(
        "laplace",
        {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 60.0},
        numbers(0.0, 60.0),
        estimate_options=(("--by", "day"),),
    ),
    Case(
        "gaussian",
        {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "lower": -1.0, "upper": 1.0},
        numbers(-1.0, 1.0),
    ),
    Case(
        "gaussian-vector",
        {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "dim": 3, "clip_norm": 1.0},
        ball(3, 1.0),
    ),
    Case(
        "duchi",
        {"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 10.0},
        numbers(0.0, 10.0),
    ),
    Case(
        "duchi-vector",
        {"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 10.0, "dim": 3},
        numbers(0.0, 10.0, 3),
    ),
    Case(
        "piecewise",
        {"mechanism": "piecewise", "epsilon": 1.0, "lower": 0.0, "upper": 60.0},
        numbers(0.0, 60.0),
    ),
    Case(
        "piecewise-vector",
        {
            "mechanism": "piecewise",
            "epsilon": 2.0,
            "lower": 0.0,
            "upper": 1.0,
            "dim": 4,
            "coordinates": 2,
        },
        numbers(0.0, 1.0, 4),
    ),
    Case(
        "hybrid",
        {"mechanism": "hybrid", "epsilon": 1.0, "lower": 0.0, "upper": 60.0},
        numbers(0.0, 60.0),
    ),
    Case(
        "onebitmean",
        {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
        numbers(0.0, 100.0),
    ),
    Case(
        "onebitmean-fresh",
        {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0.0, "upper": 100.0, "memoize": False},
        numbers(0.0, 100.0),
    ),
    # RAPPOR (strings, decoded against the campaign's candidates)
    Case(
        "rappor",
        {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75},
        words,
        WORDS[:20],
    ),
    # sketches (a known candidate domain)
    Case(
        "cms",
        {"mechanism": "cms", "epsilon": 4.0, "m": 128, "hashes": 4, "max_length": 4},
        words,
        [*WORDS[:12], "absent"],
    ),
    Case(
        "hcms",
        {"mechanism": "hcms", "epsilon": 4.0, "m": 128, "hashes": 4, "max_length": 4},
        words,
        [*WORDS[:12], "absent"],
    ),
    Case(
        "cms-longitudinal",
        {
            "mechanism": "cms",
            "epsilon": 4.0,
            "m": 128,
            "hashes": 4,
            "max_length": 4,
            "longitudinal": {"epsilon_permanent": 6.0},
        },
        words,
        [*WORDS[:12], "absent"],
    ),
    # discovery (no domain)
    Case(
        "pem", {"mechanism": "pem", "epsilon": 6.0, "max_length": 3, "step_bits": 6}, words, n=3000
    ),
    Case(
        "sfp",
        {"mechanism": "sfp", "epsilon": 6.0, "max_length": 3, "m": 128, "hashes": 4},
        words,
        n=3000,
    ),
    Case(
        "pem-longitudinal",
        {
            "mechanism": "pem",
            "epsilon": 6.0,
            "max_length": 3,
            "step_bits": 6,
            "longitudinal": {"epsilon_permanent": 8.0},
        },
        words,
        n=3000,
    ),
    Case(
        "sfp-longitudinal",
        {
            "mechanism": "sfp",
            "epsilon": 6.0,
            "max_length": 3,
            "m": 128,
            "hashes": 4,
            "longitudinal": {"epsilon_permanent": 8.0},
        },
        words,
        n=3000,
    ),
    # distributions
    Case(
        "square_wave",
        {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0.0, "upper": 10.0, "bins": 8},
        numbers(0.0, 10.0),
        estimate_options=(("--quantiles", "0.25,0.5,0.9"),),
    ),
    # ranges
    Case(
        "hierarchical",
        {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16},
        categories(16),
        labels(16),
        (("--range", "2,9"), ("--quantiles", "0.5,0.9")),
    ),
    Case(
        "hierarchical-haar",
        {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16, "variant": "haar"},
        categories(16),
        labels(16),
        (("--range", "0,5"),),
    ),
    # multi-attribute marginals, every protocol
    *(
        Case(
            f"multi-{protocol}",
            {
                "mechanism": "multi",
                "epsilon": 2.0,
                "protocol": protocol,
                "attributes": [
                    {"name": "os", "k": 3, "labels": ["android", "ios", "web"]},
                    {"name": "theme", "k": 2},
                    {"name": "size", "k": 4},
                ],
            },
            records([3, 2, 4]),
            estimate_options=(("--marginal", "size"),),
        )
        for protocol in ("spl", "smp", "rsfd")
    ),
    Case(
        "multi-smp-tables",
        {
            "mechanism": "multi",
            "epsilon": 2.0,
            "protocol": "smp",
            "attributes": [
                {"name": "os", "k": 3, "labels": ["android", "ios", "web"]},
                {"name": "theme", "k": 2},
                {"name": "size", "k": 4},
            ],
            "marginals": [["os", "theme"], ["theme", "size"]],
        },
        records([3, 2, 4]),
        estimate_options=(("--marginal", "os,theme"),),
    ),
    # Fourier marginals of bits
    Case(
        "fourier",
        {
            "mechanism": "fourier",
            "epsilon": 2.0,
            "order": 2,
            "attributes": [
                {"name": "wifi", "labels": ["off", "on"]},
                {"name": "dark"},
                {"name": "beta"},
            ],
        },
        bits(3),
        estimate_options=(("--marginal", "wifi,dark"),),
    ),
    # key-value
    Case("pckv", {"mechanism": "pckv", "epsilon": 2.0, "k": 5, "padding": 2}, key_values(5)),
    Case(
        "pckv-ue",
        {"mechanism": "pckv", "epsilon": 2.0, "k": 5, "padding": 2, "variant": "ue"},
        key_values(5),
    ),
)


# ---- the database ---------------------------------------------------------------------------


def simulate(mechanism: Any, values: Any, rng: np.random.Generator) -> Any:
    """Reports of a population of distinct devices: memoized mechanisms draw each device's
    permanent response from ``rng`` (``perturb_independent_devices``, RAPPOR's
    ``simulate_clients``), the others perturb directly."""
    for method in ("perturb_independent_devices", "simulate_clients"):
        if hasattr(mechanism, method):
            return getattr(mechanism, method)(values, rng=rng)
    return mechanism.perturb(values, rng=rng)


def build_database(db: Path) -> dict[str, dict[str, Any]]:
    """Every case's campaign with its reports: ids from the case's name, half on each day.
    Returns each case's stored (calibrated) mechanism config."""
    from client_sdk.mechanisms import mechanism_from_config
    from collector.storage import Storage

    configs: dict[str, dict[str, Any]] = {}
    with Storage(db) as storage:
        for index, case in enumerate(CASES):
            document: dict[str, Any] = {
                "name": case.name,
                "mechanism": case.mechanism,
                "min_batch_size": 100,
                **case.extra,
            }
            if case.domain is not None:
                document["domain"] = case.domain
            stored, _ = storage.create_campaign(document)
            configs[case.name] = dict(stored.config)
            mechanism = mechanism_from_config(stored.config)
            rng = np.random.default_rng([SEED, index])
            payloads = mechanism.to_wire(
                simulate(mechanism, case.values(mechanism, case.n, rng), rng)
            )
            rows = [
                (hashlib.sha256(f"{case.name}/{i}".encode()).hexdigest()[:32], json.dumps(p))
                for i, p in enumerate(payloads)
            ]
            half = len(rows) // 2
            storage.insert_reports(case.name, rows[:half], day=DAYS[0])
            storage.insert_reports(case.name, rows[half:], day=DAYS[1])
    return configs


# ---- the surfaces ---------------------------------------------------------------------------


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """``ldp-analyze argv`` in this process (its console script's entry point)."""
    from client_sdk._extras import analyze_main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["ldp-analyze", *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = analyze_main()
            except SystemExit as exit_:  # argparse
                status = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        sys.argv = saved
    return int(status or 0), out.getvalue(), err.getvalue()


def cli_document(argv: Sequence[str]) -> Any:
    """The command's JSON on stdout, or its status and error when it refused."""
    status, out, err = run_cli(argv)
    if status != 0:
        return {"status": status, "stderr": err.strip()}
    return json.loads(out)


def dump_cli(db: Path, configs: dict[str, dict[str, Any]], work: Path, out: Path) -> None:
    for case in CASES:
        source = ["--db", str(db), "--campaign", case.name]
        estimate = {"default": cli_document(["estimate", *source, "--format", "json"])}
        for options in case.estimate_options:
            estimate[" ".join(options)] = cli_document(
                ["estimate", *source, "--format", "json", "--replicates", "20", *options]
            )
        write_json(out / "estimate" / f"{case.name}.json", estimate)
        gap = {
            "exact": cli_document(["gap", *source, "--format", "json"]),
            "simulated": cli_document(
                [
                    "gap",
                    "--mechanism",
                    json.dumps(configs[case.name]),
                    "--n",
                    str(case.n),
                    "--format",
                    "json",
                    "--simulate",
                    simulation(case),
                    "--repetitions",
                    "2",
                    "--vocabulary",
                    "60",
                    "--top",
                    "5",
                    "--seed",
                    "3",
                ]
            ),
        }
        write_json(out / "gap" / f"{case.name}.json", gap)
        page, numbers_path = work / f"{case.name}.html", work / f"{case.name}.json"
        status, stdout, err = run_cli(
            ["report", *source, "--out", str(page), "--json", str(numbers_path),
             "--replicates", "20", "--top", "8", "--format", "json"]
        )  # fmt: skip
        if status != 0:
            write_json(out / "report" / f"{case.name}.json", {"status": status, "stderr": err})
            continue
        write_json(
            out / "report" / f"{case.name}.json",
            {"stdout": json.loads(stdout), "file": json.loads(numbers_path.read_text())},
        )
        write_text(out / "report" / f"{case.name}.html", page.read_text(encoding="utf-8"))


def simulation(case: Case) -> str:
    """The simulated population ``gap --simulate`` takes for the case's values."""
    number = case.values.__qualname__.startswith(("numbers", "ball"))
    return "lognormal" if number else "zipf"


def dump_dashboard(db: Path, out: Path) -> None:
    from analysis.dashboard import create_app

    app = create_app(db, TOKEN)
    app.testing = True
    with app.test_client() as client:
        page = client.get("/login").get_data(as_text=True)
        marker = 'name="csrf" value="'
        start = page.index(marker) + len(marker)
        csrf = page[start : page.index('"', start)]
        signed = client.post("/login", data={"csrf": csrf, "token": TOKEN})
        assert signed.status_code in (302, 303), signed.status_code
        write_json(
            out / "dashboard" / "campaigns.json", response_document(client.get("/api/campaigns"))
        )
        for case in CASES:
            documents = {
                "whole": response_document(client.get(f"/api/campaigns/{case.name}")),
                "window": response_document(
                    client.get(f"/api/campaigns/{case.name}?since={DAYS[1]}&until={DAYS[1]}")
                ),
            }
            write_json(out / "dashboard" / f"{case.name}.json", documents)


def dump_collector(db: Path, out: Path) -> None:
    from collector import create_app

    app = create_app({"DB": str(db), "ADMIN_TOKEN": TOKEN})
    app.testing = True
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with app.test_client() as client:
        for case in CASES:
            documents = {
                "whole": response_document(
                    client.get(f"/v1/campaigns/{case.name}/estimate", headers=headers)
                ),
                "window": response_document(
                    client.get(
                        f"/v1/campaigns/{case.name}/estimate?since={DAYS[0]}&until={DAYS[0]}"
                        "&confidence=0.9",
                        headers=headers,
                    )
                ),
            }
            write_json(out / "collector" / f"{case.name}.json", documents)


def response_document(response: Any) -> Any:
    return {"status": response.status_code, "body": response.get_json(silent=True)}


# ---- canonical files ------------------------------------------------------------------------

ROOTS: list[str] = []
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
PNG = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")


def normalise(text: str) -> str:
    for root in ROOTS:
        text = text.replace(root, "<tmp>")
    text = TIMESTAMP.sub("<timestamp>", text)
    return PNG.sub(lambda m: "png-sha256:" + hashlib.sha256(m.group(1).encode()).hexdigest(), text)


def write_json(path: Path, document: Any) -> None:
    write_text(path, json.dumps(document, indent=1, sort_keys=True, allow_nan=True) + "\n")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(normalise(text), encoding="utf-8")


# ---- commands -------------------------------------------------------------------------------


def dump(out: Path) -> int:
    if out.exists() and any(out.iterdir()):
        print(f"compare_outputs: {out} exists and is not empty", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compare-outputs-") as tmp:
        root = Path(tmp)
        ROOTS[:] = [str(root.resolve()), str(root)]
        db = root / "collector.db"
        configs = build_database(db)
        print(f"database: {len(CASES)} campaigns ({time.perf_counter() - started:.0f} s)")
        out.mkdir(parents=True, exist_ok=True)
        work = root / "reports"
        work.mkdir()
        dump_collector(db, out)
        print(f"collector done ({time.perf_counter() - started:.0f} s)")
        dump_dashboard(db, out)
        print(f"dashboard done ({time.perf_counter() - started:.0f} s)")
        dump_cli(db, configs, work, out)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    print(f"wrote {files} files to {out} in {time.perf_counter() - started:.0f} s")
    return 0


def diff(a: Path, b: Path) -> int:
    left = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    right = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    differing = 0
    for name in sorted(left ^ right):
        print(f"only in {a if name in left else b}: {name}")
        differing += 1
    for name in sorted(left & right):
        x = (a / name).read_text(encoding="utf-8").splitlines()
        y = (b / name).read_text(encoding="utf-8").splitlines()
        if x != y:
            differing += 1
            lines = list(difflib.unified_diff(x, y, str(a / name), str(b / name), lineterm=""))
            print(
                "\n".join(
                    lines[:80] + ([f"... {len(lines) - 80} more lines"] if len(lines) > 80 else [])
                )
            )
    print(f"{differing} differing document(s) of {len(left | right)}")
    return 1 if differing else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dumping = commands.add_parser("dump", help="write every document of every case to OUT")
    dumping.add_argument("out", type=Path)
    comparing = commands.add_parser("diff", help="print the documents that differ (exit 1)")
    comparing.add_argument("a", type=Path)
    comparing.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args.out)
    return diff(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
