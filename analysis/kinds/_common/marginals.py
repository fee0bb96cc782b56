"""What the marginal kinds share (``multi`` and ``fourier``; docs/math/marginals.md)."""

from __future__ import annotations

import numpy as np

from client_sdk.mechanisms.base import FloatArray

__all__ = ["CONSISTENCY_ROUNDS", "project_onto"]

CONSISTENCY_ROUNDS = 10


def project_onto(table: FloatArray, axes: tuple[int, ...], keep: tuple[int, ...]) -> FloatArray:
    """A batch of tables (R, *shape over ``axes``) summed down to the attributes ``keep`` (in
    that order)."""
    if tuple(keep) == tuple(axes):  # the whole table in its own order (the sum of no axes)
        return table.copy()
    positions = [1 + axes.index(a) for a in keep]
    others = tuple(d for d in range(1, table.ndim) if d not in positions)
    summed = table.sum(axis=others)
    order = np.argsort(np.argsort(positions))  # where each kept axis sits after the sum
    return np.transpose(summed, [0, *(1 + int(i) for i in order)])
