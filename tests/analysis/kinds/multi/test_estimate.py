"""CALM estimates (analysis/kinds/multi/estimate.py): the consistent tables of one set are the
rounds' result; a whole table's cells carry their exact standard errors from the cells' own
variance, which equals the sum variance over one-cell masks for every table oracle (GRR, OUE,
OLH), in either attribute order; a 1-way marginal combines every table holding the attribute,
with the combination's exact covariance (checked against seeded runs) and the consistent
tables anchored to it."""

from __future__ import annotations

import numpy as np
import pytest

import analysis.kinds.multi.estimate
from analysis.kinds.multi.estimate import (
    CONSISTENCY_ROUNDS,
    consistent_batches,
    consistent_tables,
    estimate_multi,
    project_onto,
    simplex_anchors,
)
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.simplex import project_simplex
from tests.stats import assert_within_z

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


@pytest.mark.parametrize("anchored", [False, True])
@pytest.mark.parametrize(
    "axes",
    [[(0, 1), (0, 2), (1, 2)], [(0, 1, 2), (2, 3), (1, 3), (0, 4)], [(0, 1), (2, 3)]],
)
def test_consistent_tables_are_the_batched_rounds_on_one_set(
    axes: list[tuple[int, ...]], anchored: bool
) -> None:
    ks = (3, 2, 4, 5, 2)
    rng = np.random.default_rng(len(axes))
    tables = [rng.random([ks[a] for a in ax]) / 20 - 0.01 for ax in axes]
    weights, anchors, batch_anchors = None, None, None
    if anchored:  # uneven weights per holder and value; every attribute anchored
        weights = {
            a: rng.random((sum(a in ax for ax in axes), ks[a])) + 0.1
            for a in {a for ax in axes for a in ax}
        }
        batch_anchors = simplex_anchors([t[None] for t in tables], axes, weights)
        anchors = {a: t[0] for a, t in batch_anchors.items()}
    got = consistent_tables(tables, axes, weights=weights, anchors=anchors)
    batched = consistent_batches(
        [t[None] for t in tables], axes, CONSISTENCY_ROUNDS, weights, batch_anchors
    )
    for table, reference in zip(got, batched, strict=True):
        assert table.shape == reference.shape[1:]
        assert np.allclose(table, reference[0], rtol=0, atol=1e-14)
        assert np.all(table >= 0) and table.sum() == pytest.approx(1.0, abs=1e-12)


def _calm(ks: tuple[int, ...], oracle: str, marginals: object = None) -> Multi:
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": 1.0,
            "protocol": "smp",
            "attributes": [{"name": f"a{j}", "k": k} for j, k in enumerate(ks)],
            "marginals": marginals or [["a0", "a1"], ["a0", "a2"], ["a1", "a2"]],
            "table_oracles": [oracle] * 3,
        }
    )
    assert isinstance(m, Multi)
    return m


@pytest.mark.parametrize("oracle", ["grr", "oue"])
def test_one_way_combination_has_its_exact_covariance(oracle: str) -> None:
    """400 seeded runs on a fixed population: the combination is unbiased, and its covariance
    over values (GRR: negative within a table; OUE: 0 there) and variance match the exact ones
    at the truth, each entry within 5.5 standard errors of a sample covariance,
    sqrt((s_vv s_ww + s_vw^2) / (R - 1))."""
    ks, n, runs = (3, 4, 2), 4_000, 400
    m = _calm(ks, oracle)
    rng = np.random.default_rng(31)
    x = np.stack([rng.choice(k, n, p=np.arange(1, k + 1) / (k * (k + 1) / 2)) for k in ks], 1)
    truth = np.bincount(x[:, 1], minlength=4) / n
    draws = np.empty((runs, 4))
    for r in range(runs):
        est = estimate_multi(m, m.perturb(x, rng=rng), replicates=0)
        draws[r] = est.raw_marginal("a1").frequencies
    # the exact covariance at the true frequencies: the plug-in of one estimate, replaced
    est = estimate_multi(m, m.perturb(x, rng=rng), replicates=0)
    one = est._one_way[1]
    assert one.holders == (0, 2)
    values = [np.tile(np.arange(4), 3), np.repeat(np.arange(4), 2)]  # a1 in (a0, a1), (a1, a2)
    sums = [np.zeros(4), np.zeros(4)]  # only the covariance is used
    exact = analysis.kinds.multi.estimate._combine(
        m, n, one.holders, sums, values, truth
    ).covariance
    mean_se = np.sqrt(np.diag(exact) / runs)
    assert_within_z(draws.mean(axis=0), truth, mean_se, what="combination mean")
    sample = np.cov(draws, rowvar=False)
    var = np.diag(sample)
    se = np.sqrt((np.outer(var, var) + sample**2) / (runs - 1))
    assert_within_z(sample, exact, se, what="combination covariance")
    off = exact[~np.eye(4, dtype=bool)]
    assert np.all(off < 0) if oracle == "grr" else np.allclose(off, 0.0, atol=1e-15)
    # the weights: each holder's inverse variance (plus f/n), as the consistency step uses
    assert np.array_equal(est._weights[1], one.weights)


def test_anchored_tables_agree_with_the_projected_combination() -> None:
    """An attribute's 1-way marginal is the simplex projection of the combination (the anchor),
    every consistent table's 1-way sums agree with it (to 1e-4 on these small tables), and an
    attribute held by one table keeps that table's sum and its exact variance."""
    m = _calm((3, 4, 2, 5), "oue", [["a0", "a1"], ["a0", "a2"], ["a1", "a2", "a3"]])
    rng = np.random.default_rng(12)
    x = np.stack([rng.integers(0, k, 30_000) for k in (3, 4, 2, 5)], axis=1)
    est = estimate_multi(m, m.perturb(x, rng=rng), replicates=0)
    for a, name in enumerate(m.names):
        one = est._one_way[a]
        anchor = project_simplex(one.frequencies)[0]
        marginal = est.marginal(name)
        assert np.allclose(marginal.frequencies, anchor, rtol=0, atol=1e-15)
        assert np.allclose(marginal.std_errors, np.sqrt(one.simplex_variance(anchor)))
        for j in one.holders:
            unit = m.units[j]
            assert np.abs(project_onto(est.tables[j][None], unit, (a,))[0] - anchor).max() < 1e-4
    (j,) = est._one_way[3].holders  # a3 lies in one table only: its own sum and variance
    raw = est.raw_marginal("a3")
    table = est._raw_tables[j]
    assert np.allclose(raw.frequencies, table.sum(axis=(0, 1)))
    plug = est._plug_tables[j].reshape(table.shape).sum(axis=(0, 1))
    cells = np.repeat(plug[None, None, :] / 8, 8, axis=0).reshape(4, 2, 5).ravel()
    masks = np.indices(table.shape)[2].ravel()[None, :] == np.arange(5)[:, None]
    expected = m.sum_variance(est.n, j, masks, cells)
    assert np.allclose(raw.std_errors, np.sqrt(expected), rtol=1e-12)
