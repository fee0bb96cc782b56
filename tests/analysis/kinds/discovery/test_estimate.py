"""Discovery of frequent strings without a domain: PEM (docs/math/heavy-hitters.md)."""

from __future__ import annotations

import numpy as np
import pytest

import analysis
from analysis.estimation import DocumentedEstimate
from analysis.kinds._common.items import ItemsEstimate
from analysis.kinds.discovery.estimate import discover_pem, discover_pem_by_support
from client_sdk.mechanisms.pem import PEM


def _zipf_population(rng: np.random.Generator, n: int) -> tuple[list[str], dict[str, int]]:
    vocabulary = ["", "日", "é", *(f"{i:x}z" for i in range(2000))]
    weights = np.arange(1, len(vocabulary) + 1, dtype=np.float64) ** -1.1
    drawn = rng.choice(len(vocabulary), size=n, p=weights / weights.sum())
    values = [vocabulary[i] for i in drawn]
    index, counts = np.unique(drawn, return_counts=True)
    return values, {vocabulary[i]: int(c) for i, c in zip(index, counts, strict=True)}


HEX_ALPHABET = "0123456789abcdefz日é"
"""Every character of ``_zipf_population``'s strings (19: 5 bits a character)."""


@pytest.mark.parametrize("alphabet", [None, HEX_ALPHABET])
def test_pem_finds_the_heavy_strings_of_a_zipf_population_and_nothing_absent(
    alphabet: str | None,
) -> None:
    # one fixed seed per case: 20261201 with the alphabet gives one false discovery (p = 2.6e-6
    # among 256 strings tested, 1 run in 1,500); at n = 40,000, 3 false in 60 seeds: alpha
    rng = np.random.default_rng(20261201 if alphabet is None else 20261202)
    n = 80_000
    values, truth = _zipf_population(rng, n)
    m = PEM(epsilon=5.0, max_length=4, step_bits=4, alphabet=alphabet)
    reports = m.perturb(values, rng=rng)
    chunks = [reports[:30_000], reports[30_000:]]  # streamed chunks read the same
    result = analysis.estimate(m, chunks)
    assert isinstance(result, ItemsEstimate) and isinstance(result, DocumentedEstimate)
    assert result.n == n
    significant = [item for item in result.items if item.significant]
    heaviest = sorted(truth, key=lambda v: -truth[v])[:5]
    assert set(heaviest) <= {item.value for item in significant}  # "", "日", "é" among them
    assert all(item.value in truth for item in significant)  # no false discovery (alpha 0.05)
    for item in significant:  # the last level is scored on its own devices: unbiased
        assert abs(item.frequency - truth[item.value] / n) < 5 * item.std_error
    frequencies = [item.frequency for item in result.items]
    assert frequencies == sorted(frequencies, reverse=True)
    assert [level["reports"] for level in result.levels] == np.bincount(
        reports["level"], minlength=m.levels
    ).tolist()
    assert set(result.unconfirmed) == {item.value for item in result.items if not item.significant}
    document = result.to_dict()
    assert set(document["items"][0]) >= {"value", "frequency", "std_error", "significant"}
    assert len(document["levels"]) == m.levels
    assert "level 0:" in result.format_table()


def test_discovery_on_pure_noise_reports_nothing_significant() -> None:
    rng = np.random.default_rng(7)
    m = PEM(epsilon=1.0, max_length=2, step_bits=6)
    values = [f"{i:02x}"[-2:] for i in rng.integers(0, 256, size=20_000)]  # 256 rare strings
    result = discover_pem(m, m.perturb(values, rng=rng), top=16)
    assert not any(item.significant for item in result.items)
    assert len(result.unconfirmed) == len(result.items)


def test_discovery_needs_reports_not_a_merged_statistic() -> None:
    m = PEM(epsilon=1.0, max_length=2)
    reports = m.perturb(["a"] * 10, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="reads the reports themselves"):
        analysis.estimate(m, m.aggregate(reports))


@pytest.mark.parametrize("alphabet", [None, HEX_ALPHABET])
def test_discovery_from_a_support_callable_over_shards_equals_the_in_memory_one(
    alphabet: str | None,
) -> None:
    """The decoder only needs reports per level and support counts: a callable summing
    brute-force counts (h_seed(prefix) == y, one report at a time) over three shards gives
    the same estimate as the in-memory reports."""
    rng = np.random.default_rng(11)
    values, _ = _zipf_population(rng, 12_000)
    m = PEM(epsilon=4.0, max_length=4, step_bits=5, alphabet=alphabet)
    reports = m.perturb(values, rng=rng)
    shards = np.array_split(reports, 3)
    calls: list[tuple[int, tuple[int, ...]]] = []

    def support(level: int, prefixes: np.ndarray) -> np.ndarray:
        calls.append((level, prefixes.shape))
        assert prefixes.dtype == np.int64 and prefixes.shape[1] == m.chunk_count(level)
        total = np.zeros(prefixes.shape[0], dtype=np.int64)
        for shard in shards:
            mine = shard[shard["level"] == level]
            hashed = m.bucket(mine["seed"][:, None, :], prefixes[None, :, :])
            total += (hashed == mine["y"][:, None]).sum(axis=0)
        return total

    per_level = np.bincount(reports["level"], minlength=m.levels).astype(np.int64)
    by_support = discover_pem_by_support(m, per_level, support, top=20)
    assert by_support.to_dict() == discover_pem(m, reports, top=20).to_dict()
    assert [level for level, _ in calls] == list(range(m.levels))
    assert any(item.significant for item in by_support.items)
    with pytest.raises(ValueError, match="one count per level"):
        discover_pem_by_support(m, per_level[:-1], support)


def test_a_string_finished_early_is_tested_on_every_later_level_exactly() -> None:
    """The empty string is complete at level 0: it is set aside there, and its count is its
    support among the reports of levels 1 to the last (brute force), pooled."""
    rng = np.random.default_rng(3)
    values, truth = _zipf_population(rng, 30_000)
    m = PEM(epsilon=4.0, max_length=4, step_bits=4)
    reports = m.perturb(values, rng=rng)
    result = discover_pem(m, reports, top=16)
    assert result.levels[0]["finished"] >= 1
    item = next(item for item in result.items if item.value == "")
    later = reports[reports["level"] > 0]
    support = 0
    for level in range(1, m.levels):
        mine = later[later["level"] == level]
        zero = np.zeros((1, m.chunk_count(level)), dtype=np.int64)  # "" is all zero bits
        support += int((m.bucket(mine["seed"], zero) == mine["y"]).sum())
    expected = (support / later.size - m.q_star) / (m.p_star - m.q_star)
    assert item.frequency == pytest.approx(expected, rel=1e-12)
    assert item.significant and abs(item.frequency - truth[""] / 30_000) < 5 * item.std_error
    last_only = np.sqrt(m.frequency_variance(result.levels[-1]["reports"], 30_000, item.frequency))
    assert item.std_error < last_only / 3  # 15 levels' reports, not the last one's


def test_an_alphabet_hint_scores_fewer_prefixes_and_finds_the_strings_written_in_it() -> None:
    rng = np.random.default_rng(9)
    binary = [format(i, "b").replace("0", "a").replace("1", "b") for i in range(2, 16)]
    words = ["ab", "ba", "abba", "b", "Z9", *(w for w in binary if w not in {"ab", "ba", "abba"})]
    weights = np.arange(1, len(words) + 1, dtype=np.float64) ** -1.1
    values = [words[i] for i in rng.choice(len(words), size=40_000, p=weights / weights.sum())]
    m = PEM(epsilon=4.0, max_length=4, step_bits=4)
    reports = m.perturb(values, rng=rng)
    plain = discover_pem(m, reports, top=16)
    hinted = discover_pem(m, reports, top=16, alphabet="ab")
    found = {item.value for item in hinted.significant}
    assert {"ab", "ba", "abba", "b"} <= found and "Z9" not in found
    assert "Z9" in {item.value for item in plain.significant}
    assert all(set(item.value) <= {"a", "b"} for item in hinted.items)
    assert sum(level["candidates"] for level in hinted.levels) < sum(
        level["candidates"] for level in plain.levels
    )


@pytest.mark.parametrize("alphabet", ["", 5, ["a", "b"]])
def test_an_alphabet_hint_that_is_not_a_non_empty_string_is_refused(alphabet: object) -> None:
    m = PEM(epsilon=4.0, max_length=4, step_bits=4)
    reports = m.perturb(["ab"] * 200, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"alphabet must be a non-empty string .* got"):
        discover_pem(m, reports, alphabet=alphabet)  # type: ignore[arg-type]


def test_a_device_alphabet_extends_by_its_characters_only_and_refuses_the_hint() -> None:
    """With the alphabet on the devices, every scored prefix is one of strings written in it
    (fewer candidates than the byte campaign's, no hint needed) and the heavy strings,
    multi-byte characters and the empty string included, are found with unbiased estimates."""
    rng = np.random.default_rng(4)
    values, truth = _zipf_population(rng, 60_000)
    m = PEM(epsilon=4.0, max_length=4, alphabet=HEX_ALPHABET)
    reports = m.perturb(values, rng=rng)
    result = discover_pem(m, reports, top=32)
    significant = {item.value for item in result.significant}
    assert set(sorted(truth, key=lambda v: -truth[v])[:4]) <= significant
    assert significant <= set(truth)
    assert all(set(item.value) <= set(HEX_ALPHABET) for item in result.items)
    for item in result.significant:
        assert abs(item.frequency - truth[item.value] / 60_000) < 5 * item.std_error
    plain = PEM(epsilon=4.0, max_length=4)
    byte_result = discover_pem(plain, plain.perturb(values, rng=rng), top=32)
    assert sum(level["candidates"] for level in result.levels) < sum(
        level["candidates"] for level in byte_result.levels
    )
    with pytest.raises(ValueError, match="alphabet: the campaign's pem has a device alphabet"):
        discover_pem(m, reports, alphabet="abc")


def test_discover_dispatches_by_the_mechanisms_discovery_through_decoders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``discover`` asks ``mechanism.discovery`` and calls that entry of ``DECODERS`` (no type
    switch); a mechanism without one is refused by name."""
    from analysis.kinds.discovery import estimate as discovery
    from client_sdk.mechanisms import mechanism_from_config

    calls: list[tuple[str, float]] = []

    def fake(mechanism: object, reports: object, *, confidence: float) -> ItemsEstimate:
        calls.append((getattr(mechanism, "name", ""), confidence))
        raise LookupError("decoded")

    for config in (
        {"mechanism": "pem", "epsilon": 4.0, "max_length": 4},
        {"mechanism": "sfp", "epsilon": 4.0, "max_length": 4},
    ):
        mechanism = mechanism_from_config(config)
        assert mechanism.discovery in discovery.DECODERS
        monkeypatch.setitem(discovery.DECODERS, str(mechanism.discovery), fake)
        with pytest.raises(LookupError, match="decoded"):
            discovery.discover(mechanism, [], confidence=0.9)
    assert calls == [("pem", 0.9), ("sfp", 0.9)]
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 4})
    with pytest.raises(TypeError, match="no discovery decoder for mechanism 'grr'"):
        discovery.discover(grr, [])
