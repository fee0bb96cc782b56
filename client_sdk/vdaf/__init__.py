"""Prio3 (draft-irtf-cfrg-vdaf-20): verifiable distributed aggregation over secret shares.

A device calls ``shard``; two (or more) non-colluding Aggregators call the rest. See
docs/math/prio3.md.
"""

from client_sdk.vdaf.errors import (
    DecodeError,
    JointRandCheckError,
    MeasurementError,
    VdafError,
    VerifierCheckError,
)
from client_sdk.vdaf.field import Field64, Field128
from client_sdk.vdaf.prio3 import (
    Prio3,
    Prio3Count,
    Prio3Histogram,
    Prio3MultihotCountVec,
    Prio3Sum,
    Prio3SumVec,
)
from client_sdk.vdaf.xof import XofTurboShake128

__all__ = [
    "DecodeError",
    "Field64",
    "Field128",
    "JointRandCheckError",
    "MeasurementError",
    "Prio3",
    "Prio3Count",
    "Prio3Histogram",
    "Prio3MultihotCountVec",
    "Prio3Sum",
    "Prio3SumVec",
    "VdafError",
    "VerifierCheckError",
    "XofTurboShake128",
]
