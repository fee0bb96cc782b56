"""PCKV-GRR (Gu et al., USENIX Security 2020): the exact privacy of the correlated perturbation
over every key set and sign pattern, the device side against its declared channel, unbiased
frequencies with their exact variance, means, and bad inputs (docs/math/richer-data.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.estimation import DocumentedEstimate, estimate
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.pckv import PCKV
from tests.stats import assert_chi_square, assert_within_z


def pckv(epsilon: float, k: int, padding: int) -> PCKV:
    m = mechanism_from_config({"mechanism": "pckv", "epsilon": epsilon, "k": k, "padding": padding})
    assert isinstance(m, PCKV)
    return m


@pytest.mark.parametrize(
    ("epsilon", "k", "padding"), [(1.0, 3, 1), (1.0, 3, 2), (2.0, 4, 3), (0.5, 4, 1), (3.0, 2, 2)]
)
def test_exact_privacy_over_every_key_set(epsilon: float, k: int, padding: int) -> None:
    # every subset of keys (sizes above the padding included) with every sign pattern
    m = pckv(epsilon, k, padding)
    (matrix,) = list(m.channel_matrices())
    assert matrix.shape == (3**k, 2 * (k + padding))
    assert np.allclose(matrix.sum(axis=1), 1.0)
    worst = m.implemented_epsilon()
    assert worst <= epsilon * (1 + 1e-9)
    assert worst == pytest.approx(epsilon, rel=1e-6)


def test_device_side_matches_the_declared_channel() -> None:
    m = pckv(1.0, 4, 2)
    rng = np.random.default_rng(6)
    for record in ({0: 1.0, 3: -1.0}, {}, {1: 1.0, 2: 1.0, 3: -1.0}):
        reports = m.perturb([record] * 100_000, rng=rng)
        signs = {key: 1 if value > 0 else -1 for key, value in record.items()}
        assert_chi_square(np.bincount(reports, minlength=2 * m.keys), m.output_distribution(signs))


def population(n: int) -> list[dict[int, float]]:
    rng = np.random.default_rng(17)
    records = []
    for i in range(n):
        record: dict[int, float] = {}
        if i % 2 == 0:
            record[0] = 0.5
        if i % 3 == 0:
            record[1] = -0.8
        if i % 5 == 0:
            record[2] = float(rng.uniform(-1, 1))
        records.append(record)
    return records


def test_frequencies_unbiased_with_exact_variance_and_means() -> None:
    m = pckv(2.0, 5, 3)  # padding >= every |S|: the frequency estimator is unbiased
    records = population(3000)
    truth = np.array([sum(key in r for r in records) for key in range(5)]) / len(records)
    true_means = np.array([0.5, -0.8])
    rng = np.random.default_rng(8)
    repetitions = 300
    frequencies = np.empty((repetitions, 5))
    means = np.empty((repetitions, 5))
    for r in range(repetitions):
        est = estimate(m, m.perturb(records, rng=rng))
        frequencies[r], means[r] = est.frequencies, est.means
    exact = m.frequency_variance(len(records), truth)
    assert_within_z(frequencies.mean(axis=0), truth, np.sqrt(exact / repetitions))
    ratios = frequencies.var(axis=0, ddof=1) / exact
    assert_within_z(ratios, 1.0, math.sqrt(2 / (repetitions - 1)), what="variance ratio")
    # means of the keys 0 and 1 (a ratio estimator: consistent, its delta-method error matches)
    spread = means[:, :2].std(axis=0, ddof=1)
    assert_within_z(means[:, :2].mean(axis=0), true_means, spread / math.sqrt(repetitions) + 0.01)
    assert np.all(np.abs(est.mean_std_errors[:2] / spread - 1) < 0.25)
    assert isinstance(est, DocumentedEstimate)
    assert len(est.to_dict()["keys"]) == 5 and "PCKV" in est.format_table()


def test_bad_records_and_configs() -> None:
    m = pckv(1.0, 4, 2)
    with pytest.raises(ValueError, match=r"position 1 has a key outside \[0, 4\)"):
        m.perturb([{0: 0.1}, {7: 0.5}])
    with pytest.raises(ValueError, match=r"position 0, key 2, must be in \[-1, 1\]"):
        m.perturb([{2: 3.5}])
    with pytest.raises(ValueError, match="mapping"):
        m.perturb([[1, 2]])
    for field, value in (("k", 1), ("padding", 0), ("epsilon", 0)):
        config = {"mechanism": "pckv", "epsilon": 1.0, "k": 4, "padding": 2, field: value}
        with pytest.raises(ValueError, match=field):
            mechanism_from_config(config)
    reports = m.perturb([{0: 0.2}, {}], rng=np.random.default_rng(0))
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    good, errors = m.parse_wire([0, 2 * m.keys, -1, "1"])
    assert len(good) == 1 and [e.index for e in errors] == [1, 2, 3]
