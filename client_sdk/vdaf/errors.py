"""Errors of the VDAF package: each a ``ValueError`` subclass that says which check failed."""

from __future__ import annotations

__all__ = [
    "DecodeError",
    "JointRandCheckError",
    "MeasurementError",
    "VdafError",
    "VerifierCheckError",
]


class VdafError(ValueError):
    """Base class of every error raised by ``client_sdk.vdaf``."""


class DecodeError(VdafError):
    """An encoded message has a wrong length or an element outside the field."""


class MeasurementError(VdafError):
    """A measurement outside the variant's range, refused on the device before sharding."""


class VerifierCheckError(VdafError):
    """The combined verifier message rejects: the circuit output or a gadget test is nonzero."""


class JointRandCheckError(VdafError):
    """The joint randomness the Aggregators derived differs from the one the Client used."""
