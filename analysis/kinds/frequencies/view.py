"""The views of the ``frequencies`` estimate kind (frequency oracles over a known domain).

Report (its own page): the estimated frequencies of the top items with their intervals, raw and
post-processed (``analysis.postprocess``), each with its Bonferroni significance
(``analysis.heavy_hitters``); the error against a central curator at the same epsilon
(``analysis.gap``) and behind a shuffler; the error against n for both models; the privacy
section. Dashboard: one bar per item with its interval as a whisker.
"""

from __future__ import annotations

import datetime
import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis import plots
from analysis.dataset import StoredCampaign
from analysis.kinds._common.gap import GapOptions, empirical_gap, error_curve, utility_gap
from analysis.kinds.frequencies.estimate import FrequencyEstimate
from analysis.postprocess import postprocess
from analysis.report_common import (
    STYLE,
    Report,
    central_html,
    central_section,
    privacy_figure,
    privacy_html,
    privacy_section,
    reports_per_device_of,
)
from analysis.streaming import json_safe
from analysis.views.answer import answer_html
from analysis.views.cells import fixed, fmt_number, fmt_users, image_tag, percent, share
from analysis.views.dashboard import (
    ITEM_COLUMNS,
    DashboardView,
    Display,
    Document,
    item_chart,
    present,
    record_table,
)
from analysis.views.report import ReportPage
from analysis.views.table import Column, keyed_table, measured_table, table, truth_column
from client_sdk.mechanisms.base import FrequencyOracle

__all__ = ["DASHBOARD", "PAGE", "build_report", "render_html"]


def build_report(
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
) -> Report:
    """The report of a frequency oracle's campaign from its raw estimate (``analysis.report.
    build_report`` says what the arguments are)."""
    # Imported here: loading KINDS (every estimate does) must not load the top-k module.
    from analysis.heavy_hitters import bonferroni_z, top_k

    mechanism = campaign.mechanism
    if not isinstance(mechanism, FrequencyOracle):
        raise TypeError(
            f"campaign {campaign.name!r}: the frequencies report needs a frequency oracle, not "
            f"{mechanism.estimate_kind!r} estimates"
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
    central = central_section(campaign, batch_sizes, batch_credentials)
    from analysis.kinds.frequencies.gap import shuffled_column, trust_models

    options = GapOptions(delta=delta, neighbouring=neighbouring)
    shuffled = None
    if central is not None:
        options = GapOptions(
            delta=float(campaign.shuffle["delta"]),  # type: ignore[index]
            neighbouring=neighbouring,
            batch_sizes=tuple(batch_sizes) if batch_sizes else None,
        )
        shuffled = shuffled_column(mechanism, raw.n, options)
    trust = trust_models(mechanism, raw.n, options, shuffled)
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
        mechanism, delta=delta, reports_per_device=reports_per_device_of(campaign.policy)
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
            "trust_models": trust,
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


# ---- the report's HTML ------------------------------------------------------------------------


def render_html(report: Report) -> str:
    """The page of a report built by :func:`build_report`."""
    d = report.data
    mechanism = d["mechanism"]
    level = percent(d["confidence"])
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>LDP report: {esc(d['campaign'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>Campaign <code>{esc(d['campaign'])}</code></h1>",
        f'<p class="meta">mechanism <code>{esc(json.dumps(mechanism, sort_keys=True))}</code>'
        f" &middot; config id <code>{esc(str(d['config_id']))}</code> &middot; n = "
        f"{fmt_number(d['n'])} reports &middot; k = {fmt_number(d['k'])} &middot; created "
        f"{esc(str(d['created']))} &middot; generated {esc(str(d['generated']))}</p>",
    ]
    parts += answer_html(d)
    details = d.get("postprocessing_details") or {}
    parts += [
        "<h2>1. Estimated frequencies</h2>",
        image_tag(report.figures, "frequencies", "estimated frequencies of the top items"),
        f'<p class="note">The raw estimate is unbiased (Wang et al., USENIX Security 2017) with '
        f"exact standard errors; <b>{esc(d['postprocessing'])}</b> makes the table consistent "
        f"(non-negative, summing to one) at the price of a bias ("
        f"{esc(str(details.get('intervals', 'exact normal intervals')))}). An item is "
        f"<span class='yes'>significant</span> when its raw estimate exceeds "
        f"z = {d['bonferroni_z']:.3f} standard errors: a one-sided test at alpha = {d['alpha']} "
        f"with Bonferroni over all {d['k']} items. {d['significant_items']} of the top "
        f"{d['top']} pass.</p>",
    ]
    parts.append(
        table(
            [
                Column.text("value", "value"),
                Column.fixed("raw", "raw_frequency"),
                _bracket(f"raw {level} interval", "raw_ci_low", "raw_ci_high"),
                Column.fixed(d["postprocessing"], "frequency"),
                _bracket(f"{level} interval", "ci_low", "ci_high"),
                Column.number("z", "z", 3),
                Column.flag("significant", "significant"),
                truth_column(d["items"]),
            ],
            d["items"],
        )
    )
    if details:
        parts.append(
            '<p class="note">Post-processing details: '
            + ", ".join(
                f"{esc(str(k))} = {fmt_number(v)}" for k, v in details.items() if k != "intervals"
            )
            + "</p>"
        )

    gap = d["gap"]
    parts += [
        "<h2>2. The price of locality</h2>",
        image_tag(report.figures, "gap", "local versus central standard errors"),
        keyed_table(
            ["model", "variance of one frequency", "standard error"],
            gap,
            [
                ("LDP (this mechanism, Var*/n)", "ldp_variance", "ldp_std_error"),
                (
                    f"central Laplace ({esc(gap['neighbouring'])})",
                    "central_laplace_variance",
                    "central_laplace_std_error",
                ),
                (
                    f"central analytic Gaussian (delta = {gap['delta']:g})",
                    "central_gaussian_variance",
                    "central_gaussian_std_error",
                ),
            ],
        ),
        f'<p class="note">At epsilon = {gap["epsilon"]:g} the local estimate has '
        f"<b>{fmt_number(gap['variance_ratio'])}</b> times the variance of a trusted curator "
        f"adding Laplace noise to the true histogram ({fmt_number(gap['gaussian_variance_ratio'])} "
        "times the analytic Gaussian's). To match the curator's error at "
        f"n = {fmt_number(d['n'])}, the local model would need "
        f"{fmt_users(gap['ldp_users_for_central_laplace_error'])} users; the curator matches "
        "this campaign's error with "
        f"{fmt_users(gap['central_laplace_users_for_ldp_error'])}.</p>",
    ]
    if gap.get("shuffle_epsilon") is not None:
        shuffle = (
            f"Behind an anonymising shuffler, the same {fmt_number(d['n'])} reports would be "
            f"({fmt_number(gap['shuffle_epsilon'])}, {gap['shuffle_delta']:g})-DP centrally "
            f"(Feldman, McMillan, Talwar, FOCS 2021, Theorem 3.1), and "
            f"({fmt_number(gap['shuffle_epsilon_numerical'])}, {gap['shuffle_delta']:g})-DP by "
            "their tighter numerical bound."
        )
    else:
        shuffle = (
            "The closed-form shuffle bound does not apply: "
            f"{esc(str(gap.get('shuffle_epsilon_reason')))}. The numerical bound of the same "
            f"paper gives epsilon = {fmt_number(gap.get('shuffle_epsilon_numerical'))}."
        )
    parts.append(f'<p class="note">{shuffle}</p>')
    parts += _trust_models_html(d.get("trust_models"))
    empirical = d.get("empirical_gap")
    if empirical:
        parts.append(
            measured_table(
                ["observed (against the truth)", "mean squared error per item", "expected"],
                empirical,
                ("LDP (these reports)", "ldp_mse", "ldp_expected"),
                " (run on the true histogram)",
            )
        )
    parts += [
        "<h2>3. Error against the number of users</h2>",
        image_tag(report.figures, "error_curve", "standard error against n for both models"),
        '<p class="note">The local model\'s standard error falls as 1/sqrt(n), the central '
        "model's as 1/n: the gap grows as sqrt(n) (Beimel, Nissim, Omri, "
        "CRYPTO 2008).</p>",
    ]
    parts += central_html(d.get("central"), d.get("shuffled_column"))
    parts += privacy_html(d, report.figures, number=4)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


TRUST_MODEL_LABELS = {
    "local": "local (this oracle, each report epsilon-LDP)",
    "shuffled": "shuffled (behind a shuffler)",
    "secure_aggregation": "secure aggregation (DAP, two aggregators)",
    "curator": "trusted curator (Laplace)",
}


def _trust_models_html(trust: Mapping[str, Any] | None) -> list[str]:
    """The same question under each trust model (``analysis.kinds.frequencies.gap.
    trust_models``): a table and what each model trusts."""
    if not trust:
        return []
    models = trust["models"]
    rows = []
    for name in TRUST_MODEL_LABELS:
        if models[name].get("applies", True):
            rows.append({"model": TRUST_MODEL_LABELS[name], **models[name]})
        gaussian = models[name].get("gaussian") if name == "secure_aggregation" else None
        if gaussian:
            label = (
                f"secure aggregation, discrete Gaussian (rho {fmt_number(gaussian['rho'])}, "
                f"the same epsilon at delta {gaussian['delta']:g})"
            )
            rows.append({"model": label, "trusts": models[name]["trusts"], **gaussian})
    return [
        f"<h3>Three trust models at the same central epsilon = "
        f"{fmt_number(trust['central_epsilon'])}</h3>",
        table(
            [
                Column.text("model", "model"),
                Column.text("trusts", "trusts"),
                Column.number("standard error of one frequency", "std_error"),
                Column.number("x the curator's", "std_error_over_curator", 3),
                Column("gap closed", lambda row: share(row["share_of_gap_closed"])),
            ],
            rows,
        ),
        '<p class="note">Exact. Secure aggregation: Prio3 shares of each report go to two '
        "aggregators, each adding its own discrete Laplace noise to the sum (Cook 2024; "
        "docs/math/dap-noise.md): the release is epsilon-DP if either one is honest, at "
        "sqrt(2) times the geometric curator's error. Its discrete Gaussian alternative (zCDP, "
        "Canonne, Kamath, Steinke 2020) at the same (epsilon, delta) costs more for one "
        "collection of a histogram; it wins when a report touches many coordinates or over "
        "many collections. The gap closed is on a log scale, from the local model (0%) to the "
        "curator (100%).</p>",
    ]


def _bracket(header: str, low: str, high: str) -> Column:
    """``[low, high]`` with each bound written (a dash for a missing one)."""
    return Column(header, lambda item: f"[{fixed(item[low])}, {fixed(item[high])}]")


# ---- the dashboard ------------------------------------------------------------------------------


def _frequencies(document: Document, _estimate: Any) -> Display:
    """Categorical frequencies: one bar per item with its interval as a whisker."""
    items = document.get("items", [])
    columns = present([*ITEM_COLUMNS, "z", "threshold", "significant"], items)
    return {
        "chart": item_chart("estimated frequency", items),
        "table": record_table(columns, items),
    }


DASHBOARD = DashboardView("frequencies", "Categorical frequencies", _frequencies)
PAGE = ReportPage(build_report, render_html)
