"""PEM, the prefix-extending method over local hashing (docs/math/heavy-hitters.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from client_sdk.campaign import parse_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.pem import PEM
from client_sdk.mechanisms.strings import RESERVED, distinct_strings
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


LETTERS = "abcdefghijklmnopqrstuvwxyz"


def test_an_alphabet_makes_each_character_its_index_in_w_bits() -> None:
    m = PEM(epsilon=4.0, max_length=8, alphabet=LETTERS)
    assert (m.symbol_bits, m.symbols, m.length_bits, m.total_bits) == (5, 26, 4, 44)
    assert (m.start_bits, m.step_bits, m.levels) == (9, 5, 8)  # one character a level
    document = m.to_config()
    assert document["alphabet"] == LETTERS and mechanism_from_config(document) == m
    assert "alphabet" not in PEM(epsilon=4.0, max_length=8).to_config()  # absent when None
    small = PEM(epsilon=1.0, max_length=3, alphabet="xyé")  # 2 bits a character
    bits = small.value_bits(["éx".encode()])[0]
    assert bits.tolist() == [1, 0, 1, 0, 0, 0, 0, 0]  # length 2; codes 2, 0; padding 0
    prefix = int("".join(map(str, bits)), 2)
    assert small.decode_prefix(prefix) == "éx"
    assert small.decode_prefix(prefix | 0b11 << 2) is None  # code 3 is outside the alphabet
    assert not small.plausible(prefix | 0b11 << 2, small.levels - 1)
    assert small.plausible(prefix, small.levels - 1) and small.complete(prefix, small.levels - 1)
    one = PEM(epsilon=1.0, max_length=4, alphabet="z")  # 1 bit a character, only code 0
    assert one.symbol_bits == 1 and one.total_bits == 3 + 4
    assert one.decode_prefix(0b011_0000) == "zzz" and one.decode_prefix(0b011_1000) is None


@pytest.mark.parametrize(
    ("alphabet", "match"),
    [
        ("", "alphabet must be a non-empty string"),
        (5, "alphabet must be a non-empty string"),
        (["a", "b"], "alphabet must be a non-empty string"),
        ("abca", "alphabet must not repeat a character; got 'abca' \\('a'\\)"),
        (
            "".join(map(chr, range(300, 557))),
            "alphabet must have at most 256 characters .*; got 257",
        ),
        ("a\ud800", "alphabet must be valid Unicode"),
    ],
)
def test_a_bad_alphabet_is_refused_by_name(alphabet: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(
            {"mechanism": "pem", "epsilon": 2.0, "max_length": 4, "alphabet": alphabet}
        )


def test_a_value_outside_the_alphabet_or_too_many_characters_is_the_reserved_symbol() -> None:
    m = PEM(epsilon=2.0, max_length=2, alphabet="abé")
    reports = m.perturb(["éé", "", "ba"], rng=np.random.default_rng(0))  # 4 bytes, 2 characters
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    # Out of the alphabet, too long, not valid Unicode: one reserved symbol, sent like a value
    # (its own bit string, which no value has), never refused: nothing about the value shows.
    distinct, inverse = distinct_strings(["a", "aQ", "ééé", "a\ud800", "b"], 2, "pem", m.alphabet)
    assert distinct == [b"a", RESERVED, b"b"] and inverse.tolist() == [0, 1, 1, 1, 2]
    reserved = m.value_bits([RESERVED])[0]
    assert reserved[: m.length_bits].sum() == 0 and reserved[m.length_bits + m.symbol_bits - 1]
    assert reserved.sum() == 1
    assert not any(np.array_equal(reserved, row) for row in m.value_bits([b"", b"a", b"ab"]))
    assert len(m.perturb(["a", "aQ"], rng=np.random.default_rng(0))) == 2
    with pytest.raises(ValueError, match="outside the alphabet"):
        m.value_bits([b"z"])  # the bit strings of unchecked values: refused


@pytest.mark.parametrize(
    ("epsilon", "alphabet"), [(0.5, None), (2.0, None), (2.0, "abcé"), (1.0, "0123456789")]
)
def test_exact_privacy_over_every_one_symbol_value_and_check_seed(
    epsilon: float, alphabet: str | None
) -> None:
    m = PEM(
        epsilon=epsilon,
        max_length=1,
        start_bits=1,
        step_bits=3 if alphabet is None else 1,
        alphabet=alphabet,
    )
    matrices = list(m.channel_matrices())
    # "", every symbol, and the reserved symbol (with bytes, it is the byte 0xff: no UTF-8)
    assert matrices[0].shape[0] == 1 + (256 if alphabet is None else len(alphabet) + 1)
    assert len(matrices) == 4 * m.levels  # four check seeds a level
    implemented = m.implemented_epsilon()
    assert implemented <= epsilon + 1e-12
    assert implemented > epsilon - 1e-9


@pytest.mark.parametrize(("alphabet", "value"), [(None, "hé!"), (LETTERS + "!é", "hé!")])
def test_levels_and_buckets_follow_the_declared_channel(alphabet: str | None, value: str) -> None:
    m = PEM(epsilon=1.5, max_length=4, alphabet=alphabet)
    assert m.g is not None
    n = 40_000
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


@pytest.mark.parametrize("alphabet", [None, LETTERS])
def test_values_out_of_range_follow_the_reserved_symbols_channel_row(alphabet: str | None) -> None:
    """Issue 21, item 14: a value the campaign cannot carry is never refused (a missing report
    would tell a collector expecting one that it was out of range); it is sent as the reserved
    symbol, whose reports follow the channel's row for that symbol: levels uniform, and y the
    reserved bit string's bucket with probability p*, each other bucket (1 - p*)/(g - 1)."""
    m = PEM(epsilon=1.5, max_length=4, alphabet=alphabet)
    assert m.g is not None
    n = 40_000
    # Too long, outside the alphabet (for bytes: not valid Unicode), in equal shares.
    odd = ["abcde", "x\ud800" if alphabet is None else "aB"]
    values = [odd[i % 2] for i in range(n)]
    reports = m.perturb(values, rng=np.random.default_rng(14))
    assert stats.chisquare(np.bincount(reports["level"], minlength=m.levels)).pvalue > 1e-4
    bits = m.value_bits([RESERVED])
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
    # The positive control: an in-range value's reports are far from that row.
    inside = m.perturb(["abcd"] * 4000, rng=np.random.default_rng(15))
    hits = 0
    for level in range(m.levels):
        rows = np.flatnonzero(inside["level"] == level)
        seeds = inside["seed"][rows]
        count = m.chunk_count(level)
        seeds = np.concatenate([seeds[:, :count], seeds[:, -1:]], axis=1)
        hashed = m.bucket(seeds, np.repeat(m.chunks(bits, level), rows.size, axis=0))
        hits += int(np.sum(inside["y"][rows] == hashed))
    # Levels past the length field tell them apart: far fewer hits than p* of 4000.
    assert hits < 0.6 * p * 4000


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


@pytest.mark.parametrize("alphabet", [None, "abc"])
def test_a_non_holder_supports_a_prefix_with_the_exact_q_star(alphabet: str | None) -> None:
    m = PEM(epsilon=1.0, max_length=2, step_bits=6 if alphabet is None else 2, alphabet=alphabet)
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
    assert len(m.perturb(["a", "日本"], rng=rng)) == 2  # 6 bytes: the reserved symbol
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
    with pytest.raises(ValueError, match="within"):
        PEM(epsilon=2.0, max_length=4, alphabet="ab").within(0, 0, letters)


@pytest.mark.parametrize(
    ("alphabet", "step", "start"),
    [(None, 4, None), (None, 3, 5), ("abcde", 2, None), ("abcde", 4, 3), (LETTERS, 7, None)],
)
def test_extensions_are_exactly_the_plausible_children(
    alphabet: str | None, step: int, start: int | None
) -> None:
    """Every parent the decoder can keep, against ``plausible`` on each of its 2^step children."""
    m = PEM(epsilon=2.0, max_length=3, step_bits=step, start_bits=start, alphabet=alphabet)
    rng = np.random.default_rng(1)
    for level in range(1, m.levels):
        width, bits = m.level_bits(level - 1), m.level_bits(level) - m.level_bits(level - 1)
        parents = [
            v for v in rng.integers(0, 1 << width, 400).tolist() if m.plausible(v, level - 1)
        ]
        for parent in parents[:40]:
            length = parent >> (width - m.length_bits)
            partial = (width - m.length_bits) % m.symbol_bits
            got = m.extensions(width, bits, length, parent & ((1 << partial) - 1))
            want = [s for s in range(1 << bits) if m.plausible((parent << bits) | s, level)]
            assert got == want, (level, parent)
