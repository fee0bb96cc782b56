"""SMP marginal tables (docs/math/richer-data.md): the aggregate of packed records equals a plain
reference through the wire (each unit's payloads parsed and counted by the unit's own oracle),
and ``perturb``'s report i is device i's (each device's true cell is supported at the oracle's
p*, not at the rate of a shuffled report)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.unary import column_counts, transposed_column_counts
from tests.stats import assert_within_z

KS = (2, 4, 6, 10, 15, 20)


MIXED = ["grr", "oue", "olh"] * 5
"""Table oracles in turn (the cover's 15 tables): every kind side by side in one aggregate."""


def tables(epsilon: float, oracles: list[str] | None = None) -> Multi:
    config = {
        "mechanism": "multi",
        "epsilon": epsilon,
        "protocol": "smp",
        "attributes": [{"name": f"a{j}", "k": k} for j, k in enumerate(KS)],
        "marginals": {"cover": 2},
    }
    if oracles is not None:
        config["table_oracles"] = oracles
    m = mechanism_from_config(config)
    assert isinstance(m, Multi)
    return m


def tuples(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.stack([rng.integers(0, k, n) for k in KS], axis=1)
    x[:, 1] = np.where(rng.random(n) < 0.6, x[:, 0] * 2, x[:, 1])  # correlated attributes
    return x


def reference_counts(m: Multi, reports: np.ndarray) -> np.ndarray:
    """Support counts and reports per unit from the wire payloads, one unit at a time."""
    counts = np.zeros(m.k + m.u, dtype=np.int64)
    payloads = m.to_wire(reports)
    for j, oracle in enumerate(m.oracles):
        mine = [payload for unit, payload in payloads if unit == j]
        counts[m.k + j] = len(mine)
        if mine:
            parsed, errors = oracle.parse_wire(mine)
            assert not errors
            counts[m.offsets[j] : m.offsets[j + 1]] = oracle.support_counts(parsed)
    return counts


@pytest.mark.parametrize(("epsilon", "oracles"), [(1.0, None), (2.0, MIXED), (4.0, None)])
def test_aggregate_equals_the_reference_through_the_wire(
    epsilon: float, oracles: list[str] | None
) -> None:
    m = tables(epsilon, oracles)
    assert {o.name for o in m.oracles} >= ({"grr", "oue"} if oracles is None else set(MIXED))
    reports = m.perturb(tuples(6000, 3), rng=np.random.default_rng(11))
    statistic = m.aggregate(reports)
    assert statistic.n == len(reports)
    assert np.array_equal(np.asarray(statistic.counts), reference_counts(m, reports))
    half = len(reports) // 2  # reports aggregated in parts add up to the whole
    parts = m.aggregate(reports[:half]) + m.aggregate(reports[half:])
    assert np.array_equal(np.asarray(parts.counts), np.asarray(statistic.counts))


@pytest.mark.parametrize(("epsilon", "oracles"), [(1.0, None), (2.0, MIXED), (4.0, None)])
def test_report_i_is_device_is(epsilon: float, oracles: list[str] | None) -> None:
    m = tables(epsilon, oracles)
    n = 40_000
    x = tuples(n, 5)
    reports = m.perturb(x, rng=np.random.default_rng(8))
    units = np.asarray(reports["attribute"]).astype(np.int64)
    supported = expected = variance = 0.0
    for j, oracle in enumerate(m.oracles):
        rows = np.flatnonzero(units == j)
        cells = m.unit_values(x[rows], j)
        for cell in np.unique(cells):
            mine = rows[cells == cell]
            supported += m.aggregate(reports[mine]).counts[m.offsets[j] + cell]
        p = oracle.p_star
        expected += rows.size * p
        variance += rows.size * p * (1 - p)
    assert_within_z(supported, expected, math.sqrt(variance), what="true cells supported")


@pytest.mark.parametrize("k", [2, 8, 13, 64, 300])
def test_transposed_column_counts_equal_the_byte_histograms(k: int) -> None:
    rng = np.random.default_rng(k)
    rows = np.packbits(rng.random((1001, k)) < 0.3, axis=1)
    columns = np.zeros((rows.shape[1], 1008), dtype=np.uint8)
    columns[:, :1001] = rows.T
    expected = np.unpackbits(rows, axis=1, count=k).sum(axis=0)
    assert np.array_equal(transposed_column_counts(columns, k), expected)
    assert np.array_equal(column_counts(rows, k), expected)
    with pytest.raises(ValueError, match="multiple of 8"):
        transposed_column_counts(columns[:, :1001], k)


def test_aggregate_refuses_a_unit_or_value_out_of_range() -> None:
    m = tables(4.0)
    reports = m.perturb(tuples(100, 1), rng=np.random.default_rng(2))
    bad = reports.copy()
    bad["attribute"][3] = m.u
    with pytest.raises(ValueError, match=rf"attribute must be a unit in \[0, {m.u}\); got {m.u}"):
        m.aggregate(bad)
    j = next(j for j, o in enumerate(m.oracles) if o.name == "grr")
    bad = reports.copy()
    bad["attribute"][0], bad["values"][0, 0] = j, m.sizes[j]
    with pytest.raises(ValueError, match=rf"value must be in \[0, {m.sizes[j]}\)"):
        m.aggregate(bad)


@pytest.mark.parametrize(("row", "column", "value"), [(5, 3, 10), (990, 5, -1), (999, 0, 2)])
def test_bad_tuples_are_found_in_the_tiled_rows_and_the_tail(
    row: int, column: int, value: int
) -> None:
    m = tables(1.0)
    x = tuples(1000, 7)  # 42 tuples a tiled row: rows 966.. are the tail
    m.check_tuples(x)
    x[row, column] = value
    with pytest.raises(ValueError, match=rf"values\[{row}, {column}\] \(a{column}\) must be in"):
        m.check_tuples(x)
