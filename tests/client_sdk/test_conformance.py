"""The conformance vectors (conformance/vectors, docs/protocol.md): the committed files are what
this SDK produces, every registered mechanism has one, a change of a mechanism's word consumption
is caught, malformed files are named by file and case, and another implementation's outputs are
checked payload by payload."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from client_sdk.campaign import PROTOCOL_VERSION
from client_sdk.conformance import VECTORS_DIR, VectorError, check_outputs, check_vectors
from client_sdk.conformance.__main__ import main
from client_sdk.conformance.vectors import build_vectors, load_vectors
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.pckv import PCKV, Pairs
from client_sdk.mechanisms.registry import MECHANISMS
from client_sdk.randomness import HmacWordSource, RandomSource, bernoulli, uniform_below


@pytest.fixture(scope="module")
def committed() -> dict[str, dict[str, Any]]:
    return load_vectors(VECTORS_DIR)


def test_committed_vectors_are_what_the_code_generates(committed: dict[str, Any]) -> None:
    """Regenerated in memory, every file equals the committed one: a protocol change is never
    silent (rebuild with ``python -m client_sdk.conformance generate`` when it is deliberate)."""
    generated = build_vectors()
    assert sorted(generated) == sorted(committed)
    for name, content in generated.items():
        on_disk = committed[name]
        assert len(content["cases"]) == len(on_disk["cases"]), name
        for index, (mine, theirs) in enumerate(
            zip(content["cases"], on_disk["cases"], strict=True)
        ):
            assert mine == theirs, f"{name}.json case {index}"


def test_every_registered_mechanism_and_memoized_variant_has_vectors(
    committed: dict[str, Any],
) -> None:
    assert set(committed) == set(MECHANISMS)
    for name, content in committed.items():
        assert content["protocol"] == PROTOCOL_VERSION
        assert content["mechanism"] == name
        assert len(content["cases"]) >= 1
    longitudinal = {
        name
        for name, content in committed.items()
        if any("longitudinal" in case["config"] for case in content["cases"])
    }
    assert {"grr", "sue", "oue", "ss", "blh", "olh", "hr", "cms", "hcms", "pem", "sfp"} <= (
        longitudinal
    )
    # self-memoizing mechanisms carry their device secret
    for name in ("rappor", "dbitflip", "onebitmean", "multi", "fourier", "hierarchical", "pem"):
        assert any("device_secret" in case for case in committed[name]["cases"]), name
    protocols = {case["config"]["protocol"] for case in committed["multi"]["cases"]}
    assert protocols == {"spl", "smp", "rsfd"}
    total = sum(path.stat().st_size for path in VECTORS_DIR.glob("*.json"))
    assert total < 2_000_000


def test_the_check_reproduces_every_case() -> None:
    assert check_vectors(VECTORS_DIR) == []
    assert main(["check"]) == 0


def _grr_other_first(self: GRR, values: Any, *, rng: RandomSource | None = None) -> Any:
    """GRR with its two draws swapped: the uniform other before the keep bit."""
    x = np.asarray(values, dtype=np.int64)
    other = uniform_below(rng, self.k - 1, x.size)
    other += other >= x
    keep = bernoulli(rng, self._keep_threshold, x.size)
    return np.where(keep, x, other)


def test_a_changed_consumption_order_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same distribution from the same words in another order gives other payloads."""
    monkeypatch.setattr(GRR, "perturb", _grr_other_first)
    problems = check_vectors(VECTORS_DIR)
    assert problems, "swapping GRR's draws went unnoticed"
    assert any(problem.startswith("grr.json case ") for problem in problems), problems
    assert main(["check"]) == 1


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "vectors"
    shutil.copytree(VECTORS_DIR, target)
    return target


def _edit(directory: Path, name: str, change: Any) -> None:
    path = directory / f"{name}.json"
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["cases"][2].pop("words_key"), "grr.json case 2: missing field(s) words_key"),
        (
            lambda c: c["cases"][1].update(words_key="zz"),
            "grr.json case 1: words_key must be at least 16 bytes in hex",
        ),
        (lambda c: c["cases"][0].update(extra=1), "grr.json case 0: unknown field(s) extra"),
        (
            lambda c: c["cases"][3]["config"].update(mechanism="oue"),
            "grr.json case 3: config must be an object with mechanism 'grr'",
        ),
        (lambda c: c.update(protocol=2), "grr.json: protocol must be 1; got 2"),
        (lambda c: c.update(mechanism="oue"), "grr.json: mechanism must be 'grr'"),
        (lambda c: c.update(cases=[]), "grr.json: cases must be a non-empty list"),
        (
            lambda c: c["cases"][1]["config"].update(k=0),
            "grr.json case 1: k must be",
        ),
    ],
)
def test_a_malformed_file_is_named_by_file_and_case(copy: Path, change: Any, message: str) -> None:
    _edit(copy, "grr", change)
    with pytest.raises(VectorError) as raised:
        check_vectors(copy)
    assert message in str(raised.value)


def test_a_file_that_is_not_json_is_named(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (copy / "ss.json").write_text("{not json")
    with pytest.raises(VectorError, match=r"^ss\.json: not a readable JSON file"):
        load_vectors(copy)
    assert main(["check", "--dir", str(copy)]) == 2
    assert "ss.json: not a readable JSON file" in capsys.readouterr().err


def test_a_wrong_expected_payload_is_reported_by_case(copy: Path) -> None:
    _edit(copy, "olh", lambda c: c["cases"][1].update(payload=[0, 0]))
    assert check_vectors(copy) == [
        f"olh.json case 1: expected [0, 0], got {load_vectors()['olh']['cases'][1]['payload']!r}"
    ]


def test_another_implementations_outputs_are_checked(
    tmp_path: Path, committed: dict[str, Any]
) -> None:
    outputs = {name: [case["payload"] for case in c["cases"]] for name, c in committed.items()}
    assert check_outputs(outputs) == []
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    assert main(["check", "--outputs", str(path)]) == 0

    outputs["sue"][0] = "AAAA"
    del outputs["pckv"]
    outputs["olh"] = outputs["olh"][:-1]
    outputs["nope"] = [1]
    problems = check_outputs(outputs)
    assert any(p.startswith("sue.json case 0: expected ") for p in problems)
    assert "pckv.json: no outputs" in problems
    olh = len(committed["olh"]["cases"])
    assert f"olh.json: {olh} cases but {olh - 1} outputs" in problems
    assert "outputs name 'nope', which has no vector file" in problems
    assert len(problems) == 4
    path.write_text(json.dumps(outputs))
    assert main(["check", "--outputs", str(path)]) == 1


def test_generate_writes_the_committed_files(tmp_path: Path) -> None:
    assert main(["generate", "--dir", str(tmp_path)]) == 0
    for path in VECTORS_DIR.glob("*.json"):
        assert (tmp_path / path.name).read_text() == path.read_text(), path.name


@pytest.mark.parametrize("variant", ["grr", "ue"])
def test_a_key_value_report_does_not_depend_on_the_mappings_order(variant: str) -> None:
    """PCKV samples from the record's pairs in ascending key order (the protocol's canonical
    order), whatever order the mapping holds them in: a JavaScript port cannot keep another."""
    mechanism = PCKV(epsilon=2.0, k=8, padding=2, variant=variant)
    ascending = {1: 0.25, 3: -1.0, 6: 0.5}
    orders = [ascending, {6: 0.5, 3: -1.0, 1: 0.25}, {3: -1.0, 6: 0.5, 1: 0.25}]
    pairs = Pairs(np.array([3]), np.array([6, 1, 3]), np.array([0.5, 0.25, -1.0]))
    for seed in range(64):
        key = seed.to_bytes(32, "big")
        expected = mechanism.to_wire(mechanism.perturb([ascending], rng=HmacWordSource(key)))
        for record in orders[1:]:
            got = mechanism.to_wire(mechanism.perturb([record], rng=HmacWordSource(key)))
            assert got == expected, (seed, list(record))
        got = mechanism.to_wire(mechanism.perturb(pairs, rng=HmacWordSource(key)))
        assert got == expected, seed
    # the committed vector of a two-pair record, reported from the mapping in descending order
    case = next(
        c
        for c in load_vectors()["pckv"]["cases"]
        if len(c["value"]) == 2 and c["config"].get("variant", "grr") == variant
    )
    descending = {int(k): v for k, v in sorted(case["value"].items(), key=lambda kv: -int(kv[0]))}
    words = HmacWordSource(bytes.fromhex(case["words_key"]))
    mechanism = PCKV.from_config(case["config"])
    assert mechanism.to_wire(mechanism.perturb([descending], rng=words))[0] == case["payload"]
