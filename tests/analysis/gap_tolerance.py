"""The tolerance of a measured central gap: the mean of m squared errors of Laplace noise of
variance v has standard error sqrt(5/m) v (E X^4 = 6 v^2 for Laplace)."""

from __future__ import annotations

import math

Z = 5.0


def laplace_mse_tolerance(expected: float, m: int) -> float:
    """Z standard errors of the mean of ``m`` squared Laplace errors of variance ``expected``."""
    return Z * math.sqrt(5.0 / m) * expected
