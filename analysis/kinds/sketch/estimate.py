"""Sketch estimates against candidates (``cms``, ``hcms``; Apple 2017): the count of any string
from the merged sketch (docs/math/heavy-hitters.md).

The estimates are first debiased through the exact collisions of the public hash functions with
the significant strings (:func:`sketch_test`); ``ItemsEstimate.null`` says what the null
standard error includes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.items import ALPHA, ItemsEstimate, bonferroni_z, items_from_counts
from analysis.streaming import ReportSource, aggregate
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.sketch import HeavySetCorrection, StringSketch

__all__ = ["estimate_sketch", "sketch_test"]

SKETCH_NULL = (
    "the reports' noise; the exact collisions of the public hash functions with the {heavy} "
    "significant strings (debiased jointly, {rounds} rounds to a fixed point); the collisions "
    "with every other string as a random hash family's, with the other candidates' clipped "
    "estimates and the remaining reports as strings held by one device each (a string outside "
    "the candidates much heavier than that is not covered)"
)


SKETCH_ROUNDS = 20
"""At most this many rounds of :func:`sketch_test` (it stops at a fixed point, or a cycle)."""


SKETCH_GROWTH = 64
"""D grows by at most max(this, |D|) strings a round, the largest first: the strings a heavy
one biases are then corrected before they join D (and make its collision matrix large)."""


def sketch_test(
    mechanism: StringSketch,
    statistic: AggregateStatistic,
    table: npt.NDArray[np.int64],
    critical_z: float,
) -> tuple[HeavySetCorrection, FloatArray, int]:
    """Which strings of ``table`` (their hash rows) stand above the null, with the bias of the
    fixed public hash functions removed (docs/math/heavy-hitters.md, "Significance").

    Round r debiases every estimate through the exact collision matrix with D_r
    (``StringSketch.correct_for_heavy``: A_DD n^_D = c^_D, then c^(x) - A[x, D] n^_D) and tests
    each against its null standard error (the collisions with strings outside D_r as a random
    family's); D_0 is empty and D_(r+1) the at most max(``SKETCH_GROWTH``, 2 |D_r|) largest
    significant strings of round r, until they are all of them (a fixed point) or D repeats.
    Returns the last round's correction, its null standard errors and the number of rounds.
    """
    raw = mechanism.estimate_from_table(statistic, table)
    heavy = np.zeros(0, dtype=np.int64)
    seen: set[tuple[int, ...]] = set()
    rounds = 0
    while True:
        rounds += 1
        seen.add(tuple(heavy.tolist()))
        correction = HeavySetCorrection.build(mechanism, statistic.n, raw, table, heavy)
        null = correction.standard_errors(null=True)
        significant = np.flatnonzero(correction.counts > critical_z * null)
        if np.array_equal(significant, heavy) or rounds >= SKETCH_ROUNDS:
            return correction, null, rounds
        largest = np.argsort(-correction.counts[significant], kind="stable")
        heavy = np.sort(significant[largest[: max(SKETCH_GROWTH, 2 * heavy.size)]])
        if tuple(heavy.tolist()) in seen:
            return correction, null, rounds


def estimate_sketch(
    mechanism: StringSketch,
    reports: ReportSource | AggregateStatistic,
    candidates: Sequence[str],
    *,
    confidence: float = 0.95,
    alpha: float = ALPHA,
) -> ItemsEstimate:
    """Frequencies of ``candidates`` from a CMS or HCMS sketch (docs/math/heavy-hitters.md).

    Estimates debiased through the exact collisions with the significant candidates, and
    significance against ``z_{1 - alpha / len(candidates)}``, by :func:`sketch_test`; standard
    errors as its null ones with each candidate's own estimate plugged in.
    """
    if not isinstance(mechanism, StringSketch):
        raise TypeError(f"estimate_sketch needs a cms or hcms mechanism; got {mechanism.name!r}")
    values = list(dict.fromkeys(candidates))
    if not values:
        raise ValueError("candidates must list at least one string")
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    critical = bonferroni_z(alpha, len(values))
    correction, null, rounds = sketch_test(
        mechanism, statistic, mechanism.candidate_table(values), critical
    )
    items = items_from_counts(
        values,
        correction.counts,
        correction.standard_errors(),
        null,
        statistic.n,
        confidence=confidence,
        critical_z=critical,
    )
    return ItemsEstimate(
        items=items,
        n=statistic.n,
        confidence=confidence,
        alpha=alpha,
        critical_z=critical,
        examined=len(values),
        mechanism=mechanism.to_config(),
        method="count mean sketch against candidates",
        null=SKETCH_NULL.format(heavy=correction.heavy.size, rounds=rounds),
    )
