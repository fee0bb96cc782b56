"""CALM estimates (analysis/multi.py): the consistent tables of one set are the batched
rounds' result; a whole table's cells carry their exact standard errors from the cells' own
variance, which equals the sum variance over one-cell masks for every table oracle (GRR, OUE,
OLH), in either attribute order."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.multi import (
    CONSISTENCY_ROUNDS,
    consistent_batches,
    consistent_tables,
    estimate_multi,
)
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.multi import Multi

KS = (2, 4, 6, 10, 15, 20)


@pytest.mark.parametrize("epsilon", [1.0, 2.0, 4.0])
def test_whole_table_std_errors_equal_the_one_cell_sum_variances(epsilon: float) -> None:
    config = {
        "mechanism": "multi",
        "epsilon": epsilon,
        "protocol": "smp",
        "attributes": [{"name": f"a{j}", "k": k} for j, k in enumerate(KS)],
        "marginals": {"cover": 2},
    }
    if epsilon == 2.0:  # every oracle kind in turn over the 15 tables
        config["table_oracles"] = ["grr", "oue", "olh"] * 5
    m = mechanism_from_config(config)
    assert isinstance(m, Multi)
    rng = np.random.default_rng(5)
    x = np.stack([rng.integers(0, k, 20_000) for k in KS], axis=1)
    est = estimate_multi(m, m.perturb(x, rng=rng), replicates=0)
    seen = set()
    for j, unit in enumerate(m.units):
        seen.add(m.oracles[j].name)
        plug = est._plug_tables[j]
        one_cell = np.eye(plug.size, dtype=bool)
        expected = np.sqrt(np.maximum(m.sum_variance(est.n, j, one_cell, plug), 0.0))
        a, b = (m.names[i] for i in unit)
        got = est.raw_marginal(a, b).std_errors
        assert np.allclose(got.ravel(), expected, rtol=1e-12, atol=0)
        assert np.allclose(est.raw_marginal(b, a).std_errors, got.T, rtol=1e-12, atol=0)
        assert np.array_equal(est.marginal(a, b).std_errors, got)
    assert seen >= ({"grr", "oue"} if epsilon != 2.0 else {"grr", "olh", "oue"})


@pytest.mark.parametrize(
    "axes",
    [[(0, 1), (0, 2), (1, 2)], [(0, 1, 2), (2, 3), (1, 3), (0, 4)], [(0, 1), (2, 3)]],
)
def test_consistent_tables_are_the_batched_rounds_on_one_set(
    axes: list[tuple[int, ...]],
) -> None:
    ks = (3, 2, 4, 5, 2)
    rng = np.random.default_rng(len(axes))
    tables = [rng.random([ks[a] for a in ax]) / 20 - 0.01 for ax in axes]
    got = consistent_tables(tables, axes)
    batched = consistent_batches([t[None] for t in tables], axes, CONSISTENCY_ROUNDS)
    for table, reference in zip(got, batched, strict=True):
        assert table.shape == reference.shape[1:]
        assert np.allclose(table, reference[0], rtol=0, atol=1e-14)
        assert np.all(table >= 0) and table.sum() == pytest.approx(1.0, abs=1e-12)
