"""The README works top to bottom: its code blocks run, and print what it shows.

Every ```bash and ```python block of README.md runs, in order, in one bash session in a temporary
directory (``.venv`` and ``examples/`` linked from the repository, a free port in place of the
README's 8765), except the blocks after a ``<!-- readme-test: skip -->`` line (installing, the
100,000-device demo, the test suite itself, the dashboard that serves until stopped). A python
block runs as ``.venv/bin/python - <<'EOF'``. A ```text block right after a code block is the
output the README shows: the output of the run must have its shape (:func:`shape`: the same
lines and words, numbers, hex ids and times aside; a ``...`` line stands for any lines).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SKIP = "<!-- readme-test: skip -->"
FENCE = re.compile(r"^```(\w*)\s*$")
README_PORT = "8765"
BLOCK_TIMEOUT = 120.0

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_HEX = re.compile(r"\b[0-9a-f]{8,}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\d(?:T\d\d:\d\d(?::\d\d)?Z?)?")


def blocks(text: str) -> list[tuple[str, str, bool]]:
    """The fenced blocks as ``(language, body, skipped)``, in order."""
    out: list[tuple[str, str, bool]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        skipped = index > 0 and lines[index - 1].strip() == SKIP
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        out.append((match.group(1), "\n".join(body), skipped))
        index += 1
    return out


def runnable(text: str) -> list[tuple[str, str, str | None]]:
    """``(language, code, shown output or None)`` of every block the test runs."""
    found = blocks(text)
    out = []
    for position, (language, body, skipped) in enumerate(found):
        if language not in ("bash", "python") or skipped:
            continue
        following = found[position + 1] if position + 1 < len(found) else None
        shown = following[1] if following is not None and following[0] == "text" else None
        out.append((language, body, shown))
    return out


def shape(line: str) -> str:
    """A line with times, hex ids and numbers replaced and spaces collapsed."""
    line = _TIME.sub("T", line)
    line = _HEX.sub("H", line)
    line = _NUMBER.sub("N", line)
    return " ".join(line.split())


def same_shape(shown: str, printed: str) -> bool:
    """Whether ``printed`` has the lines of ``shown`` (``...``: any number of lines)."""
    expected = [shape(line) for line in shown.splitlines() if line.strip()]
    actual = [shape(line) for line in printed.splitlines() if line.strip()]

    def match(i: int, j: int) -> bool:
        if i == len(expected):
            return j == len(actual)
        if expected[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and expected[i] == actual[j] and match(i + 1, j + 1)

    return match(0, 0)


class Shell:
    """One bash session: environment, background jobs and the directory carry over."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, script: str, marker: str) -> tuple[str, int]:
        assert self.process.stdin is not None
        self.process.stdin.write(f'{script}\necho "{marker} $?"\n')
        self.process.stdin.flush()
        printed: list[str] = []
        while True:
            line = self.lines.get(timeout=BLOCK_TIMEOUT)
            if line is None:
                raise AssertionError("the shell exited:\n" + "".join(printed))
            if line.startswith(marker):
                return "".join(printed), int(line.split()[-1])
            printed.append(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_shape_comparison_is_strict_about_words_and_lines() -> None:
    assert same_shape("n=8000  light 0.58\n...\nend", "n=12 light  0.1\nx\ny\nend")
    assert not same_shape("n=8000 light 0.58", "n=8000 dark 0.58")
    assert not same_shape("a 1\nb 2", "a 1")
    assert not same_shape("value,frequency", "value,frequency,extra")


def test_every_block_has_a_language_and_outputs_follow_code() -> None:
    found = blocks(README.read_text(encoding="utf-8"))
    languages = {language for language, _, _ in found}
    assert languages <= {"", "bash", "python", "text", "html"}, languages  # html: shown, not run
    for position, (language, _, _) in enumerate(found):
        if language == "text":
            assert position > 0 and found[position - 1][0] in ("bash", "python"), position


def test_the_readiness_wait_outlasts_a_slow_start_within_the_block_timeout() -> None:
    """The README's wait for ``/readyz`` (curl's retries times their delay) covers a collector
    that takes a minute to start on a loaded machine (30 s did not), and ends before this
    test gives up on a silent block."""
    waits = re.findall(
        r"curl -s --retry (\d+) --retry-connrefused --retry-delay (\d+) \S+/readyz",
        README.read_text(encoding="utf-8"),
    )
    assert waits, "no readiness wait in the README"
    for retries, delay in waits:
        assert 60 <= int(retries) * int(delay) < BLOCK_TIMEOUT - 10, (retries, delay)


@pytest.mark.skipif(not (Path(sys.prefix) / "bin" / "ldp-collector").exists(), reason="no venv")
def test_readme_runs_top_to_bottom(tmp_path: Path) -> None:
    """Every runnable block exits 0 and prints what the README shows (by shape)."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    port = str(_free_port())
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LDP_", "PYTEST", "COV_"))
    }
    shell = Shell(tmp_path, env)
    try:
        for number, (language, code, shown) in enumerate(
            runnable(README.read_text(encoding="utf-8"))
        ):
            code = code.replace(README_PORT, port)
            if language == "python":
                code = f".venv/bin/python - <<'README_PYTHON'\n{code}\nREADME_PYTHON"
            printed, status = shell.run(code, f"@@README-BLOCK-{number}@@")
            refusal = shown is not None and "error:" in shown  # a block showing a refusal
            assert (status != 0) == refusal, (
                f"block {number} exited {status}:\n{code}\n---\n{printed}"
            )
            if shown is not None:
                assert same_shape(shown, printed), (
                    f"block {number} printed something else than the README shows:\n{code}\n"
                    f"--- shown\n{shown}\n--- printed\n{printed}"
                )
    finally:
        # A collector the README started and a failure left running.
        pid_file = tmp_path / "collector.pid"
        if pid_file.exists():
            subprocess.run(["kill", pid_file.read_text().strip()], check=False)
        shell.close()
