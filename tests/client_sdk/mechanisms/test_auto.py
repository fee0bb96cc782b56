"""``auto`` picks the registered oracle with the least exact total error, and says so."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from client_sdk import mechanism_from_config
from client_sdk.config import config_id
from client_sdk.mechanisms.auto import CANDIDATES, rank_candidates
from client_sdk.mechanisms.base import FrequencyOracle
from client_sdk.mechanisms.registry import MECHANISMS
from tests import stats


def auto(epsilon: float, k: int) -> FrequencyOracle:
    m = mechanism_from_config({"mechanism": "auto", "epsilon": epsilon, "k": k})
    assert isinstance(m, FrequencyOracle)
    return m


def independent_errors(epsilon: float, k: int) -> dict[str, float]:
    """Each registered candidate's own total_variance, built here from its own config."""
    errors = {}
    for name in CANDIDATES:
        if name in MECHANISMS:
            try:
                m = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": k})
            except ValueError:  # e.g. a bit-vector mechanism beyond its largest k
                continue
            assert isinstance(m, FrequencyOracle)
            errors[name] = m.total_variance()
    return errors


def test_small_domain_and_large_epsilon_picks_grr() -> None:
    m = auto(4.0, 4)
    assert m.name == "grr"
    assert m.to_config() == {"mechanism": "grr", "epsilon": 4.0, "k": 4, "selected_by": "auto"}


def test_large_domain_picks_an_optimal_oracle() -> None:
    for epsilon in [0.5, 1.0, 2.0]:
        assert auto(epsilon, 1024).name in {"oue", "olh", "ss"}


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 2.0, 4.0, 6.0, 10.0])
@pytest.mark.parametrize("k", [2, 3, 8, 64, 1024, 5000])
def test_pick_has_the_least_total_error(k: int, epsilon: float) -> None:
    m = auto(epsilon, k)
    errors = independent_errors(epsilon, k)
    best = min(errors.values())
    assert m.total_variance() <= best * (1 + 1e-9), (m.name, errors)
    # Ties go to the cheapest report: nothing before the pick in CANDIDATES is as good.
    earlier = CANDIDATES[: CANDIDATES.index(m.name)]
    assert all(errors[name] > best * (1 + 1e-9) for name in earlier if name in errors)
    assert rank_candidates(epsilon, k)[0][0] == next(iter(errors))


def test_wang_et_al_rule_between_grr_and_oue() -> None:
    # Per item (Var*), GRR beats OUE exactly when k - 2 < 3 e^eps (Wang et al. 2017;
    # docs/math/randomized-response.md); the total error adds the f-terms, (k-2)/(e^eps-1)
    # against 1, which auto also counts.
    for k, epsilon in [(4, 1.0), (10, 1.0), (12, 1.5), (60, 3.0), (200, 4.0), (200, 5.0)]:
        grr = mechanism_from_config({"mechanism": "grr", "epsilon": epsilon, "k": k})
        oue = mechanism_from_config({"mechanism": "oue", "epsilon": epsilon, "k": k})
        assert isinstance(grr, FrequencyOracle) and isinstance(oue, FrequencyOracle)
        rule = k - 2 < 3 * np.exp(epsilon)
        assert (grr.variance_per_user() < oue.variance_per_user()) == rule
        total = k * grr.variance_per_user() + (k - 2) / np.expm1(epsilon)
        assert grr.total_variance() == pytest.approx(total, rel=1e-12)


def test_config_says_auto_and_round_trips() -> None:
    m = auto(1.0, 64)
    config = m.to_config()
    assert config["selected_by"] == "auto" and config["mechanism"] == m.name
    assert json.loads(json.dumps(config)) == config
    assert mechanism_from_config(config) == m
    # The same oracle named explicitly is a different config (and so a different config id).
    plain = {key: value for key, value in config.items() if key != "selected_by"}
    assert mechanism_from_config(plain) != m
    assert config_id(plain) != config_id(config)
    assert mechanism_from_config(plain).to_config() == plain


def test_auto_pick_estimates_like_any_oracle() -> None:
    m = auto(2.0, 16)
    values = np.repeat(np.arange(16), 500)
    est = m.estimate_frequencies(m.aggregate(m.perturb(values, rng=np.random.default_rng(8))))
    truth = np.full(16, 1 / 16)
    stats.assert_within_z(est, truth, np.sqrt(m.variance(values.size, truth)))


def test_huge_domain_leaves_out_bit_vector_oracles() -> None:
    m = auto(1.0, 1 << 24)
    assert m.name not in {"sue", "oue", "ss"}
    assert mechanism_from_config(m.to_config()) == m


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"mechanism": "auto", "epsilon": 1.0}, "k"),
        ({"mechanism": "auto", "k": 8}, "epsilon"),
        ({"mechanism": "auto", "epsilon": 0, "k": 8}, "epsilon"),
        ({"mechanism": "auto", "epsilon": 1.0, "k": 1}, "k"),
        ({"mechanism": "auto", "epsilon": 1.0, "k": 8, "d": 2}, "d"),
        ({"mechanism": "auto", "epsilon": 1.0, "k": 8, "selected_by": "auto"}, "selected_by"),
        ({"mechanism": "grr", "epsilon": 1.0, "k": 8, "selected_by": "me"}, "selected_by"),
        ({"mechanism": "oue", "epsilon": 1.0, "k": 8, "selected_by": 1}, "selected_by"),
    ],
)
def test_bad_configs_are_refused_naming_the_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        mechanism_from_config(config)
