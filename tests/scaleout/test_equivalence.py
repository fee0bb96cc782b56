"""Every registered mechanism (and each variant in ``shards.CONFIGS``): shards merged in one
process equal the single-database statistic and estimate, and the same merge on Dask (2 worker
processes) equals the one-process merge bit for bit. PEM's estimate (discovery, one support job
per level over the partitions) is included."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import distributed, sources
from analysis.dataset import iter_report_chunks
from analysis.estimation import aggregate, estimate
from client_sdk.mechanisms import mechanism_from_config
from tests.scaleout.shards import (
    CONFIGS,
    DUPLICATES,
    RAPPOR_CANDIDATES,
    N,
    assert_same_estimate,
    build_shards,
)

Shards = dict[str, tuple[list[str], list[str], Path]]


@pytest.fixture(scope="module")
def all_shards(tmp_path_factory: pytest.TempPathFactory) -> Shards:
    directory = tmp_path_factory.mktemp("shards")
    return {name: build_shards(directory, name) for name in sorted(CONFIGS)}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_merged_shards_equal_the_single_database_estimate(all_shards: Shards, name: str) -> None:
    dbs, parquets, whole = all_shards[name]
    mechanism = mechanism_from_config(CONFIGS[name])
    merged = sources.aggregate_local(sources.plan("c", dbs, parquets))
    reference = aggregate(mechanism, iter_report_chunks(whole, "c"))
    assert merged.statistic.n == reference.n == N
    assert merged.duplicates == DUPLICATES and merged.read == N + DUPLICATES
    assert merged.statistic.counts.dtype == reference.counts.dtype
    if reference.counts.dtype.kind in "iu":
        assert merged.statistic == reference  # integer counts: bit for bit
    else:
        # Float sums (numeric mechanisms) are exact up to the order of summation: the reference
        # adds in storage order, the merge in id order within partitions, then up a tree.
        np.testing.assert_allclose(merged.statistic.counts, reference.counts, rtol=1e-12)
        assert np.array_equal(merged.statistic.counts[2], reference.counts[2])  # coverage
    # Partitions cut differently: the same statistic (up to summation order for floats).
    other = sources.aggregate_local(sources.plan("c", dbs, parquets, partitions=2), split_every=3)
    np.testing.assert_allclose(other.statistic.counts, merged.statistic.counts, rtol=1e-12)
    assert other.statistic.n == N


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_estimate_from_merged_shards_equals_the_single_database_one(
    all_shards: Shards, name: str
) -> None:
    """The estimate itself (every field), as ``ldp-analyze estimate`` computes it from one
    database: identical for integer statistics, PEM's discovery included."""
    dbs, parquets, whole = all_shards[name]
    mechanism = mechanism_from_config(CONFIGS[name])
    single = estimate(mechanism, iter_report_chunks(whole, "c"), candidates=RAPPOR_CANDIDATES)
    work = sources.plan("c", dbs, parquets)
    engine = sources.LocalEngine()
    merged = engine.aggregate(work)
    result = sources.estimate_merged(engine, work, merged, candidates=RAPPOR_CANDIDATES)
    exact = merged.statistic.counts.dtype.kind in "iu"
    assert_same_estimate(result, single, exact=exact, where=name)


def test_dask_equals_one_process_bit_for_bit(all_shards: Shards, dask_client: Any) -> None:
    plans = {
        name: sources.plan("c", dbs, parquets, partitions=4)
        for name, (dbs, parquets, _) in all_shards.items()
    }

    def on_dask(name: str) -> sources.MergedStatistic:
        return distributed.aggregate_distributed(dask_client, plans[name], split_every=3)

    def estimate_on_dask(name: str) -> Any:
        engine = distributed.DaskEngine(dask_client, split_every=3)
        return sources.estimate_merged(
            engine, plans[name], remote[name], candidates=RAPPOR_CANDIDATES
        )

    with ThreadPoolExecutor(4) as pool:  # several jobs at once on the one cluster
        remote = dict(zip(plans, pool.map(on_dask, plans), strict=True))
        estimates = dict(zip(plans, pool.map(estimate_on_dask, plans), strict=True))
    for name, work in plans.items():
        local = sources.aggregate_local(work, split_every=3)
        # Float sums included: the same partitions, the same tree, the same order of additions.
        assert remote[name].statistic.counts.dtype == local.statistic.counts.dtype, name
        assert remote[name].statistic.counts.tobytes() == local.statistic.counts.tobytes(), name
        assert remote[name].statistic.n == local.statistic.n == N, name
        assert remote[name].duplicates == local.duplicates == DUPLICATES, name
        assert remote[name].partitions == 1 << work.bits
        engine = sources.LocalEngine(split_every=3)
        expected = sources.estimate_merged(engine, work, local, candidates=RAPPOR_CANDIDATES)
        assert_same_estimate(estimates[name], expected, exact=True, where=name)
