"""What the marginal kinds share (``multi`` and ``fourier``; docs/math/marginals.md): the
estimate's fields, the attribute names a marginal is asked by, its bootstrap intervals (the
bias-corrected percentile interval of a seeded parametric bootstrap) and its tables in the
document."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from analysis.postprocess.bootstrap import DEFAULT_REPLICATES, bootstrap_interval
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.multi import Marginal

__all__ = ["CONSISTENCY_ROUNDS", "MarginalEstimate", "project_onto"]

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


@dataclasses.dataclass(frozen=True)
class MarginalEstimate:
    """The marginals of a campaign over several attributes: ``marginal(a[, b...])`` post-processed
    with bootstrap intervals (``replicates`` of them, ``seed``; fewer than 2: none, NaN),
    ``raw_marginal`` unbiased with exact standard errors. ``oracle`` is the mechanism (each kind
    narrows its type)."""

    n: int
    confidence: float
    mechanism: dict[str, Any]
    statistic: AggregateStatistic
    oracle: Any = dataclasses.field(repr=False)
    replicates: int = DEFAULT_REPLICATES
    """Bootstrap replicates for the post-processed cells' intervals (0: none, NaN)."""
    seed: int = 0

    def marginal(self, *names: str) -> Marginal:
        raise NotImplementedError

    def _indices(self, names: tuple[str, ...]) -> tuple[int, ...]:
        """The attributes' indices, refusing a repeated or unknown name."""
        known = self.oracle.names
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a marginal needs distinct attributes; got {', '.join(names)}")
        for name in names:
            if name not in known:
                raise ValueError(f"attribute must be one of {', '.join(known)}; got {name!r}")
        return tuple(known.index(n) for n in names)

    def _intervals(self, replicates: FloatArray, estimate: FloatArray) -> tuple[Any, Any]:
        """Bias-corrected percentile intervals of ``estimate`` from its replicates (R, *shape);
        NaN without replicates."""
        if self.replicates < 2:
            nan = np.full(estimate.shape, np.nan)
            return nan, nan.copy()
        low, high = bootstrap_interval(
            replicates.reshape(replicates.shape[0], -1),
            estimate.ravel(),
            self.confidence,
            bias_corrected=True,
        )
        return low.reshape(estimate.shape), high.reshape(estimate.shape)

    def _table(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The document's entry of the marginal of ``names``."""
        marginal = self.marginal(*names)
        return {
            "attributes": list(names),
            "frequencies": marginal.frequencies,
            "std_errors": marginal.std_errors,
            "ci_low": marginal.ci_low,
            "ci_high": marginal.ci_high,
        }

    def _intervals_note(self) -> str:
        return (
            f"parametric bootstrap, {self.replicates} replicates, bias-corrected percentile, "
            f"seed {self.seed}"
            if self.replicates >= 2
            else "not computed (replicates=0)"
        )
