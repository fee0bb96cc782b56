"""Every mechanism, defined once (DESIGN.md principle 1)."""

from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.registry import MECHANISMS, mechanism_class, mechanism_from_config

__all__ = [
    "MECHANISMS",
    "AggregateStatistic",
    "FrequencyOracle",
    "Mechanism",
    "Reports",
    "WireFormatError",
    "mechanism_class",
    "mechanism_from_config",
]
