"""SFP, Apple's sequence fragment puzzle (docs/math/heavy-hitters.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import analysis
from client_sdk.campaign import parse_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.sfp import SFP


def test_config_round_trips_and_the_budget_split_is_exact() -> None:
    m = SFP(epsilon=3.0, max_length=6, m=64, hashes=4, fragment_share=0.6)
    fragment: Any = m.fragment_oracle
    assert mechanism_from_config(m.to_config()) == m
    assert m.to_config()["fragment_blocks"] == fragment.blocks  # resolved, then kept
    assert m.fragment_oracle.epsilon == pytest.approx(1.8)
    assert m.word_sketch.epsilon == pytest.approx(1.2)
    assert m.privacy_epsilon == pytest.approx(3.0)
    assert SFP(epsilon=4.0, max_length=8).fragment_share == 0.75  # resolved_share
    with pytest.raises(ValueError, match="fragment_share must be a number in"):
        SFP(epsilon=1.0, max_length=4, fragment_share=1.0)
    with pytest.raises(ValueError, match="fragment_blocks must be one of"):
        SFP(epsilon=1.0, max_length=4, fragment_blocks=4)
    with pytest.raises(ValueError, match="max_length"):
        SFP(epsilon=1.0, max_length=0)


def test_an_omitted_share_is_resolved_from_the_exact_variances_and_then_kept() -> None:
    """resolved_share: the word sketch's null variance per report falls with its epsilon to
    about 1 (one-bit HCMS), the fragments' towards 0, so at a larger epsilon the word gets a
    larger share (the earlier 0.75 is kept unless another needs 10% less); a config naming its
    share (as every stored one does) keeps it."""
    shares = [SFP(epsilon=e, max_length=8).fragment_share for e in (2.0, 4.0, 8.0)]
    assert shares == [0.75, 0.75, 0.55]
    m = SFP(epsilon=8.0, max_length=8)
    assert m.to_config()["fragment_share"] == 0.55
    assert mechanism_from_config(m.to_config()) == m
    old: Any = mechanism_from_config(
        {"mechanism": "sfp", "epsilon": 8.0, "max_length": 8, "fragment_share": 0.75}
    )
    assert old.fragment_oracle.epsilon == pytest.approx(6.0)


def test_each_part_of_a_report_is_exactly_its_share_of_the_budget() -> None:
    m = SFP(epsilon=2.0, max_length=4, m=4, hashes=2, fragment_share=0.75)
    word = m.word_sketch
    assert 0.5 - 1e-9 < word.implemented_epsilon() <= 0.5 + 1e-12
    # The fragment oracle is Hadamard response over the 65,536 fragments; its channel is
    # checked exactly at small k in test_hadamard.py, and its claim here is its epsilon.
    assert m.fragment_oracle.privacy_epsilon == pytest.approx(1.5)
    fragments = m.fragments([b"ab"], np.array([0, 1, 2]), np.array([0, 0, 0]))
    tag = int(m.tags([b"ab"])[0])
    assert fragments.tolist() == [256 * tag + ord("a"), 256 * tag + ord("b"), 256 * tag]


def test_wire_statistics_and_malformed_payloads() -> None:
    m = SFP(epsilon=2.0, max_length=4, m=64, hashes=2)
    rng = np.random.default_rng(0)
    reports = m.perturb(["", "abcd", "é", "日"] * 20, rng=rng)
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    assert m.aggregate(reports[:30]) + m.aggregate(reports[30:]) == m.aggregate(reports)
    word, fragments = m.split(m.aggregate(reports))
    assert word.n == len(reports) == sum(f.n for f in fragments)
    good = m.to_wire(reports[:1])[0]
    payloads = [
        good,
        {**good, "offset": 4},
        {**good, "word": m.word_sketch.outputs},
        {**good, "fragment": -1},
        {**good, "word": True},
        {"offset": 0, "word": 0},
        "x",
    ]
    parsed, errors = m.parse_wire(payloads)
    assert len(parsed) == 1 and [e.index for e in errors] == [1, 2, 3, 4, 5, 6]
    assert len(m.perturb(["日本"], rng=rng)) == 1  # 6 bytes: sent as the reserved symbol


def test_sfp_discovers_the_heavy_strings_and_nothing_absent() -> None:
    rng = np.random.default_rng(99)
    heavy = {"": 9000, "日": 7000, "ab": 6000, "wxyz": 5000}
    tail = [f"{i:04x}" for i in rng.integers(0, 1 << 16, size=13_000)]
    values = [v for v, c in heavy.items() for _ in range(c)] + tail
    m = SFP(epsilon=8.0, max_length=4)  # the default word sketch: 16 x 65536
    result = analysis.estimate(m, m.perturb(values, rng=rng))
    significant = {item.value for item in result.items if item.significant}
    assert set(heavy) <= significant
    assert significant <= set(values)
    for item in result.items:
        if item.value in heavy:
            assert abs(item.frequency - heavy[item.value] / len(values)) < 5 * item.std_error
    assert len(result.levels) == m.offsets + 1


def test_campaigns_have_no_domain() -> None:
    config = {"mechanism": "sfp", "epsilon": 4.0, "max_length": 8}
    assert parse_campaign({"name": "emoji", "mechanism": config}).domain is None
    with pytest.raises(ValueError, match="domain must be absent"):
        parse_campaign({"name": "emoji", "mechanism": config, "domain": ["a"]})
