"""A shuffled campaign's larger local epsilon is accepted only on the app's terms: routed through
a shuffler, within the app's central ceiling, and with the central target the device itself
computes from the amplification bound (a collector's numbers are not trusted).

A hostile test server (tests/security/test_device.py) serves campaign documents with valid
config ids and takes the uploads, as a shuffler would.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nacl.public import PrivateKey

from client_sdk import TelemetryClient
from client_sdk.amplification import numerical_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.policy import DEFAULT_POLICY, PolicyViolation, PrivacyPolicy
from client_sdk.protocol import campaign_config_id
from client_sdk.sealing import key_id_of
from collector.calibration import local_epsilon_for
from tests.security.test_device import LABELS, HostileCollector

CENTRAL, DELTA, MIN_BATCH = 1.0, 1e-6, 100_000
CEILING = PrivacyPolicy(max_central_epsilon=1.0)


def shuffled_document(
    name: str, epsilon: float, *, central: float = CENTRAL, delta: float = DELTA, **mechanism: Any
) -> dict[str, Any]:
    """A shuffled campaign document as any collector could serve it (valid config id, a real
    public key), claiming (central, delta) for batches of MIN_BATCH at local ``epsilon``."""
    config = mechanism_from_config({"mechanism": "grr", "k": 4, "epsilon": epsilon, **mechanism})
    shuffle = {"min_batch": MIN_BATCH, "central_epsilon": central, "delta": delta}
    public = bytes(PrivateKey.generate().public_key)
    return {
        "name": name,
        "mechanism": config.to_config(),
        "domain": LABELS,
        "policy": None,
        "min_batch_size": 1,
        "shuffle": shuffle,
        "config_id": campaign_config_id(
            mechanism=config.to_config(),
            domain=LABELS,
            policy=None,
            min_batch_size=1,
            shuffle=shuffle,
        ),
        "public_key": {
            "key_id": key_id_of(public),
            "key": base64.urlsafe_b64encode(public).decode().rstrip("="),
        },
    }


@pytest.fixture
def hostile() -> Iterator[HostileCollector]:
    server = HostileCollector()
    try:
        yield server
    finally:
        server.stop()


def _record(hostile: HostileCollector, state: Path, policy: PrivacyPolicy, **options: Any) -> int:
    """Record one value of campaign 's' and flush; how many reports were uploaded."""
    before = hostile.uploads
    with TelemetryClient(hostile.url, state_dir=state, policy=policy, **options) as client:
        client.record("s", LABELS[0])
        assert client.flush() == 1
    return hostile.uploads - before


def test_an_honest_shuffled_campaign_needs_a_central_ceiling_and_a_shuffler(
    hostile: HostileCollector, tmp_path: Path
) -> None:
    epsilon0 = local_epsilon_for(CENTRAL, MIN_BATCH, DELTA)  # 7.07: what the collector serves
    assert 7.0 < epsilon0 < 7.1
    hostile.documents["s"] = shuffled_document("s", epsilon0)
    # The default policy holds every campaign to max_epsilon = 4.
    with pytest.raises(PolicyViolation) as caught:
        _record(hostile, tmp_path / "a", DEFAULT_POLICY, shuffler_url=hostile.url)
    assert caught.value.field == "max_epsilon"
    # A ceiling without a shuffler: nothing would amplify, so max_epsilon still applies.
    with pytest.raises(PolicyViolation) as caught:
        _record(hostile, tmp_path / "b", CEILING)
    assert caught.value.field == "max_epsilon"
    # Through a shuffler, within the ceiling, and the device's own bound confirms the target.
    assert _record(hostile, tmp_path / "c", CEILING, shuffler_url=hostile.url) == 1


@pytest.mark.parametrize(
    ("served", "field"),
    [
        # A larger local epsilon than the target allows, claiming the same central target.
        ({"epsilon": 9.0}, "max_central_epsilon"),
        # An honest calibration of a central target above the app's ceiling.
        (
            {"epsilon": local_epsilon_for(3.0, MIN_BATCH, DELTA), "central": 3.0},
            "max_central_epsilon",
        ),
        # A central delta above the app's.
        ({"epsilon": 7.0, "delta": 1e-3}, "max_central_delta"),
        # A local epsilon beyond what the app accepts should the shuffler collude.
        ({"epsilon": 12.0}, "max_shuffled_epsilon"),
    ],
)
def test_a_hostile_collectors_shuffled_campaign_is_refused_and_sends_nothing(
    hostile: HostileCollector, tmp_path: Path, served: dict[str, Any], field: str
) -> None:
    served = dict(served)
    epsilon = served.pop("epsilon")
    hostile.documents["s"] = shuffled_document("s", epsilon, **served)
    with TelemetryClient(
        hostile.url, state_dir=tmp_path / "d", policy=CEILING, shuffler_url=hostile.url
    ) as client:
        with pytest.raises(PolicyViolation) as caught:
            client.record("s", LABELS[0])
        assert caught.value.field == field
        assert client.pending() == 0 and hostile.uploads == 0
    if not served and field == "max_central_epsilon":  # the lying claim: the device's own bound
        bound = numerical_epsilon(epsilon, MIN_BATCH, DELTA)
        assert caught.value.campaign_value == bound and bound > 1.5 * CENTRAL
        assert "amplification bound gives" in str(caught.value)


def test_the_central_path_covers_pure_unmemoized_reports_only(tmp_path: Path) -> None:
    shuffle = {"min_batch": MIN_BATCH, "central_epsilon": CENTRAL, "delta": DELTA}
    memoized = mechanism_from_config(
        {"mechanism": "grr", "epsilon": 5.0, "k": 4, "longitudinal": {"epsilon_permanent": 6.0}}
    )
    gaussian = mechanism_from_config(
        {"mechanism": "gaussian", "epsilon": 6.0, "delta": 1e-9, "lower": 0.0, "upper": 1.0}
    )
    for mechanism in (memoized, gaussian):
        with pytest.raises(PolicyViolation, match="independent pure epsilon-LDP") as caught:
            CEILING.check("m", mechanism, config_id="x", shuffle=shuffle, through_shuffler=True)
        assert caught.value.field == "max_epsilon"
    # The same local epsilon of a pure mechanism is accepted; below max_epsilon no bound is
    # needed at all.
    grr = mechanism_from_config({"mechanism": "grr", "k": 4, "epsilon": 6.0})
    CEILING.check("s", grr, config_id="x", shuffle=shuffle, through_shuffler=True)
    small = mechanism_from_config({"mechanism": "grr", "k": 4, "epsilon": 2.0})
    DEFAULT_POLICY.check("s", small, config_id="x", shuffle=shuffle, through_shuffler=False)


@pytest.mark.parametrize(
    "fields",
    [
        {"max_central_epsilon": -1.0},
        {"max_central_epsilon": float("nan")},
        {"max_central_delta": 0.0},
        {"max_central_delta": 1.5},
        {"max_shuffled_epsilon": 0.0},
    ],
)
def test_central_ceiling_fields_are_checked(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(fields))):
        PrivacyPolicy(**fields)
