"""Privacy events (client_sdk.mechanisms.privacy): validated descriptions, one per mechanism."""

from __future__ import annotations

import math
from typing import Any

import pytest

from client_sdk import mechanism_from_config
from client_sdk.mechanisms.privacy import (
    ApproximateEvent,
    ChannelEvent,
    GaussianEvent,
    PermanentResponseEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    UnaryEncodingEvent,
)

RAPPOR = {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.5, "p": 0.25, "q": 0.75}
GAUSSIAN = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "lower": -2.0, "upper": 3.0}


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: PureEvent(0.0), "epsilon"),
        (lambda: PureEvent(math.inf), "epsilon"),
        (lambda: ApproximateEvent(1.0, 1.0), "delta"),
        (lambda: ApproximateEvent(-1.0, 0.1), "epsilon"),
        (lambda: RandomizedResponseEvent(1.0, 1), "k"),
        (lambda: RandomizedResponseEvent(-1.0, 4), "epsilon"),
        (lambda: UnaryEncodingEvent(0.3, 0.6), "q < p"),
        (lambda: UnaryEncodingEvent(1.0, 0.5), "p"),
        (lambda: GaussianEvent(0.0), "noise_multiplier"),
        (lambda: GaussianEvent(1.0, claim=(1.0, 0.0)), "claim"),  # type: ignore[arg-type]
        (lambda: ChannelEvent(object(), fallback=PureEvent(1.0)), "source"),  # type: ignore[arg-type]
        (lambda: PermanentResponseEvent(0.0, PureEvent(1.0)), "epsilon_1"),
        (
            lambda: PermanentResponseEvent(1.0, PermanentResponseEvent(1.0, PureEvent(1.0))),
            "inner",
        ),
    ],
)
def test_events_validate_their_fields(build: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        build()


def test_events_are_frozen_values() -> None:
    event = RandomizedResponseEvent(1.0, 4)
    assert event == RandomizedResponseEvent(1.0, 4) and hash(event) == hash(
        RandomizedResponseEvent(1.0, 4)
    )
    with pytest.raises(AttributeError):
        event.k = 5  # type: ignore[misc]
    assert event.p / event.q == pytest.approx(math.e, rel=1e-12)
    assert event.p + 3 * event.q == pytest.approx(1.0, rel=1e-15)


def test_grr_and_unary_encoding_describe_their_implemented_probabilities() -> None:
    grr: Any = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 5})
    event = grr.privacy_event()
    assert isinstance(event, RandomizedResponseEvent) and event.k == 5
    assert event.p == pytest.approx(grr.p_star, rel=1e-12)
    assert event.q == pytest.approx(grr.q_star, rel=1e-12)
    for name in ("sue", "oue"):
        ue: Any = mechanism_from_config({"mechanism": name, "epsilon": 1.0, "k": 5})
        assert ue.privacy_event() == UnaryEncodingEvent(ue.p_star, ue.q_star)


def test_gaussian_describes_its_noise_multiplier_and_claim() -> None:
    mechanism: Any = mechanism_from_config(GAUSSIAN)
    event = mechanism.privacy_event()
    assert isinstance(event, GaussianEvent)
    assert event.noise_multiplier == pytest.approx(mechanism.sigma / 5.0, rel=1e-15)
    assert event.claim == ApproximateEvent(1.0, 1e-5)


def test_other_oracles_describe_their_channel_with_the_claim_as_fallback() -> None:
    olh = mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": 6})
    event = olh.privacy_event()
    assert isinstance(event, ChannelEvent) and event.source is olh and event.stage is None
    assert event.fallback == PureEvent(olh.privacy_epsilon)


def test_numeric_mechanisms_default_to_their_claim() -> None:
    config = {"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 1}
    laplace = mechanism_from_config(config)
    assert laplace.privacy_event() == PureEvent(1.0)


def test_memoized_mechanisms_describe_their_permanent_response() -> None:
    rappor: Any = mechanism_from_config(RAPPOR)
    event = rappor.privacy_event()
    assert isinstance(event, PermanentResponseEvent)
    assert event.epsilon_1 == pytest.approx(rappor.privacy_epsilon)
    assert isinstance(event.inner, ChannelEvent) and event.inner.stage == "permanent"
    assert event.inner.fallback == PureEvent(rappor.epsilon_inf)

    config = {"mechanism": "grr", "epsilon": 1.0, "k": 6, "longitudinal": {"epsilon_permanent": 2}}
    memoized: Any = mechanism_from_config(config)
    event = memoized.privacy_event()
    assert isinstance(event, PermanentResponseEvent)
    assert event.inner == memoized.inner.privacy_event()
    assert isinstance(event.inner, RandomizedResponseEvent)
    assert event.inner.epsilon == pytest.approx(2.0, rel=1e-6)

    for config in (
        {"mechanism": "dbitflip", "epsilon": 1.0, "k": 5, "d": 2},
        {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 10},
    ):
        mechanism: Any = mechanism_from_config(config)
        event = mechanism.privacy_event()
        assert event == PermanentResponseEvent(
            mechanism.privacy_epsilon, PureEvent(mechanism.epsilon_inf)
        )
        fresh: Any = mechanism_from_config({**config, "memoize": False})
        assert not isinstance(fresh.privacy_event(), PermanentResponseEvent)


def test_every_registered_mechanism_answers_an_event() -> None:
    from client_sdk.mechanisms.registry import MECHANISMS

    configs: dict[str, dict[str, Any]] = {
        "rappor": RAPPOR,
        "gaussian": GAUSSIAN,
        "laplace": {"epsilon": 1.0, "lower": 0, "upper": 1},
        "duchi": {"epsilon": 1.0, "lower": 0, "upper": 1},
        "piecewise": {"epsilon": 1.0, "lower": 0, "upper": 1},
        "hybrid": {"epsilon": 1.0, "lower": 0, "upper": 1},
        "onebitmean": {"epsilon": 1.0, "lower": 0, "upper": 1},
        "dbitflip": {"epsilon": 1.0, "k": 5, "d": 2},
    }
    answered = 0
    for name in MECHANISMS:
        config = {"mechanism": name, **configs.get(name, {"epsilon": 1.0, "k": 6})}
        try:
            mechanism = mechanism_from_config(config)
        except ValueError:
            continue  # a mechanism whose config this table does not know
        assert isinstance(mechanism.privacy_event(), PrivacyEvent), name
        answered += 1
    assert answered >= 10
