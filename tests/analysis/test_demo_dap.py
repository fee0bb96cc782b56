"""``ldp-demo --dap``: a real Leader and Helper, a fleet through the real SDK, a collection
(analysis/demo_dap.py); the DESIGN contract's JSON document."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from analysis.demo import main
from collector.process import entry_point


def test_ldp_demo_dap_json_with_local_randomization() -> None:
    done = subprocess.run(
        [
            *entry_point("ldp-demo", "analysis.demo"),
            "--dap", "--json", "--devices", "300", "--epsilon", "1",
            "--local-epsilon", "2", "--clients", "2", "--seed", "3",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["devices"] == result["accepted"] == result["report_count"] == 300
    truth = np.array(result["truth"])
    assert truth.sum() == 300 and len(truth) == len(result["labels"]) == 8
    estimate, errors = np.array(result["estimate"]), np.array(result["std_errors"])
    assert estimate.shape == errors.shape == (8,)
    # Debiased randomized response plus the Aggregators' noise: within 6 standard errors of
    # the truth in every bucket (a false failure has probability below 8 * 2e-9).
    assert np.all(errors > 0) and np.all(np.abs(estimate - truth) <= 6 * errors)
    assert result["epsilon"] == 1.0 and result["local_epsilon"] == 2.0
    assert sum(result["collected"]) == pytest.approx(300, abs=12 * errors.max())
    assert set(result["guarantees"]) == {"local", "central"}


def test_dap_only_options_need_dap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json"]) == 2
    assert "--json and --local-epsilon go with --dap" in capsys.readouterr().err
    assert main(["--dap", "--shuffle"]) == 2
    assert "--dap runs its own Leader and Helper" in capsys.readouterr().err
