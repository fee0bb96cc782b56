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
from collections.abc import Sequence
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
    "credentialed_guarantee",
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


def credentialed_guarantee(
    epsilon0: float,
    batches: Sequence[tuple[int, int | None, int | None]],
    delta: float,
    *,
    adversary_credentials: int = 0,
) -> dict[str, Any] | None:
    """The central guarantee of the batches received, under its stated assumption; ``None``
    before any batch. ``batches``: ``(size, per_credential, uncredentialed)`` each
    (``collector.storage.Storage.batch_credentials``).

    The bound of n shuffled reports holds for a device whose report is shuffled among n - 1
    reports of *other, honest* devices; an adversary's own reports are known to it, so a batch
    holding H honest reports is as private as H shuffled reports (the adversary adds its own
    and shuffles: post-processing). Where the shuffler metered credentials with at most q
    reports of one credential in a batch and none without one, an adversary holding A
    credentials put at most A q reports in it: H >= size - A q. Then the device has at most q
    reports in the batch, and group privacy over them gives (q eps, q e^((q-1) eps) delta)
    (Dwork and Roth, "The algorithmic foundations of differential privacy", 2014, section 2.3;
    their Theorem 2.2 is the pure case). Without credentials nothing bounds H or a device's
    reports in a batch: the figure assumes every report comes from a different honest device,
    and one uploader sending ``size - 1`` reports leaves the next device its local epsilon.
    """
    received = [b for b in batches if b[0] > 0]  # a batch that stored nothing costs nothing
    if not received:
        return None
    adversary = check_int(adversary_credentials, "adversary_credentials", minimum=0)
    sizes = [size for size, _, _ in received]
    metered = all(q is not None and without == 0 for _, q, without in received)
    quota = max(q or 1 for _, q, _ in received) if metered else 1
    honest = min(size - adversary * quota for size in sizes) if metered else min(sizes)
    local = {"epsilon": epsilon0, "delta": 0.0}
    if honest >= 1:
        single = numerical_epsilon(epsilon0, honest, delta)
        epsilon = quota * single
        group_delta = quota * math.exp((quota - 1) * single) * delta
    else:
        epsilon, group_delta = quota * epsilon0, 0.0
    if metered:
        assumption = (
            f"at least {honest} honest reports in every batch: each batch holds at most "
            f"{quota} report(s) of any one device credential and none without one, and an "
            f"adversary holds at most {adversary} credential(s) (--adversary-credentials)"
        )
        per_device = (
            "enforced: at most one report of each credential in a batch (the shuffler's quota)"
            if quota == 1
            else f"composed: up to {quota} reports of one credential in a batch (the shuffler's "
            f"quota), by group privacy over them"
        )
    else:
        assumption = (
            f"every report of a batch from a different honest device ({honest} in the smallest "
            "batch): not enforced, the shuffler took uploads without device credentials, so "
            "anyone may have sent many of them"
        )
        per_device = (
            "not enforced: the shuffler took uploads without credentials; a device with m "
            "reports in one batch has (m epsilon, m e^((m-1) epsilon) delta) by group privacy, "
            "and never more than m times the local epsilon"
        )
    return {
        "epsilon": epsilon,
        "delta": group_delta,
        "local_epsilon": epsilon0,
        "batches": len(sizes),
        "smallest_batch": min(sizes),
        "reports": sum(sizes),
        "honest_reports": max(honest, 0),
        "adversary_credentials": adversary if metered else None,
        "reports_per_device_per_batch": quota if metered else None,
        "assumption": assumption,
        "one_report_per_device": per_device,
        "if_assumption_fails": {
            **local,
            "note": "with fewer honest reports in a batch (an adversary uploading size - 1 of "
            "them), a device keeps only its report's local epsilon",
        },
    }
