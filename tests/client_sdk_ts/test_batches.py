"""Several values reported in one ``perturb`` call from one word stream: the TypeScript SDK gives
the Python SDK's payloads (the vectors hold one value per case; a batch draws its words in
vectorized order: every keep bit, then every uniform other...). Python makes the payloads here,
node the TypeScript ones (``conformance-cli --batches``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from client_sdk.client import memo_scope
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.randomness import HmacWordSource
from client_sdk.secrets_store import DeviceKeys
from tests.client_sdk_ts.conftest import require_node

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed: the TypeScript SDK cannot run"
)

SECRET = bytes(range(32))
CAMPAIGN = "batch-campaign"
LONG = {"longitudinal": {"epsilon_permanent": 4.0}}
CONFIGS: list[dict[str, Any]] = [
    {"mechanism": "grr", "epsilon": 1.0, "k": 5},
    {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    {"mechanism": "grr", "epsilon": 1.0, "k": 5, **LONG},
    {"mechanism": "grr", "epsilon": 0.5, "k": 2, "longitudinal": {"epsilon_permanent": 2.0}},
    {"mechanism": "sue", "epsilon": 1.0, "k": 9},
    {"mechanism": "sue", "epsilon": 1.0, "k": 9, **LONG},
    {"mechanism": "oue", "epsilon": 1.0, "k": 12, **LONG},
    {"mechanism": "ss", "epsilon": 1.0, "k": 10, "d": 3},
    {"mechanism": "ss", "epsilon": 1.0, "k": 10, "d": 7},
    {"mechanism": "ss", "epsilon": 1.0, "k": 10, "d": 3, **LONG},
    {"mechanism": "olh", "epsilon": 2.0, "k": 16, "g": 8},
    {"mechanism": "olh", "epsilon": 2.0, "k": 16, "g": 8, **LONG},
    {"mechanism": "blh", "epsilon": 1.0, "k": 16},
    {"mechanism": "blh", "epsilon": 1.0, "k": 16, **LONG},
    {"mechanism": "hr", "epsilon": 1.0, "k": 10, "blocks": 1},
    {
        "mechanism": "hr",
        "epsilon": 1.0,
        "k": 100,
        "blocks": 4,
        "longitudinal": {"epsilon_permanent": 3.0},
    },
    {"mechanism": "dbitflip", "epsilon": 1.0, "k": 16, "d": 4, "memoize": False},
    {"mechanism": "dbitflip", "epsilon": 1.0, "k": 16, "d": 4, "memoize": True},
    {"mechanism": "rappor", "k": 16, "h": 2, "m": 4, "f": 0.5, "p": 0.25, "q": 0.75},
    {"mechanism": "rappor", "k": 64, "h": 3, "m": 1, "f": 0.25, "p": 0.5, "q": 0.75},
]


def _batch(index: int, config: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """A batch of six values (repeats included) and Python's payloads for it."""
    mechanism = mechanism_from_config(config)
    assert mechanism.to_config() == config  # canonical, as the collector serves it
    values: list[Any]
    if config["mechanism"] == "rappor":
        values = ["a", "béta", "", "a", "zz" * 10, "\U0001f600"]
    else:
        k = config["k"]
        values = [0, k - 1, 1, 0, 3 % k, k // 2]
    key = bytes([index + 1]) * 32
    memoized = "longitudinal" in config or config["mechanism"] == "rappor" or config.get("memoize")
    batch: dict[str, Any] = {"config": config, "values": values, "words_key": key.hex()}
    if memoized:
        keys = DeviceKeys(SECRET, memo_scope(CAMPAIGN, mechanism))
        keyed: Any = mechanism  # a memoized mechanism's perturb also takes the device's keys
        reports = keyed.perturb(values, permanent=keys, rng=HmacWordSource(key))
        batch.update(campaign=CAMPAIGN, device_secret=SECRET.hex())
    else:
        reports = mechanism.perturb(values, rng=HmacWordSource(key))
    return batch, mechanism.to_wire(reports)


COMPACT: list[dict[str, Any]] = [
    {"mechanism": "grr", "epsilon": 1.0, "k": 5},
    {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    {"mechanism": "grr", "epsilon": 0.3, "k": 70000},
    {"mechanism": "oue", "epsilon": 1.0, "k": 12},
    {"mechanism": "oue", "epsilon": 0.2, "k": 1000},
    {"mechanism": "sue", "epsilon": 1.0, "k": 9},
    {"mechanism": "olh", "epsilon": 2.0, "k": 16, "g": 8},
    {"mechanism": "blh", "epsilon": 1.0, "k": 16},
    {"mechanism": "olh", "epsilon": 3.0, "k": 1048576, "g": 64},
]
"""The oracles whose compact samplers (``perturb_compact``) multi's units use."""


def _compact_batch(index: int, config: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """Thirty values through the compact sampler, and Python's payloads."""
    mechanism = mechanism_from_config(config)
    k = config["k"]
    values = [0, k - 1, 1, 0, 3 % k, k // 2] * 5
    key = bytes([index + 101]) * 32
    reports = mechanism.perturb_compact(values, rng=HmacWordSource(key))  # type: ignore[attr-defined]
    batch = {"config": config, "values": values, "words_key": key.hex(), "compact": True}
    return batch, mechanism.to_wire(reports)


def test_batches_of_values_give_the_python_payloads(tmp_path: Path, ts_build: Path) -> None:
    made = [_batch(index, config) for index, config in enumerate(CONFIGS)]
    made += [_compact_batch(index, config) for index, config in enumerate(COMPACT)]
    batches = tmp_path / "batches.json"
    batches.write_text(json.dumps([batch for batch, _ in made]), encoding="utf-8")
    outputs = tmp_path / "outputs.json"
    run = subprocess.run(
        [
            require_node(),
            str(ts_build / "src" / "conformance-cli.js"),
            "--batches",
            str(batches),
            "--outputs",
            str(outputs),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(outputs.read_text(encoding="utf-8"))
    assert len(got) == len(made)
    for (batch, expected), payloads in zip(made, got, strict=True):
        assert payloads == expected, batch["config"]
