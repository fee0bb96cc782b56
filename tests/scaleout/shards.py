"""Shards for the scale-out tests: real collector databases filled with randomized reports."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from client_sdk.mechanisms import Mechanism, mechanism_from_config
from client_sdk.mechanisms.rappor import RAPPOR
from collector import export
from collector.storage import Storage

# One campaign config per registered mechanism name (test_every_registered_mechanism_has_a_config
# fails when a mechanism is registered without one here), plus memoization around an oracle.
CONFIGS: dict[str, dict[str, Any]] = {
    "grr": {"mechanism": "grr", "epsilon": 1.0, "k": 5},
    "sue": {"mechanism": "sue", "epsilon": 1.0, "k": 6},
    "oue": {"mechanism": "oue", "epsilon": 1.0, "k": 9},
    "ss": {"mechanism": "ss", "epsilon": 1.0, "k": 7},
    "auto": {"mechanism": "auto", "epsilon": 1.0, "k": 16},
    "blh": {"mechanism": "blh", "epsilon": 1.0, "k": 6},
    "olh": {"mechanism": "olh", "epsilon": 1.0, "k": 32},
    "hr": {"mechanism": "hr", "epsilon": 2.0, "k": 12},
    "rappor": {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.5, "p": 0.25, "q": 0.75},
    "laplace": {"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 10},
    "gaussian": {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "lower": 0, "upper": 10},
    "duchi": {"mechanism": "duchi", "epsilon": 1.0, "lower": 0, "upper": 10},
    "piecewise": {"mechanism": "piecewise", "epsilon": 1.0, "lower": 0, "upper": 10},
    "hybrid": {"mechanism": "hybrid", "epsilon": 1.0, "lower": 0, "upper": 10},
    "dbitflip": {"mechanism": "dbitflip", "epsilon": 1.0, "k": 5, "d": 2, "memoize": False},
    "onebitmean": {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 10},
    "cms": {"mechanism": "cms", "epsilon": 2.0, "m": 64, "hashes": 4},
    "hcms": {"mechanism": "hcms", "epsilon": 2.0, "m": 64, "hashes": 4},
    "pem": {"mechanism": "pem", "epsilon": 2.0, "max_length": 8},
    "sfp": {"mechanism": "sfp", "epsilon": 4.0, "max_length": 8},
    "hierarchical": {"mechanism": "hierarchical", "epsilon": 1.0, "k": 8},
    "square_wave": {
        "mechanism": "square_wave",
        "epsilon": 1.0,
        "lower": 0.0,
        "upper": 4.0,
        "bins": 8,
    },
    "multi": {
        "mechanism": "multi",
        "epsilon": 2.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 3}, {"name": "tier", "k": 12}],
    },
    "pckv": {"mechanism": "pckv", "epsilon": 2.0, "k": 6, "padding": 2},
    "fourier": {
        "mechanism": "fourier",
        "epsilon": 2.0,
        "attributes": [{"name": "wifi"}, {"name": "dark"}, {"name": "beta"}],
        "order": 2,
    },
    "longitudinal-olh": {
        "mechanism": "olh",
        "epsilon": 1.0,
        "k": 8,
        "longitudinal": {"epsilon_permanent": 2.0},
    },
}

# Variants of a registered mechanism that estimate through other code (another protocol or
# decoder): each must merge and estimate from shards like the default config.
CONFIGS.update(
    {
        "multi-spl": {**CONFIGS["multi"], "protocol": "spl"},
        "multi-rsfd": {**CONFIGS["multi"], "protocol": "rsfd"},
        "hierarchical-haar": {**CONFIGS["hierarchical"], "variant": "haar"},
        **{
            f"longitudinal-{name}": {**CONFIGS[name], "longitudinal": {"epsilon_permanent": 4.0}}
            for name in ("cms", "hcms", "pem", "sfp")
        },
    }
)

RAPPOR_CANDIDATES = [f"site-{i}" for i in range(6)]
"""RAPPOR's domain, and the candidates of the string sketches (cms, hcms)."""


def assert_same_estimate(a: Any, b: Any, *, exact: bool, where: str = "estimate") -> None:
    """Two estimates equal field by field: bit for bit (``exact``) or to float rounding."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for field in dataclasses.fields(a):
            assert_same_estimate(
                getattr(a, field.name),
                getattr(b, field.name),
                exact=exact,
                where=f"{where}.{field.name}",
            )
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if exact or a.dtype.kind not in "fc":
            assert a.tobytes() == b.tobytes(), where
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_estimate(a[key], b[key], exact=exact, where=f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_estimate(x, y, exact=exact, where=f"{where}[{i}]")
    elif isinstance(a, float) and not exact:
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=where)
    elif isinstance(a, float):
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def campaign_document(name: str, config: dict[str, Any]) -> dict[str, Any]:
    mechanism = mechanism_from_config(config)
    document: dict[str, Any] = {"name": name, "mechanism": config, "min_batch_size": 1}
    if mechanism.value_kind == "category":
        document["domain"] = [f"v{i}" for i in range(getattr(mechanism, "k", 2))]
    elif isinstance(mechanism, RAPPOR):
        document["domain"] = RAPPOR_CANDIDATES
    return document


def random_reports(mechanism: Mechanism, n: int, rng: np.random.Generator) -> list[Any]:
    """Wire payloads of ``n`` randomized reports (fresh devices for memoizing mechanisms)."""
    if mechanism.value_kind == "category":
        values: Any = rng.integers(0, getattr(mechanism, "k", 2), n)
    elif mechanism.value_kind == "number":
        values = rng.uniform(0.0, 10.0, n)
    elif mechanism.value_kind == "record" and hasattr(mechanism, "masks"):  # fourier: bits
        values = rng.integers(0, 2, (n, getattr(mechanism, "d")))  # noqa: B009
    elif mechanism.value_kind == "record" and hasattr(mechanism, "ks"):  # multi: index tuples
        values = np.stack([rng.integers(0, k, n) for k in getattr(mechanism, "ks")], axis=1)  # noqa: B009
    elif mechanism.value_kind == "record":  # pckv: a few keys with values in [-1, 1]
        keys = getattr(mechanism, "k")  # noqa: B009 -- the record mechanism's key count
        values = [
            {int(j): float(rng.uniform(-1, 1)) for j in rng.choice(keys, 2, replace=False)}
            for _ in range(n)
        ]
    else:
        values = [RAPPOR_CANDIDATES[i] for i in rng.integers(0, len(RAPPOR_CANDIDATES), n)]
    independent = getattr(mechanism, "perturb_independent_devices", None) or getattr(
        mechanism, "simulate_clients", None
    )
    if independent is not None:
        reports = independent(values, rng=rng)
    else:
        reports = mechanism.perturb(values, rng=rng)
    return list(mechanism.to_wire(reports))


def report_ids(n: int, rng: np.random.Generator) -> list[str]:
    return [bytes(row).hex() for row in rng.integers(0, 256, (n, 16), dtype=np.uint8)]


def fill(
    path: Path,
    document: dict[str, Any],
    rows: list[tuple[str, Any]],
    *,
    days: list[str] | None = None,
) -> None:
    """A collector database holding the campaign and these (id, payload) rows, by day."""
    with Storage(path) as storage:
        storage.create_campaign(document)
        encoded = [(i, json.dumps(p, separators=(",", ":"))) for i, p in rows]
        days = days or ["2026-01-01"]
        per_day = -(-len(encoded) // len(days))
        for d, day in enumerate(days):
            part = encoded[d * per_day : (d + 1) * per_day]
            if part:
                storage.insert_reports(document["name"], part, day=day)


N = 600
DUPLICATES = 130
"""Copies beyond the first in :func:`build_shards` at n = 600: 730 stored, 600 distinct (a and b
share 100 ids, b and c share 30, 5 of which are in a too)."""


def build_shards(
    directory: Path, name: str, *, n: int = N, seed: int = 0
) -> tuple[list[str], list[str], Path]:
    """Two databases and a Parquet export of a third, overlapping like retries landing on other
    collectors, and one database holding each report once (the reference)."""
    config = CONFIGS[name]
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(seed)
    rows = list(zip(report_ids(n, rng), random_reports(mechanism, n, rng), strict=True))
    document = campaign_document("c", config)
    a, b, c = (directory / f"{name}-{s}.db" for s in "abc")
    t, e = n // 24, n // 120  # 25 and 5 at n = 600
    fill(a, document, rows[: 10 * t], days=["2026-02-01", "2026-02-02"])
    fill(b, document, rows[8 * t : 18 * t] + rows[: 2 * t])
    fill(c, document, rows[17 * t :] + rows[9 * t : 9 * t + e], days=["2026-02-03"])
    export.export_campaign(c, "c", directory / f"{name}-lake", chunk_size=n // 4)
    whole = directory / f"{name}-whole.db"
    fill(whole, document, rows)
    return [str(a), str(b)], [str(directory / f"{name}-lake")], whole
