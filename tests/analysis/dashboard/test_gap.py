"""The dashboard's gap table: the trust models beside the local one (analysis.dashboard.app
``central_gap``, the figures of ``analysis.kinds.frequencies.gap.trust_models``)."""

from __future__ import annotations

import math

import pytest
from flask.testing import FlaskClient

from analysis.accounting import Zcdp
from analysis.gap import GapOptions, kind_gap
from client_sdk.mechanisms import mechanism_from_config
from tests.analysis.dashboard.conftest import COLORS, sign_in


def test_the_gap_table_shows_shuffled_and_secure_aggregation(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    served = client.get("/api/campaigns/colors").get_json()
    gap, n = served["gap"], served["n"]
    models = kind_gap(mechanism_from_config(COLORS["mechanism"]), n, GapOptions())["trust_models"][
        "models"
    ]
    assert gap["ldp_std_error"] == models["local"]["std_error"]
    assert gap["central_laplace_std_error"] == models["curator"]["std_error"]
    assert gap["shuffled_std_error"] == models["shuffled"]["std_error"]
    assert gap["shuffled_local_epsilon"] == models["shuffled"]["local_epsilon"]
    dap = gap["secure_aggregation_std_error"]
    assert dap == models["secure_aggregation"]["std_error"]
    # the DAP error is two discrete Laplace draws of scale 2/epsilon over n (epsilon 2 here)
    assert dap == pytest.approx(1 / math.sinh(2.0 / 4) / n, rel=1e-12)
    assert gap["ldp_std_error"] > gap["shuffled_std_error"] > dap > gap["central_laplace_std_error"]
    for key in ("shuffled_share_of_gap_closed", "secure_aggregation_share_of_gap_closed"):
        assert 0 < gap[key] < 1
    # the DAP pair's discrete Gaussian alternative at the same epsilon and the gap's delta
    gaussian = models["secure_aggregation"]["gaussian"]
    assert gap["secure_aggregation_gaussian_rho"] == gaussian["rho"]
    assert gap["secure_aggregation_gaussian_std_error"] == gaussian["std_error"]
    share = gap["secure_aggregation_gaussian_share_of_gap_closed"]
    assert share == gaussian["share_of_gap_closed"]
    assert Zcdp(gaussian["rho"]).epsilon_at(gap["delta"]) <= 2.0  # the campaign's epsilon
    # two discrete Gaussians of sigma^2 >= 1/rho over n (their variance within 1e-9 of it here)
    assert gaussian["std_error"] == pytest.approx(math.sqrt(2 * gaussian["sigma2"]) / n, rel=1e-9)
    assert gaussian["sigma2"] >= 1 / gaussian["rho"]
    assert gaussian["std_error"] > dap and 0 < share < gap["secure_aggregation_share_of_gap_closed"]
