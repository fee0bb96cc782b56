"""A command whose standard output's reader has gone (``ldp-analyze estimate ... | head -5``) ends
quietly: no ``error: [Errno 32] Broken pipe`` line, no traceback, no "Exception ignored" message,
and the exit status of a Unix tool that SIGPIPE ended (``client_sdk._extras.closed_pipe``).
Every console script runs as a real process writing into a pipe whose reader, another real
process, exited before the command wrote a byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from client_sdk._extras import CLOSED_PIPE_STATUS
from collector.process import entry_point

GRR = '{"mechanism": "grr", "epsilon": 1.0, "k": 3}'

COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "ldp-analyze gap": (
        "ldp-analyze",
        "analysis.cli",
        ["gap", "--mechanism", GRR, "--n", "1000", "--format", "table"],
    ),
    "ldp-collector init-db": ("ldp-collector", "collector.cli", ["init-db", "--db", "c.db"]),
    "ldp-shuffler init-db": ("ldp-shuffler", "shuffler.cli", ["init-db", "--db", "s.db"]),
    "ldp-demo": (
        "ldp-demo",
        "analysis.demo",
        ["--devices", "1000", "--clients", "1", "--report", "demo.html"],
    ),
}


def run_into_closed_pipe(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with stdout into a pipe whose only reader (a process) has already exited."""
    read_end, write_end = os.pipe()
    try:
        reader = subprocess.run([sys.executable, "-c", "pass"], stdin=read_end, check=True)
        assert reader.returncode == 0
    finally:
        os.close(read_end)
    try:
        return subprocess.run(
            command, stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=300
        )
    finally:
        os.close(write_end)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_closed_pipe_ends_quietly(name: str, tmp_path: Path) -> None:
    script, module, arguments = COMMANDS[name]
    finished = run_into_closed_pipe([*entry_point(script, module), *arguments], tmp_path)
    assert finished.stderr == "", (name, finished.stderr)
    assert finished.returncode == CLOSED_PIPE_STATUS, (name, finished.returncode)
    if "init-db" in arguments:  # the work was done; only the message had nowhere to go
        assert (tmp_path / arguments[-1]).exists()
