"""Poisoning by impossible reports: laplace and gaussian refuse at upload every grid index an
honest device produces with probability below 2**-64, so one report moves a mean by a bounded
amount (an index of 2**53 - 1 moved a laplace mean on [0, 1] from 0.48 to 8.6e6)."""

from __future__ import annotations

import math
import secrets
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import requests

from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms._wire import IMPLAUSIBLE_PROBABILITY
from client_sdk.sampling import DiscreteGaussian, DiscreteLaplace
from tests.security.conftest import StartCollector, upload

P = IMPLAUSIBLE_PROBABILITY
LAPLACE = {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 1.0}
CONFIGS = [
    LAPLACE,
    {"mechanism": "laplace", "epsilon": 4.0, "lower": -5.0, "upper": 5.0, "granularity": 0.01},
    {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "lower": 0.0, "upper": 1.0},
    {"mechanism": "gaussian", "epsilon": 2.0, "delta": 1e-6, "dim": 4, "clip_norm": 1.0},
]


@pytest.mark.parametrize("scale", [0.5, 1.0, 7.25, 1000.0, 2.0**20])
def test_the_laplace_bound_is_the_exact_tail_quantile(scale: float) -> None:
    noise = DiscreteLaplace(Fraction(scale))
    bound = noise.magnitude_bound(P)
    assert 2 * noise.tail(bound + 1) <= P  # P[|X| > M] = 2 P[X >= M + 1], exactly
    assert 2 * noise.tail(bound - 1) > P  # and at most one step above the smallest such M


@pytest.mark.parametrize(("t", "m"), [(3, 3), (40, 50), (1000, 1100), (20_000, 20_001)])
def test_the_gaussian_bound_holds_for_the_exact_tail(t: int, m: int) -> None:
    noise = DiscreteGaussian(t, m)
    sigma = math.sqrt(noise.sigma2)
    bound = noise.magnitude_bound(P)
    # The exact tail mass, summed from the pmf far beyond where it matters.
    beyond = np.arange(bound + 1, bound + 1 + int(30 * sigma) + 50)
    assert 2 * float(noise.pmf(beyond).sum()) <= P
    # Subgaussian Chernoff is loose by a little: still within one sigma of the exact quantile.
    lower = max(0, bound - math.ceil(sigma) - 1)
    near = np.arange(lower + 1, bound + 1 + int(30 * sigma) + 50)
    assert 2 * float(noise.pmf(near).sum()) > P


def extreme_values(mechanism: Any, size: int) -> list[Any]:
    if getattr(mechanism, "dim", None) is None:
        return [np.full(size, mechanism.lower), np.full(size, mechanism.upper)]
    unit = np.zeros((size, mechanism.dim))
    unit[:, 0] = mechanism.clip_norm
    return [unit, -unit]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["mechanism"])
def test_parse_wire_refuses_exactly_outside_the_plausible_range(config: dict[str, Any]) -> None:
    mechanism: Any = mechanism_from_config(config)
    low, high = mechanism.plausible_range
    dim = getattr(mechanism, "dim", None)

    def payload(index: int) -> Any:
        return index if dim is None else [index] + [0] * (dim - 1)

    accepted = [payload(low), payload(high), payload(0)]
    refused = [payload(low - 1), payload(high + 1), payload((1 << 53) - 1), payload(-(1 << 52))]
    reports, errors = mechanism.parse_wire(accepted + refused)
    assert len(reports) == len(accepted)
    assert [e.index for e in errors] == [3, 4, 5, 6]
    assert all("grid index" in e.reason for e in errors)

    # Honest reports at the extremes of the input range are accepted (seeded; 2 x 100,000).
    rng = np.random.default_rng(20261201)
    for values in extreme_values(mechanism, 100_000):
        honest = mechanism.to_wire(mechanism.perturb(values, rng=rng))
        _, errors = mechanism.parse_wire(honest)
        assert errors == []


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["mechanism"])
def test_one_report_moves_a_mean_by_at_most_the_stated_bound(config: dict[str, Any]) -> None:
    mechanism: Any = mechanism_from_config(config)
    low, high = mechanism.estimate_range()
    dim = getattr(mechanism, "dim", None)
    width = mechanism.upper - mechanism.lower if dim is None else 2 * mechanism.clip_norm
    eps = config["epsilon"]
    # The bound is a data-independent constant: the input range plus ~45/eps (laplace) or
    # ~10 sigma (gaussian) noise widths on each side.
    assert high - low < width * (1 + 2 * 46 / eps) + 20 * getattr(mechanism, "sigma", 0)
    edges = [mechanism.plausible_range[0], mechanism.plausible_range[1]]
    reports, errors = mechanism.parse_wire(edges if dim is None else [[e] * dim for e in edges])
    assert errors == []
    estimates = np.asarray(mechanism.estimates(reports))
    assert np.allclose(estimates.min(), low) and np.allclose(estimates.max(), high)


def test_the_live_collector_refuses_the_poisoning_report_and_bounds_the_rest(
    start_collector: StartCollector,
) -> None:
    collector = start_collector(workers=1)
    campaign = {"name": "poison", "mechanism": LAPLACE, "min_batch_size": 10}
    config_id = collector.create_campaign(campaign)["config_id"]
    mechanism: Any = mechanism_from_config(LAPLACE)
    rng = np.random.default_rng(7)
    n = 1000
    honest = mechanism.to_wire(mechanism.perturb(np.full(n, 0.48), rng=rng))
    reports = [{"id": secrets.token_hex(16), "payload": p} for p in honest]
    assert upload(collector, "poison", config_id, reports).json()["accepted"] == n

    def mean() -> float:
        response = requests.get(
            f"{collector.url}/v1/campaigns/poison/estimate", headers=collector.admin(), timeout=30
        )
        assert response.status_code == 200, response.text
        return float(response.json()["mean"])

    before = mean()
    attack = upload(
        collector, "poison", config_id, [{"id": secrets.token_hex(16), "payload": (1 << 53) - 1}]
    ).json()
    assert attack["accepted"] == 0
    assert attack["rejected"][0]["code"] == "invalid_payload"
    assert mean() == before

    # The worst report the collector still accepts moves the mean by at most the stated bound.
    low, high = mechanism.estimate_range()
    worst = {"id": secrets.token_hex(16), "payload": mechanism.plausible_range[1]}
    assert upload(collector, "poison", config_id, [worst]).json()["accepted"] == 1
    shift = mean() - before
    assert 0 < shift <= (high - low) / n
    assert abs(mean() - 0.48) < 0.5  # was 8.6e6 with an index of 2**53 - 1
