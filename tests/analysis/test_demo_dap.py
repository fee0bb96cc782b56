"""``ldp-demo --dap``: a real Leader and Helper, a fleet through the real SDK, a collection
(analysis/demo_dap.py); the DESIGN contract's JSON document."""

from __future__ import annotations

import json
import math
import secrets
import subprocess

import numpy as np
import pytest

from analysis.demo import main
from client_sdk.sampling import DiscreteGaussian
from client_sdk.zcdp import zcdp_epsilon
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


def test_ldp_demo_dap_with_oue_inside_prio3() -> None:
    """--local-mechanism oue: a MultihotCountVec task of length = max_weight = 8 (sensitivity
    min(16, 8) = 8 at epsilon 4: scale 2 per aggregator), the devices' OUE bit vectors sharded,
    the support counts debiased by the Collector."""
    done = subprocess.run(
        [
            *entry_point("ldp-demo", "analysis.demo"),
            "--dap", "--json", "--devices", "300", "--epsilon", "4",
            "--local-epsilon", "2", "--local-mechanism", "oue", "--clients", "2", "--seed", "5",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["devices"] == result["accepted"] == result["report_count"] == 300
    assert result["vdaf"] == {
        "type": "multihotcountvec",
        "length": 8,
        "max_weight": 8,
        "chunk_length": 3,
    }
    assert result["local"] == {"mechanism": "oue", "epsilon": 2.0, "k": 8}
    truth, estimate = np.array(result["truth"]), np.array(result["estimate"])
    errors = np.array(result["std_errors"])
    # OUE's support counts total about 300 (1/2 + 7/(e^2 + 1)) = 403, not 300: the sum's
    # standard deviation is about 20 (OUE's bits and 16 Laplace draws), so 300 is 5 away
    assert sum(result["collected"]) > 300
    assert np.all(errors > 0) and np.all(np.abs(estimate - truth) <= 6 * errors)


def test_ldp_demo_dap_with_the_discrete_gaussian() -> None:
    """--dp gaussian:RHO: the devices' policy accepts the task at its epsilon at delta 1e-6
    (client_sdk.zcdp), the Aggregators add the discrete Gaussian, the Collector states rho."""
    done = subprocess.run(
        [
            *entry_point("ldp-demo", "analysis.demo"),
            "--dap", "--json", "--devices", "300", "--dp", "gaussian:1/20",
            "--clients", "2", "--seed", "4",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["devices"] == result["accepted"] == result["report_count"] == 300
    assert result["dp"] == "gaussian:1/20" and result["rho"] == 0.05
    assert result["epsilon"] == zcdp_epsilon(0.05, 1e-6) and result["delta"] == 1e-6
    # each aggregator: N_Z(0, sigma^2), sigma^2 = Delta_2^2 / (2 rho) = 2 / 0.1 = 20
    noise = DiscreteGaussian.at_least(20.0)
    assert noise.sigma2 == 20
    truth, estimate = np.array(result["truth"]), np.array(result["estimate"])
    errors = np.array(result["std_errors"])
    assert errors == pytest.approx(math.sqrt(2 * noise.variance()), rel=1e-12)
    # within 6 standard errors in every bucket (a false failure below 8 * 2e-9)
    assert np.all(np.abs(estimate - truth) <= 6 * errors)


def test_dap_only_options_need_dap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json"]) == 2
    assert "--json, --local-epsilon and --dp go with --dap" in capsys.readouterr().err
    assert main(["--dap", "--local-mechanism", "oue"]) == 2  # without --local-epsilon
    assert "--local-mechanism goes with --dap --local-epsilon" in capsys.readouterr().err
    assert main(["--dp", "gaussian:0.1"]) == 2
    assert "go with --dap" in capsys.readouterr().err
    assert main(["--dap", "--dp", "gaussian:-1"]) == 2  # refused before any process starts
    err = capsys.readouterr().err
    assert "dp must be" in err and "'gaussian:-1'" in err
    assert main(["--dap", "--shuffle"]) == 2
    assert "--dap runs its own Leader and Helper" in capsys.readouterr().err


def test_tokens_beginning_with_a_dash_reach_the_aggregators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A random base64url token begins with "-" one time in 64: passed as a separate argument,
    argparse took it for an option and the demo failed (seen in CI)."""
    from analysis.demo_dap import run_dap_demo

    drawn = iter(range(1000))
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n=32: f"-{next(drawn)}-" + "A" * n)
    result = run_dap_demo(devices=100, labels=4, seed=1)
    assert result["devices"] == result["accepted"] == 100
