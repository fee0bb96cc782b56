"""The estimate kinds: one folder per ``Mechanism.estimate_kind``, and the one table of them.

Each ``analysis/kinds/<kind>/`` holds ``estimate.py`` (pure: a mechanism and its reports or merged
statistic in, an estimate out) and ``gap.py`` (the same estimate against a trusted curator at the
same epsilon: ``exact_gap``, ``simulated_gap``, ``measured_gap``; docs/math/central-and-shuffle.md).
Code several kinds share lives below them in ``analysis/kinds/_common/``. :data:`KINDS` names
every kind's functions by direct import, so readers, mypy and the layering test see each arrow;
:func:`analysis.estimate` and :mod:`analysis.gap` dispatch through it. A new kind of estimate adds
its folder and one entry here (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from analysis.kinds._common.gap import GapOptions, Simulation
from analysis.kinds.discovery import estimate as discovery_estimate
from analysis.kinds.discovery import gap as discovery_gap
from analysis.kinds.distribution import estimate as distribution_estimate
from analysis.kinds.distribution import gap as distribution_gap
from analysis.kinds.fourier import estimate as fourier_estimate
from analysis.kinds.fourier import gap as fourier_gap
from analysis.kinds.frequencies import estimate as frequencies_estimate
from analysis.kinds.frequencies import gap as frequencies_gap
from analysis.kinds.key_value import estimate as key_value_estimate
from analysis.kinds.key_value import gap as key_value_gap
from analysis.kinds.mean import estimate as mean_estimate
from analysis.kinds.mean import gap as mean_gap
from analysis.kinds.multi import estimate as multi_estimate
from analysis.kinds.multi import gap as multi_gap
from analysis.kinds.ranges import estimate as ranges_estimate
from analysis.kinds.ranges import gap as ranges_gap
from analysis.kinds.rappor import estimate as rappor_estimate
from analysis.kinds.rappor import gap as rappor_gap
from analysis.kinds.sketch import estimate as sketch_estimate
from analysis.kinds.sketch import gap as sketch_gap
from analysis.streaming import ReportSource

__all__ = [
    "KINDS",
    "CandidateEstimator",
    "Estimator",
    "ExactGap",
    "Kind",
    "MeasuredGap",
    "SimulatedGap",
]


class Estimator(Protocol):
    """``estimate.py``'s estimator: reports (or their merged statistic) in, an estimate out."""

    def __call__(self, mechanism: Any, reports: ReportSource, /, *, confidence: float) -> Any: ...


class CandidateEstimator(Protocol):
    """An estimator of the frequencies of given candidate strings (RAPPOR, the sketches)."""

    def __call__(
        self, mechanism: Any, reports: ReportSource, candidates: list[str], /, *, confidence: float
    ) -> Any: ...


ExactGap = Callable[[Any, int, GapOptions], dict[str, Any]]
"""``exact_gap(mechanism, n, options)``: the figures that follow from formulas alone (each
document says which of its numbers are ``"exact"`` and which need a simulation)."""

SimulatedGap = Callable[[Any, int, Simulation, GapOptions, np.random.Generator], dict[str, Any]]
"""``simulated_gap(mechanism, n, simulation, options, rng)``: a population drawn as
``simulation`` says, perturbed by the mechanism itself, estimated by its own estimator, and both
models' errors measured against the known truth."""

MeasuredGap = Callable[[Any, Any, Any, GapOptions, np.random.Generator], dict[str, Any]]
"""``measured_gap(mechanism, estimate, truth, options, rng)``: the same measurement for an
estimate whose truth is known (the demo's report)."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One estimate kind: its estimator (exactly one of ``estimator`` and
    ``candidate_estimator``) and its comparison with a central curator."""

    exact_gap: ExactGap
    simulated_gap: SimulatedGap
    measured_gap: MeasuredGap
    estimator: Estimator | None = None
    candidate_estimator: CandidateEstimator | None = None

    def __post_init__(self) -> None:
        if (self.estimator is None) == (self.candidate_estimator is None):
            raise TypeError("a kind has exactly one of estimator and candidate_estimator")

    @property
    def needs_candidates(self) -> bool:
        """Whether the kind estimates the frequencies of a candidate list it must be given."""
        return self.candidate_estimator is not None

    def estimate(
        self,
        mechanism: Any,
        reports: ReportSource,
        *,
        confidence: float,
        candidates: Sequence[str] = (),
    ) -> Any:
        """The kind's estimate (``candidates`` read only by a candidate estimator)."""
        if self.candidate_estimator is not None:
            return self.candidate_estimator(
                mechanism, reports, list(candidates), confidence=confidence
            )
        assert self.estimator is not None
        return self.estimator(mechanism, reports, confidence=confidence)


KINDS: dict[str, Kind] = {
    "frequencies": Kind(
        estimator=frequencies_estimate.estimate_frequencies,
        exact_gap=frequencies_gap.exact_gap,
        simulated_gap=frequencies_gap.simulated_gap,
        measured_gap=frequencies_gap.measured_gap,
    ),
    "mean": Kind(
        estimator=mean_estimate.estimate_mean,
        exact_gap=mean_gap.exact_gap,
        simulated_gap=mean_gap.simulated_gap,
        measured_gap=mean_gap.measured_gap,
    ),
    "rappor": Kind(
        candidate_estimator=rappor_estimate.decode,
        exact_gap=rappor_gap.exact_gap,
        simulated_gap=rappor_gap.simulated_gap,
        measured_gap=rappor_gap.measured_gap,
    ),
    "sketch": Kind(
        candidate_estimator=sketch_estimate.estimate_sketch,
        exact_gap=sketch_gap.exact_gap,
        simulated_gap=sketch_gap.simulated_gap,
        measured_gap=sketch_gap.measured_gap,
    ),
    "discovery": Kind(
        estimator=discovery_estimate.discover,
        exact_gap=discovery_gap.exact_gap,
        simulated_gap=discovery_gap.simulated_gap,
        measured_gap=discovery_gap.measured_gap,
    ),
    "distribution": Kind(
        estimator=distribution_estimate.estimate_distribution,
        exact_gap=distribution_gap.exact_gap,
        simulated_gap=distribution_gap.simulated_gap,
        measured_gap=distribution_gap.measured_gap,
    ),
    "range": Kind(
        estimator=ranges_estimate.estimate_ranges,
        exact_gap=ranges_gap.exact_gap,
        simulated_gap=ranges_gap.simulated_gap,
        measured_gap=ranges_gap.measured_gap,
    ),
    "multi": Kind(
        estimator=multi_estimate.estimate_multi,
        exact_gap=multi_gap.exact_gap,
        simulated_gap=multi_gap.simulated_gap,
        measured_gap=multi_gap.measured_gap,
    ),
    "fourier": Kind(
        estimator=fourier_estimate.estimate_fourier,
        exact_gap=fourier_gap.exact_gap,
        simulated_gap=fourier_gap.simulated_gap,
        measured_gap=fourier_gap.measured_gap,
    ),
    "key-value": Kind(
        estimator=key_value_estimate.estimate_key_value,
        exact_gap=key_value_gap.exact_gap,
        simulated_gap=key_value_gap.simulated_gap,
        measured_gap=key_value_gap.measured_gap,
    ),
}
"""Every estimate kind by ``Mechanism.estimate_kind``: a new kind adds its folder and one entry."""
