"""The accounting dispatches on privacy events, never on a mechanism's name or class."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

from analysis.accounting import (
    approximate_dp,
    device_privacy,
    from_channel,
    gaussian,
    mechanism_privacy,
    randomized_response_from,
    unary_encoding_from,
)
from analysis.accounting.device import event_privacy
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.privacy import (
    ApproximateEvent,
    ChannelEvent,
    ChannelSource,
    GaussianEvent,
    PermanentResponseEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    UnaryEncodingEvent,
)

DELTA = 1e-6
DEVICE = pathlib.Path(__file__).parents[3] / "analysis" / "accounting" / "device.py"


def test_each_event_gives_its_step() -> None:
    rr = RandomizedResponseEvent(1.0, 4)
    assert event_privacy(rr).epsilon_at(DELTA) == pytest.approx(
        randomized_response_from(rr.p, rr.q, 4).epsilon_at(DELTA), rel=1e-12
    )
    ue = UnaryEncodingEvent(0.5, 0.2)
    assert event_privacy(ue).delta_at(0.5) == pytest.approx(
        unary_encoding_from(0.5, 0.2).delta_at(0.5), rel=1e-12
    )
    g = GaussianEvent(2.0, claim=ApproximateEvent(2.0, 1e-5))
    assert event_privacy(g).mu == pytest.approx(0.5)
    assert event_privacy(g).claims() == [(2.0, 1e-5, 1)]
    assert (event_privacy(g) * 100).epsilon_at(DELTA) == pytest.approx(
        (gaussian(sigma=2.0) * 100).epsilon_at(DELTA), rel=1e-12
    )
    assert event_privacy(PureEvent(1.5)).epsilon_at(0.0) == pytest.approx(1.5)
    assert event_privacy(ApproximateEvent(1.0, 1e-3)).epsilon_at(1e-3) == pytest.approx(1.0)


def test_a_permanent_response_is_accounted_by_its_inner_event() -> None:
    event = PermanentResponseEvent(0.3, RandomizedResponseEvent(2.0, 6))
    assert event_privacy(event).epsilon_at(0.0) == pytest.approx(2.0, rel=1e-12)
    # Reports of few distinct values cost one permanent response each.
    assert device_privacy(event, 100, distinct_values=2).epsilon_at(0.0) == pytest.approx(4.0)
    # A non-memoized event ignores distinct_values.
    plain = RandomizedResponseEvent(0.3, 6)
    assert device_privacy(plain, 100, distinct_values=2).epsilon_at(0.0) == pytest.approx(30.0)


def test_a_channel_event_uses_the_channel_or_its_fallback() -> None:
    olh = mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": 6})
    assert isinstance(olh, ChannelSource)
    exact = event_privacy(ChannelEvent(olh, fallback=PureEvent(1.0)))
    assert exact.epsilon_at(DELTA) == pytest.approx(from_channel(olh).epsilon_at(DELTA))
    big = mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": 100_000})
    assert isinstance(big, ChannelSource)
    fallback = event_privacy(ChannelEvent(big, fallback=ApproximateEvent(1.0, 1e-9)))
    assert fallback.epsilon_at(DELTA) == pytest.approx(
        approximate_dp(1.0, 1e-9).epsilon_at(DELTA), rel=1e-12
    )


def test_an_unknown_event_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Shuffled(PrivacyEvent):
        n: int

    with pytest.raises(ValueError, match="unsupported privacy event"):
        event_privacy(Shuffled(10))
    with pytest.raises(ValueError, match="unsupported privacy event"):
        mechanism_privacy(PermanentResponseEvent(1.0, Shuffled(10)))


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "grr", "epsilon": 1.0, "k": 5},
        {"mechanism": "sue", "epsilon": 1.0, "k": 5},
        {"mechanism": "oue", "epsilon": 1.0, "k": 5},
    ],
)
def test_the_closed_forms_match_the_enumerated_channel(config: dict[str, object]) -> None:
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, ChannelSource)
    closed = mechanism_privacy(mechanism)
    enumerated = from_channel(mechanism)
    for eps in (0.0, 0.5, 1.0):
        assert closed.delta_at(eps) == pytest.approx(enumerated.delta_at(eps), rel=1e-9, abs=1e-15)


def test_device_accounting_names_no_mechanism() -> None:
    """No import of a mechanism module and no comparison with a mechanism's name."""
    tree = ast.parse(DEVICE.read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert imported & {f"client_sdk.mechanisms.{m}" for m in ("rappor", "grr", "unary")} == set()
    assert "longitudinal" not in " ".join(imported)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "name":
            parent_compare = [
                c
                for c in ast.walk(tree)
                if isinstance(c, ast.Compare) and any(n is node for n in ast.walk(c))
            ]
            assert not parent_compare, ast.unparse(parent_compare[0])
