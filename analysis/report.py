"""One self-contained HTML page about a campaign, and the same numbers as JSON.

For a categorical campaign (a frequency oracle) the page shows (``ldp-analyze report``):

1. the estimated frequencies of the top items with their intervals, raw and post-processed
   (``analysis.postprocess``), each with its Bonferroni significance (``analysis.heavy_hitters``);
2. the error of this LDP campaign against a central curator at the same epsilon
   (``analysis.gap``), and what the same reports give behind a shuffler (``analysis.shuffle``);
3. the error against n for both models, this campaign's n marked;
4. the privacy parameters and their accounting over a device's repeated reports
   (``analysis.accounting``): the exact epsilon of T reports against the classical bounds.

Every other estimate kind (heavy hitters, marginals, distributions, ranges, key-value) has its
own view in ``analysis.report_kinds``: the estimate, its central gap, then the same privacy
section. A shuffled campaign's page states both guarantees: the local epsilon of each report
and the central (epsilon, delta) of the batches the collector received (and, for frequencies,
the error of local-only, shuffled and curator collection at that central guarantee).

Figures are PNGs embedded as base64 data URIs, so the page needs no other file and no network.
Every string taken from the campaign (its name, labels) is HTML-escaped.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis import plots
from analysis.accounting import mechanism_privacy
from analysis.dataset import StoredCampaign
from analysis.estimation import FrequencyEstimate, json_safe
from analysis.gap import DEFAULT_DELTA, GapOptions, empirical_gap, error_curve, utility_gap
from analysis.heavy_hitters import bonferroni_z, top_k
from analysis.postprocess import DEFAULT_REPLICATES, postprocess
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism

__all__ = [
    "Report",
    "build_report",
    "central_section",
    "privacy_figure",
    "privacy_html",
    "privacy_section",
    "render_html",
]

DEFAULT_TOP = 20
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


def _reports_per_device(policy: Mapping[str, Any] | None) -> int | None:
    if not policy:
        return None
    value = policy.get("reports_per_period")
    return int(value) if isinstance(value, int) and value >= 1 else None


def build_report(
    campaign: StoredCampaign,
    raw: Any,
    *,
    method: str = "norm-sub",
    delta: float = DEFAULT_DELTA,
    neighbouring: str = "replace",
    top: int = DEFAULT_TOP,
    alpha: float = 0.05,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    true_counts: npt.ArrayLike | None = None,
    truth: Any = None,
    batch_sizes: Sequence[int] | None = None,
) -> Report:
    """Compute every number and figure of a campaign's report from its raw estimate.

    ``true_counts`` (simulations and the demo only) adds the truth to the frequency figure and
    the observed errors of both models (``analysis.gap.empirical_gap``). For the other
    estimate kinds, ``truth`` is the kind's truth (``analysis.gap.measured_kind_gap``: the true
    count of each string, the true records, the true values; ``true_counts`` is taken when it
    is not given). ``batch_sizes``: a shuffled campaign's received batches (its central
    guarantee).
    """
    mechanism = campaign.mechanism
    if not isinstance(mechanism, FrequencyOracle):
        from analysis.report_kinds import build_kind_report

        return build_kind_report(  # type: ignore[no-any-return]
            campaign,
            raw,
            delta=delta,
            neighbouring=neighbouring,
            top=top,
            seed=seed,
            truth=truth if truth is not None else true_counts,
            batch_sizes=batch_sizes,
        )
    labels = list(campaign.domain) if campaign.domain else [str(v) for v in range(mechanism.k)]
    processed = postprocess(raw, method, mechanism, replicates=replicates, seed=seed)
    hitters = top_k(processed, min(top, mechanism.k), alpha=alpha)
    order = [h.index for h in hitters]
    truth = None
    if true_counts is not None:
        counts = np.asarray(true_counts, dtype=float)
        truth = counts / counts.sum()
    items = [
        {
            "value": labels[h.index],
            "raw_frequency": raw.frequencies[h.index],
            "raw_std_error": raw.std_errors[h.index],
            "raw_ci_low": raw.ci_low[h.index],
            "raw_ci_high": raw.ci_high[h.index],
            "frequency": h.frequency,
            "std_error": h.std_error,
            "ci_low": h.ci_low,
            "ci_high": h.ci_high,
            "z": h.z,
            "significant": h.significant,
            **({"true_frequency": truth[h.index]} if truth is not None else {}),
        }
        for h in hitters
    ]
    gap = utility_gap(mechanism, raw.n, delta=delta, neighbouring=neighbouring)
    gap_figures = gap.to_dict()
    central = central_section(campaign, batch_sizes)
    shuffled = None
    if central is not None:
        from analysis.gap_frequencies import shuffled_column

        options = GapOptions(
            delta=float(campaign.shuffle["delta"]),  # type: ignore[index]
            neighbouring=neighbouring,
            batch_sizes=tuple(batch_sizes) if batch_sizes else None,
        )
        shuffled = shuffled_column(mechanism, raw.n, options)
    empirical = None
    if true_counts is not None:
        empirical = empirical_gap(
            raw, true_counts, mechanism=mechanism, delta=delta, neighbouring=neighbouring, rng=seed
        ).to_dict()
    low_n = 10.0 ** min(2.0, math.floor(math.log10(raw.n)))
    high_n = 10.0 ** max(7.0, math.ceil(math.log10(raw.n)) + 1)
    curve = error_curve(
        mechanism, np.geomspace(low_n, high_n, 60), delta=delta, neighbouring=neighbouring
    )
    privacy = privacy_section(
        mechanism, delta=delta, reports_per_device=_reports_per_device(campaign.policy)
    )
    data = json_safe(
        {
            "campaign": campaign.name,
            "kind": "frequencies",
            "config_id": campaign.config_id,
            "mechanism": campaign.config,
            "created": campaign.created,
            "min_batch_size": campaign.min_batch_size,
            "n": raw.n,
            "k": mechanism.k,
            "confidence": raw.confidence,
            "postprocessing": processed.postprocessing,
            "postprocessing_details": dict(getattr(processed, "details", {})),
            "top": len(items),
            "alpha": alpha,
            "bonferroni_z": bonferroni_z(alpha, mechanism.k),
            "significant_items": int(sum(h.significant for h in hitters)),
            "items": items,
            "gap": gap_figures,
            "empirical_gap": empirical,
            "central": central,
            "shuffled_column": shuffled,
            "error_curve": {name: list(values) for name, values in curve.items()},
            "privacy": privacy,
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    figures = _figures(
        labels=[labels[v] for v in order],
        raw=raw,
        processed=processed,
        order=order,
        truth=None if truth is None else truth[order],
        gap=gap_figures,
        empirical=empirical,
        curve=curve,
        n=raw.n,
        privacy=privacy,
    )
    return Report(data=data, figures=figures)


def _figures(
    *,
    labels: Sequence[str],
    raw: FrequencyEstimate,
    processed: FrequencyEstimate,
    order: Sequence[int],
    truth: npt.NDArray[np.float64] | None,
    gap: Mapping[str, Any],
    empirical: Mapping[str, Any] | None,
    curve: Mapping[str, npt.NDArray[np.float64]],
    n: int,
    privacy: Mapping[str, Any],
) -> dict[str, bytes]:
    index = list(order)
    figure = plots.new_figure(9.0, 4.4)
    series: list[tuple[str, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]] = [
        ("raw (unbiased)", raw.frequencies[index], raw.ci_low[index], raw.ci_high[index])
    ]
    if processed.postprocessing != "base":
        series.append(
            (
                processed.postprocessing,
                processed.frequencies[index],
                processed.ci_low[index],
                processed.ci_high[index],
            )
        )
    plots.plot_frequencies(
        figure.add_subplot(), labels, series, truth=truth, confidence=raw.confidence
    )
    out = {"frequencies": plots.figure_png(figure)}

    figure = plots.new_figure(7.0, 4.0)
    expected = {
        "ldp": gap["ldp_std_error"],
        "central_laplace": gap["central_laplace_std_error"],
        "central_gaussian": gap["central_gaussian_std_error"],
    }
    observed = None
    if empirical is not None:
        observed = {
            "ldp": math.sqrt(empirical["ldp_mse"]),
            "central_laplace": math.sqrt(empirical["central_laplace_mse"]),
            "central_gaussian": math.sqrt(empirical["central_gaussian_mse"]),
        }
    plots.plot_error_comparison(figure.add_subplot(), expected, observed=observed)
    out["gap"] = plots.figure_png(figure)

    figure = plots.new_figure(7.0, 4.0)
    plots.plot_error_curve(figure.add_subplot(), curve, marked_n=n)
    out["error_curve"] = plots.figure_png(figure)

    out["privacy"] = privacy_figure(privacy)
    return out


def privacy_figure(privacy: Mapping[str, Any]) -> bytes:
    """A device's epsilon against its reports (the privacy section's figure)."""
    figure = plots.new_figure(7.0, 4.0)
    curves = {k: v for k, v in privacy["curve"].items() if k != "reports"}
    plots.plot_privacy(
        figure.add_subplot(),
        privacy["curve"]["reports"],
        curves,
        delta=privacy["delta"],
        marked=privacy["reports_per_device"],
    )
    return plots.figure_png(figure)


def central_section(
    campaign: StoredCampaign, batch_sizes: Sequence[int] | None
) -> dict[str, Any] | None:
    """A shuffled campaign's two guarantees: the local epsilon each report carries (what holds
    if the shuffler colludes with the collector) and the central (epsilon, delta) of the batches
    received (their real sizes, the smallest binding; ``None`` before any batch); ``None`` for a
    campaign without a shuffler."""
    if campaign.shuffle is None:
        return None
    from collector.calibration import central_guarantee

    epsilon0 = campaign.mechanism.privacy_epsilon
    received = central_guarantee(
        epsilon0, list(batch_sizes or ()), float(campaign.shuffle["delta"])
    )
    return {"local_epsilon": epsilon0, "target": dict(campaign.shuffle), "received": received}


# ---- HTML ---------------------------------------------------------------------------------------

_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 980px; color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid
#ddd; padding-bottom: 0.2em; }
.meta { color: #555; font-size: 0.92em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; }
img { max-width: 100%; height: auto; display: block; margin: 0.6em 0; }
.note { color: #555; font-size: 0.9em; max-width: 52em; }
.yes { color: #1b7a35; font-weight: 600; } .no { color: #999; }
code { background: #f3f3f3; padding: 0 0.25em; }
"""


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"
    return html.escape(str(value))


def _freq(value: Any) -> str:
    """A frequency, always with four decimals (tables of frequencies line up)."""
    return "&ndash;" if value is None else f"{value:.4f}"


def _users(value: Any) -> str:
    """A number of users, rounded up to a whole user."""
    return "&ndash;" if value is None else f"{math.ceil(value):,}"


def _image(figures: Mapping[str, bytes], name: str, alt: str) -> str:
    encoded = base64.b64encode(figures[name]).decode("ascii")
    return f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page."""
    d = report.data
    if d.get("kind", "frequencies") != "frequencies":
        from analysis.report_kinds import render_kind_html

        return render_kind_html(report)
    mechanism = d["mechanism"]
    percent = f"{round(100 * d['confidence'], 4):g}%"
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>LDP report: {esc(d['campaign'])}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Campaign <code>{esc(d['campaign'])}</code></h1>",
        f'<p class="meta">mechanism <code>{esc(json.dumps(mechanism, sort_keys=True))}</code>'
        f" &middot; config id <code>{esc(str(d['config_id']))}</code> &middot; n = "
        f"{_number(d['n'])} reports &middot; k = {_number(d['k'])} &middot; created "
        f"{esc(str(d['created']))} &middot; generated {esc(str(d['generated']))}</p>",
    ]
    details = d.get("postprocessing_details") or {}
    parts += [
        "<h2>1. Estimated frequencies</h2>",
        _image(report.figures, "frequencies", "estimated frequencies of the top items"),
        f'<p class="note">The raw estimate is unbiased (Wang et al., USENIX Security 2017) with '
        f"exact standard errors; <b>{esc(d['postprocessing'])}</b> makes the table consistent "
        f"(non-negative, summing to one) at the price of a bias ("
        f"{esc(str(details.get('intervals', 'exact normal intervals')))}). An item is "
        f"<span class='yes'>significant</span> when its raw estimate exceeds "
        f"z = {d['bonferroni_z']:.3f} standard errors: a one-sided test at alpha = {d['alpha']} "
        f"with Bonferroni over all {d['k']} items. {d['significant_items']} of the top "
        f"{d['top']} pass.</p>",
    ]
    has_truth = any("true_frequency" in item for item in d["items"])
    header = [
        "value",
        "raw",
        f"raw {percent} interval",
        d["postprocessing"],
        f"{percent} interval",
        "z",
        "significant",
    ]
    if has_truth:
        header.append("truth")
    rows = []
    for item in d["items"]:
        row = [
            esc(str(item["value"])),
            _freq(item["raw_frequency"]),
            f"[{_freq(item['raw_ci_low'])}, {_freq(item['raw_ci_high'])}]",
            _freq(item["frequency"]),
            f"[{_freq(item['ci_low'])}, {_freq(item['ci_high'])}]",
            _number(item["z"], 3),
            f"<span class='{'yes' if item['significant'] else 'no'}'>"
            f"{'yes' if item['significant'] else 'no'}</span>",
        ]
        if has_truth:
            row.append(_freq(item.get("true_frequency")))
        rows.append(row)
    parts.append(_table(header, rows))
    if details:
        parts.append(
            '<p class="note">Post-processing details: '
            + ", ".join(
                f"{esc(str(k))} = {_number(v)}" for k, v in details.items() if k != "intervals"
            )
            + "</p>"
        )

    gap = d["gap"]
    parts += [
        "<h2>2. The price of locality</h2>",
        _image(report.figures, "gap", "local versus central standard errors"),
        _table(
            ["model", "variance of one frequency", "standard error"],
            [
                [
                    "LDP (this mechanism, Var*/n)",
                    _number(gap["ldp_variance"]),
                    _number(gap["ldp_std_error"]),
                ],
                [
                    f"central Laplace ({esc(gap['neighbouring'])})",
                    _number(gap["central_laplace_variance"]),
                    _number(gap["central_laplace_std_error"]),
                ],
                [
                    f"central analytic Gaussian (delta = {gap['delta']:g})",
                    _number(gap["central_gaussian_variance"]),
                    _number(gap["central_gaussian_std_error"]),
                ],
            ],
        ),
        f'<p class="note">At epsilon = {gap["epsilon"]:g} the local estimate has '
        f"<b>{_number(gap['variance_ratio'])}</b> times the variance of a trusted curator "
        f"adding Laplace noise to the true histogram ({_number(gap['gaussian_variance_ratio'])} "
        f"times the analytic Gaussian's). To match the curator's error at n = {_number(d['n'])}, "
        f"the local model would need {_users(gap['ldp_users_for_central_laplace_error'])} "
        f"users; the curator matches this campaign's error with "
        f"{_users(gap['central_laplace_users_for_ldp_error'])}.</p>",
    ]
    if gap.get("shuffle_epsilon") is not None:
        shuffle = (
            f"Behind an anonymising shuffler, the same {_number(d['n'])} reports would be "
            f"({_number(gap['shuffle_epsilon'])}, {gap['shuffle_delta']:g})-DP centrally "
            f"(Feldman, McMillan, Talwar, FOCS 2021, Theorem 3.1), and "
            f"({_number(gap['shuffle_epsilon_numerical'])}, {gap['shuffle_delta']:g})-DP by "
            "their tighter numerical bound."
        )
    else:
        shuffle = (
            "The closed-form shuffle bound does not apply: "
            f"{esc(str(gap.get('shuffle_epsilon_reason')))}. The numerical bound of the same "
            f"paper gives epsilon = {_number(gap.get('shuffle_epsilon_numerical'))}."
        )
    parts.append(f'<p class="note">{shuffle}</p>')
    empirical = d.get("empirical_gap")
    if empirical:
        parts.append(
            _table(
                ["observed (against the truth)", "mean squared error per item", "expected"],
                [
                    [
                        "LDP (these reports)",
                        _number(empirical["ldp_mse"]),
                        _number(empirical["ldp_expected"]),
                    ],
                    [
                        "central Laplace (run on the true histogram)",
                        _number(empirical["central_laplace_mse"]),
                        _number(empirical["central_laplace_expected"]),
                    ],
                    [
                        "central Gaussian (run on the true histogram)",
                        _number(empirical["central_gaussian_mse"]),
                        _number(empirical["central_gaussian_expected"]),
                    ],
                ],
            )
        )
    parts += [
        "<h2>3. Error against the number of users</h2>",
        _image(report.figures, "error_curve", "standard error against n for both models"),
        '<p class="note">The local model\'s standard error falls as 1/sqrt(n), the central '
        "model's as 1/n: the gap grows as sqrt(n) (Beimel, Nissim, Omri, "
        "CRYPTO 2008).</p>",
    ]
    parts += central_html(d.get("central"), d.get("shuffled_column"))
    parts += privacy_html(d, report.figures, number=4)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def privacy_html(d: Mapping[str, Any], figures: Mapping[str, bytes], *, number: int) -> list[str]:
    """The privacy section: per-report epsilon and a device's accounting over repeated reports."""
    privacy = d["privacy"]
    parts: list[str] = []
    parts += [
        f"<h2>{number}. Privacy</h2>",
        f"<p>Each report is epsilon = <b>{_number(privacy['epsilon_per_report'])}</b> locally "
        "differentially private"
        + (f" (delta {privacy['delta_per_report']:g})" if privacy["delta_per_report"] else "")
        + (
            f"; the implemented channel's exact worst-case ratio gives epsilon = "
            f"{_number(privacy['implemented_epsilon'], 10)}"
            if privacy["implemented_epsilon"] is not None
            else ""
        )
        + ".</p>",
        _image(figures, "privacy", "epsilon against reports per device"),
    ]
    rows = []
    for reports, summary in privacy["accounting"].items():
        bounds = summary["bounds"]
        rows.append(
            [
                _number(int(reports)),
                _number(summary["epsilon"]),
                _number(bounds.get("basic")),
                _number(bounds.get("advanced")),
                _number(bounds.get("kov")),
                _number(bounds.get("rdp")),
                _number(summary["advantage"]),
            ]
        )
    parts.append(
        _table(
            [
                "reports per device",
                f"epsilon at delta={privacy['delta']:g} (exact)",
                "basic",
                "advanced",
                "Kairouz-Oh-Viswanath",
                "RDP",
                "attacker advantage",
            ],
            rows,
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
        f"<p>Each report is epsilon = <b>{_number(central['local_epsilon'])}</b> locally "
        "private: what holds if the shuffler colludes with the collector. "
        + (
            f"Behind a shuffler that does not, the {_number(received['batches'])} batches "
            f"received ({_number(received['reports'])} reports, the smallest of "
            f"{_number(received['smallest_batch'])}) are <b>({_number(received['epsilon'])}, "
            f"{received['delta']:g})-DP</b> centrally (Feldman, McMillan, Talwar, FOCS 2021, "
            "numerical bound at the real batch sizes)."
            if received
            else "No batch has been received yet."
        )
        + f" The campaign's target: ({_number(target.get('central_epsilon'))}, "
        f"{target.get('delta')}) for batches of at least {_number(target.get('min_batch'))}.</p>",
    ]
    if shuffled and shuffled.get("applies"):
        exact = shuffled["exact"]
        parts += [
            _table(
                [
                    f"at the same central ({_number(shuffled['central_epsilon'])}, "
                    f"{shuffled['delta']:g})",
                    "local epsilon",
                    "variance of one frequency",
                ],
                [
                    [
                        "local only (no shuffler)",
                        _number(shuffled["central_epsilon"]),
                        _number(exact["local_only_variance"]),
                    ],
                    [
                        "shuffled (this campaign)",
                        _number(shuffled["local_epsilon"]),
                        _number(exact["shuffled_variance"]),
                    ],
                    [
                        "trusted curator, Laplace",
                        "&ndash;",
                        _number(exact["central_laplace_variance"]),
                    ],
                    [
                        "trusted curator, analytic Gaussian",
                        "&ndash;",
                        _number(exact["central_gaussian_variance"]),
                    ],
                ],
            ),
            '<p class="note">Exact (Var*/n of the mechanism at each local epsilon). The shuffler '
            f"cuts the local-only variance {_number(exact['local_over_shuffled'])} times and "
            f"closes {100 * exact['share_of_gap_closed']:.0f}% of the distance to the curator "
            "(on a log scale).</p>",
        ]
    return parts
