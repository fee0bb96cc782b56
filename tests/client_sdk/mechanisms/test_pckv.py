"""PCKV-GRR and PCKV-UE (Gu et al., USENIX Security 2020): the exact privacy of the correlated
perturbation over every key set and sign pattern (enumerated, and its closed form), the device
side against its declared channel, unbiased frequencies with their exact variance, means, the
vectorized packing of records, and bad inputs (docs/math/richer-data.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.estimation import DocumentedEstimate, estimate
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.pckv import PCKV, Pairs
from tests.stats import assert_chi_square, assert_within_z


def pckv(epsilon: float, k: int, padding: int, variant: str | None = None) -> PCKV:
    config: dict[str, object] = {"mechanism": "pckv", "epsilon": epsilon, "k": k}
    config["padding"] = padding
    if variant is not None:
        config["variant"] = variant
    m = mechanism_from_config(config)
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
    if k >= padding:
        assert worst == pytest.approx(m.epsilon_closed_form(), rel=1e-9)


@pytest.mark.parametrize(
    ("epsilon", "k", "padding"), [(1.0, 3, 1), (1.0, 3, 2), (2.0, 4, 2), (0.5, 2, 2), (3.0, 2, 3)]
)
def test_ue_exact_privacy_over_every_key_set(epsilon: float, k: int, padding: int) -> None:
    # every key set with every sign pattern against all 3^(k + l) output vectors
    m = pckv(epsilon, k, padding, "ue")
    (matrix,) = list(m.channel_matrices())
    assert matrix.shape == (3**k, 3 ** (k + padding))
    assert np.allclose(matrix.sum(axis=1), 1.0)
    worst = m.implemented_epsilon()
    assert worst <= epsilon * (1 + 1e-9)
    assert worst <= m.epsilon_closed_form() * (1 + 1e-9)
    if k >= padding:  # l agreeing keys against l disagreeing ones reach e^eps exactly
        assert worst == pytest.approx(epsilon, rel=1e-6)
        assert worst == pytest.approx(m.epsilon_closed_form(), rel=1e-9)
    else:  # fewer real keys than the padding: the dummies dilute every ratio
        assert worst < epsilon * 0.99


def ue_codes(m: PCKV, reports: np.ndarray) -> np.ndarray:
    """Each UE report as its column in ``output_distribution``: sum_j 3^j (y_j + 1)."""
    plus = np.unpackbits(reports[:, 0], axis=1)[:, : m.keys].astype(np.int64)
    minus = np.unpackbits(reports[:, 1], axis=1)[:, : m.keys].astype(np.int64)
    return (plus - minus + 1) @ (3 ** np.arange(m.keys))


@pytest.mark.parametrize("variant", [None, "ue"])
def test_device_side_matches_the_declared_channel(variant: str | None) -> None:
    m = pckv(1.0, 3, 2, variant) if variant else pckv(1.0, 4, 2)
    rng = np.random.default_rng(6)
    for record in ({0: 1.0, 2: -1.0}, {}, {1: 1.0, 2: 1.0, 0: -1.0}, {1: 0.0}):
        reports = m.perturb([record] * 100_000, rng=rng)
        if record == {1: 0.0}:  # v = 0 is the even mixture of the extremes
            expected = (m.output_distribution({1: 1}) + m.output_distribution({1: -1})) / 2
        else:
            expected = m.output_distribution({k: 1 if v > 0 else -1 for k, v in record.items()})
        outputs = ue_codes(m, reports) if variant else reports
        assert_chi_square(np.bincount(outputs, minlength=expected.size), expected)


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


@pytest.mark.parametrize("variant", [None, "ue"])
def test_frequencies_unbiased_with_exact_variance_and_means(variant: str | None) -> None:
    m = pckv(2.0, 5, 3, variant)  # padding >= every |S|: the frequency estimator is unbiased
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
    with pytest.raises(ValueError, match="position 1 has a non-integer key"):
        m.perturb([{0: 0.1}, {True: 0.5}])
    with pytest.raises(ValueError, match="position 0, key 1, must be a number"):
        m.perturb([{1: "0.5"}])
    with pytest.raises(ValueError, match="position 2, key 0, must be in"):
        m.perturb([{}, {1: 1.0}, {0: float("nan")}])
    with pytest.raises(ValueError, match=r"Pairs.keys must be in \[0, 4\)"):
        m.perturb(Pairs(np.array([1]), np.array([4]), np.array([0.5])))
    for field, value in (("k", 1), ("padding", 0), ("epsilon", 0), ("variant", "oue")):
        config = {"mechanism": "pckv", "epsilon": 1.0, "k": 4, "padding": 2, field: value}
        with pytest.raises(ValueError, match=field):
            mechanism_from_config(config)
    reports = m.perturb([{0: 0.2}, {}], rng=np.random.default_rng(0))
    assert np.array_equal(m.from_wire(m.to_wire(reports)), reports)
    good, errors = m.parse_wire([0, 2 * m.keys, -1, "1"])
    assert len(good) == 1 and [e.index for e in errors] == [1, 2, 3]


def test_packed_records_match_the_mappings() -> None:
    m = pckv(1.0, 6, 2)
    records = [{0: 0.5, 3: -1.0}, {}, {5: 1.0}, {1: 0.25, 2: 0.0, 4: -0.5}]
    pairs = m.pack(records)
    assert pairs.sizes.tolist() == [2, 0, 1, 3]
    assert pairs.keys.tolist() == [0, 3, 5, 1, 2, 4]
    assert pairs.values.tolist() == [0.5, -1.0, 1.0, 0.25, 0.0, -0.5]
    same = m.perturb(pairs, rng=np.random.default_rng(3))
    assert np.array_equal(same, m.perturb(records, rng=np.random.default_rng(3)))
    assert m.pack([]).sizes.size == 0 and m.perturb([], rng=np.random.default_rng(0)).size == 0


def test_ue_wire_round_trip_and_malformed_payloads() -> None:
    m = pckv(1.0, 4, 2, "ue")
    reports = m.perturb([{0: 0.2}, {}, {1: -1.0, 3: 1.0}], rng=np.random.default_rng(0))
    assert reports.shape == (3, 2, 1)
    wire = m.to_wire(reports)
    assert np.array_equal(m.from_wire(wire), reports)
    both = np.zeros((1, 2, 1), dtype=np.uint8)
    both[0, :, 0] = 0x80  # key 0 set in the plus and the minus rows
    payloads = [wire[1], "AA", [wire[1][0]], [wire[1][0], "!!"], [wire[1][0], "AAAA"]]
    good, errors = m.parse_wire([*payloads, m.to_wire(both)[0]])
    assert len(good) == 1
    assert [e.index for e in errors] == [1, 2, 3, 4, 5]
    assert "minus bits" in errors[2].reason
    assert "both +1 and -1" in errors[-1].reason
