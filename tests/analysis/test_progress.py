"""analysis.progress: bars on stderr only at a terminal, never with --quiet, never on stdout."""

from __future__ import annotations

import argparse
import inspect
import io
import json
from pathlib import Path

import numpy as np
import pytest

from analysis import cli as analyze
from analysis import demo, loading
from analysis import progress as progress_module
from analysis.progress import add_quiet_argument, progress, progress_enabled, steps
from tests.analysis.conftest import store_campaign


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_when_stderr_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not progress_enabled()
    assert list(progress(range(5), desc="work")) == [0, 1, 2, 3, 4]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_bar_on_stderr_at_a_terminal_and_quiet_turns_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", terminal)
    assert progress_enabled() and not progress_enabled(quiet=True)
    assert list(steps(range(3), desc="shards")) == [0, 1, 2]
    assert "shards" in terminal.getvalue()
    quiet = _Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", quiet)
    with progress(desc="reports", total=10, quiet=True) as bar:
        bar.update(10)
    assert quiet.getvalue() == ""


def test_quiet_flag() -> None:
    parser = argparse.ArgumentParser()
    add_quiet_argument(parser)
    assert parser.parse_args(["--quiet"]).quiet and not parser.parse_args([]).quiet


@pytest.fixture
def screens(tmp_path: Path) -> Path:
    path = tmp_path / "collector.db"
    config = {"mechanism": "grr", "epsilon": 2.0, "k": 3}
    document = {"name": "screens", "mechanism": config, "domain": ["a", "b", "c"]}
    store_campaign(path, document, np.repeat(np.arange(3), [300, 200, 100]), 3)
    return path


@pytest.mark.parametrize(
    "extra, desc", [(["--by", "day"], "screens by day"), ([], "screens")], ids=["by-day", "whole"]
)
def test_estimate_draws_its_bar_at_a_terminal_and_quiet_stops_it(
    screens: Path,
    extra: list[str],
    desc: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`estimate` (the chunks it reads) and `estimate --by day` (the days it estimates) draw a
    bar on a terminal's stderr, and none with --quiet; stdout stays the JSON alone."""
    monkeypatch.setattr(loading, "PROGRESS_MIN_REPORTS", 1)  # a bar even for 600 reports
    argv = ["estimate", "--db", str(screens), "--campaign", "screens", "--format", "json", *extra]
    for quiet, drawn in ((False, True), (True, False)):
        terminal = _Terminal()
        monkeypatch.setattr(progress_module.sys, "stderr", terminal)
        assert analyze.main([*argv, *(["--quiet"] if quiet else [])]) == 0
        json.loads(capsys.readouterr().out)
        assert (desc in terminal.getvalue()) is drawn, (quiet, terminal.getvalue())


def test_demo_takes_quiet() -> None:
    parser = demo.build_parser()
    assert parser.parse_args(["--quiet"]).quiet and not parser.parse_args([]).quiet
    assert "quiet" in inspect.signature(demo.run_demo).parameters
    assert "quiet" in inspect.signature(demo.feed_collector).parameters
