"""What callers ask a mechanism instead of switching on its name (tests/test_layering.py): the
declared answers agree with the mechanism's kind for every registered mechanism, and the
methods behind the old switches compute what the switches did."""

from __future__ import annotations

import math

import numpy as np
import pytest

from client_sdk.mechanisms import mechanism_class, mechanism_from_config
from client_sdk.mechanisms.registry import MECHANISMS


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_declared_answers_agree_with_the_estimate_kind(name: str) -> None:
    cls = mechanism_class(name)
    assert (cls.discovery is not None) == (cls.estimate_kind == "discovery")
    assert cls.tests_candidates == (cls.estimate_kind in ("discovery", "sketch"))
    assert cls.reads_reports == (name == "pem")


def test_grr_bootstrap_support_keeps_each_report_on_one_item_with_the_channels_mean() -> None:
    """GRR: every simulated report supports exactly one item (rows sum to the devices); OUE:
    independent bits (rows do not). Both have E[support] = cells p + (devices - cells) q;
    checked within 5 standard errors of the mean over R = 4000 replicates (seed 7)."""
    rng = np.random.default_rng(7)
    cells = np.tile(np.array([500, 300, 150, 50], dtype=np.int64), (4000, 1))
    devices = cells.sum(axis=1, keepdims=True)
    for config in (
        {"mechanism": "grr", "epsilon": 1.0, "k": 4},
        {"mechanism": "oue", "epsilon": 1.0, "k": 4},
    ):
        oracle = mechanism_from_config(config)
        e = math.exp(1.0)
        p, q = (e / (e + 3), 1 / (e + 3)) if config["mechanism"] == "grr" else (0.5, 1 / (e + 1))
        support = oracle.bootstrap_support(cells, devices, p, q, rng)  # type: ignore[attr-defined]
        expected = cells[0] * p + (devices[0] - cells[0]) * q
        error = support.std(axis=0, ddof=1) / math.sqrt(len(support))
        assert np.all(np.abs(support.mean(axis=0) - expected) < 5 * error), config
        rows_sum_to_devices = bool(np.all(support.sum(axis=1) == devices[:, 0]))
        assert rows_sum_to_devices == (config["mechanism"] == "grr"), config


def test_null_detection_frequency_of_pem_sketches_and_the_rest() -> None:
    """PEM: critical sqrt(q*(1 - q*) / (n / levels)) / (p* - q*); a sketch: from its null
    count variance; SFP and a frequency oracle: no closed form (None)."""
    pem = mechanism_from_config({"mechanism": "pem", "epsilon": 4.0, "max_length": 4})
    frequency, note = pem.null_detection_frequency(10_000, 3.0) or (None, "")
    p, q, levels = pem.p_star, pem.q_star, pem.levels  # type: ignore[attr-defined]
    assert frequency == 3.0 * math.sqrt(q * (1 - q) / (10_000 / levels)) / (p - q)
    assert "last level" in note
    cms = mechanism_from_config(
        {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 8, "max_length": 4}
    )
    variance = cms.count_variance(10_000, np.zeros(1), np.full(1, 1e4))  # type: ignore[attr-defined]
    assert cms.null_detection_frequency(10_000, 3.0) == (
        3.0 * math.sqrt(float(variance[0])) / 10_000,
        "the sketch's null variance with no other repeated string (a lower bound)",
    )
    for config in (
        {"mechanism": "sfp", "epsilon": 4.0, "max_length": 4},
        {"mechanism": "grr", "epsilon": 1.0, "k": 4},
    ):
        assert mechanism_from_config(config).null_detection_frequency(10_000, 3.0) is None


def test_the_range_node_tree_is_the_tree_itself_or_a_binary_one_for_haar() -> None:
    tree = mechanism_from_config({"mechanism": "hierarchical", "epsilon": 2.0, "k": 16})
    assert tree.node_tree() is tree  # type: ignore[attr-defined]
    haar = mechanism_from_config(
        {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16, "variant": "haar"}
    )
    binary = haar.node_tree()  # type: ignore[attr-defined]
    assert (binary.name, binary.epsilon, binary.k, binary.b) == ("hierarchical", 2.0, 16, 2)
