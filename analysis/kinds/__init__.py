"""The estimate kinds: one folder per ``Mechanism.estimate_kind``, and the one table of them.

Each ``analysis/kinds/<kind>/`` holds ``estimate.py`` (pure: a mechanism and its reports or merged
statistic in, an estimate out), ``gap.py`` (the same estimate against a trusted curator at the
same epsilon: ``exact_gap``, ``simulated_gap``, ``measured_gap``; docs/math/central-and-shuffle.md)
and ``view.py`` (the report's and the dashboard's rendering of its document). Code several kinds
share lives below them in ``analysis/kinds/_common/`` and ``analysis/views/``. :data:`KINDS` names
every kind's functions and views by direct import, so readers, mypy and the layering test see
each arrow; :func:`analysis.estimate`, :mod:`analysis.gap`, :mod:`analysis.report` and the
dashboard dispatch through it. A new kind of estimate adds its folder and one entry here
(docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from analysis.kinds._common.gap import ExactGap, MeasuredGap, SimulatedGap
from analysis.kinds.discovery import estimate as discovery_estimate
from analysis.kinds.discovery import gap as discovery_gap
from analysis.kinds.discovery import view as discovery_view
from analysis.kinds.distribution import estimate as distribution_estimate
from analysis.kinds.distribution import gap as distribution_gap
from analysis.kinds.distribution import view as distribution_view
from analysis.kinds.fourier import estimate as fourier_estimate
from analysis.kinds.fourier import gap as fourier_gap
from analysis.kinds.fourier import view as fourier_view
from analysis.kinds.frequencies import estimate as frequencies_estimate
from analysis.kinds.frequencies import gap as frequencies_gap
from analysis.kinds.frequencies import view as frequencies_view
from analysis.kinds.key_value import estimate as key_value_estimate
from analysis.kinds.key_value import gap as key_value_gap
from analysis.kinds.key_value import view as key_value_view
from analysis.kinds.mean import estimate as mean_estimate
from analysis.kinds.mean import gap as mean_gap
from analysis.kinds.mean import view as mean_view
from analysis.kinds.multi import estimate as multi_estimate
from analysis.kinds.multi import gap as multi_gap
from analysis.kinds.multi import view as multi_view
from analysis.kinds.ranges import estimate as ranges_estimate
from analysis.kinds.ranges import gap as ranges_gap
from analysis.kinds.ranges import view as ranges_view
from analysis.kinds.rappor import estimate as rappor_estimate
from analysis.kinds.rappor import gap as rappor_gap
from analysis.kinds.rappor import view as rappor_view
from analysis.kinds.sketch import estimate as sketch_estimate
from analysis.kinds.sketch import gap as sketch_gap
from analysis.kinds.sketch import view as sketch_view
from analysis.streaming import ReportSource
from analysis.views.dashboard import DashboardView
from analysis.views.report import ReportPage, ReportView

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


@dataclasses.dataclass(frozen=True)
class Kind:
    """One estimate kind: its estimator (exactly one of ``estimator`` and
    ``candidate_estimator``), its comparison with a central curator, and its views: ``report``
    (sections on ``analysis.report_kinds``'s page, or a :class:`ReportPage` that writes the
    whole page) and ``dashboard``."""

    exact_gap: ExactGap
    simulated_gap: SimulatedGap
    measured_gap: MeasuredGap
    report: ReportView | ReportPage
    dashboard: DashboardView
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
        report=frequencies_view.PAGE,
        dashboard=frequencies_view.DASHBOARD,
    ),
    "mean": Kind(
        estimator=mean_estimate.estimate_mean,
        exact_gap=mean_gap.exact_gap,
        simulated_gap=mean_gap.simulated_gap,
        measured_gap=mean_gap.measured_gap,
        report=mean_view.REPORT,
        dashboard=mean_view.DASHBOARD,
    ),
    "rappor": Kind(
        candidate_estimator=rappor_estimate.decode,
        exact_gap=rappor_gap.exact_gap,
        simulated_gap=rappor_gap.simulated_gap,
        measured_gap=rappor_gap.measured_gap,
        report=rappor_view.REPORT,
        dashboard=rappor_view.DASHBOARD,
    ),
    "sketch": Kind(
        candidate_estimator=sketch_estimate.estimate_sketch,
        exact_gap=sketch_gap.exact_gap,
        simulated_gap=sketch_gap.simulated_gap,
        measured_gap=sketch_gap.measured_gap,
        report=sketch_view.REPORT,
        dashboard=sketch_view.DASHBOARD,
    ),
    "discovery": Kind(
        estimator=discovery_estimate.discover,
        exact_gap=discovery_gap.exact_gap,
        simulated_gap=discovery_gap.simulated_gap,
        measured_gap=discovery_gap.measured_gap,
        report=discovery_view.REPORT,
        dashboard=discovery_view.DASHBOARD,
    ),
    "distribution": Kind(
        estimator=distribution_estimate.estimate_distribution,
        exact_gap=distribution_gap.exact_gap,
        simulated_gap=distribution_gap.simulated_gap,
        measured_gap=distribution_gap.measured_gap,
        report=distribution_view.REPORT,
        dashboard=distribution_view.DASHBOARD,
    ),
    "range": Kind(
        estimator=ranges_estimate.estimate_ranges,
        exact_gap=ranges_gap.exact_gap,
        simulated_gap=ranges_gap.simulated_gap,
        measured_gap=ranges_gap.measured_gap,
        report=ranges_view.REPORT,
        dashboard=ranges_view.DASHBOARD,
    ),
    "multi": Kind(
        estimator=multi_estimate.estimate_multi,
        exact_gap=multi_gap.exact_gap,
        simulated_gap=multi_gap.simulated_gap,
        measured_gap=multi_gap.measured_gap,
        report=multi_view.REPORT,
        dashboard=multi_view.DASHBOARD,
    ),
    "fourier": Kind(
        estimator=fourier_estimate.estimate_fourier,
        exact_gap=fourier_gap.exact_gap,
        simulated_gap=fourier_gap.simulated_gap,
        measured_gap=fourier_gap.measured_gap,
        report=fourier_view.REPORT,
        dashboard=fourier_view.DASHBOARD,
    ),
    "key-value": Kind(
        estimator=key_value_estimate.estimate_key_value,
        exact_gap=key_value_gap.exact_gap,
        simulated_gap=key_value_gap.simulated_gap,
        measured_gap=key_value_gap.measured_gap,
        report=key_value_view.REPORT,
        dashboard=key_value_view.DASHBOARD,
    ),
}
"""Every estimate kind by ``Mechanism.estimate_kind``: a new kind adds its folder and one entry."""
