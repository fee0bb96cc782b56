"""Memoization of the string mechanisms: cms, hcms, pem, sfp under ``"longitudinal"``
(client_sdk/mechanisms/strings.py and each mechanism's memoized class).

What is checked, and how it can fail:
- configs round-trip; E < epsilon, allow_pseudonym and bad fields are refused by name;
- exact privacy: the composed one-report channel (enumerated over every hash tuple, or every
  one-byte value and check seed for PEM) has worst ratio e^epsilon exactly (tight, rtol 1e-9)
  and equals the closed-form epsilon_1; the permanent step alone is within e^E;
- the device path (HMAC under many secrets) draws the composed channel and the PRR the plain
  channel at E (chi-square, p >= 1e-6); PEM's bucket is kept with P' exactly (z = 5.5);
- one device reporting one string 2,000 times only ever re-randomizes one PRR: the public
  part is the PRR's and each randomized part equals the PRR's with probability p2 (z = 5.5);
- estimates from memoized reports are unbiased with the composed variance, and discovery
  finds the heavy strings;
- through the real client (HTTP, SQLite ledger): epsilon_inf is charged once per distinct
  string, memoized PEM needs the app's consent to its pseudonym.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import analysis
from client_sdk import TelemetryClient, mechanism_from_config
from client_sdk.budget import BudgetExceededError
from client_sdk.mechanisms.pem import MemoizedPEM
from client_sdk.mechanisms.sfp import MemoizedSFP
from client_sdk.mechanisms.sketch import HCMS, MemoizedCMS, MemoizedHCMS
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from client_sdk.secrets_store import DeviceKeys
from tests import stats
from tests.client_sdk.test_client import Collector

SCOPE = "campaign-config-id"


def memoized(config: dict[str, Any], permanent: float) -> Any:
    return mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": permanent}})


SMALL: dict[str, dict[str, Any]] = {
    "cms": {"mechanism": "cms", "epsilon": 1.0, "m": 4, "hashes": 2, "max_length": 8},
    "hcms": {"mechanism": "hcms", "epsilon": 0.7, "m": 4, "hashes": 2, "max_length": 8},
    "pem": {"mechanism": "pem", "epsilon": 1.5, "max_length": 1},
    "pem-alphabet": {
        "mechanism": "pem",
        "epsilon": 1.5,
        "max_length": 1,
        "alphabet": "abcdé",
        "start_bits": 1,
        "step_bits": 1,
    },
}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _output_index(m: Any, reports: np.ndarray) -> np.ndarray:
    """Each sketch report's column in ``channel_matrices``."""
    if isinstance(m, HCMS):
        return np.asarray(reports, dtype=np.int64)
    bits = np.unpackbits(reports["bits"], axis=1, count=m.m).astype(np.int64)
    weights = 1 << np.arange(m.m - 1, -1, -1)
    return reports["row"].astype(np.int64) * (1 << m.m) + bits @ weights


# ---- configs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "cls"),
    [
        (SMALL["cms"], MemoizedCMS),
        (SMALL["hcms"], MemoizedHCMS),
        ({"mechanism": "pem", "epsilon": 2.0, "max_length": 8}, MemoizedPEM),
        ({"mechanism": "pem", "epsilon": 2.0, "max_length": 8, "alphabet": LETTERS}, MemoizedPEM),
        ({"mechanism": "sfp", "epsilon": 2.0, "max_length": 4, "m": 64, "hashes": 4}, MemoizedSFP),
    ],
)
def test_configs_round_trip_and_bad_ones_are_named(config: dict[str, Any], cls: type[Any]) -> None:
    m: Any = memoized(config, 3.0)
    assert isinstance(m, cls) and m.memoized
    document = m.to_config()
    assert document["longitudinal"] == {"epsilon_permanent": 3.0}
    assert document["epsilon"] == config["epsilon"]
    assert "epsilon_permanent" not in document
    assert json.loads(json.dumps(document)) == document
    assert mechanism_from_config(document) == m
    assert m.epsilon_inf == pytest.approx(3.0)
    assert m.privacy_epsilon == config["epsilon"]
    assert m.epsilon_one <= config["epsilon"] * (1 + 1e-12)
    assert m.permanent.privacy_epsilon == pytest.approx(3.0)
    with pytest.raises(ValueError, match="epsilon_permanent must be >= epsilon"):
        memoized(config, config["epsilon"] / 2)
    with pytest.raises(ValueError, match="allow_pseudonym applies to 'auto'"):
        mechanism_from_config(
            {**config, "longitudinal": {"epsilon_permanent": 3.0, "allow_pseudonym": True}}
        )
    with pytest.raises(ValueError, match="longitudinal has unknown field"):
        mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": 3.0, "x": 1}})


# ---- exact privacy ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "permanent"),
    [(name, e) for name in SMALL for e in (1.0, 1.5, 2.0, 4.0) if e >= SMALL[name]["epsilon"]],
)
def test_the_two_stage_channel_is_exactly_private(name: str, permanent: float) -> None:
    m = memoized(SMALL[name], permanent)
    stats.assert_exact_privacy(m)  # one report: e^epsilon, not more, and reached
    assert m.epsilon_one == pytest.approx(m.implemented_epsilon(), rel=1e-9)
    worst_permanent = max(
        float(np.max(np.log(c.max(axis=0) / c.min(axis=0)))) for c in m.permanent_channel_matrices()
    )
    assert worst_permanent <= permanent * (1 + 1e-9)
    total = 1 / m.levels if name.startswith("pem") else 1.0  # pem: a matrix a level and seed
    for matrix in m.channel_matrices():
        np.testing.assert_allclose(matrix.sum(axis=1), total, rtol=1e-12)


def test_sfp_splits_both_epsilons_and_each_part_is_exact() -> None:
    m = memoized({"mechanism": "sfp", "epsilon": 2.0, "max_length": 4, "m": 4, "hashes": 2}, 4.0)
    word, fragment = m.word_sketch, m.fragment_oracle
    assert word.epsilon == pytest.approx(2.0 * (1 - m.fragment_share))
    assert word.epsilon_inf == pytest.approx(4.0 * (1 - m.fragment_share))
    assert fragment.epsilon == pytest.approx(2.0 * m.fragment_share)
    assert fragment.epsilon_inf == pytest.approx(4.0 * m.fragment_share)
    stats.assert_exact_privacy(word)  # the fragment's chain (memoized HR) is checked exactly
    assert fragment.chain == "mixture" and fragment.claim_is_tight  # in test_memoized_oracle.py
    assert m.epsilon_one <= 2.0 * (1 + 1e-12)
    assert m.epsilon_inf == pytest.approx(4.0)


# ---- the implemented channel -------------------------------------------------------------


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_device_reports_and_permanent_responses_follow_their_channels(name: str) -> None:
    m = memoized(SMALL[name], 2.5)
    (matrix,) = list(m.channel_matrices())
    (permanent,) = list(m.permanent_channel_matrices())
    value = "héllo"
    table = m.hash_table([value.encode()])[0]
    row = table[0] * m.m + table[1]
    rng = np.random.default_rng(12)
    devices = [DeviceKeys(rng.bytes(32), SCOPE) for _ in range(6000)]
    reports = np.concatenate([m.perturb([value], rng=rng, permanent=k) for k in devices])
    prrs = np.concatenate([m.permanent_responses([value], permanent=k) for k in devices])
    for got, channel, what in ((reports, matrix, "reports"), (prrs, permanent, "PRRs")):
        observed = np.bincount(_output_index(m, got), minlength=channel.shape[1])
        stats.assert_chi_square(observed, channel[row], what=f"memoized {name} {what}")
    simulated = m.perturb_independent_devices([value] * 20_000, rng=rng)
    observed = np.bincount(_output_index(m, simulated), minlength=matrix.shape[1])
    stats.assert_chi_square(observed, matrix[row], what=f"memoized {name} simulated")


@pytest.mark.parametrize("alphabet", [None, "日本"])
def test_pem_device_reports_keep_their_bucket_with_the_composed_probability(
    alphabet: str | None,
) -> None:
    config = {"mechanism": "pem", "epsilon": 2.0, "max_length": 4, "alphabet": alphabet}
    m = memoized({k: v for k, v in config.items() if v is not None}, 4.0)
    assert m.alphabet == alphabet and m.permanent.alphabet == alphabet
    rng = np.random.default_rng(3)
    devices = [DeviceKeys(rng.bytes(32), SCOPE) for _ in range(4000)]
    reports = np.concatenate([m.perturb(["日"], rng=rng, permanent=k) for k in devices])
    bits = m.value_bits(["日".encode()])
    hits = [
        int(m.bucket(r["seed"][None, :], m.chunks(bits, int(r["level"])))[0]) == int(r["y"])
        for r in reports
    ]
    p = m.keep_probability
    stats.assert_within_z(np.mean(hits), float(p), math.sqrt(float(p * (1 - p)) / len(hits)))
    levels = np.bincount(reports["level"], minlength=m.levels)
    stats.assert_chi_square(levels, np.full(m.levels, 1 / m.levels), what="pem device levels")


# ---- one device, one string, many reports -----------------------------------------------------


def test_one_device_only_ever_rerandomizes_one_permanent_response() -> None:
    rng = np.random.default_rng(8)
    keys = DeviceKeys(rng.bytes(32), SCOPE)
    n = 2000
    cms = memoized({"mechanism": "cms", "epsilon": 1.0, "m": 64, "hashes": 4}, 3.0)
    prr = cms.permanent_responses(["term"], permanent=keys)
    again = cms.permanent_responses(["other", "term"], permanent=keys)
    assert np.array_equal(again[1], prr[0])  # memoized: the same PRR every time
    assert not np.array_equal(again[0], prr[0])
    reports = cms.perturb(["term"] * n, rng=rng, permanent=keys)
    assert set(reports["row"].tolist()) == {int(prr["row"][0])}  # the device's row
    assert set(cms.perturb(["other"], rng=rng, permanent=keys)["row"].tolist()) == set(
        reports["row"].tolist()
    )  # a choice of the device, not of the string
    same = np.unpackbits(reports["bits"], axis=1) == np.unpackbits(prr["bits"], axis=1)
    p2 = float(cms.keep_probability)
    stats.assert_within_z(same.mean(), p2, math.sqrt(p2 * (1 - p2) / same.size))

    hcms = memoized({"mechanism": "hcms", "epsilon": 1.0, "m": 64, "hashes": 4}, 3.0)
    prr_bit = int(hcms.permanent_responses(["term"], permanent=keys)[0])
    reports = hcms.perturb(["term"] * n, rng=rng, permanent=keys)
    assert set((reports >> 1).tolist()) == {prr_bit >> 1}  # the device's (row, column)
    p2 = float(hcms.keep_probability)
    stats.assert_within_z(np.mean(reports == prr_bit), p2, math.sqrt(p2 * (1 - p2) / n))

    pem = memoized({"mechanism": "pem", "epsilon": 2.0, "max_length": 8}, 4.0)
    prr = pem.permanent_responses(["term"], permanent=keys)[0]
    reports = pem.perturb(["term"] * n, rng=rng, permanent=keys)
    assert (reports["seed"] == prr["seed"]).all() and (reports["level"] == prr["level"]).all()
    p2 = float(pem.again_keep_probability)
    stats.assert_within_z(np.mean(reports["y"] == prr["y"]), p2, math.sqrt(p2 * (1 - p2) / n))
    assert pem.deterministic_pseudonym and "pseudonym" in pem.linkability
    assert not cms.deterministic_pseudonym and not hcms.deterministic_pseudonym


def test_memo_keys_name_strings_without_revealing_them() -> None:
    m = memoized(SMALL["hcms"], 2.0)
    keys = m.memo_keys(["naïve", "naïve", "b"], permanent=DeviceKeys(bytes(range(32)), SCOPE))
    assert keys[0] == keys[1] != keys[2]
    assert all(len(key) == 64 and "na" not in key for key in keys)
    other = m.memo_keys(["naïve"], permanent=DeviceKeys(bytes(range(32)), "other"))
    assert other != keys[:1]
    with pytest.raises(ValueError, match="needs permanent=<keyed source>"):
        m.perturb(["a"], rng=np.random.default_rng(0))
    # Too long: the reserved symbol's PRR, memoized like a value's (one key for every such value).
    long_keys = m.memo_keys(["123456789", "abcdefghij"], permanent=DeviceKeys(bytes(32), SCOPE))
    assert long_keys[0] == long_keys[1]
    pem = memoized({"mechanism": "pem", "epsilon": 2.0, "max_length": 2, "alphabet": "éa"}, 3.0)
    keys = DeviceKeys(bytes(range(32)), SCOPE)
    assert len(pem.memo_keys(["éé", "a"], permanent=keys)) == 2  # 2 characters (4 bytes)
    # Outside the alphabet: the reserved symbol, the same for every such value.
    assert pem.memo_keys(["aï", "ï"], permanent=keys)[0] == pem.memo_keys(["ï"], permanent=keys)[0]
    assert len(pem.perturb(["a", "aï"], permanent=keys)) == 2


# ---- estimation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_memoized_sketch_estimates_are_unbiased_with_the_composed_variance(name: str) -> None:
    """Fresh devices (one report each): the candidates' estimates against the exact fixed-hash
    moments of the composed sketch, over 200 randomizations (z = 5.5 on the mean of each)."""
    m = memoized({"mechanism": name, "epsilon": 2.0, "m": 64, "hashes": 4}, 4.0)
    population = ["a"] * 600 + ["b"] * 300 + [f"t{i}" for i in range(300)]
    distinct, counts = np.unique(population, return_counts=True)
    targets = ["a", "b", "zz"]
    mean, variance = m.fixed_hash_moments(targets, list(distinct), counts)
    rng = np.random.default_rng(21)
    runs = np.array(
        [
            m.estimate_counts(
                m.aggregate(m.perturb_independent_devices(population, rng=rng)), targets
            )
            for _ in range(200)
        ]
    )
    stats.assert_within_z(runs.mean(axis=0), mean, np.sqrt(variance / 200))
    ratio = runs.var(axis=0, ddof=1) / variance
    assert np.all(np.abs(ratio - 1) < 5.5 * math.sqrt(2 / 199)), ratio


def test_discovery_from_memoized_reports_finds_the_heavy_strings() -> None:
    rng = np.random.default_rng(5)
    heavy = {"alpha": 9000, "béta": 6000, "": 4000}
    values = [v for v, c in heavy.items() for _ in range(c)] + [f"{i:x}" for i in range(21_000)]
    pem = memoized({"mechanism": "pem", "epsilon": 4.0, "max_length": 5}, 6.0)
    result = analysis.estimate(pem, pem.perturb_independent_devices(values, rng=rng))
    found = {item.value for item in result.items if item.significant}
    assert set(heavy) <= found and found <= set(values)
    for item in result.items:
        if item.value in heavy:
            assert abs(item.frequency - heavy[item.value] / len(values)) < 5 * item.std_error
    alphabet = "".join(sorted(set("".join(values))))  # hex digits and the heavy strings
    pem = memoized({"mechanism": "pem", "epsilon": 4.0, "max_length": 5, "alphabet": alphabet}, 6.0)
    result = analysis.estimate(pem, pem.perturb_independent_devices(values, rng=rng))
    found = {item.value for item in result.items if item.significant}
    assert set(heavy) <= found and found <= set(values)
    sfp = memoized({"mechanism": "sfp", "epsilon": 6.0, "max_length": 5}, 8.0)
    result = analysis.estimate(sfp, sfp.perturb_independent_devices(values, rng=rng))
    found = {item.value for item in result.items if item.significant}
    assert {"alpha", "béta"} <= found and found <= set(values)


# ---- through the client -----------------------------------------------------------------


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    server = Collector(tmp_path / "collector.db")
    budget = {"epsilon_per_report": 3.0, "reports_per_period": 1, "period_seconds": 86400}
    for name, config in (
        ("terms", {"mechanism": "hcms", "epsilon": 1.0, "m": 256, "hashes": 4, "max_length": 16}),
        ("search", {"mechanism": "pem", "epsilon": 2.0, "max_length": 8}),
    ):
        server.create(
            {
                "name": name,
                "mechanism": {**config, "longitudinal": {"epsilon_permanent": 3.0}},
                "policy": budget,  # one distinct string's lifetime cost (epsilon_inf = 3)
            }
        )
    yield server
    server.stop()


def test_the_client_charges_epsilon_inf_once_per_distinct_string(
    collector: Collector, tmp_path: Path
) -> None:
    with TelemetryClient(collector.url, state_dir=tmp_path / "device") as client:
        for _ in range(30):  # the same search term every day: charged once
            client.record("terms", "weather")
        with pytest.raises(BudgetExceededError):
            client.record("terms", "news")  # another distinct string would cost 3 more
        log = client.privacy_log("terms")
        assert [entry.epsilon_charged for entry in log] == [3.0] + [0.0] * 29
        assert all(entry.memoized_repeat for entry in log[1:])
        with pytest.raises(PolicyViolation, match="allow_pseudonymous_memoization"):
            client.record("search", "weather")  # memoized PEM resends its hash seed
        assert client.flush() == 30
    policy = PrivacyPolicy(allow_pseudonymous_memoization=True)
    with TelemetryClient(collector.url, state_dir=tmp_path / "app", policy=policy) as client:
        client.record_many("search", ["weather"] * 5)
        assert [e.epsilon_charged for e in client.privacy_log("search")] == [3.0] + [0.0] * 4
        assert client.flush() == 5
    stored = [json.loads(payload) for _, payload in collector.stored()]
    assert not any("weather" in json.dumps(p) for p in stored)
    seeds = {tuple(p["seed"]) for p in stored if isinstance(p, dict) and "seed" in p}
    assert len(seeds) == 1  # the PRR's seed, in all five reports


def test_a_pem_campaign_with_an_alphabet_from_json_through_the_client(
    collector: Collector, tmp_path: Path
) -> None:
    """The campaign JSON's alphabet reaches the devices (a value outside it is sent as the
    reserved symbol and counted in the client's status, never shown) and the collector stores
    reports that decode to the strings."""
    config = {"mechanism": "pem", "epsilon": 4.0, "max_length": 8, "alphabet": "0123456789abcdef"}
    created = collector.create({"name": "crash-ids", "mechanism": config})
    assert created["mechanism"]["alphabet"] == config["alphabet"]
    with TelemetryClient(collector.url, state_dir=tmp_path / "device") as client:
        client.record("crash-ids", "c0ffee-1")
        assert client.status()["reserved_values"] == {"crash-ids": 1}
        client.record_many("crash-ids", ["c0ffee", "deadbeef", ""])
        assert client.flush() == 4
    m = mechanism_from_config(config)
    payloads = [json.loads(payload) for _, payload in collector.stored()]
    reports, errors = m.parse_wire(payloads)
    assert not errors and reports.size == 4
    assert not any("c0ffee" in json.dumps(p) for p in payloads)
