"""Every envelope of a campaign has one size (issue 21, item 12): plaintexts are padded to the
campaign's largest payload (``Mechanism.largest_wire_payload``), whatever the value, the
device's level or slot, or the noise; over every registered mechanism and its variants."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from nacl.public import PrivateKey

from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms._wire import wire_length
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.mechanisms.registry import MECHANISMS
from client_sdk.sealing import (
    SEAL_OVERHEAD,
    envelope_size,
    key_id_of,
    open_plaintext,
    plaintext_size,
    seal_payloads,
)
from client_sdk.secrets_store import DeviceKeys

Values = Callable[[np.random.Generator, int], Any]


def _ints(k: int) -> Values:
    return lambda rng, n: rng.integers(0, k, n)


def _floats(low: float, high: float) -> Values:
    return lambda rng, n: rng.uniform(low, high, n)


def _tuples(*ks: int) -> Values:
    return lambda rng, n: np.stack([rng.integers(0, k, n) for k in ks], axis=1)


def _strings(max_length: int, alphabet: str = string.ascii_lowercase + "é") -> Values:
    """Strings of every length up to ``max_length`` characters (bytes, for 'é' twice)."""

    def draw(rng: np.random.Generator, n: int) -> list[str]:
        out = []
        for length in rng.integers(0, max_length + 1, n):
            text = "".join(rng.choice(list(alphabet), int(length)))
            while len(text.encode()) > max_length:
                text = text[:-1]
            out.append(text)
        return out

    return draw


def _pairs(k: int) -> Values:
    def draw(rng: np.random.Generator, n: int) -> list[dict[int, float]]:
        return [
            {int(key): float(rng.uniform(-1, 1)) for key in rng.choice(k, rng.integers(0, 4))}
            for _ in range(n)
        ]

    return draw


ATTRIBUTES = [{"name": "a", "k": 3}, {"name": "b", "k": 12}, {"name": "c", "k": 40}]
LONG = {"longitudinal": {"epsilon_permanent": 4.0}}

# (config, values): every registered mechanism, and the variants that change the wire.
CASES: list[tuple[dict[str, Any], Values]] = [
    ({"mechanism": "grr", "epsilon": 1.0, "k": 12}, _ints(12)),
    ({"mechanism": "grr", "epsilon": 4.0, "k": 1000, **LONG}, _ints(1000)),
    ({"mechanism": "sue", "epsilon": 1.0, "k": 13}, _ints(13)),
    ({"mechanism": "oue", "epsilon": 1.0, "k": 100}, _ints(100)),
    ({"mechanism": "ss", "epsilon": 1.0, "k": 30}, _ints(30)),
    ({"mechanism": "blh", "epsilon": 1.0, "k": 50}, _ints(50)),
    ({"mechanism": "olh", "epsilon": 4.0, "k": 500}, _ints(500)),
    ({"mechanism": "hr", "epsilon": 2.0, "k": 200}, _ints(200)),
    (
        {"mechanism": "rappor", "k": 32, "h": 2, "m": 16, "f": 0.5, "p": 0.25, "q": 0.75},
        lambda rng, n: [f"value-{i}" for i in rng.integers(0, 50, n)],
    ),
    ({"mechanism": "laplace", "epsilon": 1.0, "lower": -5, "upper": 5}, _floats(-5, 5)),
    (
        {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "lower": -2.0, "upper": 3.0},
        _floats(-2, 3),
    ),
    (
        {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "dim": 3, "clip_norm": 1.0},
        lambda rng, n: rng.uniform(-0.5, 0.5, (n, 3)),
    ),
    ({"mechanism": "duchi", "epsilon": 1.0, "lower": 0, "upper": 10}, _floats(0, 10)),
    (
        {"mechanism": "duchi", "epsilon": 1.0, "lower": 0, "upper": 1, "dim": 12},
        lambda rng, n: rng.uniform(0, 1, (n, 12)),
    ),
    ({"mechanism": "piecewise", "epsilon": 2.0, "lower": -1, "upper": 1}, _floats(-1, 1)),
    (
        {"mechanism": "piecewise", "epsilon": 2.0, "lower": 0, "upper": 1, "dim": 20},
        lambda rng, n: rng.uniform(0, 1, (n, 20)),
    ),
    ({"mechanism": "hybrid", "epsilon": 3.0, "lower": 0, "upper": 100}, _floats(0, 100)),
    ({"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 1}, _floats(0, 1)),
    ({"mechanism": "dbitflip", "epsilon": 1.0, "k": 300, "d": 4}, _ints(300)),
    ({"mechanism": "cms", "epsilon": 2.0, "m": 1024, "hashes": 16, "max_length": 8}, _strings(8)),
    ({"mechanism": "hcms", "epsilon": 2.0, "m": 1024, "hashes": 16, "max_length": 8}, _strings(8)),
    (
        {"mechanism": "cms", "epsilon": 2.0, "m": 256, "hashes": 12, "max_length": 8, **LONG},
        _strings(8),
    ),
    ({"mechanism": "pem", "epsilon": 2.0, "max_length": 16}, _strings(16)),
    (
        {"mechanism": "pem", "epsilon": 4.0, "max_length": 6, "alphabet": "abcdefghij"},
        _strings(6, "abcdefghij"),
    ),
    ({"mechanism": "pem", "epsilon": 2.0, "max_length": 16, **LONG}, _strings(16)),
    ({"mechanism": "sfp", "epsilon": 4.0, "max_length": 8}, _strings(8)),
    ({"mechanism": "sfp", "epsilon": 4.0, "max_length": 8, **LONG}, _strings(8)),
    (
        {"mechanism": "square_wave", "epsilon": 1.0, "lower": 0, "upper": 1, "bins": 1024},
        _floats(0, 1),
    ),
    ({"mechanism": "hierarchical", "epsilon": 1.0, "k": 1024}, _ints(1024)),
    ({"mechanism": "hierarchical", "epsilon": 3.0, "k": 64, "branching": 4}, _ints(64)),
    ({"mechanism": "hierarchical", "epsilon": 1.0, "k": 1024, "variant": "haar"}, _ints(1024)),
    *[
        (
            {"mechanism": "multi", "epsilon": 2.0, "protocol": p, "attributes": ATTRIBUTES},
            _tuples(3, 12, 40),
        )
        for p in ("spl", "smp", "rsfd")
    ],
    (
        {
            "mechanism": "multi",
            "epsilon": 2.0,
            "protocol": "smp",
            "attributes": ATTRIBUTES,
            "marginals": [["a", "b"], ["b", "c"]],
        },
        _tuples(3, 12, 40),
    ),
    (
        {
            "mechanism": "fourier",
            "epsilon": 1.0,
            "attributes": [{"name": n} for n in "abcdefghijkl"],
            "order": 2,
        },
        _tuples(*[2] * 12),
    ),
    ({"mechanism": "pckv", "epsilon": 2.0, "k": 20, "padding": 3}, _pairs(20)),
    ({"mechanism": "pckv", "epsilon": 2.0, "k": 20, "padding": 3, "variant": "ue"}, _pairs(20)),
]


def _label(case: tuple[dict[str, Any], Values]) -> str:
    config = case[0]
    extra = [str(config.get(f)) for f in ("protocol", "variant", "alphabet", "dim") if f in config]
    return "-".join([config["mechanism"], *extra] + (["long"] if "longitudinal" in config else []))


def test_every_registered_mechanism_is_covered() -> None:
    assert {config["mechanism"] for config, _ in CASES} == set(MECHANISMS)


@pytest.mark.parametrize("case", CASES, ids=_label)
def test_one_envelope_size_per_campaign(case: tuple[dict[str, Any], Values]) -> None:
    """400 reports, each from its own simulated device (its own level, row, offset or
    attribute), over values of every length and range, sealed: one size, the documented one,
    and the payload inside is the report's."""
    config, values = case
    mechanism: Any = mechanism_from_config(config)
    rng = np.random.default_rng(21)
    n = 400
    drawn = values(rng, n)
    if is_memoized(mechanism) or getattr(mechanism, "uses_device_choices", False):
        payloads = []
        for i in range(n):
            keys = DeviceKeys(rng.bytes(32), "scope")
            one = drawn[i : i + 1]
            payloads += mechanism.to_wire(mechanism.perturb(one, rng=rng, permanent=keys))
    else:
        payloads = mechanism.to_wire(mechanism.perturb(drawn, rng=rng))
    lengths = {wire_length(p) for p in payloads}
    bound = wire_length(mechanism.largest_wire_payload())
    assert max(lengths) <= bound
    secret = PrivateKey.generate()
    public = bytes(secret.public_key)
    document: dict[str, Any] = {
        "name": "c-" + _label(case)[:40],
        "config_id": "ab" * 16,
        "mechanism": config,
    }
    envelopes = seal_payloads(
        payloads,
        public_key=_b64(public),
        key_id=key_id_of(public),
        campaign=document["name"],
        config_id=document["config_id"],
        mechanism=mechanism,
        rng=rng,
    )
    sizes = {len(e["sealed"]) for e in envelopes}
    assert len(sizes) == 1, (sorted(lengths), sizes)
    size = plaintext_size(document["name"], document["config_id"], mechanism)
    assert sizes == {-(-4 * (size + SEAL_OVERHEAD) // 3)}
    compact = {len(_compact(e)) for e in envelopes}
    assert compact == {envelope_size(document)}
    from nacl.public import SealedBox

    box = SealedBox(secret)
    for envelope, payload in list(zip(envelopes, payloads, strict=True))[:20]:
        opened = open_plaintext(box.decrypt(_unb64(envelope["sealed"])))
        assert opened.payload == payload and opened.campaign == document["name"]


def test_the_bound_is_the_largest_payload_for_pem() -> None:
    """The issue's case: max_length 16 used to seal levels 0-12 to 64 bytes, 13-31 to 128; the
    largest payload is a last-level report with every seed at its widest."""
    pem: Any = mechanism_from_config({"mechanism": "pem", "epsilon": 2.0, "max_length": 16})
    largest = pem.largest_wire_payload()
    assert largest["level"] == pem.levels - 1
    assert pem.parse_wire([largest])[1] == []  # a payload an honest device can send


def test_a_payload_longer_than_the_bound_is_never_sealed() -> None:
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 10})
    public = bytes(PrivateKey.generate().public_key)
    with pytest.raises(ValueError, match="largest payload"):
        seal_payloads(
            [10],
            public_key=_b64(public),
            key_id=key_id_of(public),
            campaign="c",
            config_id="ab" * 16,
            mechanism=grr,
        )


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _compact(envelope: dict[str, str]) -> str:
    import json

    return json.dumps(envelope, separators=(",", ":"))


@pytest.mark.parametrize(
    "plaintext",
    [
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":[1,2]}   ',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":[1, 2]}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload": 1 }',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"A" * 32 + b'","payload":1}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 31 + b'","payload":1}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":1,"x":2}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":1}}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":NaN}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":' + b"[" * 5000,
        b'{"config_id":"ab","campaign":"c","nonce":"' + b"0" * 32 + b'","payload":1}',
        b'{"campaign":"d","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":1}',
        b'{"campaign":"c","config_id":"ab","nonce":"' + b"0" * 32 + b'","payload":"\xff"}',
        b"[1]",
        b"",
    ],
)
def test_the_campaigns_reader_agrees_with_the_general_one(plaintext: bytes) -> None:
    """The collector's fast reader for one campaign gives exactly what ``open_plaintext``
    gives (the fields, or the same error), on plaintexts written otherwise or hostile."""
    from client_sdk.sealing import plaintext_reader

    def outcome(read: Callable[[bytes], Any]) -> Any:
        try:
            report = read(plaintext)
        except (ValueError, RecursionError) as error:
            return type(error), str(error)
        return report[:4]  # the text is a candidate only: collector.ingest checks it

    assert outcome(plaintext_reader("c", "ab")) == outcome(open_plaintext)
