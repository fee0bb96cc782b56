"""Every mechanism, defined once (docs/architecture.md): the registry names them, the factory
builds them from configs."""

from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.registry import MECHANISMS, mechanism_class

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
