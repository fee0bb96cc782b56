"""The report's plots say the campaign's unit on the axis that carries its values (issue 27,
item 2): the mean, the histogram and the CDF; and a report of a campaign with a ``unit`` passes
it to them and writes it in the answer and the mean's column."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from analysis import estimate, plots
from analysis.report import build_report, render_html
from client_sdk.mechanisms import mechanism_from_config
from collector.storage import StoredCampaign


def _axes() -> Any:
    return plots.new_figure(6, 3).add_subplot()


@pytest.mark.parametrize("unit", [None, "ms"])
def test_value_axes_carry_the_unit(unit: str | None) -> None:
    means = plots.plot_means(_axes(), ["mean"], [3.0], [2.5], [3.5], bounds=(0, 10), unit=unit)
    edges = np.linspace(0, 10, 5)
    shares = np.full(4, 0.25)
    histogram = plots.plot_histogram(_axes(), edges, shares, shares - 0.1, shares + 0.1, unit=unit)
    xs = np.linspace(0, 10, 11)
    cdf = plots.plot_cdf(_axes(), xs, xs / 10, xs / 10, xs / 10, unit=unit)
    labels = [means.get_xlabel(), histogram.get_xlabel(), cdf.get_xlabel()]
    if unit is None:
        assert labels == ["value (dashed: the input range)", "value", "value"]
    else:
        assert labels == ["value (ms) (dashed: the input range)", "value (ms)", "value (ms)"]


def _campaign(config: dict[str, Any], unit: str) -> StoredCampaign:
    m = mechanism_from_config(config)
    return StoredCampaign("timed", m, m.to_config(), None, None, "id-timed", 100,
                          "2026-12-01T00:00:00+00:00", metadata={"unit": unit})  # fmt: skip


@pytest.mark.parametrize(
    ("config", "plot"),
    [
        ({"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 60.0}, "plot_means"),
        (
            {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0, "upper": 60, "bins": 8},
            "plot_cdf",
        ),
    ],
)
def test_a_report_passes_the_unit_to_its_plots(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], plot: str
) -> None:
    seen: list[Any] = []
    original = getattr(plots, plot)

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("unit"))
        return original(*args, **kwargs)

    monkeypatch.setattr(plots, plot, recording)
    rng = np.random.default_rng(3)
    c = _campaign(config, "seconds")
    raw = estimate(c.mechanism, c.mechanism.perturb(rng.uniform(10, 40, 2000), rng=rng))
    report = build_report(c, raw, replicates=10)
    assert seen == ["seconds"] and report.data["unit"] == "seconds"
    if plot == "plot_means":
        page = render_html(report)
        assert "mean (seconds)</th>" in page
        assert "seconds, 95% interval" in page  # the answer sentence


def test_a_report_without_a_unit_says_none() -> None:
    rng = np.random.default_rng(4)
    c = dataclasses.replace(
        _campaign({"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 60.0}, "x"),
        metadata={},
    )
    raw = estimate(c.mechanism, c.mechanism.perturb(rng.uniform(10, 40, 2000), rng=rng))
    report = build_report(c, raw)
    assert "unit" not in report.data and "<th>mean</th>" in render_html(report)
