"""The compact samplers (``perturb_compact`` of unary encoding, GRR and local hashing) that
``multi``'s units use: the same declared channel as ``perturb`` from fewer random bits,
checked by chi-square at fixed seeds against the exact channel; and ``multi``'s SMP tables,
which now go through them, against the whole-tuple channel."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.local_hashing import (
    HASH_PRIME,
    OLH,
    SEED_SPACE,
    hash_parameters,
    local_hash,
)
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.unary import OUE, SUE
from tests import stats


@pytest.mark.parametrize(
    "oracle", [OUE(1.0, 10), OUE(4.0, 9), SUE(2.0, 3), OUE(0.5, 8)], ids=lambda o: f"{o.name}{o.k}"
)
def test_unary_compact_reports_follow_the_channel(oracle: OUE | SUE) -> None:
    (matrix,) = list(oracle.channel_matrices())
    rng = np.random.default_rng(41)
    for x in range(oracle.k):
        reports = oracle.perturb_compact(np.full(40_000, x), rng=rng)
        assert reports.dtype == np.uint8 and reports.shape == (40_000, oracle.report_bytes)
        assert not np.unpackbits(reports, axis=1)[:, oracle.k :].any()  # pad bits stay zero
        observed = np.bincount(oracle.output_index(reports), minlength=matrix.shape[1])
        stats.assert_chi_square(observed, matrix[x], what=f"{oracle.name} outputs for {x}")


def test_unary_compact_bit_rates_at_a_table_size() -> None:
    """k = 300 (too many outputs to enumerate): every bit's rate is q, the value's is p."""
    oracle = OUE(1.0, 300)
    values = np.arange(300_000) % 300
    bits = np.unpackbits(oracle.perturb_compact(values, rng=np.random.default_rng(42)), axis=1)
    n = values.size
    own = bits[np.arange(n), values]
    p, q = oracle.p_star, oracle.q_star
    stats.assert_within_z(own.mean(), p, math.sqrt(p * (1 - p) / n), what="own bit")
    others = (bits[:, :300].sum() - own.sum()) / (n * 299)
    stats.assert_within_z(others, q, math.sqrt(q * (1 - q) / (n * 299)), what="other bits")
    assert not bits[:, 300:].any()


@pytest.mark.parametrize(("epsilon", "k"), [(1.0, 2), (2.0, 5), (4.0, 40), (0.5, 300)])
def test_grr_compact_reports_follow_the_channel(epsilon: float, k: int) -> None:
    oracle = GRR(epsilon, k)
    (matrix,) = list(oracle.channel_matrices())
    rng = np.random.default_rng(43)
    for x in sorted({0, k // 2, k - 1}):
        reports = oracle.perturb_compact(np.full(100_000, x), rng=rng)
        observed = np.bincount(oracle.output_index(reports), minlength=k)
        stats.assert_chi_square(observed, matrix[x], what=f"grr outputs for {x}")


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 5), (2.0, 30), (4.0, 20)])
def test_olh_compact_agreement_and_uniform_disagreement(epsilon: float, k: int) -> None:
    """y == h_seed(x) with probability p; otherwise uniform over the g - 1 other buckets."""
    oracle = OLH(epsilon, k)
    g, p = oracle.buckets, oracle.p_star
    rng = np.random.default_rng(44)
    draws = 200_000
    for x in (0, k - 1):
        reports = oracle.perturb_compact(np.full(draws, x), rng=rng)
        a, b = hash_parameters(reports["seed"])
        assert reports["seed"].max() < SEED_SPACE and a.min() >= 1
        for part, high in ((a - 1, HASH_PRIME - 1), (b, HASH_PRIME)):  # both uniform
            top = (part.astype(np.int64) * 64) // high
            stats.assert_chi_square(np.bincount(top, minlength=64), np.full(64, 1 / 64))
        hashed = local_hash(reports["seed"], x, g)
        agree = reports["y"] == hashed
        stats.assert_within_z(agree.mean(), p, math.sqrt(p * (1 - p) / draws), what="agreement")
        shift = (reports["y"][~agree].astype(np.int64) - hashed[~agree]) % g
        observed = np.bincount(shift, minlength=g)
        assert observed[0] == 0
        stats.assert_chi_square(observed[1:], np.full(g - 1, 1 / (g - 1)), what="disagreement")


def test_smp_tables_follow_the_whole_tuple_channel() -> None:
    """Tables by GRR (4 cells) and OUE (10 cells) at eps 1: the outputs (table, report) of one
    tuple against its row of the enumerated channel, every table's outputs side by side."""
    m = mechanism_from_config(
        {
            "mechanism": "multi",
            "epsilon": 1.0,
            "protocol": "smp",
            "attributes": [{"name": "a", "k": 2}, {"name": "b", "k": 2}, {"name": "c", "k": 5}],
            "marginals": [["a", "b"], ["a", "c"]],
        }
    )
    assert isinstance(m, Multi)
    assert [o.name for o in m.oracles] == ["grr", "oue"]
    (matrix,) = list(m.channel_matrices())
    widths = [1 << o.k if o.name == "oue" else o.k for o in m.oracles]
    x = (1, 0, 3)
    reports = m.perturb(np.tile(np.array([x]), (200_000, 1)), rng=np.random.default_rng(45))
    index = np.empty(len(reports), dtype=np.int64)
    oracles: list[Any] = list(m.oracles)
    for j, oracle in enumerate(oracles):
        rows = reports["attribute"] == j
        if oracle.name == "oue":
            local = oracle.output_index(reports["bits"][rows, 0, : oracle.report_bytes])
        else:
            local = reports["values"][rows, 0]
        index[rows] = sum(widths[:j]) + local
    observed = np.bincount(index, minlength=matrix.shape[1])
    stats.assert_chi_square(observed, matrix[(x[0] * 2 + x[1]) * 5 + x[2]], what="smp tables")
