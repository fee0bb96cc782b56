"""Campaigns by central target: the local epsilon of a shuffled campaign, calibrated from its
``"shuffle": {"min_batch": N, "central_epsilon": E, "delta": D}`` with the numerical
amplification bound of Feldman, McMillan, Talwar (FOCS 2021; ``client_sdk.amplification``,
docs/math/central-and-shuffle.md), the closed form (their Theorem 3.1) as a cross-check.

A batch of at least N reports, each epsilon0-LDP, shuffled by a shuffler that does not collude
with the collector, is (E, D)-DP centrally. If the shuffler colludes, each report still carries
its local epsilon0.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping
from typing import Any

from client_sdk.amplification import (
    calibrate_local_epsilon,
    closed_form_epsilon,
    numerical_epsilon,
)
from client_sdk.campaign import ShufflePlan

__all__ = ["calibrate_campaign", "central_guarantee", "local_epsilon_for"]

TOLERANCE = 1e-9


@functools.lru_cache(maxsize=128)
def local_epsilon_for(central_epsilon: float, min_batch: int, delta: float) -> float:
    """The largest epsilon0 whose batches of ``min_batch`` reports are (E, delta)-DP, rounded
    down to 6 significant digits (deterministic, so the same body is the same campaign).

    Cross-check: where Theorem 3.1 applies, its epsilon at epsilon0 is never below the
    numerical one (the numerical bound is the tighter); a violation is a bug (RuntimeError).
    """
    exact = calibrate_local_epsilon(central_epsilon, min_batch, delta)
    digits = 5 - math.floor(math.log10(exact))
    epsilon0 = math.floor(exact * 10**digits) / 10**digits
    closed, _ = closed_form_epsilon(epsilon0, min_batch, delta)
    numerical = numerical_epsilon(epsilon0, min_batch, delta)
    if numerical > central_epsilon * (1 + 1e-3) or (
        closed is not None and closed < numerical * (1 - 1e-3)
    ):
        raise RuntimeError(
            f"calibration check failed at epsilon0={epsilon0}: numerical {numerical}, "
            f"closed form {closed}, target {central_epsilon}"
        )
    return epsilon0


def calibrate_campaign(document: Any) -> Any:
    """``document`` with a shuffled campaign's mechanism epsilon filled in (when it has none),
    or checked against the central target (when it has one); other documents unchanged.

    ``ValueError`` naming the field for an epsilon above what the target allows.
    """
    if not isinstance(document, Mapping) or document.get("shuffle") is None:
        return document
    plan = ShufflePlan.from_dict(document["shuffle"])
    mechanism = document.get("mechanism")
    if not isinstance(mechanism, Mapping):
        return document  # parse_campaign names the problem
    allowed = local_epsilon_for(plan.central_epsilon, plan.min_batch, plan.delta)
    if "epsilon" not in mechanism:
        calibrated = copy.deepcopy(dict(document))
        calibrated["mechanism"] = {**mechanism, "epsilon": allowed}
        return calibrated
    epsilon = mechanism["epsilon"]
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and epsilon > allowed:
        raise ValueError(
            f"mechanism.epsilon={epsilon} is above {allowed}, the largest local epsilon whose "
            f"shuffled batches of {plan.min_batch} are ({plan.central_epsilon}, {plan.delta})-DP; "
            "omit it to have it calibrated"
        )
    return document


def central_guarantee(
    epsilon0: float, batch_sizes: list[int], delta: float
) -> dict[str, Any] | None:
    """The central (epsilon, delta) of the batches actually received: each user is in one
    batch, so the guarantee is the worst batch's (the smallest); ``None`` before any batch.

    A batch's size is the count of its valid reports; a batch with none stored nothing and
    costs nothing, so it is left out."""
    batch_sizes = [size for size in batch_sizes if size > 0]
    if not batch_sizes:
        return None
    smallest = min(batch_sizes)
    return {
        "epsilon": numerical_epsilon(epsilon0, smallest, delta),
        "delta": delta,
        "local_epsilon": epsilon0,
        "batches": len(batch_sizes),
        "smallest_batch": smallest,
        "reports": sum(batch_sizes),
    }
