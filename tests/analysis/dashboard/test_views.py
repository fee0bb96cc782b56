"""The views of every kind of estimate: the served document is ``ldp-analyze estimate``'s, and
what the view draws is that document's numbers (heavy hitters, distributions, ranges, marginals,
key-value pairs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask.testing import FlaskClient

from analysis.cli import main
from analysis.dashboard import create_app
from analysis.dashboard.data import estimate_result, open_read_only
from analysis.dashboard.views import render
from analysis.kinds import KINDS
from tests.analysis.dashboard.conftest import KIND_CAMPAIGNS, TOKEN, sign_in


def _command(db: Path, campaign: str, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    assert main(["estimate", "--db", str(db), "--campaign", campaign, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def served(kinds_db: Path) -> dict[str, Any]:
    """Each kind's ``/api/campaigns/<name>`` answer."""
    app = create_app(kinds_db, TOKEN)
    app.testing = True
    client: FlaskClient
    with app.test_client() as client:
        assert sign_in(client).status_code == 303
        answers = {}
        for kind, campaign in KIND_CAMPAIGNS.items():
            response = client.get(f"/api/campaigns/{campaign['name']}")
            assert response.status_code == 200, response.get_data(as_text=True)
            answers[kind] = response.get_json()
    return answers


def test_every_estimate_kind_has_a_view() -> None:
    with pytest.raises(ValueError, match="no dashboard view for estimates of kind 'nope'"):
        render("nope", {})


@pytest.mark.parametrize("kind", list(KIND_CAMPAIGNS))
def test_the_served_estimate_is_the_commands(
    kind: str, served: dict[str, Any], kinds_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = served[kind]
    assert answer["estimate_status"] == "released"
    assert answer["estimate"] == _command(kinds_db, KIND_CAMPAIGNS[kind]["name"], capsys)


def _column(display: dict[str, Any], name: str) -> list[Any]:
    index = display["table"]["columns"].index(name)
    return [row[index] for row in display["table"]["rows"]]


@pytest.mark.parametrize("kind", ["discovery", "sketch"])
def test_heavy_hitters_show_the_discovered_table_with_intervals(
    kind: str, served: dict[str, Any]
) -> None:
    estimate, display = served[kind]["estimate"], served[kind]["display"]
    assert display["view"] == "heavy-hitters"
    items = estimate["items"]
    significant = [item for item in items if item["significant"]]
    assert significant  # the seeded Zipf head is found
    # The table answers: the significant items; the others are in a collapsed section.
    assert _column(display, "value") == [item["value"] for item in significant]
    for field in ("frequency", "std_error", "ci_low", "ci_high", "z", "significant"):
        assert _column(display, field) == [item[field] for item in significant]
    rest = [item for item in items if not item["significant"]]
    collapsed = [s for s in display["sections"] if s.get("collapsed")]
    if rest:
        (others,) = collapsed
        assert [row[0] for row in others["table"]["rows"]] == [item["value"] for item in rest]
    else:
        assert collapsed == []
    assert display["chart"]["labels"] == [item["value"] for item in significant]
    assert display["chart"]["low"] == [item["ci_low"] for item in significant]
    assert any(f"{estimate['detected']} significant" in note for note in display["notes"])
    if kind == "discovery":
        (levels,) = [s for s in display["sections"] if not s.get("collapsed")]
        assert [row[0] for row in levels["table"]["rows"]] == [
            level["level"] for level in estimate["levels"]
        ]


def test_a_distribution_shows_its_cdf_with_a_band_and_its_histogram(
    served: dict[str, Any], kinds_db: Path
) -> None:
    estimate, display = served["distribution"]["estimate"], served["distribution"]["display"]
    assert display["view"] == "distribution"
    cdf = display["chart"]
    assert cdf["type"] == "band-line"
    x, values = np.array(cdf["x"]), np.array(cdf["values"])
    low, high = np.array(cdf["low"]), np.array(cdf["high"])
    assert x[0] == 0.0 and x[-1] == 10.0 and np.all(np.diff(x) > 0)
    assert np.all(np.diff(values) >= -1e-12) and values[0] == pytest.approx(0, abs=1e-9)
    assert values[-1] == pytest.approx(1.0)
    assert np.all(low <= values + 1e-9) and np.all(values <= high + 1e-9)
    assert np.any(high - low > 0.01)  # a band, not a line
    # The curve is the estimate's own CDF, and its median crosses 0.5 at the stated median.
    with open_read_only(kinds_db) as storage:
        campaign = storage.get_campaign("load")
        result = estimate_result(
            campaign, storage.iter_report_chunks("load"), confidence=estimate["confidence"]
        )
    assert values.tolist() == [result.cdf(v) for v in x]
    median = next(q for q in estimate["quantiles"] if q["q"] == 0.5)["value"]
    assert np.interp(0.5, values, x) == pytest.approx(median, abs=10 / 64)
    rows = {row[0]: row[1:] for row in display["table"]["rows"]}
    mean = estimate["mean"]
    assert rows["mean"] == [mean["value"], mean["std_error"], mean["ci_low"], mean["ci_high"]]
    for q in estimate["quantiles"]:
        assert rows[f"quantile {q['q']}"] == [q["value"], None, q["ci_low"], q["ci_high"]]
    (histogram,) = display["sections"]
    assert histogram["chart"]["values"] == [b["frequency"] for b in estimate["histogram"]]
    assert histogram["chart"]["high"] == [b["ci_high"] for b in estimate["histogram"]]
    assert histogram["table"]["rows"][0][0] == "[0, 0.625)"


def test_a_distribution_document_alone_shows_its_histogram(served: dict[str, Any]) -> None:
    display = render("distribution", served["distribution"]["estimate"])  # no estimate object
    assert display["chart"]["type"] == "interval-bars" and display["sections"] == []


def test_ranges_show_leaf_frequencies_and_quantiles(served: dict[str, Any]) -> None:
    estimate, display = served["range"]["estimate"], served["range"]["display"]
    assert display["view"] == "range"
    items = estimate["items"]
    assert display["table"]["rows"] == [
        [i["value"], i["frequency"], i["std_error"], i["ci_low"], i["ci_high"]] for i in items
    ]
    assert display["chart"]["values"] == [i["frequency"] for i in items]
    cumulative, quantiles = display["sections"]
    columns = quantiles["table"]["columns"]
    assert columns[:2] == ["q", "value"]
    assert quantiles["table"]["rows"] == [[q[c] for c in columns] for q in estimate["quantiles"]]
    # The cumulative frequency is the running sum of the leaves, inside its band.
    curve = cumulative["chart"]
    assert curve["type"] == "band-line" and curve["x"] == list(range(16))
    assert curve["values"] == pytest.approx(np.cumsum([i["frequency"] for i in items]))
    assert np.all(np.array(curve["low"]) <= curve["values"])
    assert np.all(np.array(curve["high"]) >= curve["values"])


def test_marginals_show_one_way_bars_and_a_two_way_heatmap(served: dict[str, Any]) -> None:
    estimate, display = served["multi"]["estimate"], served["multi"]["display"]
    assert display["view"] == "marginals"
    expected = [
        [m["attribute"], i["value"], i["frequency"], i["std_error"], i["ci_low"], i["ci_high"]]
        for m in estimate["marginals"]
        for i in m["items"]
    ]
    assert display["table"]["rows"] == expected
    assert display["chart"]["labels"][:3] == ["os=0", "os=1", "os=2"]
    (section,) = display["sections"]
    heatmap = section["heatmap"]
    (table,) = estimate["tables"]
    assert section["title"] == "Marginal of os, version"
    assert (heatmap["row_name"], heatmap["column_name"]) == ("os", "version")
    assert heatmap["values"] == table["frequencies"]
    assert heatmap["std_errors"] == table["std_errors"]
    assert np.asarray(heatmap["values"]).shape == (3, 2)
    # The table is consistent with the one-way marginal of os (made consistent, summed).
    os_marginal = [i["frequency"] for i in estimate["marginals"][0]["items"]]
    assert np.sum(heatmap["values"], axis=1) == pytest.approx(os_marginal, abs=0.05)


def test_a_higher_way_table_is_drawn_flattened() -> None:
    values = np.arange(12, dtype=float).reshape(2, 3, 2) / 66
    document = {
        "confidence": 0.95,
        "marginals": [],
        "tables": [{"attributes": ["a", "b", "c"], "frequencies": values.tolist()}],
    }
    heatmap = render("multi", document)["sections"][0]["heatmap"]
    assert heatmap["column_name"] == "b,c"
    assert heatmap["columns"] == ["0,0", "0,1", "1,0", "1,1", "2,0", "2,1"]
    assert heatmap["values"] == values.reshape(2, 6).tolist()
    assert heatmap["std_errors"][0][0] is None  # no errors given: empty, not an error


def test_key_value_shows_frequencies_and_means(served: dict[str, Any]) -> None:
    estimate, display = served["key-value"]["estimate"], served["key-value"]["display"]
    assert display["view"] == "key-value"
    keys = estimate["keys"]
    assert _column(display, "key") == [k["key"] for k in keys]
    assert _column(display, "mean") == [k["mean"] for k in keys]
    assert _column(display, "frequency_ci_low") == [k["frequency_ci"][0] for k in keys]
    assert _column(display, "mean_ci_high") == [k["mean_ci"][1] for k in keys]
    (means,) = display["sections"]
    assert means["chart"]["type"] == "interval-points"
    assert means["chart"]["values"] == [k["mean"] for k in keys]
    # The seeded means rise with the key (0.3 k - 0.8): the estimates see it.
    assert np.corrcoef([k["key"] for k in keys], [k["mean"] for k in keys])[0, 1] > 0.8


def test_views_tolerate_missing_fields() -> None:
    for kind, entry in KINDS.items():
        if kind == "mean":
            continue  # a mean document is its fields
        shown = render(kind, {})
        assert shown["table"]["rows"] == [] and shown["view"] == entry.dashboard.name


def test_fourier_marginals_show_their_tables_cells_and_heatmaps(served: dict[str, Any]) -> None:
    estimate, display = served["fourier"]["estimate"], served["fourier"]["display"]
    assert display["view"] == "marginals"
    tables = estimate["tables"]
    assert [s["title"] for s in display["sections"]] == [
        f"Marginal of {', '.join(t['attributes'])}" for t in tables
    ]
    for section, entry in zip(display["sections"], tables, strict=True):
        heatmap = section["heatmap"]
        assert heatmap["values"] == entry["frequencies"]
        # The table's own (bootstrap) intervals, not normal ones made up from its errors.
        assert heatmap["ci_low"] == entry["ci_low"] and heatmap["ci_high"] == entry["ci_high"]
    # No one-way marginals in the document: the main table lists every cell of every table.
    first = tables[0]
    rows = display["table"]["rows"][:4]
    assert [r[:2] for r in rows] == [
        [",".join(first["attributes"]), c] for c in ("0,0", "0,1", "1,0", "1,1")
    ]
    assert [r[2] for r in rows] == np.ravel(first["frequencies"]).tolist()
    assert [r[4] for r in rows] == np.ravel(first["ci_low"]).tolist()
