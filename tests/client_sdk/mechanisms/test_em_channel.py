"""``FrequencyOracle.em_channel``: the channel each oracle gives EM (analysis.postprocess.em).

Exact channels (GRR, Hadamard response) must equal the enumerated ``channel_matrices`` as
linear maps, forward and backward, to float rounding; the default support-count channel is
p* I + q* (J - I) applied to the normalised support counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle


def _oracle(config: dict[str, Any]) -> FrequencyOracle:
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, FrequencyOracle)
    return mechanism


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "grr", "epsilon": 1.0, "k": 7},
        {"mechanism": "hr", "epsilon": 1.0, "k": 5},
        {"mechanism": "hr", "epsilon": 4.0, "k": 20},
        {"mechanism": "hr", "epsilon": 6.0, "k": 30, "blocks": 10},
    ],
)
def test_exact_channels_equal_the_enumerated_channel(config: dict[str, Any]) -> None:
    mechanism: Any = _oracle(config)
    channel = mechanism.em_channel()
    assert channel.exact and channel.k == mechanism.k
    dense = next(mechanism.channel_matrices())
    rng = np.random.default_rng(8)
    theta = rng.dirichlet(np.ones(mechanism.k), size=4)
    ratio = rng.random((4, dense.shape[1]))
    np.testing.assert_allclose(channel.forward(theta), theta @ dense, atol=1e-15)
    np.testing.assert_allclose(channel.backward(ratio), ratio @ dense.T, atol=1e-13)
    reports = mechanism.perturb(rng.integers(0, mechanism.k, 500), rng=rng)
    observed = channel.observe(mechanism.aggregate(reports))
    expected = np.bincount(mechanism.output_index(reports), minlength=dense.shape[1]) / 500
    np.testing.assert_allclose(observed, expected)


def test_the_default_channel_is_the_support_count_approximation() -> None:
    mechanism = _oracle({"mechanism": "oue", "epsilon": 1.0, "k": 6})
    channel = mechanism.em_channel()
    assert channel.kind == "support-count approximation" and not channel.exact
    assert channel.diagonal == (mechanism.p_star, mechanism.q_star)
    theta = np.random.default_rng(1).dirichlet(np.ones(6))
    p, q = mechanism.p_star, mechanism.q_star
    matrix = np.full((6, 6), q) + (p - q) * np.eye(6)
    np.testing.assert_allclose(channel.forward(theta), theta @ matrix)
    np.testing.assert_allclose(channel.backward(theta), matrix @ theta)
    reports = mechanism.perturb(np.arange(6).repeat(50), rng=np.random.default_rng(2))
    support = mechanism.support_counts(reports)
    np.testing.assert_allclose(
        channel.observe(mechanism.aggregate(reports)), support / support.sum()
    )
