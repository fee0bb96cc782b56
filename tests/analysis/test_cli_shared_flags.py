"""One CLI: the shared flags parse the same in every command, every option has help, every
command has --version, --format follows the terminal, and progress stays off stderr when it is
not a terminal (issue 27, "One CLI")."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import cli as analyze
from analysis import demo
from analysis.commands._arguments import DEFAULT_TOP, top_of
from client_sdk._version import __version__
from collector import cli as collector
from shuffler import cli as shuffler
from tests.analysis.conftest import store_campaign

PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "ldp-analyze": analyze.build_parser,
    "ldp-collector": collector.build_parser,
    "ldp-shuffler": shuffler.build_parser,
    "ldp-demo": demo.build_parser,
}
READERS = ("estimate", "report", "dashboard")
"""The ``ldp-analyze`` commands that read a campaign's stored reports."""
REQUIRED = {"report": ["--out", "r.html"]}
LABELS = ["home", "search", "settings"]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _every_parser(
    parser: argparse.ArgumentParser, path: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for name, sub in _subparsers(parser).items():
        yield from _every_parser(sub, f"{path} {name}")


def _parse(command: str, argv: list[str]) -> argparse.Namespace:
    args = analyze.build_parser().parse_args([command, *REQUIRED.get(command, []), *argv])
    return args


@pytest.mark.parametrize("command", READERS)
def test_sources_are_repeatable_in_every_reading_command(command: str) -> None:
    campaign = [] if command == "dashboard" else ["--campaign", "c"]  # it serves them all
    args = _parse(
        command, [*campaign, "--db", "a.db", "--db", "b.db", "--parquet", "x", "--parquet", "y"]
    )
    assert args.db == ["a.db", "b.db"] and args.parquet == ["x", "y"], command


@pytest.mark.parametrize("command", [c for c in READERS if c != "dashboard"])
def test_postprocess_top_and_format_mean_the_same(command: str) -> None:
    args = _parse(command, ["--campaign", "c", "--db", "a.db"])
    assert args.postprocess == "base", command  # the one default
    assert args.format is None and args.format_choices[0] in ("table", "text"), command
    assert "json" in args.format_choices
    from analysis.commands._arguments import resolve_format

    for terminal, expected in ((True, args.format_choices[0]), (False, "json")):
        fresh = _parse(command, ["--campaign", "c", "--db", "a.db"])
        resolve_format(fresh, terminal=terminal)
        assert fresh.format == expected, (command, terminal)
    asked = _parse(command, ["--campaign", "c", "--db", "a.db", "--format", "json"])
    resolve_format(asked, terminal=True)
    assert asked.format == "json"
    assert _parse(command, ["--campaign", "c", "--db", "a.db", "--top", "5"]).top == 5
    assert _parse(command, ["--campaign", "c", "--db", "a.db", "--quiet"]).quiet


SHARED = ("--db", "--parquet", "--top", "--postprocess", "--format", "--quiet")
"""The flags several ``ldp-analyze`` commands share (``--quiet`` also ``ldp-demo``'s)."""


def _shared_actions() -> dict[str, dict[str, argparse.Action]]:
    """flag -> command -> its action, over every ``ldp-analyze`` command and ``ldp-demo``."""
    found: dict[str, dict[str, argparse.Action]] = {}
    programs = (("ldp-analyze", analyze.build_parser), ("ldp-demo", demo.build_parser))
    for program, build in programs:
        for path, parser in _every_parser(build(), program):
            for action in parser._actions:
                for flag in action.option_strings:
                    if flag in SHARED and (program == "ldp-analyze" or flag == "--quiet"):
                        found.setdefault(flag, {})[path] = action
    return found


def _parsing(action: argparse.Action) -> tuple[Any, ...]:
    """What decides how a flag parses: its action, destination, default, type, arity, choices
    (--format's: the people's format first, then the others, json among them)."""
    choices = None if action.choices is None else list(action.choices)
    if action.dest == "format":
        assert choices is not None and "json" in choices and choices[0] in ("table", "text")
        choices = None
    return (type(action), action.dest, repr(action.default), action.type, action.nargs, choices)


@pytest.mark.parametrize("flag", SHARED)
def test_a_shared_flag_parses_the_same_in_every_command_that_takes_it(flag: str) -> None:
    commands = _shared_actions()[flag]
    assert len(commands) >= 2, (flag, list(commands))
    parsing = {path: _parsing(action) for path, action in commands.items()}
    assert len({repr(value) for value in parsing.values()}) == 1, parsing


def test_top_has_one_meaning_and_one_default() -> None:
    commands = _shared_actions()["--top"]
    assert set(commands) == {"ldp-analyze estimate", "ldp-analyze report", "ldp-analyze gap"}
    for path, action in commands.items():
        assert action.help is not None
        assert action.help.startswith(f"the N largest items, largest first (default {DEFAULT_TOP})")
        command = path.split()[1]
        base = [*REQUIRED.get(command, []), "--campaign", "c", "--db", "a.db"]
        parser = analyze.build_parser()
        assert top_of(parser.parse_args([command, *base])) == DEFAULT_TOP == 20, path
        assert top_of(parser.parse_args([command, *base, "--top", "5"])) == 5, path
        with pytest.raises(ValueError, match="--top must be a positive integer; got 0"):
            top_of(parser.parse_args([command, *base, "--top", "0"]))
    dbs = ["--db", "a.db", "--db", "b.db"]
    for command in ("estimate", "report", "dashboard", "gap"):
        campaign = [] if command in ("dashboard", "gap") else ["--campaign", "c"]
        assert _parse(command, [*campaign, *dbs]).db == ["a.db", "b.db"], command
        assert _parse(command, campaign).db == [], command


@pytest.mark.parametrize("program", PARSERS)
def test_every_option_has_help(program: str) -> None:
    missing = [
        f"{path} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in _every_parser(PARSERS[program](), program)
        for action in parser._actions
        if not action.help and not isinstance(action, argparse._SubParsersAction)
    ]
    assert missing == []


@pytest.mark.parametrize("program", PARSERS)
def test_version_everywhere(program: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        PARSERS[program]().parse_args(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"{program} {__version__}"


def test_help_lists_the_postprocess_methods_the_readme_documents(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in ("estimate", "report"):
        with pytest.raises(SystemExit):
            analyze.build_parser().parse_args([command, "--help"])
        text = capsys.readouterr().out
        assert "{base,base-pos,norm,norm-sub,mle}" in text and "mle,em" not in text, command
    assert _parse("estimate", ["--campaign", "c", "--db", "a", "--postprocess", "em"]).postprocess


def test_shuffler_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["serve", "--help"], ["forward", "--help"]):
        with pytest.raises(SystemExit):
            shuffler.build_parser().parse_args(argv)
        text = capsys.readouterr().out
        assert "``" not in text and "module docstring" not in text, argv


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shared") / "collector.db"
    values = np.repeat(np.arange(3), [600, 300, 100])
    config = {"mechanism": "grr", "epsilon": 2.0, "k": 3}
    store_campaign(path, {"name": "screens", "mechanism": config, "domain": LABELS}, values, 3)
    return path


class _Terminal:
    """Stands for a terminal's stdout: records what is written and says it is a tty."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_a_table_at_a_terminal_and_json_when_piped(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["estimate", "--db", str(db), "--campaign", "screens"]
    assert analyze.main(argv) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)  # piped (captured): JSON
    assert [item["value"] for item in document["items"]] == LABELS
    assert captured.err == ""  # no progress bar when stderr is not a terminal
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert analyze.main(argv) == 0
    table = "".join(terminal.parts)
    assert table.startswith("campaign screens  n=1000") and "ci_high" in table


def test_report_reads_several_databases_like_estimate(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same campaign in two shards: `report` over both counts each report once, as
    `estimate` over both does."""
    import shutil

    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)
    sources = ["--campaign", "screens", "--db", str(db), "--db", str(copy)]
    assert analyze.main(["estimate", *sources, "--format", "json"]) == 0
    estimated = json.loads(capsys.readouterr().out)
    out = tmp_path / "r.html"
    assert analyze.main(["report", *sources, "--out", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    reported = json.loads(captured.out)
    assert reported["n"] == estimated["n"] == 1000  # the copy's reports are the same reports
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_estimate_shows_the_20_largest_of_40_screens_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "screens.db"
    screens = [f"screen-{i:02d}" for i in range(40)]
    counts = np.arange(40, 0, -1) * 10  # screen-00 the most visited
    document = {"name": "screens", "mechanism": {"mechanism": "grr", "epsilon": 4.0, "k": 40}}
    store_campaign(path, {**document, "domain": screens}, np.repeat(np.arange(40), counts), 5)
    argv = ["estimate", "--db", str(path), "--campaign", "screens"]
    assert analyze.main([*argv, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["top"] == len(shown["items"]) == DEFAULT_TOP and shown["domain_size"] == 40
    frequencies = [item["frequency"] for item in shown["items"]]
    assert frequencies == sorted(frequencies, reverse=True)
    assert analyze.main([*argv, "--format", "json", "--top", "40"]) == 0
    every = json.loads(capsys.readouterr().out)["items"]
    assert sorted(item["value"] for item in every) == screens
    assert [item["value"] for item in every[:DEFAULT_TOP]] == [i["value"] for i in shown["items"]]
    assert analyze.main([*argv, "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "the 20 largest of 40 items (--top 40 for every one)" in table
