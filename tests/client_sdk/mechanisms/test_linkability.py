"""What an observer can link across a device's memoized reports (docs/math/memoization.md, "What
an observer can link"): each mechanism's stated figures, measured from ``perturb`` at a fixed
seed against the formula (binomial z-tests), and ``auto`` avoiding deterministic pseudonyms."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.dbitflip import DBitFlip
from client_sdk.mechanisms.memoized_oracle import Memoized
from client_sdk.mechanisms.onebitmean import OneBitMean
from client_sdk.mechanisms.rappor import RAPPOR
from client_sdk.secrets_store import DeviceKeys
from tests import stats

SECRET = bytes(range(32))
REPORTS = 20_000

CONFIGS: list[tuple[str, dict[str, Any], float]] = [
    ("grr", {"mechanism": "grr", "epsilon": 1.0, "k": 5}, 3.0),
    ("oue", {"mechanism": "oue", "epsilon": 0.8, "k": 5}, 2.0),
    ("olh", {"mechanism": "olh", "epsilon": 1.0, "k": 16}, 2.0),
    ("blh", {"mechanism": "blh", "epsilon": 0.5, "k": 6}, 1.5),
    ("ss", {"mechanism": "ss", "epsilon": 0.5, "k": 8}, 1.0),
    ("hr", {"mechanism": "hr", "epsilon": 0.5, "k": 6, "blocks": 1}, 1.0),
]


def memoized(config: dict[str, Any], permanent: float) -> Memoized:
    m = mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": permanent}})
    assert isinstance(m, Memoized)
    return m


def wire_strings(m: Any, reports: Any) -> list[str]:
    return [json.dumps(p, sort_keys=True) for p in m.to_wire(reports)]


def expected_recurrence(m: Memoized, prr: Any) -> float:
    """P[report == PRR]: the chain's resend probability; for the mixture chain a fresh report
    (of a uniform input) adds (1 - lambda) a(r), a(r) the permanent channel's column mean."""
    if m.chain != "mixture":
        return m.resend_probability
    (channel,) = list(m.permanent_channel_matrices())
    column = int(m.output_index(prr)[0])
    lam = m.instantaneous_parameter
    return lam + (1 - lam) * float(channel[:, column].mean())


@pytest.mark.parametrize(("name", "config", "permanent"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_recurrence_of_the_permanent_report_is_the_stated_one(
    name: str, config: dict[str, Any], permanent: float
) -> None:
    m = memoized(config, permanent)
    keys = DeviceKeys(SECRET, f"linkability-{name}")
    prr = m.permanent_responses([1], permanent=keys)
    reports = m.perturb(
        np.ones(REPORTS, dtype=np.int64), permanent=keys, rng=np.random.default_rng(7)
    )
    (target,) = wire_strings(m, prr)
    sent = wire_strings(m, reports)
    rate = sum(s == target for s in sent) / REPORTS
    expected = expected_recurrence(m, prr)
    stats.assert_within_z(
        rate, expected, np.sqrt(expected * (1 - expected) / REPORTS), what=f"{name}: recurrence"
    )
    assert m.deterministic_pseudonym == (m.chain == "l-lh")
    assert m.chain in m.linkability
    if m.chain == "l-lh":  # the seed is in every report: 20,000 of 20,000
        seeds = {p["seed"] for p in m.to_wire(reports)}
        assert seeds == {m.to_wire(prr)[0]["seed"]}
        assert "deterministic pseudonym" in m.linkability
    else:
        assert "no deterministic component" in m.linkability
    if m.chain == "mixture":
        assert f"{m.instantaneous_parameter:.4g}" in m.linkability  # lambda is stated


def test_rappor_bits_recur_with_q_and_one_minus_p() -> None:
    mech = RAPPOR(k=32, h=2, m=8, f=0.5, p=0.25, q=0.75)
    keys = DeviceKeys(SECRET, "linkability-rappor")
    cohort = mech.campaign_cohort(keys)
    _, _, prr = mech.permanent_response(
        ["x"], secret=keys.reference_secret, encoder_id=keys.scope, cohort=cohort
    )
    reports = mech.perturb(["x"] * 5000, permanent=keys, rng=np.random.default_rng(8))
    assert set(reports["cohort"].tolist()) == {cohort}  # constant in this campaign
    bits = np.array([[int(c) for c in p["bits"][::-1]] for p in mech.to_wire(reports)], dtype=bool)
    one, zero = mech.bit_recurrence
    for stated, mask in ((one, prr[0]), (zero, ~prr[0])):
        agree = bits[:, mask] == prr[0][mask]
        n = agree.size
        stats.assert_within_z(agree.mean(), stated, np.sqrt(stated * (1 - stated) / n))
    assert not mech.deterministic_pseudonym and "cohort" in mech.linkability


def test_memoized_dbitflip_is_a_deterministic_pseudonym() -> None:
    mech = DBitFlip(epsilon=1.0, k=16, d=4)
    keys = DeviceKeys(SECRET, "linkability-dbitflip")
    reports = mech.perturb(np.full(200, 3), permanent=keys, rng=np.random.default_rng(9))
    assert len(set(wire_strings(mech, reports))) == 1  # every report of one pattern identical
    assert mech.deterministic_pseudonym is True
    assert DBitFlip(epsilon=1.0, k=16, d=4, memoize=False).deterministic_pseudonym is False


def test_onebitmean_bit_recurs_with_one_minus_gamma() -> None:
    """The memoized bit (gamma = 0, the same keys: the same alpha and point bits) is resent
    with probability 1 - gamma."""
    config = {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0.0, "upper": 1.0}
    mech = mechanism_from_config({**config, "gamma": 0.1})
    assert isinstance(mech, OneBitMean)
    keys = DeviceKeys(SECRET, "linkability-onebitmean")
    values = np.full(REPORTS, 0.3)
    bits = np.asarray(mech.perturb(values, permanent=keys, rng=np.random.default_rng(1)))
    plain = mechanism_from_config(config)
    assert isinstance(plain, OneBitMean)
    memoized_bit = np.asarray(plain.perturb(values[:1], permanent=keys))
    assert mech.deterministic_pseudonym is False
    stated = 1 - mech.flip_probability
    rate = float((bits == memoized_bit[0]).mean())
    stats.assert_within_z(rate, stated, np.sqrt(stated * (1 - stated) / REPORTS))


# ---- auto avoids deterministic pseudonyms unless allowed -------------------------------------

GRID = [
    (k, epsilon, permanent)
    for k in (6, 64, 1024, 1 << 25, 10**9)
    for epsilon, permanent in ((0.5, 1.0), (1.0, 2.0), (2.0, 4.0))
]


def auto(k: int, epsilon: float, permanent: float, **longitudinal: Any) -> Memoized:
    config = {
        "mechanism": "auto",
        "epsilon": epsilon,
        "k": k,
        "longitudinal": {"epsilon_permanent": permanent, **longitudinal},
    }
    m = mechanism_from_config(config)
    assert isinstance(m, Memoized)
    return m


@pytest.mark.parametrize(("k", "epsilon", "permanent"), GRID)
def test_auto_never_picks_local_hashing_for_a_longitudinal_campaign_by_default(
    k: int, epsilon: float, permanent: float
) -> None:
    m = auto(k, epsilon, permanent)
    assert m.inner.name not in {"blh", "olh"} and not m.deterministic_pseudonym
    assert "allow_pseudonym" not in m.to_config()["longitudinal"]


def test_auto_can_pick_local_hashing_when_the_config_allows_a_pseudonym() -> None:
    """Above SS's and HR's largest k only GRR has no pseudonym, and OLH errs far less."""
    default = auto(1 << 25, 1.0, 2.0)
    allowed = auto(1 << 25, 1.0, 2.0, allow_pseudonym=True)
    assert default.inner.name == "grr"
    assert allowed.inner.name == "olh" and allowed.deterministic_pseudonym
    assert allowed.total_variance() < default.total_variance()
    config = allowed.to_config()
    assert config["longitudinal"] == {"epsilon_permanent": 2.0, "allow_pseudonym": True}
    assert mechanism_from_config(config) == allowed
    # Where a pseudonym-free choice is best anyway, allowing one changes nothing.
    assert auto(64, 1.0, 2.0, allow_pseudonym=True).inner.name == auto(64, 1.0, 2.0).inner.name


def test_allow_pseudonym_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match=r"longitudinal\.allow_pseudonym"):
        auto(8, 1.0, 2.0, allow_pseudonym="yes")
