"""Generating, loading and checking the conformance vectors (docs/protocol.md, "Conformance").

A vector file ``conformance/vectors/<mechanism>.json`` is::

    {"protocol": 1, "mechanism": NAME,
     "cases": [{"config": {...}, "value": V, "words_key": HEX, "payload": P}, ...]}

and a case whose mechanism draws from the device's keyed source (memoized mechanisms, and those
with per-device choices: ``uses_device_choices``) also carries ``"device_secret"`` (hex) and
``"campaign"`` (the name its memoization scope is keyed by). Each case is one report:
``payload == m.to_wire(m.perturb([value], rng=HmacWordSource(words_key), permanent=keys))[0]``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from client_sdk.campaign import PROTOCOL_VERSION
from client_sdk.mechanisms import Mechanism, mechanism_from_config
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.mechanisms.registry import MECHANISMS
from client_sdk.randomness import HmacWordSource
from client_sdk.secrets_store import DeviceKeys

__all__ = [
    "CASE_FIELDS",
    "VECTORS_DIR",
    "VectorError",
    "check_outputs",
    "check_vectors",
    "generate",
    "load_vectors",
    "report_of",
]

VECTORS_DIR = Path(__file__).resolve().parents[2] / "conformance" / "vectors"
"""Where the committed vectors live: ``conformance/vectors`` at the repository's root."""

VECTOR_CAMPAIGN = "conformance"
"""The campaign name every keyed case's memoization scope is derived from."""

CASE_FIELDS = frozenset({"config", "value", "words_key", "device_secret", "campaign", "payload"})
_REQUIRED = ("config", "value", "words_key", "payload")


class VectorError(ValueError):
    """A malformed vector file, or a case whose payload differs; names the file and the case."""


def uses_keyed_source(mechanism: Mechanism) -> bool:
    """True when ``perturb`` takes ``permanent=`` (the device's keyed source)."""
    return is_memoized(mechanism) or bool(mechanism.uses_device_choices)


def device_values(mechanism: Mechanism, value: Any) -> Any:
    """The one-element batch ``perturb`` takes for a vector's JSON ``value``.

    Categories are indices, numbers floats (a list for a vector mechanism), strings themselves,
    records mappings; a key-value record's keys are decimal strings in JSON (integers here)."""
    kind = mechanism.value_kind
    if kind == "category":
        return np.array([value], dtype=np.int64)
    if kind == "number":
        return np.array([value], dtype=np.float64)
    if kind == "string":
        return np.array([value], dtype=object)
    return mechanism.encode_records([mechanism.record_from_json(value)])  # type: ignore[attr-defined]


def report_of(
    config: Mapping[str, Any],
    value: Any,
    words_key: bytes,
    device_secret: bytes | None = None,
    campaign: str = VECTOR_CAMPAIGN,
) -> Any:
    """The wire payload of one report of ``value`` under ``config``, every word from
    ``HmacWordSource(words_key)`` (and the keyed source of ``device_secret`` where used)."""
    from client_sdk.client import memo_scope  # the client's own derivation of the scope

    mechanism = mechanism_from_config(config)
    keys: dict[str, Any] = {}
    if uses_keyed_source(mechanism):
        if device_secret is None:
            raise ValueError(f"{mechanism.name} uses the keyed source: device_secret is required")
        keys["permanent"] = DeviceKeys(device_secret, memo_scope(campaign, mechanism))
    reports = mechanism.perturb(
        device_values(mechanism, value), rng=HmacWordSource(words_key), **keys
    )
    return _json(mechanism.to_wire(reports)[0])


def _json(payload: Any) -> Any:
    """A payload as JSON reads it back (tuples become lists, numpy scalars numbers)."""
    return json.loads(json.dumps(payload, default=_default))


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON: {type(obj).__name__}")


def _derived(name: str, index: int, what: str) -> str:
    """A fixed 32-byte key per file, case and purpose (hex): regenerating gives the same."""
    return hashlib.sha256(f"ldp-telemetry/conformance/{name}/{index}/{what}".encode()).hexdigest()


def build_vectors() -> dict[str, dict[str, Any]]:
    """Every vector file's content, by mechanism name (from ``cases.CASES``)."""
    from client_sdk.conformance.cases import CASES

    missing = sorted(set(MECHANISMS) - set(CASES))
    if missing:
        raise AssertionError(f"no conformance cases for {', '.join(missing)}")
    files: dict[str, dict[str, Any]] = {}
    for name, groups in CASES.items():
        cases: list[dict[str, Any]] = []
        for config, values in groups:
            mechanism = mechanism_from_config(config)
            canonical = mechanism.to_config()
            if "longitudinal" in config and "longitudinal" not in canonical:
                canonical = {**canonical, "longitudinal": config["longitudinal"]}
            for value in values:
                index = len(cases)
                case: dict[str, Any] = {"config": canonical, "value": value}
                case["words_key"] = _derived(name, index, "words")
                secret = None
                if uses_keyed_source(mechanism):
                    case["device_secret"] = _derived(name, index, "device-secret")
                    case["campaign"] = VECTOR_CAMPAIGN
                    secret = bytes.fromhex(case["device_secret"])
                case["payload"] = report_of(
                    canonical, value, bytes.fromhex(case["words_key"]), secret
                )
                cases.append(case)
        files[name] = {"protocol": PROTOCOL_VERSION, "mechanism": name, "cases": cases}
    return files


def dumps(content: Mapping[str, Any]) -> str:
    """A vector file's text: one case a line, so a diff shows which cases changed."""
    head = json.dumps({k: v for k, v in content.items() if k != "cases"}, sort_keys=True)
    lines = [json.dumps(case, sort_keys=True, separators=(",", ":")) for case in content["cases"]]
    return head[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n"


def generate(directory: Path = VECTORS_DIR) -> list[Path]:
    """Rebuild every vector file under ``directory``; the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in build_vectors().items():
        path = directory / f"{name}.json"
        path.write_text(dumps(content), encoding="utf-8")
        written.append(path)
    return written


def load_vectors(directory: Path = VECTORS_DIR) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` under ``directory``, checked for shape; ``VectorError`` naming the file
    and the case (by index) otherwise."""
    files: dict[str, dict[str, Any]] = {}
    paths = sorted(Path(directory).glob("*.json"))
    if not paths:
        raise VectorError(
            f"{directory}: no vector files (*.json); they live in the repository's "
            "conformance/vectors/ (an installed package does not carry them): pass --dir"
        )
    for path in paths:
        files[path.stem] = _checked_file(path)
    return files


def _checked_file(path: Path) -> dict[str, Any]:
    where = path.name
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise VectorError(f"{where}: not a readable JSON file ({error})") from None
    if not isinstance(content, dict):
        raise VectorError(f"{where}: must be a JSON object; got {type(content).__name__}")
    if content.get("protocol") != PROTOCOL_VERSION:
        raise VectorError(
            f"{where}: protocol must be {PROTOCOL_VERSION}; got {content.get('protocol')!r}"
        )
    if content.get("mechanism") != path.stem:
        raise VectorError(
            f"{where}: mechanism must be {path.stem!r} (the file's name); "
            f"got {content.get('mechanism')!r}"
        )
    cases = content.get("cases")
    if not isinstance(cases, list) or not cases:
        raise VectorError(f"{where}: cases must be a non-empty list; got {cases!r:.80}")
    for index, case in enumerate(cases):
        _check_case(f"{where} case {index}", case, path.stem)
    return content


def _check_case(where: str, case: Any, name: str) -> None:
    if not isinstance(case, dict):
        raise VectorError(f"{where}: must be a JSON object; got {type(case).__name__}")
    missing = [field for field in _REQUIRED if field not in case]
    if missing:
        raise VectorError(f"{where}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(case) - CASE_FIELDS)
    if unknown:
        raise VectorError(f"{where}: unknown field(s) {', '.join(unknown)}")
    config = case["config"]
    if not isinstance(config, dict) or config.get("mechanism") != name:
        raise VectorError(f"{where}: config must be an object with mechanism {name!r}")
    for field in ("words_key", "device_secret"):
        if field in case:
            _check_hex(where, field, case[field])
    if "campaign" in case and not isinstance(case["campaign"], str):
        raise VectorError(f"{where}: campaign must be a string; got {case['campaign']!r}")


def _check_hex(where: str, field: str, text: Any) -> None:
    try:
        ok = isinstance(text, str) and len(bytes.fromhex(text)) >= 16
    except ValueError:
        ok = False
    if not ok:
        raise VectorError(f"{where}: {field} must be at least 16 bytes in hex; got {text!r:.80}")


def check_vectors(directory: Path = VECTORS_DIR) -> list[str]:
    """Reproduce every case with this SDK; the mismatches, each naming file and case."""
    problems: list[str] = []
    for name, content in load_vectors(directory).items():
        for index, case in enumerate(content["cases"]):
            where = f"{name}.json case {index}"
            try:
                secret = case.get("device_secret")
                payload = report_of(
                    case["config"],
                    case["value"],
                    bytes.fromhex(case["words_key"]),
                    bytes.fromhex(secret) if secret is not None else None,
                    case.get("campaign", VECTOR_CAMPAIGN),
                )
            except (ValueError, TypeError, KeyError) as error:
                raise VectorError(f"{where}: {error}") from None
            if payload != case["payload"]:
                problems.append(f"{where}: expected {case['payload']!r:.200}, got {payload!r:.200}")
    return problems


def check_outputs(outputs: Mapping[str, Any], directory: Path = VECTORS_DIR) -> list[str]:
    """Check another implementation's payloads, ``{mechanism: [payload per case, ...]}``, against
    the files; the mismatches (and the files or cases it left out), each named."""
    if not isinstance(outputs, Mapping):
        raise VectorError(
            f"outputs must be a JSON object {{mechanism: [payloads]}}; got {type(outputs).__name__}"
        )
    problems: list[str] = []
    vectors = load_vectors(directory)
    for name in sorted(set(outputs) - set(vectors)):
        problems.append(f"outputs name {name!r}, which has no vector file")
    for name, content in vectors.items():
        given = outputs.get(name)
        if given is None:
            problems.append(f"{name}.json: no outputs")
            continue
        if not isinstance(given, Sequence) or isinstance(given, str):
            problems.append(f"{name}.json: outputs must be a list of payloads")
            continue
        if len(given) != len(content["cases"]):
            problems.append(f"{name}.json: {len(content['cases'])} cases but {len(given)} outputs")
        for index, (case, payload) in enumerate(zip(content["cases"], given, strict=False)):
            if _json(payload) != case["payload"]:
                problems.append(
                    f"{name}.json case {index}: expected {case['payload']!r:.200}, "
                    f"got {payload!r:.200}"
                )
    return problems
