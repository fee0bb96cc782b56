"""Progress bars for long commands: one rule for every ``ldp-*`` command (a leaf module).

A bar goes to standard error, never to standard output (which may be piped JSON), and only
when standard error is a terminal and the user did not ask for ``--quiet``. A bar shows counts
and rates only, never a report's value.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["add_quiet_argument", "progress", "progress_enabled"]

T = TypeVar("T")


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bars (they are already off when stderr is not a terminal)."""
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress bars on stderr (they are off anyway when stderr is not a terminal)",
    )


def progress_enabled(quiet: bool = False) -> bool:
    """True when a bar may be drawn: stderr is a terminal and ``quiet`` is false."""
    if quiet:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


def progress(
    iterable: Iterable[T] | None = None,
    *,
    desc: str,
    total: int | None = None,
    unit: str = "it",
    quiet: bool = False,
) -> Any:
    """A tqdm bar on stderr over ``iterable`` (or updated by hand when ``iterable`` is None),
    disabled by :func:`progress_enabled`.

    Use it as an iterator (``for x in progress(xs, desc=...)``) or as a context manager
    (``with progress(desc=..., total=n) as bar: bar.update(k)``); a disabled bar costs
    nothing and prints nothing.
    """
    from tqdm import tqdm

    return tqdm(
        iterable,
        desc=desc,
        total=total,
        unit=unit,
        file=sys.stderr,
        disable=not progress_enabled(quiet),
        leave=False,
        dynamic_ncols=True,
    )


def steps(items: Iterable[T], *, desc: str, quiet: bool = False) -> Iterator[T]:
    """``items`` one by one, with a bar when :func:`progress_enabled` (a typed iterator)."""
    sized = list(items)
    yield from progress(sized, desc=desc, total=len(sized), quiet=quiet)
