"""What a kind's report view builds from and returns (``analysis.report_kinds``).

A :class:`ReportView` has ``build(context) -> (data, figures)``: the JSON-safe numbers of the
kind's sections and their PNG figures, and ``render(data, figures) -> html parts``: those
sections as HTML (the page around them, its privacy section included, is the report's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from analysis import plots
from analysis.dataset import StoredCampaign

if TYPE_CHECKING:  # analysis.gap reaches every kind: imported where used, so no kind's view.py
    # that imports this module closes a circle through it
    from analysis.gap import GapOptions

__all__ = ["Context", "Figures", "ReportView", "central_gap", "png"]

Figures = dict[str, bytes]


@dataclasses.dataclass(frozen=True)
class Context:
    """What a view builds from: the campaign, its estimate and (simulations, the demo) the
    truth, with the gap's options, how many items to show and the seed of its simulations."""

    campaign: StoredCampaign
    estimate: Any
    truth: Any
    options: GapOptions
    top: int
    seed: int

    @classmethod
    def of(
        cls,
        campaign: StoredCampaign,
        estimate: Any,
        *,
        delta: float,
        neighbouring: str,
        top: int,
        seed: int,
        truth: Any = None,
    ) -> Context:
        """The context of the report's page: the gap at ``delta`` under ``neighbouring`` over
        the ``top`` items (at most 20), Bonferroni over the strings a candidate-testing decoder
        examined."""
        from analysis.gap import GapOptions

        options = GapOptions(delta=delta, neighbouring=neighbouring, top=min(top, 20))
        if campaign.mechanism.tests_candidates:
            options = dataclasses.replace(options, vocabulary=max(2, int(estimate.examined)))
        return cls(campaign, estimate, truth, options, top, seed)

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


def png(width: float, height: float, draw: Callable[[Any], Any]) -> bytes:
    """A figure of ``width`` by ``height`` inches drawn by ``draw(figure)``, as PNG bytes."""
    figure = plots.new_figure(width, height)
    draw(figure)
    return plots.figure_png(figure)


def central_gap(context: Context) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The exact gap against the curator (``analysis.gap.kind_gap``) and, with the truth, the
    measured one (``analysis.gap.measured_kind_gap``)."""
    from analysis.gap import kind_gap, measured_kind_gap

    exact = kind_gap(context.mechanism, context.estimate.n, context.options)
    measured = None
    if context.truth is not None:
        measured = measured_kind_gap(
            context.mechanism, context.estimate, context.truth, context.options, seed=context.seed
        )
    return exact, measured
