"""The contract every frequency oracle keeps (one abstract suite, as dp_accounting's
``PrivacyAccountantTest``), run over ``cases.SMALL_CONFIGS``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, WireFormatError
from tests import stats
from tests.client_sdk.mechanisms.cases import SMALL_CONFIGS, config_id


@pytest.fixture(params=SMALL_CONFIGS, ids=config_id)
def mechanism(request: pytest.FixtureRequest) -> FrequencyOracle:
    m = mechanism_from_config(request.param)
    assert isinstance(m, FrequencyOracle)
    return m


def test_config_round_trip(mechanism: FrequencyOracle) -> None:
    config = mechanism.to_config()
    assert mechanism_from_config(config) == mechanism
    import json

    assert json.loads(json.dumps(config)) == config


def test_wire_round_trip(mechanism: FrequencyOracle) -> None:
    values = np.arange(200) % mechanism.k
    reports = mechanism.perturb(values, rng=np.random.default_rng(1))
    payloads = mechanism.to_wire(reports)
    assert len(payloads) == len(values)
    import json

    decoded = mechanism.from_wire(json.loads(json.dumps(payloads)))
    assert mechanism.aggregate(decoded) == mechanism.aggregate(reports)
    np.testing.assert_array_equal(decoded, reports)


@settings(
    max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(
    junk=st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True),
        st.text(max_size=20),
        st.integers(min_value=-(2**70), max_value=-1),
        st.integers(min_value=2**60, max_value=2**70),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )
)
def test_from_wire_rejects_malformed_payloads(mechanism: FrequencyOracle, junk: Any) -> None:
    good = mechanism.to_wire(
        mechanism.perturb(np.zeros(3, dtype=np.int64), rng=np.random.default_rng(0))
    )
    payloads = [good[0], junk, good[1]]
    reports, errors = mechanism.parse_wire(payloads)
    if errors:
        assert [e.index for e in errors] == [1]
        assert errors[0].reason
        with pytest.raises(WireFormatError, match="report 1"):
            mechanism.from_wire(payloads)
    else:
        # Some junk may happen to be a valid payload (an in-range integer for GRR, say).
        assert len(reports) == 3


def test_from_wire_refuses_non_list(mechanism: FrequencyOracle) -> None:
    with pytest.raises(ValueError, match="list"):
        mechanism.from_wire("not a list")


@pytest.mark.parametrize("epsilon", [0, -1.0, math.inf, math.nan, True, "1"])
def test_bad_epsilon_is_refused_naming_the_field(mechanism: FrequencyOracle, epsilon: Any) -> None:
    config = mechanism.to_config() | {"epsilon": epsilon}
    with pytest.raises(ValueError, match="epsilon"):
        mechanism_from_config(config)


@pytest.mark.parametrize("k", [1, 0, -3, 2.5, 4.0, True, "8"])
def test_bad_k_is_refused_naming_the_field(mechanism: FrequencyOracle, k: Any) -> None:
    config = mechanism.to_config() | {"k": k}
    with pytest.raises(ValueError, match="k"):
        mechanism_from_config(config)


def test_unknown_config_field_is_refused(mechanism: FrequencyOracle) -> None:
    with pytest.raises(ValueError, match="colour"):
        mechanism_from_config(mechanism.to_config() | {"colour": "blue"})


def test_bad_values_are_refused(mechanism: FrequencyOracle) -> None:
    with pytest.raises(ValueError, match=r"values\[1\]"):
        mechanism.perturb(np.array([0, mechanism.k]), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"values\[0\]"):
        mechanism.perturb(np.array([-1, 0]), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="dtype"):
        mechanism.perturb(np.array([0.0, 1.0]), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="dtype"):
        mechanism.perturb(np.array([True, False]), rng=np.random.default_rng(0))


def test_exact_privacy_claim_holds_and_is_tight(mechanism: FrequencyOracle) -> None:
    stats.assert_exact_privacy(mechanism)
    # A mechanism claiming slightly less epsilon than it implements must fail the check.
    assert mechanism.implemented_epsilon() > mechanism.epsilon * (1 - 1e-6)


# Mechanisms with public randomness (local hashing's seed, dBitFlip's sampled buckets) have no
# single channel matrix over their outputs; their own modules test their output distribution.
CHANNEL_CONFIGS = [
    config for config in SMALL_CONFIGS if hasattr(mechanism_from_config(config), "output_index")
]


@pytest.mark.parametrize("config", CHANNEL_CONFIGS, ids=config_id)
def test_perturb_matches_declared_channel(config: dict[str, Any]) -> None:
    mechanism: Any = mechanism_from_config(config)
    assert isinstance(mechanism, FrequencyOracle)
    oracle: Any = mechanism  # output_index: the oracles whose reports are bit vectors
    (matrix,) = list(mechanism.channel_matrices())
    rng = np.random.default_rng(2024)
    draws = 40_000
    for x in range(mechanism.k):
        reports = mechanism.perturb(np.full(draws, x), rng=rng)
        observed = np.bincount(oracle.output_index(reports), minlength=matrix.shape[1])
        stats.assert_chi_square(observed, matrix[x], what=f"outputs for input {x}")


def test_unbiased_with_exact_variance(mechanism: FrequencyOracle) -> None:
    values = stats.skewed_population(mechanism.k, 3000)
    stats.assert_unbiased_with_exact_variance(mechanism, values, repetitions=1500, seed=7)


def test_default_randomness_is_the_csprng(mechanism: FrequencyOracle) -> None:
    values = stats.skewed_population(mechanism.k, 20_000)
    est = mechanism.estimate_frequencies(mechanism.aggregate(mechanism.perturb(values)))
    truth = np.bincount(values, minlength=mechanism.k) / len(values)
    stats.assert_within_z(est, truth, np.sqrt(mechanism.variance(len(values), truth)))


def test_seeded_generator_is_reproducible(mechanism: FrequencyOracle) -> None:
    values = np.arange(500) % mechanism.k
    a = mechanism.perturb(values, rng=np.random.default_rng(99))
    b = mechanism.perturb(values, rng=np.random.default_rng(99))
    np.testing.assert_array_equal(a, b)


def test_statistic_is_mergeable(mechanism: FrequencyOracle) -> None:
    reports = mechanism.perturb(np.arange(1000) % mechanism.k, rng=np.random.default_rng(5))
    whole = mechanism.aggregate(reports)
    parts = mechanism.aggregate(reports[:313]) + mechanism.aggregate(reports[313:])
    assert parts == whole
    assert mechanism.empty_statistic() + whole == whole
