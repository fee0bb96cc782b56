"""The minimum batch is a leaf every kind of estimate can import (issue 22): the CLI's loaders
refuse a small batch without loading the heavy-hitter module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from analysis import heavy_hitters, min_batch


def test_below_the_minimum_is_refused_naming_the_campaign_and_the_numbers() -> None:
    min_batch.require_min_batch(100, 100, "ok")  # exactly the minimum is allowed
    min_batch.require_min_batch(1, None)  # no minimum
    with pytest.raises(min_batch.InsufficientReports, match=r"'c' has 6 reports.*size 7"):
        min_batch.require_min_batch(6, 7, "c")
    assert heavy_hitters.require_min_batch is min_batch.require_min_batch  # one definition


def test_the_shard_loader_refuses_a_small_batch_without_the_heavy_hitter_module() -> None:
    code = "import sys, analysis.sharded\nprint('analysis.heavy_hitters' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
