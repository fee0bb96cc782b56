"""PEM discovery over merged shards: one support job per level over the id-range partitions,
each report id counted once, in one process and on Dask, identical to one database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import distributed, sources
from analysis.dataset import iter_report_chunks
from analysis.estimation import estimate
from client_sdk.mechanisms import mechanism_from_config
from tests.scaleout.shards import CONFIGS, assert_same_estimate, build_shards

N = 4800
"""Enough reports (about 300 per level) for discovery to find the frequent strings."""


@pytest.fixture(scope="module")
def pem_shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], Path]:
    return build_shards(tmp_path_factory.mktemp("pem"), "pem", n=N, seed=4)


def test_pem_over_shards_equals_one_database_and_finds_the_strings(
    pem_shards: tuple[list[str], list[str], Path],
) -> None:
    dbs, parquets, whole = pem_shards
    mechanism = mechanism_from_config(CONFIGS["pem"])
    single = estimate(mechanism, iter_report_chunks(whole, "c"))
    work = sources.plan("c", dbs, parquets)
    engine = sources.LocalEngine()
    merged = engine.aggregate(work)
    assert merged.duplicates == N * 130 // 600 and merged.statistic.n == N
    result = sources.estimate_merged(engine, work, merged)
    assert_same_estimate(result, single, exact=True, where="pem")
    # Not vacuous: discovery ran every level and confirmed some of the six strings held.
    assert [level["reports"] for level in result.levels] == merged.statistic.counts.tolist()
    found = {item.value for item in result.significant}
    assert found and found <= {f"site-{i}" for i in range(6)}


def test_support_counts_each_report_id_once(
    pem_shards: tuple[list[str], list[str], Path],
) -> None:
    """The support of a level's candidates over the merged shards is that of the database
    holding each report once, and less than the sum over the shards read one by one (which
    would count the copies a retry left on two collectors twice)."""
    dbs, parquets, whole = pem_shards
    mechanism: Any = mechanism_from_config(CONFIGS["pem"])
    level = 0
    prefixes = mechanism.prefix_chunks(list(range(1 << mechanism.level_bits(level))), level)
    reports = np.concatenate(list(iter_report_chunks(whole, "c")))
    expected = mechanism.support_counts(reports, level, prefixes)
    merged = sources.support_local(sources.plan("c", dbs, parquets, partitions=4), level, prefixes)
    assert merged.dtype == np.int64 and np.array_equal(merged, expected)
    one_by_one = sum(
        sources.support_local(sources.plan("c", [db]), level, prefixes) for db in dbs
    ) + sources.support_local(sources.plan("c", parquets=parquets), level, prefixes)
    assert int(one_by_one.sum()) > int(expected.sum())


def test_pem_on_dask_equals_one_process(
    pem_shards: tuple[list[str], list[str], Path], dask_client: Any
) -> None:
    dbs, parquets, _ = pem_shards
    work = sources.plan("c", dbs, parquets, partitions=8)
    local = sources.LocalEngine(split_every=3)
    remote = distributed.DaskEngine(dask_client, split_every=3)
    merged_here, merged_there = local.aggregate(work), remote.aggregate(work)
    assert merged_there.statistic == merged_here.statistic
    here = sources.estimate_merged(local, work, merged_here)
    there = sources.estimate_merged(remote, work, merged_there)
    assert_same_estimate(there, here, exact=True, where="pem on dask")
    assert here.significant
