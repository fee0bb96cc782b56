"""Memoization around every frequency oracle (client_sdk/mechanisms/memoized_oracle.py and the
chains each oracle builds, client_sdk/mechanisms/memoization.py).

What is checked, and how it can fail:
- configs round-trip and bad ones are refused naming the field;
- the two-stage chain of every oracle is private *exactly*: the composed one-report channel,
  enumerated from the inner mechanism's implemented channel and the IRR's implemented
  probabilities, has worst ratio <= e^epsilon and reaches it (rtol 1e-9); the permanent step alone
  is within e^E; the closed-form epsilon_1 agrees with the enumeration;
- the device path (HMAC under the secret) and the simulation path draw from that channel
  (chi-square, p >= 1e-6);
- the estimator is unbiased with the exact variance (z = 5.5, 1000 repetitions);
- an averaging attack recovers a value from 1,000 unmemoized reports, and with memoization does
  exactly as well as one permanent response allows (z = 5.5) and far worse than without.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import pytest

from analysis import estimate
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.memoization import (
    Chain,
    MixtureChain,
    generic_column_profile,
    is_memoized,
)
from client_sdk.mechanisms.memoized_oracle import Memoized
from client_sdk.secrets_store import DeviceKeys, load_or_create_device_secret
from tests import stats

SECRET = bytes(range(32))
SCOPE = "campaign-config-id"

# (name, config): small enough to enumerate every channel. E >= epsilon in all of them.
CHAIN_CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("grr-k2", {"mechanism": "grr", "epsilon": 0.5, "k": 2, "permanent": 2.0}),
    ("grr-k5", {"mechanism": "grr", "epsilon": 1.0, "k": 5, "permanent": 3.0}),
    ("grr-equal", {"mechanism": "grr", "epsilon": 2.0, "k": 4, "permanent": 2.0}),
    ("sue-k4", {"mechanism": "sue", "epsilon": 1.0, "k": 4, "permanent": 2.5}),
    ("oue-k5", {"mechanism": "oue", "epsilon": 0.8, "k": 5, "permanent": 2.0}),
    ("blh-k6", {"mechanism": "blh", "epsilon": 0.5, "k": 6, "permanent": 1.5}),
    ("olh-k5", {"mechanism": "olh", "epsilon": 1.0, "k": 5, "permanent": 2.0}),
    ("ss-k8", {"mechanism": "ss", "epsilon": 0.5, "k": 8, "permanent": 1.0}),
    ("hr-basic", {"mechanism": "hr", "epsilon": 0.5, "k": 6, "blocks": 1, "permanent": 1.0}),
    ("hr-blocked", {"mechanism": "hr", "epsilon": 1.5, "k": 12, "permanent": 2.0}),
    ("auto-k6", {"mechanism": "auto", "epsilon": 1.0, "k": 6, "permanent": 3.0}),
]


def build(config: dict[str, Any]) -> Memoized:
    full = {key: value for key, value in config.items() if key != "permanent"}
    full["longitudinal"] = {"epsilon_permanent": config["permanent"]}
    m = mechanism_from_config(full)
    assert isinstance(m, Memoized)
    return m


@pytest.fixture(params=CHAIN_CONFIGS, ids=[name for name, _ in CHAIN_CONFIGS])
def memoized(request: pytest.FixtureRequest) -> Memoized:
    return build(request.param[1])


# ---- configs -------------------------------------------------------------------------------


def test_config_round_trip(memoized: Memoized) -> None:
    config = memoized.to_config()
    assert json.loads(json.dumps(config)) == config
    assert mechanism_from_config(config) == memoized
    assert config["longitudinal"] == {"epsilon_permanent": memoized.epsilon_permanent}
    assert memoized.privacy_epsilon == config["epsilon"]
    assert memoized.epsilon_inf == memoized.inner.privacy_epsilon
    assert is_memoized(memoized)


def test_each_family_gets_its_classic_chain() -> None:
    chains = {name: build(config).chain for name, config in CHAIN_CONFIGS}
    assert chains["grr-k5"] == "l-grr"
    assert chains["sue-k4"] == chains["oue-k5"] == "l-ue"
    assert chains["blh-k6"] == chains["olh-k5"] == "l-lh"
    assert chains["ss-k8"] == chains["hr-basic"] == chains["hr-blocked"] == "mixture"


def test_auto_picks_the_best_composed_channel() -> None:
    m = build(dict(CHAIN_CONFIGS[-1][1]))
    assert m.inner.selected_by == "auto"
    for name in ("grr", "oue", "olh", "ss", "hr"):
        other = build({"mechanism": name, "epsilon": 1.0, "k": 6, "permanent": 3.0})
        assert m.total_variance() <= other.total_variance() * (1 + 1e-9)


@pytest.mark.parametrize("name", ["grr", "sue", "oue", "blh", "olh", "ss"])
def test_memoization_costs_no_accuracy_in_one_round(name: str) -> None:
    """With the shape resolved for epsilon (OLH's g, SS's d), each composed channel is its
    family's channel at epsilon: L-GRR is GRR, L-UE with OUE's p = 1/2 keeps P = 1/2, SS mixed
    with a uniform subset is SS. So the exact total error equals the unmemoized one."""
    for permanent in (1.0, 2.0, 4.0):
        m = build({"mechanism": name, "epsilon": 1.0, "k": 32, "permanent": permanent})
        plain = mechanism_from_config({"mechanism": name, "epsilon": 1.0, "k": 32})
        assert isinstance(plain, FrequencyOracle)
        assert m.total_variance() == pytest.approx(plain.total_variance(), rel=1e-9)
        assert mechanism_from_config(m.to_config()) == m


def test_explicit_shape_parameters_are_kept() -> None:
    m = build({"mechanism": "olh", "epsilon": 1.0, "k": 32, "g": 7, "permanent": 3.0})
    assert m.to_config()["g"] == 7
    resolved = build({"mechanism": "olh", "epsilon": 1.0, "k": 32, "permanent": 3.0})
    assert resolved.to_config()["g"] == round(math.exp(1.0) + 1)  # for epsilon, not for E


@pytest.mark.parametrize(
    ("longitudinal", "match"),
    [
        ({"epsilon_permanent": 0.5}, "epsilon_permanent must be >= epsilon"),
        ({"epsilon_permanent": -1.0}, "longitudinal.epsilon_permanent"),
        ({"epsilon_permanent": math.nan}, "longitudinal.epsilon_permanent"),
        ({"epsilon_permanent": True}, "longitudinal.epsilon_permanent"),
        ({"epsilon_permanent": "2"}, "longitudinal.epsilon_permanent"),
        ({}, "missing epsilon_permanent"),
        ({"epsilon_permanent": 2.0, "rounds": 3}, "unknown field"),
        (2.0, "longitudinal must be an object"),
        (None, "longitudinal must be an object"),
    ],
)
def test_bad_longitudinal_configs_are_refused(longitudinal: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(
            {"mechanism": "grr", "epsilon": 1.0, "k": 4, "longitudinal": longitudinal}
        )


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"mechanism": "grr", "k": 4}, "epsilon"),
        ({"mechanism": "grr", "epsilon": 1.0, "k": 1}, "k"),
        ({"mechanism": "grr", "epsilon": 1.0, "k": 4, "colour": 1}, "colour"),
        ({"mechanism": "nope", "epsilon": 1.0, "k": 4}, "mechanism must be one of"),
        ({"mechanism": "dbitflip", "epsilon": 1.0, "k": 4, "d": 2}, "own memoization"),
        ({"mechanism": "rappor", "epsilon": 1.0, "k": 4}, "own memoization"),
        ({"mechanism": "duchi", "epsilon": 1.0, "lower": 0, "upper": 1}, "frequency oracle"),
    ],
)
def test_bad_inner_configs_are_refused(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mechanism_from_config(config | {"longitudinal": {"epsilon_permanent": 2.0}})


def test_wrapper_refuses_bad_inner_objects() -> None:
    grr = GRR(2.0, 4)
    with pytest.raises(ValueError, match="epsilon_permanent must be >= epsilon"):
        Memoized(inner=grr, epsilon=2.5)
    with pytest.raises(ValueError, match="not memoized"):
        Memoized(inner=Memoized(inner=grr, epsilon=1.0), epsilon=1.0)


# ---- exact privacy of every chain ------------------------------------------------------------


def test_two_stage_chain_is_exactly_private(memoized: Memoized) -> None:
    # One report: the composed channel's worst ratio is e^epsilon, not more, and is reached.
    stats.assert_exact_privacy(memoized)
    assert memoized.claim_is_tight
    assert memoized.epsilon_one == pytest.approx(memoized.implemented_epsilon(), rel=1e-9)
    assert memoized.epsilon_one <= memoized.epsilon * (1 + 1e-12)
    # The permanent step alone is within e^E.
    worst_permanent = memoized.inner.implemented_epsilon()
    assert worst_permanent <= memoized.epsilon_permanent * (1 + 1e-9)
    for matrix in memoized.channel_matrices():
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)


@dataclasses.dataclass(frozen=True)
class _Unknown(GRR):
    """GRR that does not say what it is: the mixture chain and the generic column profile."""

    name: ClassVar[str] = "unknown-grr"

    def memoization_chain(self, target: Fraction) -> Chain:
        return MixtureChain(self, target)


def test_generic_bound_is_valid_and_tight_for_single_high_columns() -> None:
    m = Memoized(inner=_Unknown(3.0, 5), epsilon=1.0)
    assert m.chain == "mixture" and not m.claim_is_tight
    # GRR has output columns with a single high entry, so the generic bound is attained.
    stats.assert_exact_privacy(m)


def test_generic_bound_is_valid_for_any_channel() -> None:
    ss = build({"mechanism": "ss", "epsilon": 0.5, "k": 8, "permanent": 1.0}).inner
    # Force the generic profile on an SS channel (columns with d > 1 high entries): still valid.
    high, mean, exact = generic_column_profile(_Unknown(ss.epsilon, 8))
    assert not exact

    class Generic(MixtureChain):
        def __init__(self, inner: FrequencyOracle, target: Any) -> None:
            self.high_ratio, self.mean_ratio, self.tight = high, mean, False
            Chain.__init__(self, inner, target)

    chain = Generic(ss, Fraction(math.exp(0.5)))
    worst = max(
        float(np.max(np.log(c.max(axis=0) / c.min(axis=0))))
        for c in (chain.compose(matrix) for matrix in ss.channel_matrices())
    )
    assert worst <= 0.5 * (1 + 1e-9)
    assert worst < 0.5 * (1 - 1e-3)  # loose for SS, which is why SS has its exact profile


# ---- the implemented channel -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["grr-k5", "oue-k5", "ss-k8", "hr-blocked"])
def test_simulated_reports_follow_the_composed_channel(name: str) -> None:
    m = build(dict(CHAIN_CONFIGS[[n for n, _ in CHAIN_CONFIGS].index(name)][1]))
    (matrix,) = list(m.channel_matrices())
    rng = np.random.default_rng(11)
    for x in (0, m.k - 1):
        reports = m.perturb_independent_devices(np.full(30_000, x), rng=rng)
        observed = np.bincount(m.output_index(reports), minlength=matrix.shape[1])
        stats.assert_chi_square(observed, matrix[x], what=f"{name} outputs for input {x}")


@pytest.mark.parametrize("name", ["grr-k5", "sue-k4", "hr-basic"])
def test_device_path_follows_the_composed_channel(name: str) -> None:
    """Many devices (one secret each), one report each: the HMAC-derived PRR plus the IRR."""
    m = build(dict(CHAIN_CONFIGS[[n for n, _ in CHAIN_CONFIGS].index(name)][1]))
    (matrix,) = list(m.channel_matrices())
    (permanent_matrix,) = list(m.permanent_channel_matrices())
    rng = np.random.default_rng(12)
    devices = 4000
    secrets = [rng.bytes(32) for _ in range(devices)]
    x = 1
    reports = np.concatenate(
        [m.perturb([x], rng=rng, permanent=DeviceKeys(s, SCOPE)) for s in secrets]
    )
    prrs = np.concatenate(
        [m.permanent_responses([x], permanent=DeviceKeys(s, SCOPE)) for s in secrets]
    )
    observed = np.bincount(m.output_index(reports), minlength=matrix.shape[1])
    stats.assert_chi_square(observed, matrix[x], what=f"{name} device reports")
    observed_prr = np.bincount(m.output_index(prrs), minlength=matrix.shape[1])
    stats.assert_chi_square(observed_prr, permanent_matrix[x], what=f"{name} permanent responses")


def test_permanent_response_is_deterministic_and_independent() -> None:
    m = build({"mechanism": "grr", "epsilon": 1.0, "k": 16, "permanent": 2.0})
    again = mechanism_from_config(m.to_config())
    assert isinstance(again, Memoized)
    values = np.array([3, 7, 3, 0, 15, 7])
    first = m.permanent_responses(values, permanent=DeviceKeys(SECRET, SCOPE))
    np.testing.assert_array_equal(
        first, again.permanent_responses(values, permanent=DeviceKeys(SECRET, SCOPE))
    )
    np.testing.assert_array_equal(first[[0, 1]], first[[2, 5]])  # same value, same PRR
    # Across secrets, the PRRs of two values (and of one value in two scopes) agree only at the
    # rate two independent draws do: sum_y P[y|3] P[y|7] = 2 p q + (k-2) q^2.
    rng = np.random.default_rng(3)
    secrets = [rng.bytes(32) for _ in range(3000)]
    a = np.array([m.permanent_responses([3], permanent=DeviceKeys(s, SCOPE))[0] for s in secrets])
    b = np.array([m.permanent_responses([7], permanent=DeviceKeys(s, SCOPE))[0] for s in secrets])
    c = np.array([m.permanent_responses([3], permanent=DeviceKeys(s, "other"))[0] for s in secrets])
    p, q = m.inner.p_star, m.inner.q_star
    for observed, expected in (
        (np.mean(a == b), 2 * p * q + 14 * q * q),
        (np.mean(a == c), p * p + 15 * q * q),
    ):
        stats.assert_within_z(observed, expected, math.sqrt(expected * (1 - expected) / 3000))


def test_reports_need_the_keyed_source() -> None:
    m = build({"mechanism": "oue", "epsilon": 1.0, "k": 8, "permanent": 2.0})
    with pytest.raises(ValueError, match="needs permanent=<keyed source>"):
        m.perturb([1, 2], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="permanent must be a keyed source"):
        m.perturb([1, 2], permanent=SECRET)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="secret must be bytes"):
        DeviceKeys(b"short", SCOPE)
    with pytest.raises(ValueError, match="scope is required"):
        DeviceKeys(SECRET, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"values\[0\]"):
        m.perturb([8], permanent=DeviceKeys(SECRET, SCOPE))
    reports = m.perturb([1, 2], permanent=DeviceKeys(SECRET, SCOPE))
    assert m.from_wire(m.to_wire(reports)).shape == reports.shape


def test_memo_keys_name_values_without_revealing_them() -> None:
    m = build({"mechanism": "grr", "epsilon": 1.0, "k": 16, "permanent": 2.0})
    keys = m.memo_keys([3, 3, 4], permanent=DeviceKeys(SECRET, SCOPE))
    assert keys[0] == keys[1] != keys[2]
    assert all(len(key) == 64 and int(key, 16) >= 0 for key in keys)
    assert m.memo_keys([3], permanent=DeviceKeys(SECRET, "other")) != keys[:1]
    assert m.memo_keys([3], permanent=DeviceKeys(bytes(32), SCOPE)) != keys[:1]


# ---- estimation --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["grr-k5", "oue-k5", "olh-k5", "ss-k8", "hr-blocked"])
def test_unbiased_with_exact_variance(name: str) -> None:
    m = build(dict(CHAIN_CONFIGS[[n for n, _ in CHAIN_CONFIGS].index(name)][1]))
    values = stats.skewed_population(m.k, 1500)
    stats.assert_unbiased_with_exact_variance(
        m, values, repetitions=1000, seed=21, estimates_fn=stats.fresh_device_estimates
    )


def test_general_variance_matches_the_pure_formula() -> None:
    """The mixture formula for an inner estimator of its own reduces to section 0 with p*', q*'
    when the inner mechanism is pure (basic HR: p* = e^E/(e^E+1), q* = 1/2)."""
    m = build(dict(CHAIN_CONFIGS[[n for n, _ in CHAIN_CONFIGS].index("hr-basic")][1]))
    assert not m._inner_is_pure
    f = np.array([0.4, 0.3, 0.1, 0.1, 0.1, 0.0])
    np.testing.assert_allclose(m.variance(900, f), FrequencyOracle.variance(m, 900, f), rtol=1e-9)


def test_device_fleet_estimate_through_analysis() -> None:
    """A real fleet: every device has its own secret; analysis.estimate needs nothing special."""
    m = build({"mechanism": "oue", "epsilon": 1.0, "k": 8, "permanent": 3.0})
    rng = np.random.default_rng(5)
    values = stats.skewed_population(8, 3000)
    reports = np.concatenate(
        [
            m.perturb([v], rng=rng, permanent=DeviceKeys(rng.bytes(32), SCOPE))
            for v in values.tolist()
        ]
    )
    result = estimate(m, reports)
    truth = np.bincount(values, minlength=8) / len(values)
    stats.assert_within_z(result.frequencies, truth, np.sqrt(m.variance(len(values), truth)))
    assert result.mechanism == m.to_config()


# ---- the averaging attack ------------------------------------------------------------------


def mode_attack(reports: np.ndarray, k: int) -> int:
    return int(np.argmax(np.bincount(reports, minlength=k)))


def test_averaging_attack_without_and_with_memoization() -> None:
    """1,000 reports of one fixed value from one device, GRR at epsilon 1 over k = 16.

    Without memoization the mode of the reports is the value (P[one report is v] = 0.153 vs
    0.057 for each other value). With memoization the reports only ever reveal the PRR, so the
    attacker succeeds exactly when the PRR is the value: at the rate p1 = P[PRR = v] across
    devices (z = 5.5), far below the unmemoized rate.
    """
    k, value, devices, reports_per_device = 16, 9, 400, 1000
    plain = GRR(1.0, k)
    m = build({"mechanism": "grr", "epsilon": 1.0, "k": k, "permanent": 2.0})
    rng = np.random.default_rng(2017)
    plain_hits = sum(
        mode_attack(plain.perturb(np.full(reports_per_device, value), rng=rng), k) == value
        for _ in range(devices)
    )
    memo_hits = 0
    prr_hits = 0
    for _ in range(devices):
        secret = rng.bytes(32)
        reports = m.perturb(
            np.full(reports_per_device, value), rng=rng, permanent=DeviceKeys(secret, SCOPE)
        )
        memo_hits += mode_attack(reports, k) == value
        prr_hits += (
            int(m.permanent_responses([value], permanent=DeviceKeys(secret, SCOPE))[0]) == value
        )
    assert plain_hits >= devices - 1
    p1 = m.inner.p_star  # e^2/(e^2+15) = 0.33
    stats.assert_within_z(memo_hits / devices, p1, math.sqrt(p1 * (1 - p1) / devices))
    assert memo_hits == prr_hits  # the attack learns the PRR and nothing else
    assert memo_hits / devices < 0.5 * plain_hits / devices


def test_unary_attack_does_no_better_than_one_permanent_response() -> None:
    """OUE, k = 8: the attacker averages 1,000 reports and guesses the most frequent bit; its
    success across devices (uniform values) is at most the Bayes rate of the PRR channel."""
    k, devices = 8, 600
    m = build({"mechanism": "oue", "epsilon": 1.0, "k": k, "permanent": 2.0})
    (permanent,) = list(m.permanent_channel_matrices())
    bayes = float(permanent.max(axis=0).sum() / k)  # best guess from the PRR, uniform prior
    rng = np.random.default_rng(8)
    hits = 0
    for _ in range(devices):
        value = int(rng.integers(k))
        reports = m.perturb(
            np.full(1000, value), rng=rng, permanent=DeviceKeys(rng.bytes(32), SCOPE)
        )
        bits = np.unpackbits(reports, axis=1, count=k).mean(axis=0)
        hits += int(np.argmax(bits)) == value
    se = math.sqrt(bayes * (1 - bayes) / devices)
    assert hits / devices <= bayes + stats.Z_TOLERANCE * se  # no better than the PRR allows
    stats.assert_within_z(hits / devices, bayes, se)  # and it does learn the PRR


# ---- the device secret ------------------------------------------------------------------------


def test_device_secret_is_created_once_private_and_kept(tmp_path: Any) -> None:
    state = tmp_path / "state"
    first = load_or_create_device_secret(state)
    assert len(first) == 32
    path = state / "device_secret"
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_or_create_device_secret(state) == first
    assert load_or_create_device_secret(tmp_path / "other") != first
    os.chmod(path, 0o644)
    assert load_or_create_device_secret(state) == first
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in state.iterdir()] == ["device_secret"]  # no temporary file left


def test_concurrent_creation_yields_one_secret(tmp_path: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: load_or_create_device_secret(tmp_path), range(32)))
    assert len(set(results)) == 1


def test_corrupt_secret_is_refused_not_replaced(tmp_path: Any) -> None:
    (tmp_path / "device_secret").write_bytes(b"too short")
    with pytest.raises(ValueError, match="must hold 32 bytes"):
        load_or_create_device_secret(tmp_path)
    assert (tmp_path / "device_secret").read_bytes() == b"too short"
