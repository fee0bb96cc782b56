"""What the same reports guarantee in the shuffle model: privacy amplification by shuffling.

n users each send one report from an epsilon0-LDP randomizer; a shuffler strips who sent what.
Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal analysis of
privacy amplification by shuffling", FOCS 2021 (docs/math/central-and-shuffle.md), bound the
central (epsilon, delta) of the shuffled reports against datasets that differ in one user's data:

- **Closed form** (their Theorem 3.1): if epsilon0 <= ln(n / (16 ln(2/delta))), then

      epsilon <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta)) / sqrt(n)
                                                       + 8 e^eps0 / n)).

  Outside that condition the theorem says nothing, and neither does :func:`closed_form_epsilon`
  (it returns ``None`` with the reason).
- **Numerical** (same paper, the reduction behind the theorem; computed in
  ``client_sdk.amplification``, numpy only, so the collector calibrates with it): the shuffled
  output is a post-processing of one draw from P or Q, where C ~ Bin(n-1, e^-eps0) counts the
  "clones",
  A ~ Bin(C, 1/2), Delta ~ Bern(e^eps0/(e^eps0+1)), P = (A + Delta, C - A + 1 - Delta) and
  Q = (A + 1 - Delta, C - A + Delta). :func:`clone_delta` evaluates the hockey-stick divergence
  D_{e^eps}(P || Q) exactly by summing binomials (it equals D_{e^eps}(Q || P): swapping the two
  coordinates maps P to Q), and :func:`numerical_epsilon` binary-searches the smallest epsilon
  whose delta is within the target. It holds for every n and is never above the closed form.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from client_sdk.amplification import (
    clone_delta,
    closed_form_condition,
    closed_form_epsilon,
    numerical_epsilon,
)
from client_sdk.mechanisms._validation import check_delta, check_epsilon, check_int

__all__ = [
    "ShuffleBound",
    "clone_delta",
    "closed_form_condition",
    "closed_form_epsilon",
    "numerical_epsilon",
    "shuffle_bound",
]


def _check(epsilon0: float, n: int, delta: float) -> tuple[float, int, float]:
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    return epsilon0, check_int(n, "n", minimum=1), check_delta(delta, allow_zero=False)


@dataclasses.dataclass(frozen=True)
class ShuffleBound:
    """The central guarantee of n shuffled epsilon0-LDP reports at a given delta.

    ``epsilon`` is Theorem 3.1's closed form, ``None`` when its condition fails (``reason`` then
    says why); ``numerical_epsilon`` is the tighter bound from the clone reduction.
    """

    epsilon0: float
    n: int
    delta: float
    epsilon: float | None
    reason: str | None
    numerical_epsilon: float
    max_epsilon0: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "shuffle_epsilon": self.epsilon,
            "shuffle_epsilon_reason": self.reason,
            "shuffle_epsilon_numerical": self.numerical_epsilon,
            "shuffle_delta": self.delta,
            "shuffle_max_epsilon0": self.max_epsilon0 if math.isfinite(self.max_epsilon0) else None,
        }


def shuffle_bound(epsilon0: float, n: int, delta: float) -> ShuffleBound:
    """Both bounds of Feldman, McMillan, Talwar (FOCS 2021) for n reports at epsilon0."""
    epsilon0, n, delta = _check(epsilon0, n, delta)
    epsilon, reason = closed_form_epsilon(epsilon0, n, delta)
    return ShuffleBound(
        epsilon0=epsilon0,
        n=n,
        delta=delta,
        epsilon=epsilon,
        reason=reason,
        numerical_epsilon=numerical_epsilon(epsilon0, n, delta),
        max_epsilon0=closed_form_condition(n, delta),
    )
