"""The conformance vectors (conformance/vectors, docs/protocol.md): the committed files are what
this SDK produces, every registered mechanism has one, a change of a mechanism's word consumption
is caught, malformed files are named by file and case, and another implementation's outputs are
checked payload by payload."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import shutil
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from client_sdk.campaign import PROTOCOL_VERSION
from client_sdk.conformance import VECTORS_DIR, VectorError, check_outputs, check_vectors
from client_sdk.conformance.__main__ import main
from client_sdk.conformance.sealed import SEALED_FILE, check_sealed
from client_sdk.conformance.vectors import build_vectors, load_vectors
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.pckv import PCKV, Pairs
from client_sdk.mechanisms.registry import MECHANISMS
from client_sdk.randomness import HmacWordSource, RandomSource, bernoulli, uniform_below
from client_sdk.sealing import seal_payloads


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


# ---- a port written from docs/protocol.md alone (plain integers, hashlib): the page says enough


class _Words:
    """docs/protocol.md, "Random words": HMAC-SHA256 blocks, four little-endian words each."""

    def __init__(self, key: bytes) -> None:
        self.key, self.block = key, 0
        self.buffer: list[int] = []

    def take(self, n: int) -> list[int]:
        while len(self.buffer) < n:
            digest = hmac.new(self.key, self.block.to_bytes(8, "big"), hashlib.sha256).digest()
            self.block += 1
            self.buffer += [int.from_bytes(digest[i : i + 8], "little") for i in (0, 8, 16, 24)]
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def below(self, high: int) -> int:
        """uniform_below(high, 1): reject words at or above 2**64 - 2**64 mod high."""
        limit = 2**64 - 2**64 % high
        while True:
            (word,) = self.take(1)
            if word < limit:
                return word % high

    def lazy(self, threshold: int, n: int) -> list[bool]:
        """bernoulli_lazy(T, n): one byte a draw, a tie on the top byte takes a word."""
        data = b"".join(w.to_bytes(8, "little") for w in self.take(-(-n // 8)))[:n]
        high, low = threshold >> 56, threshold & (2**56 - 1)
        out = [b < high for b in data]
        if low:
            for j, b in enumerate(data):
                if b == high:
                    out[j] = (self.take(1)[0] >> 8) < low
        return out


def _bits(bits: list[bool]) -> str:
    packed = bytes(
        sum(1 << (7 - i) for i, bit in enumerate(bits[start : start + 8]) if bit)
        for start in range(0, len(bits), 8)
    )
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def _port(config: dict[str, Any], value: Any, words: _Words) -> Any:
    mechanism: Any = mechanism_from_config(config)
    name = config["mechanism"]
    if name == "grr":
        keep = words.take(1)[0] < mechanism._keep_threshold
        other = words.below(config["k"] - 1)
        return value if keep else other + (other >= value)
    if name in ("sue", "oue"):
        p, q = mechanism._thresholds
        bits = words.lazy(q, config["k"])
        bits[value] = words.lazy(p, 1)[0]
        return _bits(bits)
    if name == "olh":
        prime, g = 2**31 - 1, config["g"]
        seed = words.below((prime - 1) * prime)
        a, b = seed // prime + 1, seed % prime
        hashed = g * ((a * value + b) % prime) // prime
        keep = words.take(1)[0] < mechanism._keep_threshold
        if g == 2:
            return {"seed": f"{seed:016x}", "y": hashed if keep else 1 - hashed}
        other = words.below(g - 1)
        y = hashed if keep else other + (other >= hashed)
        return {"seed": f"{seed:016x}", "y": y}
    if name == "hr":
        blocks = config["blocks"]
        size = 1 << (-(-config["k"] // blocks)).bit_length()
        block, row = value // (size - 1), value % (size - 1) + 1
        keep = words.take(1)[0] < mechanism._keep_threshold
        other = 1
        if blocks > 1:
            other = words.below(2 * blocks - 1)
            other += other >= 2 * block
        half = 2 * block if keep else other
        offset = words.take(1)[0] & (size - 1)
        if (bin(row & offset).count("1") % 2 == 1) != bool(half & 1):
            offset ^= row & -row
        return (half >> 1) * size + offset
    assert name == "pckv" and config.get("variant") in (None, "grr")
    pairs = sorted((int(key), number) for key, number in value.items())
    ell, k = config["padding"], config["k"]
    slot = words.below(max(len(pairs), ell))
    dummy = words.below(ell) + k
    key, number = pairs[slot] if slot < len(pairs) else (dummy, 0.0)
    scaled = min(math.floor((1 + number) / 2 * 2.0**64), math.nextafter(2.0**64, 0))
    plus = words.take(1)[0] < int(scaled) or number >= 1.0
    t_keep, t_sign, _ = mechanism._thresholds
    keep_sign = words.take(1)[0] < t_sign
    keep = words.take(1)[0] < t_keep
    other = words.below(k + ell - 1)
    other += other >= key
    random_sign = words.below(2)
    sign = (plus if keep_sign else not plus) if keep else bool(random_sign)
    return 2 * (key if keep else other) + int(sign)


def test_a_port_written_from_the_protocol_page_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """Plain-integer ports of grr, sue, oue, olh, hr and PCKV-GRR from docs/protocol.md's words
    give every committed payload of those mechanisms (memoized variants excepted); checked
    through ``check_outputs`` as a port's outputs are."""
    outputs: dict[str, list[Any]] = {}
    for name in ("grr", "sue", "oue", "olh", "hr", "pckv"):
        outputs[name] = []
        for case in committed[name]["cases"]:
            plain = "longitudinal" not in case["config"] and case["config"].get("variant") != "ue"
            words = _Words(bytes.fromhex(case["words_key"]))
            payload = _port(case["config"], case["value"], words) if plain else case["payload"]
            outputs[name].append(payload)
    problems = check_outputs(outputs)
    assert all(p.endswith("no outputs") for p in problems), problems


def _memo_words(case: dict[str, Any], label: str, index: int) -> _Words:
    """docs/protocol.md, "Memoization": the keyed source of (label, index) under the case's
    device secret and the scope config_id({"campaign", "mechanism"})."""
    canonical = json.dumps(
        {"campaign": case["campaign"], "mechanism": case["config"]},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    scope = hashlib.sha256(canonical.encode()).hexdigest()[:32]
    parts = (b"ldp-telemetry/memo/v1", scope.encode(), label.encode())
    message = b"".join(len(p).to_bytes(4, "big") + p for p in parts) + index.to_bytes(8, "big")
    secret = bytes.fromhex(case["device_secret"])
    return _Words(hmac.new(secret, message, hashlib.sha256).digest())


def test_a_port_of_the_memoized_mechanisms_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """dBitFlip (buckets and bits from the keyed source) and GRR under ``longitudinal`` (the
    permanent response from the keyed source, the instantaneous one from the words), ported
    from docs/protocol.md, give the committed payloads."""
    checked = 0
    for case in committed["dbitflip"]["cases"]:
        config = case["config"]
        if not config["memoize"]:
            continue
        k, d, v = config["k"], config["d"], case["value"]
        words = _memo_words(case, "dbitflip/buckets", 0)
        chosen: list[int] = []
        for j in range(k - d, k):  # Floyd's algorithm
            r = words.below(j + 1)
            chosen.append(j if r in chosen else r)
        buckets = sorted(chosen)
        pattern = v if v in buckets else k
        high, low = cast(Any, mechanism_from_config(config))._thresholds
        bit_words = _memo_words(case, "dbitflip/bits", pattern).take(d)
        bits = [w < (high if b == v else low) for w, b in zip(bit_words, buckets, strict=True)]
        assert {"buckets": buckets, "bits": _bits(bits)} == case["payload"]
        checked += 1
    for case in committed["grr"]["cases"]:
        config = case["config"]
        if "longitudinal" not in config:
            continue
        memoized: Any = mechanism_from_config(config)
        inner_words = _memo_words(case, "value", case["value"])
        keep = inner_words.take(1)[0] < memoized.inner._keep_threshold
        other = inner_words.below(config["k"] - 1)
        permanent = case["value"] if keep else other + (other >= case["value"])
        chain = memoized._chain
        words = _Words(bytes.fromhex(case["words_key"]))
        keep = words.take(1)[0] < chain.threshold
        other = words.below(config["k"] - 1)
        assert (permanent if keep else other + (other >= permanent)) == case["payload"]
        checked += 1
    assert checked == 6


def test_the_sealed_envelope_vectors_are_what_the_sdk_seals(tmp_path: Path) -> None:
    """conformance/sealed.json: each envelope (a fixed ephemeral key) opens to its plaintext and
    is rebuilt byte for byte; the SDK's own ``seal_payloads``, with the case's nonce words, seals
    that very plaintext; a changed envelope is named by its case."""
    from nacl.bindings import crypto_box_seal_open, crypto_scalarmult_base

    assert check_sealed() == []
    content = json.loads(SEALED_FILE.read_text())
    secret = bytes.fromhex(content["recipient_secret_key"])
    public = crypto_scalarmult_base(secret)
    for case in content["cases"]:
        (envelope,) = seal_payloads(
            [case["payload"]],
            public_key=content["public_key"],
            key_id=content["key_id"],
            campaign=case["campaign"],
            config_id=case["config_id"],
            mechanism=mechanism_from_config(case["config"]),
            rng=HmacWordSource(bytes.fromhex(case["nonce_words_key"])),
        )
        assert envelope["key_id"] == case["envelope"]["key_id"]
        assert len(envelope["sealed"]) == len(case["envelope"]["sealed"])
        sealed = base64.urlsafe_b64decode(envelope["sealed"] + "==")
        assert crypto_box_seal_open(sealed, public, secret).decode() == case["plaintext"]
    content["cases"][1]["envelope"]["sealed"] = content["cases"][0]["envelope"]["sealed"]
    changed = tmp_path / "sealed.json"
    changed.write_text(json.dumps(content))
    assert check_sealed(changed) == [
        "sealed.json case 1: the envelope does not open to plaintext",
        "sealed.json case 1: differs from what this SDK seals",
    ]


def test_a_corrupted_sealed_envelope_is_named_by_its_case(tmp_path: Path) -> None:
    content = json.loads(SEALED_FILE.read_text())
    sealed = content["cases"][2]["envelope"]["sealed"]
    content["cases"][2]["envelope"]["sealed"] = sealed[:-4] + (
        "AAAA" if sealed[-4:] != "AAAA" else "BBBB"
    )
    changed = tmp_path / "sealed.json"
    changed.write_text(json.dumps(content))
    assert check_sealed(changed) == [
        "sealed.json case 2: the envelope does not open to plaintext",
        "sealed.json case 2: differs from what this SDK seals",
    ]


def _below_16(words: _Words, high: int) -> int:
    """uniform_below_32 of one draw with high <= 2**12: a 16-bit lane, multiply-shift."""
    while True:
        product = (words.take(1)[0] & 0xFFFF) * high
        if product & 0xFFFF >= (1 << 16) % high:
            return product >> 16


def test_a_port_of_the_count_mean_sketches_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """CMS and HCMS ported from docs/protocol.md (the keyed BLAKE2b hash, the reserved symbol
    0xFF, the row, column and flip words) give the committed payloads."""
    checked = 0
    for name in ("cms", "hcms"):
        for case in committed[name]["cases"]:
            config = case["config"]
            if "longitudinal" in config:
                continue
            m, hashes = config["m"], config["hashes"]
            raw = case["value"].encode()
            raw = raw if len(raw) <= config["max_length"] else b"\xff"
            key = b"ldp-telemetry/sketch/v1" + config["seed"].to_bytes(8, "big")
            digest = hashlib.blake2b(raw, digest_size=4 * hashes, key=key).digest()
            words = _Words(bytes.fromhex(case["words_key"]))
            row = _below_16(words, hashes)
            bucket = int.from_bytes(digest[4 * row : 4 * row + 4], "little") & (m - 1)
            threshold = cast(Any, mechanism_from_config(config))._flip_threshold
            if name == "cms":
                flips = words.lazy(threshold, m)
                flips[bucket] = not flips[bucket]
                assert {"row": row, "bits": _bits(flips)} == case["payload"]
            else:
                column = _below_16(words, m)
                plus = bin(bucket & column).count("1") % 2 == 0
                flip = words.lazy(threshold, 1)[0]
                assert ((row * m + column) * 2 + (plus != flip)) == case["payload"]
            checked += 1
    assert checked == 9


def _round(words: _Words, u: float, top: int) -> int:
    """randomized_round of one value (docs/protocol.md, "Random words")."""
    u = min(max(u, 0.0), float(top))
    base = min(math.floor(u), top - 1)
    phi = u - base
    threshold = int(min(math.floor(phi * 2.0**64), math.nextafter(2.0**64, 0.0)))
    return base + 1 if words.take(1)[0] < threshold or phi >= 1.0 else base


def _piecewise(words: _Words, kernel: Any, t: float) -> int:
    a = _round(words, (t + 1.0) / 2.0 * kernel.steps, kernel.steps)
    inside = words.take(1)[0] < kernel.inside_threshold
    in_window = a + words.below(kernel.window)
    other = words.below(kernel.steps)
    return in_window if inside else (other if other < a else other + kernel.window)


def _duchi(words: _Words, kernel: Any, t: float) -> int:
    side = _round(words, (t + 1.0) / 2.0, 1)
    threshold = kernel.high_threshold if side == 1 else kernel.low_threshold
    return int(words.take(1)[0] < threshold)


def test_a_port_of_the_scalar_numeric_kernels_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """Duchi, Piecewise, Hybrid and Square Wave on scalars, ported from docs/protocol.md
    (clipping, randomized rounding, the kernels' words), give the committed payloads."""
    checked = 0
    for name in ("duchi", "piecewise", "hybrid", "square_wave"):
        for case in committed[name]["cases"]:
            config = case["config"]
            if config.get("dim") is not None:
                continue
            mechanism: Any = mechanism_from_config(config)
            lower, upper = float(config["lower"]), float(config["upper"])
            half = (upper - lower) / 2.0
            mid = (lower + upper) / 2.0 if name == "square_wave" else lower + half
            t = min(max((float(case["value"]) - mid) / half, -1.0), 1.0)
            words = _Words(bytes.fromhex(case["words_key"]))
            kernel = mechanism.kernel
            if name == "duchi":
                payload = _duchi(words, kernel, t)
            elif name == "hybrid":
                if words.take(1)[0] < kernel.alpha_threshold:
                    payload = _piecewise(words, kernel.piecewise, t)
                else:
                    payload = kernel.piecewise.output_size + _duchi(words, kernel.duchi, t)
            else:
                payload = _piecewise(words, kernel, t)
            assert payload == case["payload"], (name, case["value"])
            checked += 1
    assert checked == 20
