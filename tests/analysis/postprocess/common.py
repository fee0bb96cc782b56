"""Shared set-up of the post-processing tests: seeded estimates of Zipf populations."""

from __future__ import annotations

import numpy as np

from analysis import estimate
from analysis.estimation import FrequencyEstimate
from analysis.postprocess import integer_counts
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle


def oracle(config: dict[str, object]) -> FrequencyOracle:
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, FrequencyOracle)
    return mechanism


def zipf_population(k: int, n: int, exponent: float = 1.5) -> np.ndarray:
    weights = 1.0 / np.arange(1, k + 1) ** exponent
    counts = integer_counts(weights / weights.sum(), n)
    return np.repeat(np.arange(k), counts)


def estimate_of(config: dict[str, object], values: np.ndarray, seed: int) -> FrequencyEstimate:
    mechanism = oracle(config)
    return estimate(mechanism, mechanism.perturb(values, rng=np.random.default_rng(seed)))
