"""What a kind's report view builds from and returns (``analysis.report_kinds``).

A :class:`ReportView` has ``build(context) -> (data, figures)``: the JSON-safe numbers of the
kind's sections and their PNG figures, and ``render(data, figures) -> html parts``: those
sections as HTML (the page around them, its privacy section included, is the report's). A kind
whose page is its own (the frequencies: post-processing and significance beside the estimate)
gives a :class:`ReportPage` instead: the whole report and the whole page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from analysis import plots
from analysis.dataset import StoredCampaign
from analysis.kinds._common.gap import ExactGap, GapOptions, MeasuredGap, gap_document
from client_sdk.mechanisms._validation import check_int

__all__ = [
    "CentralGap",
    "Context",
    "Figures",
    "PageBuilder",
    "ReportPage",
    "ReportView",
    "central_gap",
    "png",
]

Figures = dict[str, bytes]


class CentralGap(Protocol):
    """The kind's comparison with a central curator that a view shows (an
    :class:`analysis.kinds.Kind` is one): given to the view, not looked up, so no view imports
    the table of kinds that imports it."""

    @property
    def exact_gap(self) -> ExactGap: ...

    @property
    def measured_gap(self) -> MeasuredGap: ...


@dataclasses.dataclass(frozen=True)
class Context:
    """What a view builds from: the campaign, its estimate and (simulations, the demo) the
    truth, with the kind's central gap and its options, how many items to show and the seed of
    its simulations."""

    campaign: StoredCampaign
    estimate: Any
    truth: Any
    gaps: CentralGap
    options: GapOptions
    top: int
    seed: int

    @classmethod
    def of(
        cls,
        campaign: StoredCampaign,
        estimate: Any,
        *,
        gaps: CentralGap,
        delta: float,
        neighbouring: str,
        top: int,
        seed: int,
        truth: Any = None,
    ) -> Context:
        """The context of the report's page: the gap at ``delta`` under ``neighbouring`` over
        the ``top`` items (at most 20), Bonferroni over the strings a candidate-testing decoder
        examined."""
        options = GapOptions(delta=delta, neighbouring=neighbouring, top=min(top, 20))
        if campaign.mechanism.tests_candidates:
            options = dataclasses.replace(options, vocabulary=max(2, int(estimate.examined)))
        return cls(campaign, estimate, truth, gaps, options, top, seed)

    @property
    def mechanism(self) -> Any:
        return self.campaign.mechanism

    def labels(self, k: int) -> list[str]:
        """The campaign's domain when it names ``k`` items, else ``0 .. k-1``."""
        domain = self.campaign.domain
        return list(domain) if domain and len(domain) == k else [str(v) for v in range(k)]


@dataclasses.dataclass(frozen=True)
class ReportView:
    """How the report shows one kind of estimate (``title`` heads the page)."""

    title: str
    build: Callable[[Context], tuple[dict[str, Any], Figures]]
    render: Callable[[Mapping[str, Any], Mapping[str, bytes]], list[str]]


class PageBuilder(Protocol):
    """``build(campaign, raw, ...)``: a whole report from a campaign's raw estimate (the
    arguments are ``analysis.report.build_report``'s)."""

    def __call__(
        self,
        campaign: StoredCampaign,
        raw: Any,
        *,
        method: str,
        delta: float,
        neighbouring: str,
        top: int,
        alpha: float,
        replicates: int,
        seed: int,
        true_counts: npt.ArrayLike | None = None,
        batch_sizes: Sequence[int] | None = None,
        batch_credentials: Sequence[tuple[int, int | None, int | None]] | None = None,
    ) -> Any: ...


@dataclasses.dataclass(frozen=True)
class ReportPage:
    """How the report shows a kind that writes its whole page: ``build`` the report (its
    ``data`` and ``figures``), ``render`` its HTML page."""

    build: PageBuilder
    render: Callable[[Any], str]


def png(width: float, height: float, draw: Callable[[Any], Any]) -> bytes:
    """A figure of ``width`` by ``height`` inches drawn by ``draw(figure)``, as PNG bytes."""
    figure = plots.new_figure(width, height)
    draw(figure)
    return plots.figure_png(figure)


def central_gap(context: Context) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The exact gap against the curator (as ``analysis.gap.kind_gap`` answers it) and, with
    the truth, the measured one (as ``analysis.gap.measured_kind_gap``)."""
    mechanism, gaps, options = context.mechanism, context.gaps, context.options
    n = check_int(context.estimate.n, "n", minimum=1)
    exact = gap_document(mechanism, n, gaps.exact_gap(mechanism, n, options))
    measured = None
    if context.truth is not None:
        rng = np.random.default_rng(context.seed)
        measured = dict(gaps.measured_gap(mechanism, context.estimate, context.truth, options, rng))
    return exact, measured
