"""The estimate-kind contract (issue 22, item 6): every folder under ``analysis/kinds/`` is a kind
registered in ``KINDS`` with its ``estimate.py`` and ``gap.py``, and for every registered mechanism
(its conformance vector's config) reports from real devices go estimate -> gap.

Reports are made as devices make them: one ``perturb`` per device with its own keyed source
(seeded secrets) where the mechanism memoizes or makes per-device choices, the values those of the
mechanism's conformance vector. The integrator extends the folder check to ``view.py`` and the
chain to the report and dashboard views when the views land.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import analysis
from analysis.gap import GapOptions, kind_gap, parse_simulation, simulated_kind_gap
from analysis.kinds import KINDS, Kind
from analysis.streaming import json_safe
from client_sdk.client import memo_scope
from client_sdk.conformance.vectors import VECTOR_CAMPAIGN, device_values, uses_keyed_source
from client_sdk.mechanisms import Mechanism, mechanism_from_config
from client_sdk.mechanisms.registry import MECHANISMS
from client_sdk.secrets_store import DeviceKeys

ROOT = Path(__file__).resolve().parents[3]
KINDS_DIR = ROOT / "analysis" / "kinds"
VECTORS_DIR = ROOT / "conformance" / "vectors"
DEVICES = 240
OPTIONS = GapOptions(top=3, vocabulary=40, repetitions=2)


def kind_folders(root: Path) -> set[str]:
    """The kind packages under ``root``: folders with an ``__init__.py``, not ``_common``-like."""
    return {
        path.name
        for path in root.iterdir()
        if path.is_dir() and not path.name.startswith("_") and (path / "__init__.py").is_file()
    }


def folder_of(kind: Kind) -> str:
    """The folder whose ``estimate.py`` defines the kind's estimator."""
    estimator: Any = kind.estimator or kind.candidate_estimator
    package, _, module = estimator.__module__.rpartition(".")
    assert module == "estimate" and package.startswith("analysis.kinds."), estimator.__module__
    return package.rpartition(".")[2]


def contract_offenders(root: Path, kinds: dict[str, Kind]) -> list[str]:
    """What breaks the folder contract: a folder no kind registers, a kind without its folder,
    a missing ``estimate.py`` or ``gap.py``, a gap function not the one its ``gap.py`` names."""
    offenders: list[str] = []
    registered = {folder_of(kind): name for name, kind in kinds.items()}
    for folder in sorted(kind_folders(root) - set(registered)):
        offenders.append(f"analysis/kinds/{folder}/ is registered in no KINDS entry")
    for folder, name in sorted(registered.items()):
        for part in ("estimate.py", "gap.py"):
            if not (root / folder / part).is_file():
                offenders.append(f"kind {name!r}: analysis/kinds/{folder}/{part} is missing")
        if not (root / folder / "gap.py").is_file():
            continue
        gap = importlib.import_module(f"analysis.kinds.{folder}.gap")
        kind = kinds[name]
        for function in ("exact_gap", "simulated_gap", "measured_gap"):
            if getattr(gap, function, None) is not getattr(kind, function):
                offenders.append(f"kind {name!r}: {function} is not {folder}/gap.py's")
    return offenders


def test_every_kind_folder_is_registered_with_its_estimate_and_gap() -> None:
    assert set(KINDS) == {
        "frequencies",
        "mean",
        "rappor",
        "sketch",
        "discovery",
        "distribution",
        "range",
        "multi",
        "fourier",
        "key-value",
    }
    assert contract_offenders(KINDS_DIR, KINDS) == []
    assert {folder_of(kind) for kind in KINDS.values()} == kind_folders(KINDS_DIR)


def test_the_contract_check_finds_an_unregistered_folder_and_a_missing_file(
    tmp_path: Path,
) -> None:
    for folder in kind_folders(KINDS_DIR):
        (tmp_path / folder).mkdir()
        for part in ("__init__.py", "estimate.py", "gap.py"):
            (tmp_path / folder / part).write_text("")
    (tmp_path / "_common").mkdir()
    (tmp_path / "_common" / "__init__.py").write_text("")  # shared code: no kind
    assert contract_offenders(tmp_path, KINDS) == []
    (tmp_path / "prio3_sum").mkdir()
    (tmp_path / "prio3_sum" / "__init__.py").write_text("")
    (tmp_path / "ranges" / "gap.py").unlink()
    assert contract_offenders(tmp_path, KINDS) == [
        "analysis/kinds/prio3_sum/ is registered in no KINDS entry",
        "kind 'range': analysis/kinds/ranges/gap.py is missing",
    ]


def test_kind_holds_exactly_one_estimator() -> None:
    gaps = KINDS["mean"]
    with pytest.raises(TypeError, match="exactly one"):
        Kind(gaps.exact_gap, gaps.simulated_gap, gaps.measured_gap)
    with pytest.raises(TypeError, match="exactly one"):
        Kind(
            gaps.exact_gap,
            gaps.simulated_gap,
            gaps.measured_gap,
            estimator=KINDS["mean"].estimator,
            candidate_estimator=KINDS["rappor"].candidate_estimator,
        )
    assert KINDS["rappor"].needs_candidates and not KINDS["mean"].needs_candidates


# ---- every registered mechanism: estimate -> gap ---------------------------------------------


def vector(name: str) -> tuple[dict[str, Any], list[Any]]:
    """The first config of ``name``'s conformance vector and the values of its cases."""
    cases = json.loads((VECTORS_DIR / f"{name}.json").read_text())["cases"]
    config = cases[0]["config"]
    return config, [case["value"] for case in cases if case["config"] == config]


def device_reports(mechanism: Mechanism, values: list[Any], devices: int, seed: int) -> Any:
    """One report from each of ``devices`` devices, holding the vector's values in turn; a
    device with a keyed source gets its own seeded secret, as the client derives it."""
    rng = np.random.default_rng(seed)
    scope = memo_scope(VECTOR_CAMPAIGN, mechanism)
    reports = []
    for device in range(devices):
        keys: dict[str, Any] = {}
        if uses_keyed_source(mechanism):
            keys["permanent"] = DeviceKeys(rng.bytes(32), scope)
        value = device_values(mechanism, values[device % len(values)])
        reports.append(mechanism.perturb(value, rng=rng, **keys))
    return np.concatenate(reports)


def test_every_registered_mechanism_has_a_vector() -> None:
    assert {path.stem for path in VECTORS_DIR.glob("*.json")} == set(MECHANISMS)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_reports_go_estimate_then_gap(name: str) -> None:
    config, values = vector(name)
    mechanism = mechanism_from_config(config)
    kind = KINDS[mechanism.estimate_kind]
    reports = device_reports(mechanism, values, DEVICES, seed=len(name))
    candidates = sorted({v for v in values if isinstance(v, str) and v}) or None
    if kind.needs_candidates:
        assert candidates, f"{name}: its vector names no candidate strings"
    estimate = analysis.estimate(mechanism, reports, candidates=candidates)
    assert estimate.n == DEVICES
    json.dumps(json_safe(estimate.to_dict() if hasattr(estimate, "to_dict") else estimate.n))
    exact = kind_gap(mechanism, DEVICES, OPTIONS)
    assert exact["kind"] == mechanism.estimate_kind and exact["n"] == DEVICES
    simulated = simulated_kind_gap(mechanism, DEVICES, parse_simulation("uniform"), OPTIONS, seed=3)
    assert simulated["simulation"]["population"] == "uniform"
    assert set(exact) <= set(simulated)  # the exact figures beside the measured ones
    json.dumps(json_safe(simulated), allow_nan=False)
