"""A real full disk for readiness tests: a size-limited tmpfs mounted for one test (root only,
where ``mount`` works; otherwise the test is skipped), and a filler that takes its last byte."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(folder: Path, megabytes: int = 16) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` MiB mounted on ``folder`` (mode 0700) for the ``with`` block."""
    folder.mkdir(mode=0o700)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until its filesystem has no byte left; the file's path."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
    return filler
