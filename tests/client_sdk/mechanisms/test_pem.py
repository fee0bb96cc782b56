"""PEM, the prefix-extending method over local hashing (docs/math/heavy-hitters.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from client_sdk.campaign import parse_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.pem import PEM
from client_sdk.randomness import uniform_below
from client_sdk.secrets_store import DeviceKeys


def test_config_resolves_its_shape_round_trips_and_names_bad_fields() -> None:
    m = PEM(epsilon=4.0, max_length=8)
    assert (m.length_bits, m.total_bits, m.start_bits, m.levels) == (4, 68, 8, 16)
    assert m.g == round(math.exp(4.0) + 1)
    assert mechanism_from_config(m.to_config()) == m
    for field, value in [("max_length", 0), ("max_length", 33), ("step_bits", 0), ("g", 1)]:
        with pytest.raises(ValueError, match=field):
            mechanism_from_config({**m.to_config(), field: value})
    with pytest.raises(ValueError, match="start_bits"):
        PEM(epsilon=1.0, max_length=8, start_bits=3)  # shorter than the length field


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_exact_privacy_over_every_one_byte_value_and_check_seed(epsilon: float) -> None:
    m = PEM(epsilon=epsilon, max_length=1, step_bits=3)
    implemented = m.implemented_epsilon()
    assert implemented <= epsilon + 1e-12
    assert implemented > epsilon - 1e-9


def test_levels_and_buckets_follow_the_declared_channel() -> None:
    m = PEM(epsilon=1.5, max_length=4)
    assert m.g is not None
    n = 40_000
    value = "hé!"
    reports = m.perturb([value] * n, rng=np.random.default_rng(3))
    levels = np.bincount(reports["level"], minlength=m.levels)
    assert stats.chisquare(levels).pvalue > 1e-4  # uniform, whatever the value
    bits = m.value_bits([value.encode()])
    offset = np.zeros(n, dtype=np.int64)
    for level in range(m.levels):
        rows = np.flatnonzero(reports["level"] == level)
        seeds = reports["seed"][rows]
        count = m.chunk_count(level)
        seeds = np.concatenate([seeds[:, :count], seeds[:, -1:]], axis=1)
        hashed = m.bucket(seeds, np.repeat(m.chunks(bits, level), rows.size, axis=0))
        offset[rows] = (reports["y"][rows] - hashed) % m.g
    observed = np.bincount(offset, minlength=m.g)
    p = m.p_star
    expected = n * np.r_[p, np.full(m.g - 1, (1 - p) / (m.g - 1))]
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_a_heavier_last_level_draws_levels_by_their_weights_exactly() -> None:
    m = PEM(epsilon=2.0, max_length=1, step_bits=3, final_weight=5)
    assert mechanism_from_config(m.to_config()) == m
    weights = np.r_[np.ones(m.levels - 1), 5.0]
    np.testing.assert_allclose(m.level_probabilities, weights / weights.sum())
    (matrix, *_) = list(m.channel_matrices())  # the level's probability is in the channel
    np.testing.assert_allclose(matrix.sum(axis=1), m.level_probabilities[0], rtol=1e-12)
    implemented = m.implemented_epsilon()
    assert 2.0 - 1e-9 < implemented <= 2.0 + 1e-12
    levels = m.perturb(["a"] * 30_000, rng=np.random.default_rng(4))["level"]
    observed = np.bincount(levels, minlength=m.levels)
    assert stats.chisquare(observed, 30_000 * m.level_probabilities).pvalue > 1e-6
    devices = [m.level_of(DeviceKeys(bytes([i, 7]) * 16, "c")) for i in range(256)]
    last = float(m.level_probabilities[-1])  # 5 / (levels + 4) of the devices
    assert abs(np.mean(np.asarray(devices) == m.levels - 1) - last) < 5.5 * math.sqrt(
        last * (1 - last) / 256
    )
    uniform = PEM(epsilon=2.0, max_length=1, step_bits=3)
    same = uniform.perturb(["a"] * 50, rng=np.random.default_rng(9))["level"]
    old = np.random.default_rng(9)  # weight 1 draws exactly the uniform levels, as before
    np.testing.assert_array_equal(same, uniform_below(old, uniform.levels, 50))
    with pytest.raises(ValueError, match="final_weight"):
        PEM(epsilon=1.0, max_length=1, final_weight=0)


def test_a_non_holder_supports_a_prefix_with_the_exact_q_star() -> None:
    m = PEM(epsilon=1.0, max_length=2, step_bits=6)
    n = 200_000
    reports = m.perturb(["ab"] * n, rng=np.random.default_rng(5))
    last = m.levels - 1
    other = int("".join(map(str, m.value_bits([b"ac"])[0])), 2)
    support = m.support_counts(reports, last, [other])[0]
    n_level = int((reports["level"] == last).sum())
    q = m.q_star
    z = (support - n_level * q) / math.sqrt(n_level * q * (1 - q))
    assert abs(z) < 5
    own = int("".join(map(str, m.value_bits([b"ab"])[0])), 2)
    p = m.p_star
    hits = m.support_counts(reports, last, [own])[0]
    assert abs(hits - n_level * p) < 5 * math.sqrt(n_level * p * (1 - p))


def test_the_level_comes_from_the_keyed_source_not_the_value() -> None:
    m = PEM(epsilon=2.0, max_length=8)
    keys = DeviceKeys(b"s" * 32, "campaign-a")
    reports = m.perturb(["a", "bb", "", "ccc"], permanent=keys)
    assert len(set(reports["level"].tolist())) == 1
    assert reports["level"][0] == m.level_of(keys)
    levels = {m.level_of(DeviceKeys(bytes([i]) * 32, "campaign-a")) for i in range(40)}
    assert len(levels) > 5


def test_strings_at_and_over_the_limit_and_malformed_payloads() -> None:
    m = PEM(epsilon=2.0, max_length=4)
    rng = np.random.default_rng(0)
    reports = m.perturb(["", "abcd", "é", "日"], rng=rng)
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    with pytest.raises(ValueError, match=r"values\[1\] is 6 bytes.*max_length=4") as caught:
        m.perturb(["a", "日本"], rng=rng)
    assert "日本" not in str(caught.value)
    good = m.to_wire(reports[:1])[0]
    bad_seed = {**good, "seed": good["seed"][:-1]}
    payloads = [
        good,
        {**good, "level": m.levels},
        {**good, "y": m.g},
        bad_seed,
        {**good, "seed": [-1] * len(good["seed"])},
        {"level": 0, "y": 0},
        [1, 2],
        {**good, "extra": 0},
    ]
    parsed, errors = m.parse_wire(payloads)
    assert len(parsed) == 1
    assert [e.index for e in errors] == list(range(1, 8))


def test_campaigns_have_no_domain_and_may_be_memoized() -> None:
    config = {"mechanism": "pem", "epsilon": 2.0, "max_length": 8}
    assert parse_campaign({"name": "search", "mechanism": config}).domain is None
    with pytest.raises(ValueError, match="domain must be absent for the discovery mechanism"):
        parse_campaign({"name": "search", "mechanism": config, "domain": ["a"]})
    memo = mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": 4.0}})
    assert memo.memoized and memo.epsilon_inf == 4.0  # type: ignore[attr-defined]


def test_complete_and_within_read_the_length_and_the_covered_bytes() -> None:
    m = PEM(epsilon=2.0, max_length=4, step_bits=4)  # length in 3 bits
    bits = m.value_bits([b"ab"])[0]
    prefix = {level: int("".join(map(str, bits[: m.level_bits(level)])), 2) for level in range(4)}
    # "ab" is 3 + 16 bits: complete once a level covers 19 bits (level 3: 7 + 12 = 19)
    assert [m.complete(prefix[level], level) for level in range(4)] == [False] * 3 + [True]
    letters = frozenset(b"ab")
    assert all(m.within(prefix[level], level, letters) for level in range(4))
    assert m.within(prefix[1], 1, frozenset(b"a"))  # 11 bits: "a" and the first nibble of "b"
    assert not m.within(prefix[3], 3, frozenset(b"a"))
    assert not m.within(prefix[0], 0, frozenset(b"\x80"))  # "a" starts with the nibble 6
    empty = int("".join(map(str, m.value_bits([b""])[0][: m.level_bits(0)])), 2)
    assert m.complete(empty, 0) and m.within(empty, 0, frozenset())
