"""analysis.progress: bars on stderr only at a terminal, never with --quiet, never on stdout."""

from __future__ import annotations

import argparse
import io

import pytest

from analysis import progress as progress_module
from analysis.progress import add_quiet_argument, progress, progress_enabled, steps


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
