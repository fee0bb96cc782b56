"""uniform_below_bits (the hash seeds' draws of local hashing's compact sampler): the lane of
every 32-bit value maps to its top L bits and only values below ``high`` are kept, so each
output has probability exactly 1/high; rejected draws are drawn again; and at fixed seeds the
outputs are uniform by chi-square."""

from __future__ import annotations

import numpy as np
import pytest

import client_sdk.randomness as randomness
from client_sdk.randomness import uniform_below_32, uniform_below_bits
from tests.stats import assert_chi_square


@pytest.mark.parametrize("high", [2, 5, 8, 9, (1 << 31) - 1, 1 << 32])
def test_every_lane_maps_to_its_top_bits_or_is_drawn_again(
    high: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    bits = (high - 1).bit_length()
    values = [v for v in range(min(1 << bits, 64))] + [(1 << bits) - 1]  # every top-L value
    lanes = [(v << (32 - bits)) | (0x9E37 & ((1 << (32 - bits)) - 1)) for v in values]
    kept = [v for v in values if v < high]
    refill = [((i % high) << (32 - bits)) for i in range(len(values))]  # accepted redraws
    stream = lanes + [0] * (len(lanes) % 2) + refill  # a call takes whole words (2 lanes)

    def words(rng: object, size: int) -> np.ndarray:
        nonlocal stream
        take, stream = stream[: 2 * size], stream[2 * size :]
        take += [0] * (2 * size - len(take))
        return np.array(take, dtype=np.uint32).view(np.uint64)

    monkeypatch.setattr(randomness, "raw_words", words)
    out = uniform_below_bits(None, high, len(values))
    accepted = [v < high for v in values]
    assert [int(o) for o, a in zip(out, accepted, strict=True) if a] == kept
    redrawn = [int(o) for o, a in zip(out, accepted, strict=True) if not a]
    assert redrawn == [i % high for i in range(len(redrawn))]


def test_each_output_has_probability_one_over_high() -> None:
    # over all 2**L top-bit values with equal weight, the kept ones are exactly [0, high)
    for high in range(2, 300):
        bits = (high - 1).bit_length()
        assert 2 * high > 1 << bits >= high  # rejection below 1/2
        assert [v for v in range(1 << bits) if v < high] == list(range(high))


@pytest.mark.parametrize("high", [3, 1000, (1 << 31) - 2, (1 << 31) - 1, 1 << 32])
def test_uniform_below_bits_is_uniform(high: int) -> None:
    draws = uniform_below_bits(np.random.default_rng(12), high, 200_000)
    assert draws.dtype == np.int64 and draws.min() >= 0 and draws.max() < high
    cells = min(high, 64)
    observed = np.bincount(draws * cells // high, minlength=cells)
    sizes = np.diff(-(-np.arange(cells + 1) * high // cells))  # values in each cell
    assert_chi_square(observed, sizes / high, what=f"uniform below {high}")


def test_uniform_below_bits_refuses_a_bad_high() -> None:
    for high in (1, 0, (1 << 32) + 1):
        with pytest.raises(ValueError, match=r"high must be in \[2, 2\*\*32\]"):
            uniform_below_bits(None, high, 3)


@pytest.mark.parametrize("high", [3, 7, 15, 100, 4096])
def test_one_high_on_16_bit_lanes_is_the_array_path_and_exactly_uniform(
    high: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same draws as the path for a high per draw, at a fixed seed
    single = uniform_below_32(np.random.default_rng(9), high, 50_000)
    per_draw = uniform_below_32(np.random.default_rng(9), np.full(50_000, high), 50_000)
    assert np.array_equal(single, per_draw)
    # every 16-bit lane once: the kept ones give each value exactly floor(2**16 / high) times
    lanes = np.arange(1 << 16, dtype=np.uint16)
    redraw = np.full(1 << 16, 0xFFFF, dtype=np.uint16)  # kept for every high: gives high - 1
    stream = [lanes.view(np.uint64), redraw.view(np.uint64)]

    def words(rng: object, size: int) -> np.ndarray:
        out = stream.pop(0)
        assert out.size >= size
        return out[:size]

    monkeypatch.setattr(randomness, "raw_words", words)
    out = uniform_below_32(None, high, 1 << 16)
    kept = (lanes.astype(np.int64) * high) % (1 << 16) >= (1 << 16) % high
    assert np.array_equal(out[kept], (lanes[kept].astype(np.int64) * high) >> 16)
    assert np.all(np.bincount(out[kept], minlength=high) == (1 << 16) // high)
    assert np.all(out[~kept] == high - 1)  # redrawn from the lane 0xFFFF


def test_bernoulli_bytes_look_every_lane_up_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    threshold = randomness.probability_threshold(0.3)  # heads decide too few: 16-bit lanes
    tables = randomness.byte_tables(threshold)
    assert np.count_nonzero(tables.head != 256) < randomness._HEADS_DECIDING
    lanes = np.tile(np.arange(1 << 16, dtype=np.uint16), 3)  # three lookup blocks
    assert lanes.size > 2 * randomness._LOOKUP_BLOCK
    fed = [lanes.view(np.uint64)]

    def words(rng: object, size: int) -> np.ndarray:
        return fed.pop(0)[:size] if fed else np.full(size, 1 << 63, dtype=np.uint64)

    monkeypatch.setattr(randomness, "raw_words", words)
    out = randomness.bernoulli_bytes(None, threshold, lanes.size)
    decided = tables.lane[lanes] != 256
    assert np.array_equal(out[decided], tables.lane[lanes][decided].astype(np.uint8))
    # a straddling lane refined by the word 2**63: the cell holding lane + 1/2 (of a lane)
    for index in np.flatnonzero(~decided)[:20].tolist():
        middle = (int(lanes[index]) << 496) + (1 << 495)
        cell = sum(c <= middle for c in tables.cumulative) - 1
        assert out[index] == cell


def test_bernoulli_bytes_heads_then_lanes_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    threshold = randomness.probability_threshold(0.1)  # most heads decide: 8 bits first
    tables = randomness.byte_tables(threshold)
    assert np.count_nonzero(tables.head != 256) >= randomness._HEADS_DECIDING
    heads = np.tile(np.arange(256, dtype=np.uint8), 3 * 256)  # three lookup blocks
    assert heads.size > 2 * randomness._LOOKUP_BLOCK
    later = tables.head[heads] == 256
    seconds = np.arange(int(later.sum()) + 8, dtype=np.int64).astype(np.uint8)  # every low byte
    fed = [heads.view(np.uint64), seconds[: -(-int(later.sum()) // 8) * 8].view(np.uint64)]

    def words(rng: object, size: int) -> np.ndarray:
        return fed.pop(0)[:size] if fed else np.full(size, 1 << 63, dtype=np.uint64)

    monkeypatch.setattr(randomness, "raw_words", words)
    out = randomness.bernoulli_bytes(None, threshold, heads.size)
    assert not fed  # the heads, then one more byte per undecided head
    assert np.array_equal(out[~later], tables.head[heads[~later]].astype(np.uint8))
    lanes = (heads[later].astype(np.int64) << 8) | seconds[: int(later.sum())]
    assert set(np.unique(lanes & 0xFF).tolist()) == set(range(256))
    decided = tables.lane[lanes] != 256
    assert np.array_equal(out[later][decided], tables.lane[lanes][decided].astype(np.uint8))
    # a straddling lane refined by the word 2**63: the cell holding lane + 1/2 (of a lane)
    straddling = zip(lanes[~decided].tolist(), out[later][~decided].tolist(), strict=True)
    for lane, got in list(straddling)[:20]:
        middle = (int(lane) << 496) + (1 << 495)
        assert got == sum(c <= middle for c in tables.cumulative) - 1


@pytest.mark.parametrize("probability", [0.02, 0.12, 0.27, 0.3, 0.5, 0.9])
def test_byte_heads_decide_exactly_the_lanes_of_one_cell(probability: float) -> None:
    """A head decides its byte exactly when all its 256 lanes do, and as they do (so the
    sampler's distribution is the 16-bit lanes', whose exactness test_randomness checks)."""
    tables = randomness.byte_tables(randomness.probability_threshold(probability))
    rows = tables.lane.reshape(256, 256).astype(np.int64)
    one_cell = (rows == rows[:, :1]).all(axis=1) & (rows[:, 0] != 256)
    assert np.array_equal(tables.head != 256, one_cell)
    assert np.array_equal(tables.head[one_cell], rows[one_cell, 0])
    for h in np.flatnonzero(one_cell).tolist():  # the interval [h, h + 1) / 2**8 in one cell
        b = int(tables.head[h])
        assert tables.cumulative[b] <= h << 504 and (h + 1) << 504 <= tables.cumulative[b + 1]
