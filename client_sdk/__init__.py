"""Client SDK: randomizes telemetry on the device so only randomized reports ever leave it.

Imports nothing from ``collector`` or ``analysis`` (DESIGN.md: data and imports flow
device -> collector -> analysis).
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
from client_sdk.randomness import SYSTEM_RANDOM, SystemRandomSource

__all__ = [
    "SYSTEM_RANDOM",
    "AggregateStatistic",
    "FrequencyOracle",
    "Mechanism",
    "SystemRandomSource",
    "TelemetryClient",
    "WireFormatError",
    "__version__",
    "mechanism_from_config",
]
