"""``ldp-demo --shuffle``: a real run at small n (collector, shuffler and a fleet process), and
what its printed gap says."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.demo import main, run_demo, shuffle_batches, summary_lines
from client_sdk.amplification import numerical_epsilon


def test_shuffle_batches_cut_the_fleet_into_equal_batches_of_at_most_ten_thousand() -> None:
    assert shuffle_batches(2_000) == (2_000, 1)
    assert shuffle_batches(100_000) == (10_000, 10)
    assert shuffle_batches(10_001) == (5_000, 2)  # one report waits below min_batch
    with pytest.raises(ValueError, match="at least 2 devices"):
        shuffle_batches(1)


@pytest.mark.slow
def test_the_shuffled_demo_closes_most_of_the_gap_to_the_curator(tmp_path: Path) -> None:
    result = run_demo(
        devices=3_001, epsilon=1.0, clients=1, shuffle=True, workdir=tmp_path / "demo"
    )
    assert result.acknowledged == 3_001 and result.stored == 3_001
    assert result.mechanism["mechanism"] == "grr"
    shuffled = result.shuffled
    assert shuffled is not None and shuffled["batch_sizes"] == [3_001]
    assert shuffled["waiting"] == 0
    column = shuffled["column"]
    epsilon0 = result.mechanism["epsilon"]
    assert column["local_epsilon"] == epsilon0 > 2.5  # calibrated well above the target
    # The central figure is the bound at the real batch size, within the target.
    assert column["central_epsilon"] == numerical_epsilon(epsilon0, 3_001, 1e-6) <= 1.0 * 1.0001
    exact = column["exact"]
    assert exact["local_over_shuffled"] > 10 and 0.4 < exact["share_of_gap_closed"] < 1
    # The real estimate's error is about the exact shuffled variance (100 items: the mean of
    # 100 squared errors is within a factor 2 of its expectation with overwhelming probability).
    assert 0.5 < shuffled["observed_mse"] / exact["shuffled_variance"] < 2.0
    assert shuffled["measured"]["local_only_mse"] > 10 * shuffled["observed_mse"]
    text = "\n".join(summary_lines(result))
    assert "through the shuffler: 1 batch(es) of 3,001-3,001 reports" in text
    assert "the shuffler closes" in text and "local only (each report 1-LDP)" in text


def test_shuffle_runs_its_own_collector(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--shuffle", "--collector", "http://127.0.0.1:9", "--campaign", "c"]) == 2
    assert "--shuffle runs its own collector" in capsys.readouterr().err
