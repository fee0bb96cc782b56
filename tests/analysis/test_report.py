"""``ldp-analyze report`` and ``analysis.report``: the page renders with its figures.

The page must be self-contained (no external resource), hold its four figures as PNG data URIs
that decode (PNG signature, and matplotlib reads them back as images of a sensible size), escape
the campaign's labels, and its JSON must carry the same numbers as the library. Mean and RAPPOR
campaigns have pages of their own, whose numbers equal ``ldp-analyze estimate``'s on the same
database.
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg

from analysis import estimate
from analysis.cli import main
from analysis.dataset import load_campaign
from analysis.gap import kind_gap, utility_gap
from analysis.report import build_report, privacy_section, render_html
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.rappor import RAPPOR
from collector.storage import Storage

CONFIG = {"mechanism": "oue", "epsilon": 1.0, "k": 12}
LABELS = [f"page-{i}" for i in range(11)] + ['<script>alert("x")</script>']
COUNTS = np.array([800, 400, 250, 150, 100, 80, 60, 50, 40, 30, 20, 20])
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MEAN_CONFIG = {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 1.0}
MEAN_N = 1500
RAPPOR_CONFIG = {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75}
CANDIDATES = [f"https://site-{i}.example/" for i in range(11)] + ['<script>alert("x")</script>']
RAPPOR_N = 8000


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "collector.db"
    mechanism = mechanism_from_config(CONFIG)
    values = np.repeat(np.arange(12), COUNTS)
    payloads = mechanism.to_wire(mechanism.perturb(values, rng=np.random.default_rng(5)))
    with Storage(path) as storage:
        storage.create_campaign(
            {
                "name": "pages",
                "mechanism": CONFIG,
                "domain": LABELS,
                "policy": {
                    "epsilon_per_report": 1.0,
                    "reports_per_period": 7,
                    "period_seconds": 86400,
                },
            }
        )
        storage.insert_reports("pages", [(secrets.token_hex(16), json.dumps(p)) for p in payloads])
        storage.create_campaign({"name": "latency", "mechanism": MEAN_CONFIG})
        numeric = mechanism_from_config(MEAN_CONFIG)
        seconds = np.random.default_rng(6).beta(2, 5, MEAN_N)
        rows = numeric.to_wire(numeric.perturb(seconds, rng=np.random.default_rng(7)))
        storage.insert_reports("latency", [(secrets.token_hex(16), json.dumps(p)) for p in rows])
        storage.create_campaign(
            {"name": "homepage", "mechanism": RAPPOR_CONFIG, "domain": CANDIDATES}
        )
        rappor = mechanism_from_config(RAPPOR_CONFIG)
        assert isinstance(rappor, RAPPOR)
        rng = np.random.default_rng(8)
        held = rng.choice(3, RAPPOR_N, p=[0.5, 0.3, 0.2])
        reports = rappor.simulate_clients([CANDIDATES[i] for i in held], rng=rng)
        rows = rappor.to_wire(reports)
        storage.insert_reports("homepage", [(secrets.token_hex(16), json.dumps(p)) for p in rows])
    return path


def _images(page: str) -> list[bytes]:
    return [
        base64.b64decode(data)
        for data in re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    ]


def test_report_renders_a_self_contained_page(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, numbers = tmp_path / "report.html", tmp_path / "report.json"
    code = main(
        ["report", "--db", str(db), "--campaign", "pages", "--out", str(out), "--json",
         str(numbers), "--replicates", "40", "--format", "text"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"wrote {out}: campaign 'pages', n=2000, 4 figures")
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    images = _images(page)
    assert len(images) == 4
    for data in images:
        assert data.startswith(PNG_SIGNATURE)
        pixels = mpimg.imread(io.BytesIO(data), format="png")
        assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400
        assert float(pixels[..., :3].std()) > 0.05  # not a blank canvas
    # Self-contained: no external scripts, styles or images.
    assert not re.search(r'(src|href)="(?!data:)', page)
    # The hostile label is escaped, never injected.
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    for heading in ("Estimated frequencies", "The price of locality", "Error against",
                    "Privacy"):  # fmt: skip
        assert heading in page

    document = json.loads(numbers.read_text())
    assert document["campaign"] == "pages" and document["n"] == 2000
    assert document["postprocessing"] == "base"  # the one --postprocess default
    assert document["privacy"]["reports_per_device"] == 7
    assert set(document["privacy"]["accounting"]) == {"1", "7"}
    expected = utility_gap(mechanism_from_config(CONFIG), 2000).to_dict()
    assert document["gap"]["variance_ratio"] == pytest.approx(expected["variance_ratio"])
    assert [item["value"] for item in document["items"]][:2] == ["page-0", "page-1"]
    assert len(document["items"]) == 12


def test_report_json_on_stdout(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code = main(
        ["report", "--db", str(db), "--campaign", "pages", "--out", str(out), "--format", "json",
         "--postprocess", "mle", "--replicates", "20", "--top", "5"]
    )  # fmt: skip
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["postprocessing"] == "mle" and document["top"] == 5
    assert document["postprocessing_details"]["converged"] is True
    assert out.exists()


def test_report_of_an_unknown_campaign_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--db", str(db), "--campaign", "nope", "--out",
                 str(tmp_path / "y.html")])  # fmt: skip
    assert code == 2 and "no campaign named 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "y.html").exists()


def _report_and_estimate(
    db: Path, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The report's JSON, ``ldp-analyze estimate``'s JSON and the page, for one campaign."""
    out, numbers = tmp_path / f"{name}.html", tmp_path / f"{name}.json"
    code = main(["report", "--db", str(db), "--campaign", name, "--out", str(out),
                 "--json", str(numbers), "--format", "text"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(f"wrote {out}: campaign {name!r}")
    assert main(["estimate", "--db", str(db), "--campaign", name, "--format", "json"]) == 0
    estimated = json.loads(capsys.readouterr().out)
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and not re.search(r'(src|href)="(?!data:)', page)
    for data in _images(page):
        assert data.startswith(PNG_SIGNATURE)
        assert float(mpimg.imread(io.BytesIO(data), format="png")[..., :3].std()) > 0.05
    return json.loads(numbers.read_text()), estimated, page


def _same_figures(shown: dict[str, Any], expected: dict[str, Any]) -> None:
    assert set(shown) == set(expected)
    for key, value in expected.items():
        if isinstance(value, float):
            assert shown[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert shown[key] == value, key


def test_report_of_a_mean_campaign(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document, estimated, page = _report_and_estimate(db, "latency", tmp_path, capsys)
    assert document["kind"] == "mean" and document["n"] == estimated["n"] == MEAN_N
    for key in ("mean", "std_error", "ci_low", "ci_high"):
        assert document[key] == estimated[key], key  # the same numbers as `estimate`
    row = document["coordinates"][0]
    assert row["mean"] == estimated["mean"] and row["count"] == MEAN_N
    assert row["worst_case_std_error"] == estimated["worst_case_std_error"]
    mechanism = mechanism_from_config(MEAN_CONFIG)
    _same_figures(document["gap"], kind_gap(mechanism, MEAN_N))
    assert document["gap"]["central_laplace_variance"] == pytest.approx(2 / MEAN_N**2)
    assert document["measured_gap"] is None  # no truth in a real campaign
    for text in ("The mean", "The central gap", "Privacy", f"{estimated['mean']:.4g}",
                 "LDP, worst-case value", "central Laplace (L1 sensitivity 1)"):  # fmt: skip
        assert text in page, text
    assert len(_images(page)) == 3  # the mean, the gap, the privacy curve


def test_report_of_a_rappor_campaign(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document, estimated, page = _report_and_estimate(db, "homepage", tmp_path, capsys)
    assert document["kind"] == "rappor" and document["n"] == estimated["n"] == RAPPOR_N
    by_value = {item["value"]: item for item in estimated["items"]}
    assert document["candidates"] == len(CANDIDATES)
    for item in document["items"]:  # the largest estimates, equal to `estimate`'s
        assert item == by_value[item["value"]]
    frequencies = [item["frequency"] for item in document["items"]]
    assert frequencies == sorted(frequencies, reverse=True)
    assert [item["value"] for item in document["items"][:2]] == CANDIDATES[:2]
    for key in ("explained_fraction", "reported_fraction", "detected", "critical_z", "note"):
        assert document[key] == estimated[key], key
    assert document["selected"] == sum(item["selected"] for item in estimated["items"])
    mechanism = mechanism_from_config(RAPPOR_CONFIG)
    _same_figures(document["gap"], kind_gap(mechanism, RAPPOR_N))
    assert "&lt;script&gt;" in page and "<script>" not in page
    for text in ("Candidate strings", "Bloom-bit mass", "The central gap", "Privacy",
                 "a lone candidate nobody holds"):  # fmt: skip
        assert text in page, text
    assert len(_images(page)) == 3  # the candidates, the gap, the privacy curve


def test_report_with_ground_truth_shows_both_models_errors(db: Path) -> None:
    campaign = load_campaign(db, "pages")
    mechanism = campaign.mechanism
    values = np.repeat(np.arange(12), COUNTS)
    raw = estimate(mechanism, mechanism.perturb(values, rng=np.random.default_rng(1)))
    report = build_report(campaign, raw, method="base", replicates=0, true_counts=COUNTS)
    empirical: dict[str, Any] = report.data["empirical_gap"]
    assert empirical["ldp_mse"] > empirical["central_gaussian_mse"] > 0
    assert all("true_frequency" in item for item in report.data["items"])
    page = render_html(report)
    assert "run on the true histogram" in page and len(_images(page)) == 4


def test_privacy_section_without_a_policy() -> None:
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 4})
    section = privacy_section(grr, delta=1e-6, reports_per_device=None)
    assert section["implemented_epsilon"] == pytest.approx(1.0, abs=1e-9)
    assert list(section["accounting"]) == ["1", "10", "100", "365"]
    epsilons = [section["accounting"][t]["epsilon"] for t in section["accounting"]]
    assert epsilons == sorted(epsilons)  # grows with the number of reports
    assert section["accounting"]["10"]["bounds"]["basic"] == pytest.approx(10.0)
