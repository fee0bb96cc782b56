"""The estimate-kind contract (issue 22, item 6): every folder under ``analysis/kinds/`` is a kind
registered in ``KINDS`` with its ``estimate.py``, ``gap.py`` and ``view.py``, and for every
registered mechanism (its conformance vector's config) reports from real devices go estimate ->
gap -> report view -> dashboard view -> the collector's summary (``Mechanism.summary``, through
``collector.estimates.summarize`` as the admin API calls it).

Reports are made as devices make them: one ``perturb`` per device with its own keyed source
(seeded secrets) where the mechanism memoizes or makes per-device choices, the values those of the
mechanism's conformance vector.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import analysis
from analysis.dashboard.data import document_of
from analysis.dashboard.views import render
from analysis.gap import GapOptions, kind_gap, parse_simulation, simulated_kind_gap
from analysis.kinds import KINDS, Kind
from analysis.report import build_report, render_html
from analysis.streaming import aggregate, json_safe
from analysis.views.report import ReportPage
from client_sdk.client import memo_scope
from client_sdk.conformance.vectors import VECTOR_CAMPAIGN, device_values, uses_keyed_source
from client_sdk.mechanisms import Mechanism, mechanism_from_config
from client_sdk.mechanisms.registry import MECHANISMS
from client_sdk.secrets_store import DeviceKeys
from collector.estimates import UnsupportedEstimate, summarize
from collector.storage import StoredCampaign

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
    a missing ``estimate.py``, ``gap.py`` or ``view.py``, a gap function or view not the one its
    own module names."""
    offenders: list[str] = []
    registered = {folder_of(kind): name for name, kind in kinds.items()}
    for folder in sorted(kind_folders(root) - set(registered)):
        offenders.append(f"analysis/kinds/{folder}/ is registered in no KINDS entry")
    for folder, name in sorted(registered.items()):
        for part in ("estimate.py", "gap.py", "view.py"):
            if not (root / folder / part).is_file():
                offenders.append(f"kind {name!r}: analysis/kinds/{folder}/{part} is missing")
        if not all((root / folder / part).is_file() for part in ("gap.py", "view.py")):
            continue
        gap = importlib.import_module(f"analysis.kinds.{folder}.gap")
        view = importlib.import_module(f"analysis.kinds.{folder}.view")
        kind = kinds[name]
        for function in ("exact_gap", "simulated_gap", "measured_gap"):
            if getattr(gap, function, None) is not getattr(kind, function):
                offenders.append(f"kind {name!r}: {function} is not {folder}/gap.py's")
        report = "PAGE" if isinstance(kind.report, ReportPage) else "REPORT"
        for attribute, shown in ((report, kind.report), ("DASHBOARD", kind.dashboard)):
            if getattr(view, attribute, None) is not shown:
                offenders.append(f"kind {name!r}: its view is not {folder}/view.py's {attribute}")
    return offenders


def test_every_kind_folder_is_registered_with_its_estimate_gap_and_view() -> None:
    # a sample: the folders decide which kinds there are
    assert {"frequencies", "mean", "rappor", "key-value"} <= set(KINDS)
    assert contract_offenders(KINDS_DIR, KINDS) == []
    assert {folder_of(kind) for kind in KINDS.values()} == kind_folders(KINDS_DIR)


def test_the_contract_check_finds_an_unregistered_folder_and_a_missing_file(
    tmp_path: Path,
) -> None:
    for folder in kind_folders(KINDS_DIR):
        (tmp_path / folder).mkdir()
        for part in ("__init__.py", "estimate.py", "gap.py", "view.py"):
            (tmp_path / folder / part).write_text("")
    (tmp_path / "_common").mkdir()
    (tmp_path / "_common" / "__init__.py").write_text("")  # shared code: no kind
    assert contract_offenders(tmp_path, KINDS) == []
    (tmp_path / "prio3_sum").mkdir()
    (tmp_path / "prio3_sum" / "__init__.py").write_text("")
    (tmp_path / "ranges" / "gap.py").unlink()
    (tmp_path / "mean" / "view.py").unlink()
    assert contract_offenders(tmp_path, KINDS) == [
        "analysis/kinds/prio3_sum/ is registered in no KINDS entry",
        "kind 'mean': analysis/kinds/mean/view.py is missing",
        "kind 'range': analysis/kinds/ranges/gap.py is missing",
    ]


def test_the_contract_check_finds_a_view_not_its_folders() -> None:
    swapped = dict(KINDS)
    swapped["mean"] = dataclasses.replace(KINDS["mean"], dashboard=KINDS["range"].dashboard)
    assert contract_offenders(KINDS_DIR, swapped) == [
        "kind 'mean': its view is not mean/view.py's DASHBOARD"
    ]


def test_kind_holds_exactly_one_estimator() -> None:
    mean = KINDS["mean"]
    parts = (mean.exact_gap, mean.simulated_gap, mean.measured_gap, mean.report, mean.dashboard)
    with pytest.raises(TypeError, match="exactly one"):
        Kind(*parts)
    with pytest.raises(TypeError, match="exactly one"):
        Kind(
            *parts,
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


def stored(mechanism: Mechanism, values: list[Any]) -> StoredCampaign:
    """The campaign as the collector stores it (a domain when the vector's values are labels)."""
    domain = None
    k = getattr(mechanism, "k", None)
    if all(isinstance(v, str) for v in values) and k is not None and len(set(values)) == k:
        domain = sorted(set(values))
    config = mechanism.to_config()
    return StoredCampaign(
        VECTOR_CAMPAIGN, mechanism, config, domain, None, "contract", 1, "2026-12-01T00:00:00Z"
    )


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_reports_go_estimate_gap_report_dashboard_and_summary(name: str) -> None:
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

    campaign = stored(mechanism, values)
    report = build_report(campaign, estimate, top=3, replicates=10, seed=5)
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>") and "</body></html>" in page
    assert report.data["n"] == DEVICES and report.figures
    json.dumps(report.data, allow_nan=False)

    document = document_of(campaign, estimate)
    display = render(mechanism.estimate_kind, document, estimate)
    assert display["view"] == kind.dashboard.name and display["title"] == kind.dashboard.title
    json.dumps(json_safe(display), allow_nan=False)

    statistic = aggregate(mechanism, reports)
    try:
        summary = summarize(campaign, statistic, confidence=0.9)
    except UnsupportedEstimate:
        assert mechanism.summary(statistic, confidence=0.9) is None  # ldp-analyze answers
    else:
        assert summary["n"] == DEVICES == document.get("n", DEVICES)
        assert summary["campaign"] == document["campaign"] == VECTOR_CAMPAIGN
        json.dumps(summary, allow_nan=False)
