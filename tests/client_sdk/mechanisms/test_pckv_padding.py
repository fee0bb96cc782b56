"""PCKV's ``padding`` (issue 21, item 6): required, with advice on choosing it; calibrated
estimates when it is the 99th percentile of the pairs a device holds; the bias of devices with
more pairs stated in every estimate's notes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analysis.kinds.key_value.estimate import estimate_key_value
from client_sdk.campaign import parse_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.pckv import PCKV, Pairs

K, EPSILON, N = 20, 2.0, 200_000


def population(seed: int) -> tuple[Pairs, np.ndarray]:
    """n devices holding 1 + Poisson(4.5) distinct keys (5.5 on average, at most k) of k keys of
    unequal popularity (sampled without replacement, Gumbel top-|S|), each key's value fixed in
    [-0.8, 0.8]; and the true frequencies."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(1 + rng.poisson(4.5, N), K).astype(np.int64)
    weights = 1.0 / np.arange(1, K + 1)
    scores = np.log(weights) + rng.gumbel(size=(N, K))
    ranked = np.argsort(-scores, axis=1)
    held = np.arange(K)[None, :] < sizes[:, None]
    keys = ranked[held].astype(np.int64)  # row by row, the first |S| ranked keys
    values = np.linspace(-0.8, 0.8, K)[keys]
    truth = np.bincount(keys, minlength=K) / N
    return Pairs(sizes, keys, values), truth


def rms_z(padding: int, variant: str | None, seed: int) -> float:
    pairs, truth = population(seed)
    config: dict[str, Any] = {"mechanism": "pckv", "epsilon": EPSILON, "k": K, "padding": padding}
    if variant is not None:
        config["variant"] = variant
    mechanism: Any = mechanism_from_config(config)
    rng = np.random.default_rng(seed + 100)
    result = estimate_key_value(mechanism, mechanism.perturb(pairs, rng=rng))
    z = (result.frequencies - truth) / result.frequency_std_errors
    return float(np.sqrt(np.mean(z**2)))


def test_a_config_without_padding_is_refused_with_how_to_choose_it() -> None:
    config = {"mechanism": "pckv", "epsilon": 2.0, "k": 20}
    with pytest.raises(ValueError, match=r"missing padding: .*99th percentile") as error:
        mechanism_from_config(config)
    assert "Gu et al." in str(error.value)
    with pytest.raises(ValueError, match=r"^mechanism: config for 'pckv' is missing padding"):
        parse_campaign({"name": "features", "mechanism": config})
    with pytest.raises(TypeError, match="padding"):
        PCKV(epsilon=2.0, k=20)  # type: ignore[call-arg]


def test_a_stored_config_reads_as_it_was_stored() -> None:
    """The collector stored normalised configs, which always carried padding (1 by default)."""
    stored = {"mechanism": "pckv", "epsilon": 2.0, "k": 20, "padding": 1}
    assert mechanism_from_config(stored).to_config() == stored


@pytest.mark.parametrize("variant", [None, "ue"])
def test_padding_at_the_99th_percentile_is_calibrated(variant: str | None) -> None:
    """The RMS of 20 calibrated z values lies in [0.55, 1.5] with probability 0.998 (chi-square
    with 20 degrees of freedom); devices above the 99th percentile (1%) bias each key by about
    0.1 standard error. The old default of 1 is tens of standard errors low."""
    pairs, _ = population(7)
    padding = int(np.percentile(pairs.sizes, 99))
    assert padding == 11
    assert 0.55 <= rms_z(padding, variant, seed=7) <= 1.5
    assert rms_z(1, variant, seed=7) > 10


def test_every_estimate_states_the_bias_of_larger_records() -> None:
    mechanism: Any = mechanism_from_config(
        {"mechanism": "pckv", "epsilon": 2.0, "k": 4, "padding": 3}
    )
    rng = np.random.default_rng(1)
    result = estimate_key_value(mechanism, mechanism.perturb([{0: 0.5, 1: -1.0}] * 50, rng=rng))
    (note,) = result.to_dict()["notes"]
    assert "more than 3" in note or "|S| > 3" in note
    assert "biased low" in note and "99th percentile" in note
    assert note in result.format_table()
