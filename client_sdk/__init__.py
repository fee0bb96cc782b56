"""Client SDK: randomizes telemetry on the device so only randomized reports ever leave it.

Imports nothing from ``collector`` or ``analysis`` (docs/architecture.md: data and imports flow
device -> collector -> analysis).

A mechanism is built from its JSON config, which round-trips, and randomizes arrays of values
(``rng=None``, the default, is the OS CSPRNG; tests pass a seeded generator):

>>> import numpy as np
>>> m = mechanism_from_config({"mechanism": "olh", "epsilon": 2.0, "k": 1024})
>>> m.to_config()  # the resolved number of hash buckets is part of the config
{'mechanism': 'olh', 'epsilon': 2.0, 'k': 1024, 'g': 8}
>>> mechanism_from_config(m.to_config()) == m
True
>>> reports = m.perturb(np.array([3, 3, 1000]), rng=np.random.default_rng(0))
>>> payloads = m.to_wire(reports)  # one JSON-safe payload per report
>>> sorted(payloads[0])
['seed', 'y']
>>> bool(np.array_equal(m.from_wire(payloads), reports))
True
"""

from client_sdk._version import __version__
from client_sdk.client import TelemetryClient
from client_sdk.mechanisms import (
    AggregateStatistic,
    FrequencyOracle,
    Mechanism,
    WireFormatError,
    mechanism_from_config,
)
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from client_sdk.randomness import SYSTEM_RANDOM, SystemRandomSource

__all__ = [
    "SYSTEM_RANDOM",
    "AggregateStatistic",
    "FrequencyOracle",
    "Mechanism",
    "PolicyViolation",
    "PrivacyPolicy",
    "SystemRandomSource",
    "TelemetryClient",
    "WireFormatError",
    "__version__",
    "mechanism_from_config",
]
