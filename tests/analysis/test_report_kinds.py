"""The report's views of the estimate kinds beyond frequencies (analysis.report_kinds), and a
shuffled campaign's two guarantees.

Every estimate kind but frequencies has a view here (means, RAPPOR, heavy hitters, CALM and
Fourier marginals, distributions, ranges, key-value). Each page must be self-contained (PNG
data URIs that decode into non-blank images, no external resource), escape what comes from the
campaign, carry the numbers of ``analysis.gap`` in its JSON (which must be strict JSON), and
show each view's sections. With the truth (as the demo gives it), the measured gap appears. In
headless Chromium (when installed) every image loads and no table or figure runs past the
page's width.
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg

from analysis import estimate
from analysis.cli import main
from analysis.gap import GapOptions, kind_gap, parse_simulation, zipf_weights
from analysis.kinds import KINDS
from analysis.kinds._common.items_gap import vocabulary
from analysis.kinds.distribution.gap import simulate_values
from analysis.kinds.fourier.gap import simulate_records as fourier_records
from analysis.kinds.key_value.gap import simulate_records as key_value_records
from analysis.kinds.mean.gap import simulate_values as mean_values
from analysis.kinds.multi.gap import simulate_records as multi_records
from analysis.report import Report, build_report, central_section, render_html
from analysis.report_kinds import section_view
from analysis.views.report import ReportPage, ReportView
from client_sdk.amplification import numerical_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.fourier import Fourier
from client_sdk.mechanisms.multi import Multi
from client_sdk.mechanisms.numeric import NumericMechanism
from client_sdk.mechanisms.pckv import PCKV
from client_sdk.mechanisms.rappor import RAPPOR
from client_sdk.mechanisms.square_wave import SquareWave
from collector.calibration import local_epsilon_for
from collector.storage import Storage, StoredCampaign

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOSTILE = '<script>alert("x")</script>'
N = 6000
ZIPF = parse_simulation("zipf")


def campaign(
    name: str, config: dict[str, Any], domain: list[str] | None = None, shuffle: Any = None
) -> StoredCampaign:
    m = mechanism_from_config(config)
    return StoredCampaign(name, m, m.to_config(), domain, None, f"id-{name}", 100,
                          "2026-12-01T00:00:00+00:00", shuffle)  # fmt: skip


def images(page: str) -> list[bytes]:
    return [
        base64.b64decode(data)
        for data in re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    ]


def check_page(report: Report, headings: tuple[str, ...]) -> str:
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    found = images(page)
    assert len(found) == len(report.figures)
    for data in found:
        assert data.startswith(PNG_SIGNATURE)
        pixels = mpimg.imread(io.BytesIO(data), format="png")
        assert pixels.shape[0] > 150 and pixels.shape[1] > 300
        assert float(pixels[..., :3].std()) > 0.05
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert "<script>" not in page
    for heading in (*headings, "The central gap", "Privacy"):
        assert heading in page, heading
    json.loads(report.to_json())  # strict JSON (no NaN)
    return page


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """One report of each estimate kind, with the truth (as the demo passes it)."""
    rng = np.random.default_rng(8)
    out: dict[str, Report] = {}

    c = campaign("terms", {"mechanism": "pem", "epsilon": 4.0, "max_length": 4})
    words = vocabulary(500, 4, rng)
    items = rng.choice(500, N, p=zipf_weights(500, ZIPF))
    raw = estimate(c.mechanism, c.mechanism.perturb([words[i] for i in items], rng=rng))
    held = np.bincount(items, minlength=500)
    out["discovery"] = build_report(
        c, raw, truth={w: int(k) for w, k in zip(words, held, strict=True)}, top=8
    )

    c = campaign("search", {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 8,
                            "max_length": 4}, domain=words[:60])  # fmt: skip
    raw = estimate(
        c.mechanism, c.mechanism.perturb([words[i] for i in items], rng=rng), candidates=words[:60]
    )
    out["sketch"] = build_report(
        c, raw, truth={w: int(k) for w, k in zip(words, held, strict=True)}, top=8
    )

    c = campaign("pages", {"mechanism": "oue", "epsilon": 1.0, "k": 12},
                 domain=[HOSTILE, *(f"page-{i}" for i in range(11))])  # fmt: skip
    pages = rng.choice(12, N, p=zipf_weights(12, ZIPF))
    raw = estimate(c.mechanism, c.mechanism.perturb(pages, rng=rng))
    out["frequencies"] = build_report(
        c, raw, replicates=20, true_counts=np.bincount(pages, minlength=12)
    )

    c = campaign(
        "mix",
        {"mechanism": "multi", "epsilon": 2.0, "protocol": "smp",
         "attributes": [{"name": "os", "k": 3, "labels": ["android", HOSTILE, "other"]},
                        {"name": "version", "k": 4}],
         "marginals": [["os", "version"]]},
    )  # fmt: skip
    assert isinstance(c.mechanism, Multi)
    records = multi_records(c.mechanism, N, ZIPF, rng)
    raw = estimate(c.mechanism, c.mechanism.perturb(records, rng=rng))
    out["multi"] = build_report(c, raw, truth=records)

    c = campaign("features", {"mechanism": "pckv", "epsilon": 2.0, "k": 5, "padding": 2},
                 domain=[HOSTILE, "b", "c", "d", "e"])  # fmt: skip
    assert isinstance(c.mechanism, PCKV)
    records_kv = key_value_records(c.mechanism, N, ZIPF, rng)
    out["key-value"] = build_report(
        c, estimate(c.mechanism, c.mechanism.perturb(records_kv, rng=rng)), truth=records_kv
    )

    config = {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0, "upper": 10, "bins": 8}
    c = campaign("load", config)
    assert isinstance(c.mechanism, SquareWave)
    values = simulate_values(c.mechanism, N, parse_simulation("lognormal"), rng)
    out["distribution"] = build_report(
        c, estimate(c.mechanism, c.mechanism.perturb(values, rng=rng)), truth=values
    )

    c = campaign(
        "flags",
        {"mechanism": "fourier", "epsilon": 2.0, "order": 2,
         "attributes": [{"name": "wifi", "labels": ["off", HOSTILE]}, {"name": "dark"},
                        {"name": "beta"}, {"name": "admin"}]},
    )  # fmt: skip
    assert isinstance(c.mechanism, Fourier)
    bits = fourier_records(c.mechanism, N, ZIPF, rng)
    out["fourier"] = build_report(
        c, estimate(c.mechanism, c.mechanism.perturb(bits, rng=rng)), truth=bits
    )

    c = campaign("duration", {"mechanism": "piecewise", "epsilon": 1.0, "lower": 0, "upper": 60})
    assert isinstance(c.mechanism, NumericMechanism)
    seconds = mean_values(c.mechanism, N, parse_simulation("lognormal"), rng)
    out["mean"] = build_report(
        c, estimate(c.mechanism, c.mechanism.perturb(seconds, rng=rng)), truth=seconds
    )

    config = {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75}
    words = [HOSTILE, *(f"app-{i}" for i in range(19))]
    c = campaign("apps", config, domain=words)
    held = rng.choice(20, N, p=zipf_weights(20, ZIPF))
    strings = [words[i] for i in held] + ["not-a-candidate"] * 300
    assert isinstance(c.mechanism, RAPPOR)
    raw = estimate(c.mechanism, c.mechanism.simulate_clients(strings, rng=rng), candidates=words)
    truth_strings = {w: int(k) for w, k in zip(words, np.bincount(held, minlength=20), strict=True)}
    out["rappor"] = build_report(c, raw, truth={**truth_strings, "not-a-candidate": 300}, top=12)

    c = campaign("latency", {"mechanism": "hierarchical", "epsilon": 2.0, "k": 32})
    leaves = rng.choice(32, N, p=zipf_weights(32, ZIPF))
    out["range"] = build_report(
        c,
        estimate(c.mechanism, c.mechanism.perturb(leaves, rng=rng)),
        true_counts=np.bincount(leaves, minlength=32),
    )
    return out


def test_heavy_hitters_view(reports: dict[str, Report]) -> None:
    report = reports["discovery"]
    page = check_page(report, ("Discovered items", "Which are the top 8?", "Which exceed"))
    data = report.data
    assert data["kind"] == "discovery" and len(data["items"]) <= 8
    assert all("true_frequency" in item for item in data["items"])
    assert set(report.figures) == {"items", "recall", "privacy"}
    mechanism = mechanism_from_config(data["mechanism"])
    # Bonferroni over the strings the decoder examined
    options = GapOptions(top=8, vocabulary=data["examined"])
    expected = kind_gap(mechanism, N, options)["detection"]
    assert data["gap"]["detection"] == pytest.approx(expected)
    central = data["measured_gap"]["top_k"]["central"]
    assert set(central) == {
        "exponential_mechanism",
        "permute_and_flip",
        "report_noisy_max",
        "gaussian_top_k",
    }
    assert "exact lower bound on recall" in page


def test_marginal_heatmap_view(reports: dict[str, Report]) -> None:
    report = reports["multi"]
    page = check_page(report, ("Marginals", "os \\ version"))
    assert set(report.figures) == {"heatmap-0", "privacy"}
    table = report.data["tables"][0]
    assert np.asarray(table["frequencies"]).shape == (3, 4)
    assert "&lt;script&gt;" in page
    assert report.data["measured_gap"]["tables"][0]["attributes"] == ["os", "version"]
    truth = np.asarray(table["truth"])  # the true table from the records, in brackets
    assert truth.shape == (3, 4) and truth.sum() == pytest.approx(1.0)
    assert "the truth in brackets" in page


def test_one_way_marginals_view() -> None:
    rng = np.random.default_rng(3)
    c = campaign(
        "spl",
        {"mechanism": "multi", "epsilon": 2.0, "protocol": "spl",
         "attributes": [{"name": "os", "k": 3}, {"name": "theme", "k": 2}]},
    )  # fmt: skip
    assert isinstance(c.mechanism, Multi)
    records = multi_records(c.mechanism, 3000, ZIPF, rng)
    report = build_report(c, estimate(c.mechanism, c.mechanism.perturb(records, rng=rng)),
                          truth=records)  # fmt: skip
    check_page(report, ("Marginals", "1-way bars"))
    assert set(report.figures) == {"marginal-0", "marginal-1", "privacy"}
    first = report.data["marginals"][0]
    assert first["truth"] == pytest.approx(list(np.bincount(records[:, 0], minlength=3) / 3000))


def test_key_value_view(reports: dict[str, Report]) -> None:
    report = reports["key-value"]
    page = check_page(report, ("Keys: frequency and mean", "true mean"))
    assert report.data["keys"][0]["label"] == HOSTILE and "&lt;script&gt;" in page
    assert report.data["measured_gap"]["mean"]["keys"] == 5


def test_distribution_view(reports: dict[str, Report]) -> None:
    report = reports["distribution"]
    check_page(report, ("The distribution", "50th percentile", "Wasserstein-1"))
    assert set(report.figures) == {"histogram", "cdf", "privacy"}
    assert len(report.data["histogram"]) == 8


def test_range_view(reports: dict[str, Report]) -> None:
    report = reports["range"]
    check_page(report, ("Ranges and quantiles", "average over", "random ranges (measured)"))
    ranges = report.data["ranges"]
    assert ranges[-1]["lo"] == 0 and ranges[-1]["hi"] == 32
    assert ranges[-1]["frequency"] == pytest.approx(1.0) and ranges[-1]["truth"] == 1.0


def test_every_estimate_kind_has_a_report_view() -> None:
    """Every kind of KINDS has a page: sections on this module's page, or (the frequencies
    alone) a page of its own, which the section page refuses."""
    pages = {kind for kind, entry in KINDS.items() if isinstance(entry.report, ReportPage)}
    assert pages == {"frequencies"}
    for kind in set(KINDS) - pages:
        assert isinstance(section_view(kind), ReportView)
    with pytest.raises(ValueError, match="'frequencies' writes its own report page"):
        section_view("frequencies")


def test_fourier_view(reports: dict[str, Report]) -> None:
    report = reports["fourier"]
    page = check_page(report, ("Marginals", "cell 01", "marginal size (measured)"))
    data = report.data
    assert set(report.figures) == {"one-way", "privacy"} | {f"heatmap-{i}" for i in range(6)}
    assert [e["attributes"] for e in data["one_way"]] == [["wifi"], ["dark"], ["beta"], ["admin"]]
    assert len(data["tables"]) == 6 and data["tables"][0]["attributes"] == ["wifi", "dark"]
    assert data["one_way"][0]["labels"] == [["off", HOSTILE]] and "&lt;script&gt;" in page
    for entry in (data["one_way"][1], data["tables"][2]):
        f = np.asarray(entry["frequencies"])
        assert f.sum() == pytest.approx(1.0) and np.all(f >= 0)
        assert np.all(np.asarray(entry["ci_low"]) <= f) and np.all(
            f <= np.asarray(entry["ci_high"])
        )
        assert np.asarray(entry["truth"]).sum() == pytest.approx(1.0)
    mechanism = mechanism_from_config(data["mechanism"])
    assert data["gap"]["sizes"] == kind_gap(mechanism, N)["sizes"]
    assert [s["size"] for s in data["measured_gap"]["sizes"]] == [1, 2]


def test_fourier_view_shows_the_estimate() -> None:
    rng = np.random.default_rng(5)
    config = {"mechanism": "fourier", "epsilon": 1.0, "attributes": [{"name": "a"}, {"name": "b"},
              {"name": "c"}], "order": 2}  # fmt: skip
    c = campaign("bits", config)
    raw = estimate(c.mechanism, c.mechanism.perturb(rng.integers(0, 2, (3000, 3)), rng=rng))
    report = build_report(c, raw)
    check_page(report, ("Marginals", "Both models measured"))
    for entry, names in zip(report.data["tables"], [("a", "b"), ("a", "c"), ("b", "c")],
                            strict=True):  # fmt: skip
        marginal = raw.marginal(*names)
        assert entry["frequencies"] == marginal.frequencies.tolist()
        assert entry["ci_low"] == marginal.ci_low.tolist()
        assert entry["std_errors"] == marginal.std_errors.tolist()
    assert report.data["one_way"][2]["frequencies"] == raw.marginal("c").frequencies.tolist()
    assert report.data["measured_gap"] is None


def test_mean_view(reports: dict[str, Report]) -> None:
    report = reports["mean"]
    check_page(report, ("The mean", "measured against the truth", "LDP, worst-case value"))
    assert set(report.figures) == {"mean", "gap", "privacy"}
    data = report.data
    (row,) = data["coordinates"]
    assert row["mean"] == data["mean"] and row["ci_low"] < row["truth"] < row["ci_high"]
    assert data["bounds"] == [0.0, 60.0] and data["variance_method"] == "empirical"
    measured = data["measured_gap"]
    assert measured["ldp_squared_error"] == pytest.approx((row["mean"] - row["truth"]) ** 2)


def test_mean_view_of_a_vector() -> None:
    rng = np.random.default_rng(6)
    c = campaign("vector", {"mechanism": "hybrid", "epsilon": 2.0, "lower": -1, "upper": 1,
                            "dim": 3})  # fmt: skip
    values = rng.uniform(-0.5, 0.9, (4000, 3))
    raw = estimate(c.mechanism, c.mechanism.perturb(values, rng=rng))
    report = build_report(c, raw)
    page = check_page(report, ("The mean", "coordinate 2"))
    data = report.data
    assert [row["mean"] for row in data["coordinates"]] == raw.mean.tolist()
    assert [row["std_error"] for row in data["coordinates"]] == raw.std_errors.tolist()
    assert data["gap"]["dim"] == 3 and data["gap"]["l1_sensitivity"] == pytest.approx(6.0)
    assert data["measured_gap"] is None and "measured against the truth" not in page


def test_rappor_view(reports: dict[str, Report]) -> None:
    report = reports["rappor"]
    page = check_page(report, ("Candidate strings", "Bloom-bit mass", "MSE per candidate"))
    assert set(report.figures) == {"items", "gap", "privacy"}
    data = report.data
    assert data["candidates"] == 20 and len(data["items"]) == 12
    assert data["items"][0]["value"] == HOSTILE and "&lt;script&gt;" in page
    assert all("true_frequency" in item for item in data["items"])
    measured = data["measured_gap"]
    assert measured["outside_candidates"] == pytest.approx(300 / (N + 300))
    assert measured["ldp_false_discoveries"] <= 1
    # the strings outside the list leave Bloom-bit mass the candidates do not explain
    assert data["explained_fraction"] < 1.02


def test_a_shuffled_campaign_states_both_guarantees() -> None:
    epsilon0 = local_epsilon_for(1.0, 2000, 1e-6)
    shuffle = {"min_batch": 2000, "central_epsilon": 1.0, "delta": 1e-6}
    c = campaign("shuffled", {"mechanism": "grr", "epsilon": epsilon0, "k": 10}, shuffle=shuffle)
    sizes = [2000, 2500, 3000]
    section = central_section(c, sizes)
    assert section is not None and section["local_epsilon"] == epsilon0
    assert section["received"]["epsilon"] == numerical_epsilon(epsilon0, 2000, 1e-6)
    assert (
        central_section(campaign("plain", {"mechanism": "grr", "epsilon": 1, "k": 3}), []) is None
    )
    rng = np.random.default_rng(2)
    values = rng.integers(0, 10, sum(sizes))
    raw = estimate(c.mechanism, c.mechanism.perturb(values, rng=rng))
    report = build_report(c, raw, method="base", replicates=0, batch_sizes=sizes)
    column = report.data["shuffled_column"]
    assert column["central_epsilon"] == section["received"]["epsilon"]
    assert column["local_epsilon"] == epsilon0
    page = render_html(report)
    assert "Shuffled collection: two guarantees" in page and "local only (no shuffler)" in page
    assert "One report per device per batch: not enforced" in page  # no credentials given
    metered = build_report(
        c,
        raw,
        method="base",
        replicates=0,
        batch_sizes=sizes,
        batch_credentials=[(size, 1, 0) for size in sizes],
    )
    assert "assuming at least 2000 honest reports in every batch" in render_html(metered)
    assert "One report per device per batch: enforced" in render_html(metered)
    before = build_report(c, raw, method="base", replicates=0, batch_sizes=[])
    assert before.data["central"]["received"] is None
    assert "No batch has been received yet" in render_html(before)


# ---- the command over a real database ---------------------------------------------------------


def test_report_command_covers_a_range_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "collector.db"
    config = {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16}
    mechanism = mechanism_from_config(config)
    values = np.random.default_rng(1).integers(0, 16, 3000)
    payloads = mechanism.to_wire(mechanism.perturb(values, rng=np.random.default_rng(2)))
    with Storage(db) as storage:
        labels = [f"{10 * i}-{10 * i + 9} ms" for i in range(16)]
        storage.create_campaign({"name": "buckets", "mechanism": config, "domain": labels})
        storage.insert_reports(
            "buckets", [(secrets.token_hex(16), json.dumps(p)) for p in payloads]
        )
    out, numbers = tmp_path / "r.html", tmp_path / "r.json"
    code = main(["report", "--db", str(db), "--campaign", "buckets", "--out", str(out),
                 "--json", str(numbers), "--format", "text"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"wrote {out}: campaign 'buckets', n=3000, 2 figures")
    document = json.loads(numbers.read_text())
    assert document["kind"] == "range" and document["measured_gap"] is None
    page = out.read_text()
    assert "Ranges and quantiles" in page and "0-9 ms to 30-39 ms" in page


def test_report_command_covers_a_fourier_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "collector.db"
    config = {"mechanism": "fourier", "epsilon": 2.0, "order": 2,
              "attributes": [{"name": "wifi", "labels": ["off", "on"]}, {"name": "dark"},
                             {"name": "beta"}]}  # fmt: skip
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(9)
    bits = fourier_records(mechanism, 4000, ZIPF, rng)  # type: ignore[arg-type]
    payloads = mechanism.to_wire(mechanism.perturb(bits, rng=rng))
    with Storage(db) as storage:
        storage.create_campaign({"name": "flags", "mechanism": config})
        storage.insert_reports("flags", [(secrets.token_hex(16), json.dumps(p)) for p in payloads])
    out, numbers = tmp_path / "r.html", tmp_path / "r.json"
    code = main(["report", "--db", str(db), "--campaign", "flags", "--out", str(out),
                 "--json", str(numbers), "--format", "text"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"wrote {out}: campaign 'flags', n=4000, 5 figures")
    document = json.loads(numbers.read_text())
    assert main(["estimate", "--db", str(db), "--campaign", "flags", "--format", "json"]) == 0
    estimated = json.loads(capsys.readouterr().out)
    assert document["kind"] == "fourier" and document["n"] == estimated["n"] == 4000
    for shown, table in zip(document["tables"], estimated["tables"], strict=True):
        assert shown["attributes"] == table["attributes"]
        for key in ("frequencies", "std_errors", "ci_low", "ci_high"):
            assert shown[key] == table[key], key  # the same numbers as `estimate`
    page = out.read_text()
    assert "Marginal" in page and "coefficients" in page and "wifi, dark" in page


# ---- legible in a browser ----------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_sketch_and_frequency_pages(reports: dict[str, Report]) -> None:
    report = reports["sketch"]
    check_page(report, ("Discovered items", "Which are the top 8?"))
    assert report.data["kind"] == "sketch" and report.data["examined"] == 60
    page = render_html(reports["frequencies"])
    for heading in ("Estimated frequencies", "The price of locality", "run on the true histogram"):
        assert heading in page
    # Both pages open with the answer, before the method's first section.
    for opened in (page, render_html(report)):
        assert 0 < opened.index('<p class="answer">From ') < opened.index("<h2>1.")
        assert "significantly frequent" in opened
    assert "<script>" not in page


def test_pages_render_in_headless_chromium(reports: dict[str, Report], tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no system Chromium at {CHROMIUM}")
    assert {report.data["kind"] for report in reports.values()} == set(KINDS)  # every kind
    paths = []
    for kind, report in reports.items():
        path = tmp_path / f"{kind}.html"
        path.write_text(render_html(report), encoding="utf-8")
        paths.append(path)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            for path in paths:
                page.goto(path.as_uri())
                loaded = page.evaluate(
                    "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"
                )
                assert loaded, path.name
                # nothing wider than the page: no table or figure forces a sideways scroll
                assert page.evaluate("document.documentElement.scrollWidth") <= 1100, path.name
                shot = tmp_path / f"{path.stem}.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000
            assert errors == []
        finally:
            browser.close()
