"""Conformance vectors of the device protocol (docs/protocol.md): one expected wire payload per
case, from words that a keyed :class:`~client_sdk.randomness.HmacWordSource` supplies, so a port
of the SDK (a browser, Android or iOS one) can be checked report for report against this one.

``python -m client_sdk.conformance generate`` rebuilds ``conformance/vectors/``; ``check``
verifies the files against this SDK, or another implementation's outputs (``--outputs``).
"""

from __future__ import annotations

from client_sdk.conformance.vectors import (
    VECTORS_DIR,
    VectorError,
    check_outputs,
    check_vectors,
    generate,
    load_vectors,
    report_of,
)

__all__ = [
    "VECTORS_DIR",
    "VectorError",
    "check_outputs",
    "check_vectors",
    "generate",
    "load_vectors",
    "report_of",
]
