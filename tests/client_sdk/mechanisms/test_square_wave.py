"""Square Wave (Li et al., SIGMOD 2020): exact privacy, the sampler against its declared channel,
the unbiased mean with its exact variance, the wire and bad configs (docs/math/richer-data.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.square_wave import SquareWave, square_wave_b
from tests.stats import assert_chi_square, assert_within_z


def small(epsilon: float = 1.0, bins: int = 8) -> SquareWave:
    m = mechanism_from_config(
        {"mechanism": "square_wave", "epsilon": epsilon, "lower": 0.0, "upper": 4.0, "bins": bins}
    )
    assert isinstance(m, SquareWave)
    return m


def test_b_matches_the_paper() -> None:
    # b = 0.256 at eps 1, 0.129 at eps 2, 0.0304 at eps 4 (Li et al. 2020, from the formula)
    assert square_wave_b(1.0) == pytest.approx(0.2565, abs=5e-4)
    assert square_wave_b(2.0) == pytest.approx(0.1289, abs=5e-4)
    assert square_wave_b(4.0) == pytest.approx(0.0304, abs=5e-4)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_exact_privacy_over_every_pair_of_grid_inputs(epsilon: float) -> None:
    m = small(epsilon, bins=2048)  # N = 2048 steps, a few thousand outputs
    (matrix,) = list(m.channel_matrices())
    assert matrix.shape == (m.steps + 1, m.output_size)
    assert np.allclose(matrix.sum(axis=1), 1.0, atol=1e-12)
    worst = m.implemented_epsilon()
    assert worst <= epsilon and worst == pytest.approx(epsilon, rel=1e-9)
    high, low = matrix.max(axis=0), matrix.min(axis=0)
    assert float(np.max(np.log(high / low))) <= epsilon + 1e-12


def test_sampler_matches_the_declared_channel() -> None:
    m = small(1.0, bins=64)  # N = 1024
    rng = np.random.default_rng(7)
    for value in (0.0, 1.3, 4.0):
        reports = m.perturb(np.full(200_000, value), rng=rng)
        probabilities = m.kernel.output_distribution(float(m.to_unit(np.array([value]))[0]))
        assert_chi_square(np.bincount(reports, minlength=m.output_size), probabilities)


def test_fast_channel_maps_equal_the_matrix() -> None:
    m = small(2.0, bins=16)
    rng = np.random.default_rng(1)
    theta, r = rng.random((3, m.steps + 1)), rng.random((3, m.output_size))
    matrix = m.channel()
    assert np.allclose(m.forward(theta), theta @ matrix, atol=1e-12)
    assert np.allclose(m.backward(r), r @ matrix.T, atol=1e-12)


def test_mean_is_unbiased_with_exact_variance() -> None:
    m = small(1.0, bins=16)
    rng = np.random.default_rng(2024)
    values = rng.uniform(-0.5, 4.5, 2000)  # some outside the bounds: clipped
    clipped = np.clip(values, 0.0, 4.0)
    repetitions = 400
    reports = m.perturb(np.tile(values, repetitions), rng=rng).reshape(repetitions, -1)
    means = np.array([m.mean(m.aggregate(row)) for row in reports])
    exact = float(m.mean_variance(values).sum()) / len(values) ** 2
    assert_within_z(means.mean(), clipped.mean(), math.sqrt(exact / repetitions), what="mean")
    ratio = means.var(ddof=1) / exact
    assert abs(ratio - 1) <= 5.5 * math.sqrt(2 / (repetitions - 1)), f"variance ratio {ratio}"
    errors = [m.mean_standard_error(m.aggregate(row)) for row in reports[:20]]
    assert np.all(np.array(errors) ** 2 >= 0.8 * exact)  # conservative for a fixed population


def test_wire_round_trip_and_malformed_payloads() -> None:
    m = small()
    reports = m.perturb(np.array([0.0, 2.0, 4.0]), rng=np.random.default_rng(0))
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    good, errors = m.parse_wire([1, -1, m.output_size, "3", 2.0, True])
    assert good.tolist() == [1]
    assert [e.index for e in errors] == [1, 2, 3, 4, 5]
    assert str(m.output_size) in errors[1].reason


@pytest.mark.parametrize(
    ("field", "value"),
    [("bins", 1), ("bins", 2.5), ("epsilon", 0), ("upper", -1.0), ("bins", 10**6)],
)
def test_bad_configs_name_the_field(field: str, value: object) -> None:
    config = {"mechanism": "square_wave", "epsilon": 1.0, "lower": 0.0, "upper": 4.0, "bins": 8}
    config[field] = value
    with pytest.raises(ValueError, match=field):
        mechanism_from_config(config)


def test_config_round_trip() -> None:
    m = small(2.0, bins=32)
    assert mechanism_from_config(m.to_config()) == m
    assert m.privacy_event() is not None
