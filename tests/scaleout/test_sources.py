"""Shards merged into one statistic: equivalence, exact de-duplication, refusals, no overflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import sources
from analysis.estimation import estimate
from client_sdk.mechanisms import MECHANISMS, mechanism_from_config
from client_sdk.mechanisms.base import AggregateStatistic
from collector import export
from tests.scaleout.shards import CONFIGS, campaign_document, fill, random_reports, report_ids


def test_every_registered_mechanism_has_a_config() -> None:
    assert set(MECHANISMS) <= set(CONFIGS)


def test_the_first_copy_of_a_report_id_wins(tmp_path: Path) -> None:
    """A report id stored twice with different payloads (a shard holding a corrupt copy): the
    merged statistic takes the copy of the first source given."""
    config = CONFIGS["grr"]
    document = campaign_document("c", config)
    ids = report_ids(3, np.random.default_rng(0))
    fill(tmp_path / "a.db", document, [(ids[0], 0), (ids[1], 1)])
    fill(tmp_path / "b.db", document, [(ids[0], 4), (ids[2], 2)])
    ab = sources.aggregate_local(
        sources.plan("c", [str(tmp_path / "a.db"), str(tmp_path / "b.db")])
    )
    ba = sources.aggregate_local(
        sources.plan("c", [str(tmp_path / "b.db"), str(tmp_path / "a.db")])
    )
    assert ab.statistic.counts.tolist() == [1, 1, 1, 0, 0]
    assert ba.statistic.counts.tolist() == [0, 1, 1, 0, 1]
    assert ab.duplicates == ba.duplicates == 1


def test_partitions_hold_disjoint_id_ranges_covering_every_id() -> None:
    rng = np.random.default_rng(0)
    ids = [*report_ids(5000, rng), "0" * 32, "f" * 32, "7" + "f" * 31, "8" + "0" * 31]
    keys = sources.keys_from_bytes(export.ids_to_bytes(ids))
    for bits in (0, 1, 3, 8):
        partition = sources.partition_of(keys, bits)
        for p in range(1 << bits):
            low, high = sources.partition_bounds(p, bits)
            inside = np.array([low <= i and (high is None or i < high) for i in ids])
            assert np.array_equal(inside, partition == p)


def test_sources_of_different_campaign_configs_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [(i, 1) for i in report_ids(10, rng)]
    fill(tmp_path / "a.db", campaign_document("c", CONFIGS["grr"]), rows)
    other = {**CONFIGS["grr"], "epsilon": 2.0}
    fill(tmp_path / "b.db", campaign_document("c", other), rows)
    export.export_campaign(tmp_path / "b.db", "c", tmp_path / "lake")
    a_id = sources.SqliteSource(str(tmp_path / "a.db")).campaign("c").config_id
    b_id = sources.SqliteSource(str(tmp_path / "b.db")).campaign("c").config_id
    with pytest.raises(ValueError) as refused:
        sources.plan("c", [str(tmp_path / "a.db")], [str(tmp_path / "lake")])
    message = str(refused.value)
    assert f"--db {tmp_path / 'a.db'} has config_id {a_id}" in message
    assert f"--parquet {tmp_path / 'lake'} has config_id {b_id}" in message
    with pytest.raises(LookupError, match="holds campaign 'c', not 'd'"):
        sources.plan("d", parquets=[str(tmp_path / "lake")])
    with pytest.raises(ValueError, match="give at least one source"):
        sources.plan("c")
    with pytest.raises(FileNotFoundError, match=r"--parquet .*nowhere: no _campaign\.json"):
        sources.plan("c", parquets=[str(tmp_path / "nowhere")])


def test_the_number_of_partitions_bounds_a_partition_by_memory() -> None:
    assert sources.choose_bits(0, 12) == 3  # MIN_PARTITIONS
    bits = sources.choose_bits(10**9, 12)
    assert 10**9 * 28 / (1 << bits) <= sources.PARTITION_BYTES
    assert 10**9 * 28 / (1 << (bits - 1)) > sources.PARTITION_BYTES
    assert sources.choose_bits(10**6, 12, partitions=64) == 6
    with pytest.raises(ValueError, match="--partitions must be a power of two"):
        sources.choose_bits(10, 12, partitions=12)


# ---- counts that do not overflow ------------------------------------------------------------


def _estimate(mechanism: Any, statistic: AggregateStatistic) -> Any:
    from tests.scaleout.shards import RAPPOR_CANDIDATES

    return estimate(mechanism, statistic, candidates=RAPPOR_CANDIDATES)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_statistics_stay_exact_at_a_trillion_reports(name: str) -> None:
    """A real statistic scaled to ~10^12 reports (every count times 10^9, which is the
    statistic of 10^9 copies of the population), merged as 16 shards: integer counts stay
    exact (int64 holds 9.2e18; a count is at most n), and the estimate is the same as at the
    small n up to float rounding."""
    mechanism = mechanism_from_config(CONFIGS[name])
    rng = np.random.default_rng(1)
    small = mechanism.aggregate(mechanism.from_wire(random_reports(mechanism, 1000, rng)))
    assert small.counts.dtype in (np.int64, np.float64), small.counts.dtype
    factor = 10**9 // 16
    part = AggregateStatistic(small.counts * factor, small.n * factor)
    assert part.counts.dtype == small.counts.dtype
    merged = sources.tree_reduce([part] * 16, 4, lambda *s: sum(s[1:], s[0]))
    assert merged.n == 1000 * factor * 16 > 9.9 * 10**11
    if small.counts.dtype == np.int64:
        assert np.array_equal(merged.counts, small.counts * (factor * 16))  # no wrap-around
    else:
        np.testing.assert_allclose(merged.counts, small.counts * (factor * 16), rtol=1e-13)
    if sources.needs_reports(mechanism):
        # PEM's decoder chooses which prefixes to score from the reports (test_discovery.py):
        # its statistic alone is the reports per level, checked above.
        return
    big, reference = _estimate(mechanism, merged), _estimate(mechanism, small)
    assert big.n == merged.n
    if hasattr(reference, "means"):  # key-value (pckv): key frequencies and per-key means
        np.testing.assert_allclose(big.frequencies, reference.frequencies, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(big.means, reference.means, rtol=1e-9, atol=1e-12)
        assert np.all(np.isfinite(big.frequency_std_errors))
    elif hasattr(reference, "tables"):  # several attributes (multi): every table
        for table, expected in zip(big.tables, reference.tables, strict=True):
            np.testing.assert_allclose(table, expected, rtol=1e-9, atol=1e-12)
    elif hasattr(reference, "coefficients"):  # fourier: the Fourier coefficients
        np.testing.assert_allclose(big.coefficients, reference.coefficients, rtol=1e-9)
    elif hasattr(reference, "frequencies"):
        np.testing.assert_allclose(big.frequencies, reference.frequencies, rtol=1e-9, atol=1e-12)
        assert np.all(np.isfinite(big.std_errors))
    elif hasattr(reference, "mean"):
        np.testing.assert_allclose(big.mean, reference.mean, rtol=1e-9)
    else:  # candidates (cms, hcms, rappor): the same items, to rounding
        np.testing.assert_allclose(
            [i.frequency for i in big.items], [i.frequency for i in reference.items], rtol=1e-6
        )
