"""The numeric mechanisms: config and wire contracts, validation, unbiasedness and exact
variance, exact privacy of the implemented (discretized) channels, and an empirical audit.

Statistical tolerances: z = 5.5 two-sided for means and variances (``tests.stats``), z = 5
one-sided per bin for the privacy audit (about 40 comparisons per mechanism, so a false alarm
below 1e-5 per mechanism), chi-square at alpha = 1e-6 for output distributions.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import WireFormatError
from client_sdk.mechanisms.duchi import Duchi, DuchiKernel
from client_sdk.mechanisms.gaussian import Gaussian
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma
from client_sdk.mechanisms.grid import exp_below
from client_sdk.mechanisms.laplace import Laplace
from client_sdk.mechanisms.numeric import BoundedMechanism, NumericMechanism
from client_sdk.mechanisms.piecewise import (
    EPSILON_STAR,
    Hybrid,
    HybridKernel,
    Piecewise,
    PiecewiseKernel,
)
from client_sdk.randomness import WORD_SPAN
from tests import stats

SCALAR_CONFIGS: list[dict[str, Any]] = [
    {"mechanism": "laplace", "epsilon": 1.0, "lower": -2.0, "upper": 3.0},
    {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "lower": -2.0, "upper": 3.0},
    {
        "mechanism": "gaussian",
        "epsilon": 0.5,
        "delta": 1e-6,
        "lower": 0.0,
        "upper": 1.0,
        "calibration": "classic",
    },
    {"mechanism": "duchi", "epsilon": 1.0, "lower": -2.0, "upper": 3.0},
    {"mechanism": "piecewise", "epsilon": 2.0, "lower": -2.0, "upper": 3.0},
    {"mechanism": "hybrid", "epsilon": 2.0, "lower": -2.0, "upper": 3.0},
    {"mechanism": "hybrid", "epsilon": 0.4, "lower": 0.0, "upper": 100.0},  # Duchi regime
]
VECTOR_CONFIGS: list[dict[str, Any]] = [
    {"mechanism": "gaussian", "epsilon": 2.0, "delta": 1e-5, "dim": 4, "clip_norm": 1.5},
    {"mechanism": "duchi", "epsilon": 5.0, "lower": 0.0, "upper": 1.0, "dim": 6},
    {"mechanism": "piecewise", "epsilon": 6.0, "lower": -1.0, "upper": 1.0, "dim": 5},
    {
        "mechanism": "hybrid",
        "epsilon": 3.0,
        "lower": -1.0,
        "upper": 1.0,
        "dim": 3,
        "coordinates": 3,
    },
]
CONFIGS = SCALAR_CONFIGS + VECTOR_CONFIGS


def config_id(config: dict[str, Any]) -> str:
    return "-".join(str(v) for v in config.values())


@pytest.fixture(params=CONFIGS, ids=config_id)
def mechanism(request: pytest.FixtureRequest) -> NumericMechanism:
    m = mechanism_from_config(request.param)
    assert isinstance(m, NumericMechanism)
    return m


def test_value_shapes() -> None:
    for config in SCALAR_CONFIGS:
        assert mechanism_from_config(config).value_shape == ()  # type: ignore[attr-defined]
    for config in VECTOR_CONFIGS:
        m = mechanism_from_config(config)
        assert m.value_shape == (config["dim"],)  # type: ignore[attr-defined]


def sample_inputs(m: NumericMechanism, n: int, seed: int = 0) -> np.ndarray:
    """Inputs spread over (and a little beyond) the domain, so that clipping is exercised."""
    rng = np.random.default_rng(seed)
    if isinstance(m, Gaussian) and m.dim is not None:
        assert m.clip_norm is not None
        x = rng.normal(size=(n, m.dim))
        return x * (1.3 * m.clip_norm / np.sqrt(m.dim))
    low, high = _bounds(m)
    span = high - low
    shape = (n,) if not m.value_shape else (n, m.width)
    return rng.uniform(low - 0.1 * span, high + 0.1 * span, size=shape)


def _bounds(m: NumericMechanism) -> tuple[float, float]:
    lower, upper = getattr(m, "lower", None), getattr(m, "upper", None)
    assert lower is not None and upper is not None
    return float(lower), float(upper)


def clipped(m: NumericMechanism, x: np.ndarray) -> np.ndarray:
    """The value the mechanism is unbiased for: x clipped to the box or the ball."""
    if isinstance(m, Gaussian) and m.dim is not None:
        assert m.clip_norm is not None
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x * np.minimum(1.0, m.clip_norm / np.maximum(norms, 1e-300))
    low, high = _bounds(m)
    return np.clip(x, low, high)


# ---- config and wire contracts ---------------------------------------------------------------


def test_config_round_trip(mechanism: NumericMechanism) -> None:
    config = mechanism.to_config()
    assert json.loads(json.dumps(config)) == config
    assert mechanism_from_config(config) == mechanism
    assert mechanism_from_config(json.loads(json.dumps(config))).to_config() == config


def test_wire_round_trip(mechanism: NumericMechanism) -> None:
    reports = mechanism.perturb(sample_inputs(mechanism, 300), rng=np.random.default_rng(1))
    payloads = mechanism.to_wire(reports)
    assert len(payloads) == 300
    decoded = mechanism.from_wire(json.loads(json.dumps(payloads)))
    np.testing.assert_array_equal(decoded, reports)
    assert mechanism.aggregate(decoded) == mechanism.aggregate(reports)
    # Integers only on the wire, all JSON-exact.
    flat = json.dumps(payloads)
    assert "." not in flat and "e" not in flat


@settings(
    max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(
    junk=st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True),
        st.text(max_size=10),
        st.integers(min_value=-(2**70), max_value=-(2**53)),
        st.integers(min_value=2**53, max_value=2**70),
        st.lists(st.integers(min_value=-5, max_value=2**22), max_size=7),
        st.lists(st.lists(st.integers(min_value=-2, max_value=7), max_size=3), max_size=4),
        st.lists(st.floats(allow_nan=True), min_size=1, max_size=6),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )
)
def test_from_wire_rejects_malformed_payloads(mechanism: NumericMechanism, junk: Any) -> None:
    good = mechanism.to_wire(
        mechanism.perturb(sample_inputs(mechanism, 2), rng=np.random.default_rng(0))
    )
    payloads = [good[0], junk, good[1]]
    reports, errors = mechanism.parse_wire(payloads)
    if errors:
        assert [e.index for e in errors] == [1]
        assert errors[0].reason
        assert len(reports) == 2
        with pytest.raises(WireFormatError, match="report 1"):
            mechanism.from_wire(payloads)
    else:  # some junk is a valid payload (an in-range integer, say): it must then decode
        assert len(reports) == 3
        assert mechanism.aggregate(reports).n == 3


def test_specific_malformed_payloads_are_named() -> None:
    vector = Duchi(epsilon=5.0, lower=0.0, upper=1.0, dim=6)  # k = 2 of 6 coordinates
    assert vector.sampled_coordinates == 2
    bad = [
        [[0, 1]],  # too few pairs
        [[0, 1], [0, 1]],  # repeated coordinate
        [[3, 1], [1, 0]],  # not increasing
        [[0, 1], [6, 0]],  # coordinate out of range
        [[0, 2], [1, 0]],  # output out of range
        [[0, True], [1, 0]],  # a bool is not an integer
        [[0, 1.0], [1, 0]],  # nor is a float
        [[0, 1, 2], [1, 0]],  # not a pair
    ]
    _, errors = vector.parse_wire(bad)
    assert [e.index for e in errors] == list(range(len(bad)))
    reasons = [e.reason for e in errors]
    assert "2 [coordinate, output] pairs" in reasons[0]
    assert "strictly increasing" in reasons[1] and "strictly increasing" in reasons[2]
    assert "[0, 6)" in reasons[3] and "[0, 2)" in reasons[4]
    assert "integer" in reasons[5] and "integer" in reasons[6]
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, dim=3, clip_norm=1.0)
    _, errors = gaussian.parse_wire([[1, 2], [1, 2, 2**53], [1, 2, "3"], 5, [1, 2, 3]])
    assert [e.index for e in errors] == [0, 1, 2, 3]
    assert "3 entries" in errors[0].reason and "2**53" not in errors[1].reason
    with pytest.raises(ValueError, match="list"):
        gaussian.from_wire("[1, 2, 3]")


# ---- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0, -1.0, math.inf, math.nan, True, "1", None])
def test_bad_epsilon_is_refused_naming_the_field(mechanism: NumericMechanism, epsilon: Any) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        mechanism_from_config(mechanism.to_config() | {"epsilon": epsilon})


def test_unknown_config_field_is_refused(mechanism: NumericMechanism) -> None:
    with pytest.raises(ValueError, match="colour"):
        mechanism_from_config(mechanism.to_config() | {"colour": "blue"})


BOUNDED = ["laplace", "duchi", "piecewise", "hybrid", "gaussian"]


@pytest.mark.parametrize("name", BOUNDED)
@pytest.mark.parametrize(
    ("lower", "upper", "match"),
    [
        (1.0, 1.0, "upper must be greater than lower"),
        (2.0, -1.0, "upper must be greater than lower"),
        (math.nan, 1.0, "lower"),
        (0.0, math.inf, "upper"),
        (-1e308, 1e308, "finite"),
        ("0", 1.0, "lower"),
        (0.0, True, "upper"),
    ],
)
def test_bad_bounds_are_refused(name: str, lower: Any, upper: Any, match: str) -> None:
    config = {"mechanism": name, "epsilon": 1.0, "lower": lower, "upper": upper}
    if name == "gaussian":
        config["delta"] = 1e-5
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(config)


@pytest.mark.parametrize("delta", [0, 1, 1.5, -1e-9, math.nan, math.inf, True, "0.1", None])
def test_gaussian_delta_outside_the_open_unit_interval_is_refused(delta: Any) -> None:
    config = {"mechanism": "gaussian", "epsilon": 1.0, "delta": delta, "lower": 0, "upper": 1}
    with pytest.raises(ValueError, match="delta"):
        mechanism_from_config(config)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"lower": 0.0, "upper": 1.0, "dim": 2, "clip_norm": 1.0}, "not both"),
        ({"dim": 2}, "both dim and clip_norm"),
        ({"clip_norm": 1.0}, "both dim and clip_norm"),
        ({}, "lower and upper"),
        ({"lower": 0.0}, "upper"),
        ({"dim": 0, "clip_norm": 1.0}, "dim"),
        ({"dim": 2.0, "clip_norm": 1.0}, "dim"),
        ({"dim": 2, "clip_norm": 0.0}, "clip_norm"),
        ({"dim": 2, "clip_norm": -1.0}, "clip_norm"),
        ({"lower": 0.0, "upper": 1.0, "calibration": "textbook"}, "calibration"),
        ({"lower": 0.0, "upper": 1.0, "granularity": 0.0}, "granularity"),
        ({"lower": 0.0, "upper": 1.0, "granularity": 0.5}, "too coarse"),
        ({"lower": 0.0, "upper": 1.0, "granularity": 1e-12}, "too fine"),
    ],
)
def test_bad_gaussian_configs_are_refused(extra: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mechanism_from_config({"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5} | extra)


def test_classic_gaussian_refuses_epsilon_at_least_one() -> None:
    config = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "lower": 0, "upper": 1}
    with pytest.raises(ValueError, match="epsilon < 1"):
        mechanism_from_config(config | {"calibration": "classic"})


@pytest.mark.parametrize("name", ["duchi", "piecewise", "hybrid"])
@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"dim": 0}, "dim"),
        ({"dim": -2}, "dim"),
        ({"dim": 1.5}, "dim"),
        ({"dim": 3, "coordinates": 4}, "coordinates"),
        ({"dim": 3, "coordinates": 0}, "coordinates"),
        ({"coordinates": 1}, "needs dim"),
    ],
)
def test_bad_vector_configs_are_refused(name: str, extra: dict[str, Any], match: str) -> None:
    config = {"mechanism": name, "epsilon": 1.0, "lower": 0.0, "upper": 1.0} | extra
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(config)


@pytest.mark.parametrize("name", ["laplace", "piecewise", "hybrid"])
@pytest.mark.parametrize("granularity", [0, -0.1, math.nan, "0.1", 1e-20])
def test_bad_granularity_is_refused(name: str, granularity: Any) -> None:
    config = {"mechanism": name, "epsilon": 1.0, "lower": 0.0, "upper": 1.0}
    with pytest.raises(ValueError, match="granularity"):
        mechanism_from_config(config | {"granularity": granularity})


def test_bad_values_are_refused_naming_the_index(mechanism: NumericMechanism) -> None:
    rng = np.random.default_rng(0)
    good = sample_inputs(mechanism, 4)
    for bad_value in (math.nan, math.inf, -math.inf):
        x = good.copy()
        if mechanism.value_shape:
            x[2, mechanism.width - 1] = bad_value
            where = rf"values\[2, {mechanism.width - 1}\]"
        else:
            x[2] = bad_value
            where = r"values\[2\]"
        with pytest.raises(ValueError, match=where + " must be finite"):
            mechanism.perturb(x, rng=rng)
        with pytest.raises(ValueError, match=where):
            mechanism.variance(x)
    with pytest.raises(ValueError, match="real numbers"):
        mechanism.perturb(good.astype(str), rng=rng)
    with pytest.raises(ValueError, match="real numbers"):
        mechanism.perturb(np.ones_like(good, dtype=bool), rng=rng)


def test_wrong_dimension_is_refused(mechanism: NumericMechanism) -> None:
    rng = np.random.default_rng(0)
    if mechanism.value_shape:
        d = mechanism.width
        for shape in [(5,), (5, d + 1), (5, d - 1), (2, d, 1)]:
            with pytest.raises(ValueError, match=rf"shape \(n, {d}\)"):
                mechanism.perturb(np.zeros(shape), rng=rng)
    else:
        with pytest.raises(ValueError, match="one-dimensional"):
            mechanism.perturb(np.zeros((5, 2)), rng=rng)
        # A scalar counts as one value.
        low, _ = _bounds(mechanism)
        assert len(mechanism.perturb(low, rng=rng)) == 1


def test_empty_input_gives_empty_reports(mechanism: NumericMechanism) -> None:
    shape = (0, mechanism.width) if mechanism.value_shape else (0,)
    reports = mechanism.perturb(np.zeros(shape), rng=np.random.default_rng(0))
    assert len(reports) == 0
    assert mechanism.aggregate(reports) == mechanism.empty_statistic()
    assert mechanism.to_wire(reports) == []


# ---- randomness, statistic -----------------------------------------------------------------


def test_seeded_generator_is_reproducible(mechanism: NumericMechanism) -> None:
    x = sample_inputs(mechanism, 500)
    a = mechanism.perturb(x, rng=np.random.default_rng(99))
    b = mechanism.perturb(x, rng=np.random.default_rng(99))
    np.testing.assert_array_equal(a, b)


def test_statistic_is_mergeable(mechanism: NumericMechanism) -> None:
    reports = mechanism.perturb(sample_inputs(mechanism, 1000), rng=np.random.default_rng(5))
    whole = mechanism.aggregate(reports)
    parts = mechanism.aggregate(reports[:313]) + mechanism.aggregate(reports[313:])
    assert parts.n == whole.n == 1000
    np.testing.assert_allclose(parts.counts, whole.counts, rtol=1e-12, atol=1e-9)
    assert mechanism.empty_statistic() + whole == whole
    np.testing.assert_allclose(
        mechanism.mean(whole), mechanism.estimates(reports).reshape(1000, -1).mean(axis=0)
    )


def test_default_randomness_is_the_csprng(mechanism: NumericMechanism) -> None:
    x = sample_inputs(mechanism, 20_000, seed=3)
    statistic = mechanism.aggregate(mechanism.perturb(x))
    truth = clipped(mechanism, x).reshape(len(x), -1).mean(axis=0)
    se = np.sqrt(mechanism.variance(x).reshape(len(x), -1).sum(axis=0)) / len(x)
    stats.assert_within_z(mechanism.mean(statistic), truth, se, what="mean with the CSPRNG")


# ---- unbiasedness and exact variance ---------------------------------------------------------


def check_mean_and_variance(
    m: NumericMechanism, value: np.ndarray, n: int, rng: np.random.Generator
) -> None:
    """n reports of one value: the mean and sample variance of the estimates match the clipped
    value and the exact variance within z = 5.5 (the variance's standard error from the sample
    fourth moment, which is exact asymptotically for any distribution)."""
    inputs = np.repeat(value[None, ...], n, axis=0)
    estimates = m.estimates(m.perturb(inputs, rng=rng)).reshape(n, -1)
    truth = clipped(m, inputs[:1]).reshape(-1)
    exact = m.variance(inputs[:1]).reshape(-1)
    stats.assert_within_z(estimates.mean(axis=0), truth, np.sqrt(exact / n), what="mean")
    centred = estimates - estimates.mean(axis=0)
    sample_variance = (centred**2).sum(axis=0) / (n - 1)
    fourth = (centred**4).mean(axis=0)
    se = np.sqrt(np.maximum(fourth - sample_variance**2, 1e-300) / n)
    stats.assert_within_z(sample_variance, exact, se, what="variance")


def test_unbiased_with_exact_variance(mechanism: NumericMechanism) -> None:
    rng = np.random.default_rng(2024)
    n = 200_000 if isinstance(mechanism, BoundedMechanism) else 60_000  # cheap ones get more
    if isinstance(mechanism, Gaussian) and mechanism.dim is not None:
        assert mechanism.clip_norm is not None
        c, d = mechanism.clip_norm, mechanism.dim
        values = [np.zeros(d), np.full(d, 0.3 * c / math.sqrt(d)), np.eye(d)[0] * 3 * c]
    else:
        low, high = _bounds(mechanism)
        points = [low, low + 0.37 * (high - low), high, high + 5 * (high - low)]
        if mechanism.value_shape:
            values = [np.array(points * mechanism.width)[: mechanism.width], np.full(1, low)]
            values[1] = np.linspace(low - 1, high, mechanism.width)
        else:
            values = [np.array(p) for p in points]
    for value in values:
        check_mean_and_variance(mechanism, value, n, rng)


def test_variance_check_detects_a_wrong_formula() -> None:
    """The variance check above fails when the formula is off by 5%."""

    class Wrong(Duchi):
        def variance(self, values: Any) -> np.ndarray:
            return 1.05 * super().variance(values)

    m = Wrong(epsilon=1.0, lower=0.0, upper=1.0)
    with pytest.raises(AssertionError, match="variance"):
        check_mean_and_variance(m, np.array(0.3), 200_000, np.random.default_rng(1))


def test_worst_case_variance_bounds_every_input(mechanism: NumericMechanism) -> None:
    x = sample_inputs(mechanism, 5000, seed=8)
    worst = mechanism.worst_case_variance()
    assert worst.shape == (mechanism.width,)
    assert np.all(mechanism.variance(x).reshape(len(x), -1) <= worst * (1 + 1e-12))


# ---- the variance table (docs/math/numeric.md) ---------------------------------------------


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_variances_match_the_continuous_formulas_on_the_unit_interval(epsilon: float) -> None:
    unit: dict[str, Any] = {"epsilon": epsilon, "lower": -1.0, "upper": 1.0}
    e, h = math.exp(epsilon), math.exp(epsilon / 2)
    laplace = Laplace(**unit)
    assert laplace.worst_case_variance()[0] == pytest.approx(8 / epsilon**2, rel=1e-5)
    duchi = Duchi(**unit)
    b = (e + 1) / (e - 1)
    expected = b * b - np.array([0.0, 0.25, 1.0])
    np.testing.assert_allclose(duchi.variance(np.array([0.0, 0.5, 1.0])), expected)
    piecewise = Piecewise(**unit)
    t = np.array([0.0, 0.5, 1.0])
    continuous = t**2 / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
    np.testing.assert_allclose(piecewise.variance(t), continuous, rtol=1e-5)
    hybrid = Hybrid(**unit)
    if epsilon > EPSILON_STAR:
        flat = (h + 3) / (3 * h * (h - 1)) + (e + 1) ** 2 / (h * (e - 1) ** 2)
    else:
        flat = b * b - t * t  # at or below eps*, the hybrid is Duchi's mechanism
    np.testing.assert_allclose(hybrid.variance(t), flat, rtol=1e-5)


def test_hybrid_worst_case_matches_the_published_values() -> None:
    unit: dict[str, Any] = {"lower": -1.0, "upper": 1.0}
    assert round(float(Hybrid(epsilon=2.0, **unit).worst_case_variance()[0]), 3) == 1.042
    assert round(float(Hybrid(epsilon=4.0, **unit).worst_case_variance()[0]), 3) == 0.219


def test_hybrid_switches_to_duchi_continuously_at_epsilon_star() -> None:
    assert abs(EPSILON_STAR - 0.6094) < 1e-4
    e, h = math.exp(EPSILON_STAR), math.exp(EPSILON_STAR / 2)
    hybrid_formula = (h + 3) / (3 * h * (h - 1)) + (e + 1) ** 2 / (h * (e - 1) ** 2)
    assert hybrid_formula == pytest.approx(((e + 1) / (e - 1)) ** 2, rel=1e-12)
    assert HybridKernel(EPSILON_STAR * 0.999, 64).alpha == 0.0
    assert HybridKernel(EPSILON_STAR * 1.001, 64).alpha > 0.0


def test_gaussian_sigma_is_analytic_and_the_noise_matches_it() -> None:
    scalar = Gaussian(epsilon=1.0, delta=1e-5, lower=10.0, upper=12.0)
    assert round(scalar.sigma / 2.0, 2) == 3.73
    assert scalar.sigma == analytic_gaussian_sigma(1.0, 1e-5, 2.0)
    assert scalar.noise_std / scalar.sigma - 1 == pytest.approx(0, abs=1e-8)
    vector = Gaussian(epsilon=0.5, delta=1e-5, dim=10, clip_norm=3.0)
    assert vector.sensitivity == 6.0
    assert round(vector.sigma / 6.0, 2) == 7.03
    # The grid's rounding slack (2 sqrt(dim) steps on 2 clip_norm/g) is all the extra noise.
    slack = math.sqrt(10) * vector.grid_step / 3.0
    assert vector.noise_std / vector.sigma - 1 == pytest.approx(slack, rel=1e-3)
    classic = Gaussian(epsilon=0.5, delta=1e-5, lower=0, upper=1, calibration="classic")
    assert round(classic.sigma, 2) == 9.69


# ---- exact privacy of the implemented channels ------------------------------------------------


def test_implemented_epsilon_is_within_the_claim_and_tight(mechanism: NumericMechanism) -> None:
    if isinstance(mechanism, Gaussian):
        delta = mechanism.implemented_delta()
        assert delta <= mechanism.delta
        if mechanism.calibration == "analytic":  # the classic sigma is looser by design
            assert delta >= mechanism.delta * (1 - 1e-4)
        return
    implemented = mechanism.implemented_epsilon()  # type: ignore[attr-defined]
    assert implemented <= mechanism.epsilon * (1 + 1e-12)
    assert implemented >= mechanism.epsilon * (1 - 1e-9)


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 2.5, 7.0, 20.0])
def test_duchi_thresholds_keep_the_ratio_below_e_to_the_epsilon_exactly(epsilon: float) -> None:
    kernel = DuchiKernel(epsilon)
    ratio = Fraction(kernel.high_threshold, kernel.low_threshold)
    assert ratio <= Fraction(exp_below(epsilon))  # exp_below(eps) <= e^eps in real numbers
    assert float(ratio) >= math.exp(epsilon) * (1 - 1e-9)
    # The channel is the two rows of t = -1 and t = +1; every input mixes them, unbiasedly.
    low, high = kernel.output_distribution(-1.0), kernel.output_distribution(1.0)
    assert high[1] == float(Fraction(kernel.high_threshold, WORD_SPAN))
    assert low[1] == float(Fraction(kernel.low_threshold, WORD_SPAN))
    decoded = kernel.decode(np.array([0, 1]))
    for t in np.linspace(-1, 1, 41):
        p = kernel.output_distribution(float(t))
        assert low[1] <= p[1] <= high[1]
        assert p @ decoded == pytest.approx(t, abs=1e-12)
    assert high @ decoded == pytest.approx(1.0, abs=1e-15)
    assert low @ decoded == pytest.approx(-1.0, abs=1e-15)


SMALL_GRID = [
    PiecewiseKernel(1.0, 16),
    PiecewiseKernel(0.3, 7),
    PiecewiseKernel(5.0, 40),
    HybridKernel(2.0, 10),
    HybridKernel(0.5, 12),
    HybridKernel(4.0, 33),
]


@pytest.mark.parametrize("kernel", SMALL_GRID, ids=repr)
def test_grid_kernels_exact_channel(kernel: PiecewiseKernel | HybridKernel) -> None:
    """Enumerate the implemented channel on every grid input: the worst ratio of output
    probabilities is e^epsilon (at most, and tight), and decoding is unbiased with the exact
    variance of the formula."""
    grid = np.linspace(-1.0, 1.0, kernel.steps + 1)
    matrix = np.array([kernel.output_distribution(float(t)) for t in grid])
    assert np.allclose(matrix.sum(axis=1), 1.0, atol=1e-14)
    used = matrix.max(axis=0) > 0  # outputs of an unused branch (hybrid below eps*) never occur
    assert np.all(matrix[:, used] > 0)
    worst = float(np.max(np.log(matrix[:, used].max(axis=0)) - np.log(matrix[:, used].min(axis=0))))
    assert worst <= kernel.epsilon * (1 + 1e-12)
    assert worst >= kernel.epsilon * (1 - 1e-9)
    assert kernel.implemented_epsilon() == pytest.approx(worst, rel=1e-12)
    decoded = kernel.decode(np.arange(kernel.output_size))
    means = matrix @ decoded
    np.testing.assert_allclose(means, grid, atol=1e-12)
    variances = matrix @ decoded**2 - means**2
    np.testing.assert_allclose(variances, kernel.variance(grid), rtol=1e-9)
    # Between grid points (randomized rounding) too.
    for t in (-0.93, 0.1234, 0.77):
        p = kernel.output_distribution(t)
        mean = p @ decoded
        assert mean == pytest.approx(t, abs=1e-12)
        assert p @ decoded**2 - mean**2 == pytest.approx(kernel.variance(np.array([t]))[0])


def test_piecewise_levels_are_exact_fractions() -> None:
    kernel = PiecewiseKernel(1.7, 1 << 20)
    p_high, p_low = kernel.levels
    assert p_high / p_low <= Fraction(exp_below(1.7))
    assert float(p_high / p_low) >= math.exp(1.7) * (1 - 1e-12)
    assert kernel.window == round((1 << 20) * math.exp(-0.85))


@pytest.mark.parametrize("kernel", SMALL_GRID, ids=repr)
def test_grid_kernels_sample_their_declared_channel(kernel: PiecewiseKernel | HybridKernel) -> None:
    rng = np.random.default_rng(77)
    for t in (-1.0, -0.2, 0.55, 1.0):
        outputs = kernel.sample(rng, np.full(60_000, t))
        observed = np.bincount(outputs, minlength=kernel.output_size)
        stats.assert_chi_square(observed, kernel.output_distribution(t), what=f"t={t}")


def test_duchi_samples_its_declared_channel() -> None:
    kernel = DuchiKernel(0.8)
    rng = np.random.default_rng(78)
    for t in (-1.0, 0.3, 1.0):
        observed = np.bincount(kernel.sample(rng, np.full(200_000, t)), minlength=2)
        stats.assert_chi_square(observed, kernel.output_distribution(t), what=f"t={t}")


def test_laplace_rate_is_below_epsilon_exactly_and_the_channel_ratio_is_that_rate() -> None:
    for epsilon in (0.1, 0.7, 1.0, 3.3):
        m = Laplace(epsilon=epsilon, lower=0.0, upper=1.0)
        rate = m.implemented_rate()
        assert rate <= Fraction(epsilon)
        assert float((Fraction(epsilon) - rate) / Fraction(epsilon)) < 1e-12
    # On a coarse grid, enumerate: outputs y for the extreme grid inputs 0 and N.
    m = Laplace(epsilon=1.0, lower=0.0, upper=1.0, granularity=0.1)
    assert m.grid_steps == 10
    y = np.arange(-400, 411)
    low, high = m.noise.pmf(y), m.noise.pmf(y - m.grid_steps)
    worst = float(np.max(np.abs(np.log(low) - np.log(high))))
    assert worst == pytest.approx(m.implemented_epsilon(), rel=1e-12)
    # The mechanism's outputs at a grid input follow the noise pmf (chi-square with tails).
    outputs = m.perturb(np.full(100_000, 0.3), rng=np.random.default_rng(4)) - 3
    bulk = 60
    cells = np.concatenate([[m.noise.tail(bulk + 1)], m.noise.pmf(np.arange(-bulk, bulk + 1))])
    cells = np.concatenate([cells, [m.noise.tail(bulk + 1)]])
    observed = np.bincount(np.clip(outputs, -bulk - 1, bulk + 1) + bulk + 1, minlength=cells.size)
    stats.assert_chi_square(observed, cells, what="Laplace outputs")


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-5), (0.5, 1e-3), (3.0, 1e-8)])
def test_discrete_gaussian_exact_privacy_loss_is_within_the_claim(
    epsilon: float, delta: float
) -> None:
    """CKS 2020, Theorem 7, summed exactly on a coarse grid (sigma ~ 100 steps): the discrete
    mechanism's true delta is at most ``implemented_delta`` (the convolution bound), which is at
    most the configured delta."""
    sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
    steps = math.ceil(100 / sigma)  # sigma spans about 100 grid steps
    m = Gaussian(epsilon=epsilon, delta=delta, lower=0.0, upper=1.0, granularity=1.0 / steps)
    assert m.grid_steps == steps
    sigma_steps = math.sqrt(m.noise.sigma2)
    x = np.arange(-int(60 * sigma_steps), int(60 * sigma_steps) + steps + 1)
    p, q = m.noise.pmf(x), m.noise.pmf(x - steps)  # inputs 0 and N, the extremes
    exact = max(
        float(np.maximum(p - math.exp(epsilon) * q, 0).sum()),
        float(np.maximum(q - math.exp(epsilon) * p, 0).sum()),
    )
    assert 0 < exact <= m.implemented_delta() <= delta
    # The bound is not loose: the smoothing share costs a few percent of delta at most here.
    assert exact >= 0.5 * delta


# ---- empirical privacy audit -------------------------------------------------------------------


AUDIT_DRAWS = 150_000
AUDIT_Z = 5.0


def extremes(m: NumericMechanism) -> tuple[np.ndarray, np.ndarray]:
    """The two inputs farthest apart: the ends of the range (or opposite box corners), or two
    opposite points of the clipping ball."""
    if isinstance(m, Gaussian) and m.dim is not None:
        assert m.clip_norm is not None
        return np.eye(m.dim)[0] * m.clip_norm, -np.eye(m.dim)[0] * m.clip_norm
    low, high = _bounds(m)
    if m.value_shape:
        return np.full(m.width, low), np.full(m.width, high)
    return np.array(low), np.array(high)


def audit(m: NumericMechanism, epsilon: float, delta: float, seed: int) -> list[str]:
    """Histogram a 1-D post-processing of the outputs (the estimate of coordinate 0) on the two
    extreme inputs, in bins fixed by a pilot run; return the bins where either frequency exceeds
    e^epsilon times the other plus delta by more than AUDIT_Z standard errors."""
    rng = np.random.default_rng(seed)
    a, b = extremes(m)

    def first_coordinate(value: np.ndarray, n: int) -> np.ndarray:
        reports = m.perturb(np.repeat(value[None, ...], n, axis=0), rng=rng)
        return m.estimates(reports).reshape(n, -1)[:, 0]

    pilot = np.concatenate([first_coordinate(a, 20_000), first_coordinate(b, 20_000)])
    edges = np.unique(np.quantile(pilot, np.linspace(0, 1, 21)[1:-1]))
    n = AUDIT_DRAWS
    pa = np.bincount(np.searchsorted(edges, first_coordinate(a, n)), minlength=edges.size + 1) / n
    pb = np.bincount(np.searchsorted(edges, first_coordinate(b, n)), minlength=edges.size + 1) / n
    e = math.exp(epsilon)
    failures = []
    for x, y, label in ((pa, pb, "a>b"), (pb, pa, "b>a")):
        se = np.sqrt((x * (1 - x) + e * e * y * (1 - y)) / n + 1 / n**2)
        excess = (x - e * y - delta) / se
        failures += [f"{label} bin {i}: z={z:.1f}" for i, z in enumerate(excess) if z > AUDIT_Z]
    return failures


def test_empirical_privacy_audit(mechanism: NumericMechanism) -> None:
    assert audit(mechanism, mechanism.privacy_epsilon, mechanism.privacy_delta, seed=31) == []


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "laplace", "lower": 0.0, "upper": 1.0},
        {"mechanism": "duchi", "lower": 0.0, "upper": 1.0},
        {"mechanism": "piecewise", "lower": 0.0, "upper": 1.0},
        {"mechanism": "hybrid", "lower": 0.0, "upper": 1.0, "dim": 2},
        {"mechanism": "gaussian", "delta": 1e-5, "lower": 0.0, "upper": 1.0},
    ],
    ids=lambda c: c["mechanism"],
)
def test_audit_detects_a_mechanism_weaker_than_claimed(config: dict[str, Any]) -> None:
    """The audit has power: a mechanism run at 3 epsilon fails an audit against epsilon."""
    m = mechanism_from_config(config | {"epsilon": 3.0})
    assert isinstance(m, NumericMechanism)
    assert audit(m, 1.0, m.privacy_delta, seed=32) != []


# ---- vectors: coordinate sampling ------------------------------------------------------------


@pytest.mark.parametrize("cls", [Duchi, Piecewise, Hybrid])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 5.0, 7.5, 12.0])
def test_coordinate_choice_minimizes_the_exact_worst_case(
    cls: type[BoundedMechanism], epsilon: float
) -> None:
    d = 10
    auto = cls(epsilon=epsilon, lower=-1.0, upper=1.0, dim=d)  # type: ignore[call-arg]
    worst = {
        k: float(
            cls(epsilon=epsilon, lower=-1.0, upper=1.0, dim=d, coordinates=k)  # type: ignore[call-arg]
            .worst_case_variance()
            .max()
        )
        for k in range(1, d + 1)
    }
    best = min(worst, key=lambda k: (worst[k], k))
    assert auto.sampled_coordinates == best
    assert auto.implemented_epsilon() <= epsilon * (1 + 1e-12)
    # Wang et al.'s rule k = max(1, min(d, floor(eps/2.5))) (ICDE 2019; docs/math/numeric.md) is
    # never better, and within 8% of the optimum here.
    rule = max(1, min(d, math.floor(epsilon / 2.5)))
    assert worst[best] <= worst[rule] <= worst[best] * 1.08


def test_vector_reports_sample_coordinates_uniformly() -> None:
    m = Piecewise(epsilon=6.0, lower=0.0, upper=1.0, dim=5, coordinates=2)
    k = m.sampled_coordinates
    assert k == 2
    reports = m.perturb(np.full((50_000, 5), 0.5), rng=np.random.default_rng(6))
    coordinates = reports["coordinates"]
    assert np.all(np.diff(coordinates, axis=1) > 0)
    pairs = coordinates[:, 0] * 5 + coordinates[:, 1]
    observed = np.bincount(pairs, minlength=25)
    expected = np.zeros(25)
    for i in range(5):
        for j in range(i + 1, 5):
            expected[i * 5 + j] = 1 / 10
    stats.assert_chi_square(observed, expected, what="coordinate pairs")
    coverage = m.aggregate(reports).counts[2]
    assert coverage.sum() == 50_000 * k


def test_vector_epsilon_composes_over_the_sampled_coordinates() -> None:
    m = Hybrid(epsilon=5.0, lower=0.0, upper=1.0, dim=7, coordinates=3)
    assert m.kernel.epsilon == pytest.approx(5.0 / 3)
    assert 3 * m.kernel.implemented_epsilon() == pytest.approx(m.implemented_epsilon())
    assert m.implemented_epsilon() <= 5.0 * (1 + 1e-12)
