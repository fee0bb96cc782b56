"""``ldp-analyze report`` and ``analysis.report``: the page renders with its figures.

The page must be self-contained (no external resource), hold its four figures as PNG data URIs
that decode (PNG signature, and matplotlib reads them back as images of a sensible size), escape
the campaign's labels, and its JSON must carry the same numbers as the library.
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
from analysis.gap import utility_gap
from analysis.report import build_report, privacy_section, render_html
from client_sdk import mechanism_from_config
from collector.storage import Storage

CONFIG = {"mechanism": "oue", "epsilon": 1.0, "k": 12}
LABELS = [f"page-{i}" for i in range(11)] + ['<script>alert("x")</script>']
COUNTS = np.array([800, 400, 250, 150, 100, 80, 60, 50, 40, 30, 20, 20])
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
        storage.create_campaign(
            {
                "name": "latency",
                "mechanism": {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 1.0},
            }
        )
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
         str(numbers), "--replicates", "40"]
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
    assert document["postprocessing"] == "norm-sub"
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


def test_report_refuses_what_it_cannot_cover(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--db", str(db), "--campaign", "latency", "--out",
                 str(tmp_path / "x.html")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "campaign 'latency' uses 'laplace' (estimate kind 'mean'): the report covers" in err
    assert not (tmp_path / "x.html").exists()
    code = main(["report", "--db", str(db), "--campaign", "nope", "--out",
                 str(tmp_path / "y.html")])  # fmt: skip
    assert code == 2 and "no campaign named 'nope'" in capsys.readouterr().err


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
