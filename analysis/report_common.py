"""What every report page shares (``analysis.report``, ``analysis.report_kinds``): the
:class:`Report` container, the privacy section (per-report epsilon and a device's accounting over
repeated reports), a shuffled campaign's two guarantees and the page's style (its cells and tables:
``analysis.views``).
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis import plots
from analysis.accounting import mechanism_privacy
from analysis.dataset import StoredCampaign
from analysis.views.cells import fmt_number, image_tag
from analysis.views.table import number_table
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism

__all__ = [
    "ILLUSTRATIVE_REPORTS",
    "Report",
    "central_html",
    "central_section",
    "privacy_figure",
    "privacy_html",
    "privacy_section",
]

ILLUSTRATIVE_REPORTS = (1, 10, 100, 365)
"""Reports per device shown when the campaign has no budget policy saying how many it allows."""


@dataclasses.dataclass(frozen=True)
class Report:
    """The numbers of a report (JSON-safe ``data``) and its figures (name -> PNG bytes)."""

    data: dict[str, Any]
    figures: dict[str, bytes]

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2, allow_nan=False) + "\n"


def privacy_section(
    mechanism: Mechanism,
    *,
    delta: float,
    reports_per_device: int | None,
) -> dict[str, Any]:
    """Per-report privacy and a device's accounting over repeated reports.

    The exact epsilon of T reports comes from ``analysis.accounting`` (the mechanism's privacy
    loss distribution, composed exactly), beside basic, advanced, Kairouz-Oh-Viswanath and RDP
    bounds. T runs over a grid up to the campaign policy's ``reports_per_period`` (or
    :data:`ILLUSTRATIVE_REPORTS` when the campaign has no policy).
    """
    step = mechanism_privacy(mechanism)
    implemented: float | None
    try:
        implemented = (
            float(mechanism.implemented_epsilon())
            if isinstance(mechanism, FrequencyOracle)
            else None
        )
    except (NotImplementedError, ValueError):
        implemented = None
    horizon = max(reports_per_device or 1, max(ILLUSTRATIVE_REPORTS))
    grid = sorted(
        {int(t) for t in np.unique(np.geomspace(1, horizon, 25).round())}
        | {int(reports_per_device or 1)}
    )
    curves: dict[str, list[float | None]] = {}
    for t in grid:
        summary = (step * t).summary(delta)
        for name, value in summary["bounds"].items():
            curves.setdefault(name, []).append(value)
    shown = sorted({1, reports_per_device}) if reports_per_device else list(ILLUSTRATIVE_REPORTS)
    at = {str(t): (step * t).summary(delta) for t in shown}
    return {
        "epsilon_per_report": mechanism.privacy_epsilon,
        "delta_per_report": mechanism.privacy_delta,
        "implemented_epsilon": implemented,
        "delta": delta,
        "reports_per_device": reports_per_device,
        "accounting": at,
        "curve": {"reports": grid, **curves},
    }


def reports_per_device_of(policy: Mapping[str, Any] | None) -> int | None:
    if not policy:
        return None
    value = policy.get("reports_per_period")
    return int(value) if isinstance(value, int) and value >= 1 else None


def privacy_figure(privacy: Mapping[str, Any]) -> bytes:
    """A device's epsilon against its reports (the privacy section's figure).

    Drawn once per distinct input: campaigns at the same epsilon and policy share the figure
    (its log-scale axes are the slowest drawing of a report), and the same PNG comes back."""
    key = json.dumps(
        [privacy["curve"], privacy["delta"], privacy["reports_per_device"]], sort_keys=True
    )
    return _privacy_png(key)


@functools.lru_cache(maxsize=64)
def _privacy_png(key: str) -> bytes:
    curve, delta, reports_per_device = json.loads(key)
    figure = plots.new_figure(7.0, 4.0)
    curves = {k: v for k, v in curve.items() if k != "reports"}
    plots.plot_privacy(
        figure.add_subplot(), curve["reports"], curves, delta=delta, marked=reports_per_device
    )
    return plots.figure_png(figure)


def central_section(
    campaign: StoredCampaign,
    batch_sizes: Sequence[int] | None,
    batch_credentials: Sequence[tuple[int, int | None, int | None]] | None = None,
) -> dict[str, Any] | None:
    """A shuffled campaign's two guarantees: the local epsilon each report carries (what holds
    if the shuffler colludes with the collector) and the central (epsilon, delta) of the batches
    received under its stated assumption (``client_sdk.amplification.credentialed_guarantee``: the
    honest reports of the smallest batch bind; ``None`` before any batch); ``None`` for a
    campaign without a shuffler. ``batch_credentials``: ``(size, per_credential,
    uncredentialed)`` of each batch; without them, batches of ``batch_sizes`` not metered."""
    if campaign.shuffle is None:
        return None
    from client_sdk.amplification import credentialed_guarantee

    epsilon0 = campaign.mechanism.privacy_epsilon
    if batch_credentials is None:
        batch_credentials = [(size, None, None) for size in batch_sizes or ()]
    received = credentialed_guarantee(
        epsilon0, list(batch_credentials), float(campaign.shuffle["delta"])
    )
    return {"local_epsilon": epsilon0, "target": dict(campaign.shuffle), "received": received}


STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 980px; color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid
#ddd; padding-bottom: 0.2em; }
.meta { color: #555; font-size: 0.92em; }
.answer { font-size: 1.15em; background: #eef6ff; border-left: 4px solid #2563eb;
          padding: 0.6em 1em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; }
img { max-width: 100%; height: auto; display: block; margin: 0.6em 0; }
.note { color: #555; font-size: 0.9em; max-width: 52em; }
.yes { color: #1b7a35; font-weight: 600; } .no { color: #999; }
code { background: #f3f3f3; padding: 0 0.25em; }
"""


def privacy_html(d: Mapping[str, Any], figures: Mapping[str, bytes], *, number: int) -> list[str]:
    """The privacy section: per-report epsilon and a device's accounting over repeated reports."""
    privacy = d["privacy"]
    parts: list[str] = []
    parts += [
        f"<h2>{number}. Privacy</h2>",
        f"<p>Each report is epsilon = <b>{fmt_number(privacy['epsilon_per_report'])}</b> locally "
        "differentially private"
        + (f" (delta {privacy['delta_per_report']:g})" if privacy["delta_per_report"] else "")
        + (
            f"; the implemented channel's exact worst-case ratio gives epsilon = "
            f"{fmt_number(privacy['implemented_epsilon'], 10)}"
            if privacy["implemented_epsilon"] is not None
            else ""
        )
        + ".</p>",
        image_tag(figures, "privacy", "epsilon against reports per device"),
    ]
    parts.append(
        number_table(
            [
                "reports per device",
                f"epsilon at delta={privacy['delta']:g} (exact)",
                "basic",
                "advanced",
                "Kairouz-Oh-Viswanath",
                "RDP",
                "attacker advantage",
            ],
            [
                (
                    fmt_number(int(reports)),
                    summary["epsilon"],
                    *(summary["bounds"].get(name) for name in ("basic", "advanced", "kov", "rdp")),
                    summary["advantage"],
                )
                for reports, summary in privacy["accounting"].items()
            ],
        )
    )
    policy_note = (
        f"The campaign's budget policy allows {privacy['reports_per_device']} reports per "
        "device and period."
        if privacy["reports_per_device"]
        else "The campaign has no budget policy; the rows show what a device that sends that "
        "many reports would have spent."
    )
    parts.append(
        f'<p class="note">{policy_note} Exact: the composed privacy loss distribution '
        "(analysis.accounting); the others are the classical upper bounds. The advantage is "
        "the best membership attacker's true-positive minus false-positive rate.</p>"
    )
    return parts


def central_html(
    central: Mapping[str, Any] | None, shuffled: Mapping[str, Any] | None = None
) -> list[str]:
    """A shuffled campaign's two guarantees (and, for frequencies, the shuffled column)."""
    if not central:
        return []
    target = central["target"]
    received = central.get("received")
    parts = [
        "<h2>Shuffled collection: two guarantees</h2>",
        f"<p>Each report is epsilon = <b>{fmt_number(central['local_epsilon'])}</b> locally "
        "private: what holds if the shuffler colludes with the collector. "
        + (
            f"Behind a shuffler that does not, the {fmt_number(received['batches'])} batches "
            f"received ({fmt_number(received['reports'])} reports, the smallest of "
            f"{fmt_number(received['smallest_batch'])}) are <b>({fmt_number(received['epsilon'])}, "
            f"{received['delta']:g})-DP</b> centrally (Feldman, McMillan, Talwar, FOCS 2021, "
            "numerical bound at the real batch sizes), assuming "
            f"{html.escape(received['assumption'])}; otherwise each report keeps its local "
            "epsilon. One report per device per batch: "
            f"{html.escape(received['one_report_per_device'])}."
            if received
            else "No batch has been received yet."
        )
        + f" The campaign's target: ({fmt_number(target.get('central_epsilon'))}, "
        f"{target.get('delta')}) for batches of at least "
        f"{fmt_number(target.get('min_batch'))}.</p>",
    ]
    if shuffled and shuffled.get("applies"):
        exact = shuffled["exact"]
        parts += [
            number_table(
                [
                    f"at the same central ({fmt_number(shuffled['central_epsilon'])}, "
                    f"{shuffled['delta']:g})",
                    "local epsilon",
                    "variance of one frequency",
                ],
                [
                    (
                        "local only (no shuffler)",
                        shuffled["central_epsilon"],
                        exact["local_only_variance"],
                    ),
                    (
                        "shuffled (this campaign)",
                        shuffled["local_epsilon"],
                        exact["shuffled_variance"],
                    ),
                    ("trusted curator, Laplace", None, exact["central_laplace_variance"]),
                    (
                        "trusted curator, analytic Gaussian",
                        None,
                        exact["central_gaussian_variance"],
                    ),
                ],
            ),
            '<p class="note">Exact (Var*/n of the mechanism at each local epsilon). The shuffler '
            f"cuts the local-only variance {fmt_number(exact['local_over_shuffled'])} times and "
            f"closes {100 * exact['share_of_gap_closed']:.0f}% of the distance to the curator "
            "(on a log scale).</p>",
        ]
    return parts
