"""Apple's Count Mean Sketch and Hadamard CMS over strings (docs/math/heavy-hitters.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import analysis
from analysis.estimation import check_estimable
from client_sdk.campaign import parse_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.sketch import CMS, HCMS, StringSketch
from client_sdk.mechanisms.strings import RESERVED, distinct_strings

KINDS = [CMS, HCMS]


def _output_index(mechanism: StringSketch, reports: np.ndarray) -> np.ndarray:
    """Each report's column in ``channel_matrices`` (the order the channel enumerates)."""
    if isinstance(mechanism, HCMS):
        return np.asarray(reports, dtype=np.int64)
    bits = np.unpackbits(reports["bits"], axis=1, count=mechanism.m).astype(np.int64)
    weights = 1 << np.arange(mechanism.m - 1, -1, -1)
    return reports["row"].astype(np.int64) * (1 << mechanism.m) + bits @ weights


@pytest.mark.parametrize("cls", KINDS)
def test_config_round_trips_and_bad_fields_are_named(cls: type[StringSketch]) -> None:
    m = cls(epsilon=2.0, m=64, hashes=4, max_length=8, seed=7)
    assert mechanism_from_config(m.to_config()) == m
    assert m.to_config()["mechanism"] == cls.name
    for field, value in [("m", 48), ("m", 1), ("hashes", 0), ("hashes", 17), ("max_length", 0)]:
        config = {**m.to_config(), field: value}
        with pytest.raises(ValueError, match=field):
            mechanism_from_config(config)
    with pytest.raises(ValueError, match="epsilon"):
        mechanism_from_config({**m.to_config(), "epsilon": 0})


@pytest.mark.parametrize("cls", KINDS)
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_exact_privacy_over_every_hash_tuple(cls: type[StringSketch], epsilon: float) -> None:
    m = cls(epsilon=epsilon, m=4, hashes=2)
    (matrix,) = m.channel_matrices()
    assert matrix.shape[0] == 16  # every (h_0, h_1): so every string
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
    implemented = m.implemented_epsilon()
    assert implemented <= epsilon + 1e-12
    assert implemented > epsilon - 1e-9  # the claim is tight
    assert m.privacy_event().source is m  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", KINDS)
def test_the_device_side_follows_the_declared_channel(cls: type[StringSketch]) -> None:
    m = cls(epsilon=1.0, m=4, hashes=2, seed=5)
    (matrix,) = m.channel_matrices()
    value = "héllo"
    table = m.hash_table([value.encode()])[0]
    row = matrix[table[0] * m.m + table[1]]
    n = 60_000
    reports = m.perturb([value] * n, rng=np.random.default_rng(11))
    observed = np.bincount(_output_index(m, reports), minlength=matrix.shape[1])
    assert observed[row == 0].sum() == 0
    _, p = stats.chisquare(observed[row > 0], n * row[row > 0])
    assert p > 1e-4


@pytest.mark.parametrize("cls", KINDS)
def test_estimates_are_unbiased_with_their_exact_fixed_hash_variance(
    cls: type[StringSketch],
) -> None:
    m = cls(epsilon=2.0, m=16, hashes=4, seed=3)
    population = [f"w{i}" for i in range(30)] + ["", "ü" * 4]
    counts = np.arange(1, 33) * 8
    values = list(np.repeat(np.array(population, dtype=object), counts))
    targets = [*population[-6:], "absent"]
    mean, variance = m.fixed_hash_moments(targets, population, counts)
    rng = np.random.default_rng(2024)
    runs = 300
    estimates = np.array(
        [m.estimate_counts(m.aggregate(m.perturb(values, rng=rng)), targets) for _ in range(runs)]
    )
    z_mean = (estimates.mean(axis=0) - mean) / np.sqrt(variance / runs)
    assert np.all(np.abs(z_mean) < 5), z_mean
    ratio = estimates.var(axis=0, ddof=1) / variance
    # The sample variance's relative sd is about sqrt(2/(runs-1)) (0.08): 5 sd either side.
    assert np.all(np.abs(ratio - 1) < 5 * math.sqrt(2 / (runs - 1))), ratio


@pytest.mark.parametrize("cls", KINDS)
def test_statistics_merge_and_wire_round_trips(cls: type[StringSketch]) -> None:
    m = cls(epsilon=3.0, m=32, hashes=3)
    rng = np.random.default_rng(1)
    values = ["a", "b", "", "日本語"] * 50
    reports = m.perturb(values, rng=rng)
    assert len(reports) == len(values)
    assert m.aggregate(reports[:77]) + m.aggregate(reports[77:]) == m.aggregate(reports)
    assert m.empty_statistic() + m.aggregate(reports) == m.aggregate(reports)
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    assert len(m.perturb(values)) == len(values)  # the OS CSPRNG by default
    again = m.perturb(values, rng=np.random.default_rng(1))
    assert np.array_equal(again, reports)


@pytest.mark.parametrize("cls", KINDS)
def test_string_lengths_at_and_over_the_limit(cls: type[StringSketch]) -> None:
    m = cls(epsilon=1.0, m=16, hashes=2, max_length=6)
    assert len(m.perturb(["", "abcdef", "éèà"], rng=np.random.default_rng(0))) == 3
    secret = "naïve!"  # 7 bytes in UTF-8, 6 characters: the reserved symbol, like a lone surrogate
    assert distinct_strings(["ok", secret, "a\ud800"], 6, "cms")[0] == [b"ok", RESERVED]
    assert len(m.perturb(["ok", secret, "a\ud800"], rng=np.random.default_rng(0))) == 3
    with pytest.raises(ValueError, match=r"values\[2\] must be a string"):
        m.perturb(["a", "b", 3], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"values\[0\] must be a string"):
        m.perturb([["unhashable"]], rng=np.random.default_rng(0))
    assert len(m.perturb(["abcdef", "日本"], rng=np.random.default_rng(0))) == 2  # 6 bytes each


def test_malformed_payloads_are_rejected_by_index() -> None:
    cms = CMS(epsilon=1.0, m=16, hashes=2)
    good = cms.to_wire(cms.perturb(["x"], rng=np.random.default_rng(0)))[0]
    payloads = [
        good,
        {"row": 2, "bits": good["bits"]},
        {"row": True, "bits": good["bits"]},
        {"row": 0},
        {"row": 0, "bits": good["bits"], "extra": 1},
        {"row": 0, "bits": good["bits"] + "A"},
        {"row": 0, "bits": "!!!"},
        "nope",
        good,
    ]
    reports, errors = cms.parse_wire(payloads)
    assert len(reports) == 2
    assert [e.index for e in errors] == [1, 2, 3, 4, 5, 6, 7]
    hcms = HCMS(epsilon=1.0, m=16, hashes=2)
    reports, errors = hcms.parse_wire([0, 63, 64, -1, True, 1.0, "3", None])
    assert list(reports) == [0, 63]
    assert [e.index for e in errors] == [2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("cls", KINDS)
def test_analysis_estimates_candidates_with_significance(cls: type[StringSketch]) -> None:
    m = cls(epsilon=4.0, m=1024, hashes=8)
    rng = np.random.default_rng(7)
    heavy = {"apple": 3000, "banana": 2000, "cherry": 1000}
    tail = [f"t{i}" for i in range(4000)]
    values = [v for v, c in heavy.items() for _ in range(c)] + tail
    reports = m.perturb(values, rng=rng)
    candidates = ["cherry", "banana", "apple", "durian", "elder", "fig"]
    with pytest.raises(ValueError, match="candidate"):
        check_estimable(m)
    result = analysis.estimate(m, reports, candidates=candidates)
    assert result.n == len(values)
    assert [item.value for item in result.items[:3]] == ["apple", "banana", "cherry"]
    assert [item.significant for item in result.items] == [True] * 3 + [False] * 3
    for item in result.items[:3]:
        truth = heavy[item.value] / len(values)
        assert abs(item.frequency - truth) < 5 * item.std_error
    document = result.to_dict()
    assert set(document["items"][0]) >= {"value", "frequency", "std_error", "significant"}
    assert "apple" in result.format_table()


def test_campaigns_carry_candidates_or_nothing_and_may_be_memoized() -> None:
    config = {"mechanism": "cms", "epsilon": 2.0, "m": 64, "hashes": 4}
    assert parse_campaign({"name": "terms", "mechanism": config}).domain is None
    spec = parse_campaign({"name": "terms", "mechanism": config, "domain": ["a", "b"]})
    assert spec.domain == ("a", "b")
    memo = mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": 4.0}})
    assert memo.memoized and memo.epsilon_inf == 4.0  # type: ignore[attr-defined]


def test_values_out_of_range_follow_the_reserved_symbols_channel_row() -> None:
    """Issue 21, item 14: an hcms value longer than max_length (or not valid Unicode) is sent
    as the reserved symbol; its reports follow the channel's row for that symbol's hash tuple
    (``channel_matrices``), by a chi-square at a fixed seed."""
    m = HCMS(epsilon=1.0, m=4, hashes=2, max_length=3)
    n = 40_000
    reports = m.perturb(["abcd", "a\ud800"] * (n // 2), rng=np.random.default_rng(14))
    (matrix,) = list(m.channel_matrices())
    h = m.hash_table([RESERVED])[0]
    row = matrix[int(h[0]) * m.m + int(h[1])]
    observed = np.bincount(np.asarray(reports, dtype=np.int64), minlength=m.outputs)
    assert stats.chisquare(observed, n * row).pvalue > 1e-4
    # The positive control: a row of another hash tuple is rejected on the same counts.
    other = matrix[(int(h[0]) * m.m + int(h[1]) + 5) % len(matrix)]
    assert stats.chisquare(observed, n * other).pvalue < 1e-12
