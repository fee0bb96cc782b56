"""Which optional extra of the distribution each server-side role needs, and the guard that says
so in one line when it is missing (docs/packaging.md).

``pip install ldp-telemetry`` installs the device SDK only (``client_sdk`` and what it imports);
the collector, the shuffler and the analysis toolkit come with the extras of the same names. This
module lives in ``client_sdk`` because it is the one package every install has: the console
scripts start here, so that a missing extra is a one-line message and exit status 2, never a
traceback from the script's own import. It imports no server package itself: the scripts'
targets are named as strings and imported only once their extra is known to be present.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable

__all__ = [
    "CLOSED_PIPE_STATUS",
    "EXTRAS",
    "MissingExtra",
    "closed_pipe",
    "missing_modules",
    "require",
]

DISTRIBUTION = "ldp-telemetry"

# The modules (import names) of each extra's own requirements, beyond the base set (numpy,
# requests, urllib3, nacl, Cryptodome, pyhpke); tests/test_packaging.py checks it against
# pyproject.toml.
_COLLECTOR = ("flask", "gunicorn", "sqlite_utils", "prometheus_client")
EXTRAS: dict[str, tuple[str, ...]] = {
    "collector": _COLLECTOR,
    # The shuffler runs on the collector's server, problem+json and metrics modules.
    "shuffler": _COLLECTOR,
    # Analysis reads stored reports through collector.storage and serves the dashboard.
    "analysis": (*_COLLECTOR, "scipy", "matplotlib", "tqdm"),
    "scale": ("pyarrow", "dask"),
}


class MissingExtra(ImportError):
    """A server-side package was imported (or its command run) without its extra installed."""


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require(extra: str, what: str | None = None) -> None:
    """Raise :class:`MissingExtra` (one line naming the extra to install) when a module of
    ``extra`` is absent. ``what`` names what needs it (default: the extra's package)."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(
            f"{what or extra} needs the [{extra}] extra ({', '.join(missing)} not installed): "
            f'pip install "{DISTRIBUTION}[{extra}]"',
            name=missing[0],
        )


CLOSED_PIPE_STATUS = 128 + 13
"""The exit status of a command whose standard output was closed by its reader: what a shell
reports for a Unix tool that SIGPIPE ended (Python ignores SIGPIPE and raises BrokenPipeError)."""


def closed_pipe() -> int:
    """End a command quietly after its standard output's reader went away (``... | head -5``):
    point stdout at the null device, so the interpreter's last flush cannot fail again with an
    "Exception ignored" message, and return :data:`CLOSED_PIPE_STATUS` (the recipe of Python's
    ``signal`` documentation, "Note on SIGPIPE")."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout: nothing left to flush
        pass
    return CLOSED_PIPE_STATUS


def _launcher(script: str, extra: str, target: str) -> Callable[[], int | None]:
    """The console script ``script``: checks ``extra``, then runs ``target`` (``module:func``)."""

    def main() -> int | None:
        module, _, function = target.partition(":")
        try:
            require(extra, script)
            entry: Callable[[], int | None] = getattr(importlib.import_module(module), function)
        except MissingExtra as error:
            print(error, file=sys.stderr)
            return 2
        try:
            status = entry()
            sys.stdout.flush()  # lines still buffered when the reader left end here, quietly
        except BrokenPipeError:
            return closed_pipe()
        return status

    main.__name__ = main.__qualname__ = script.replace("-", "_")
    main.__doc__ = f"``{script}``: ``{target}`` once the [{extra}] extra is known to be installed."
    return main


# The console scripts of pyproject.toml's [project.scripts].
collector_main = _launcher("ldp-collector", "collector", "collector.cli:main")
shuffler_main = _launcher("ldp-shuffler", "shuffler", "shuffler.cli:main")
analyze_main = _launcher("ldp-analyze", "analysis", "analysis.cli:main")
demo_main = _launcher("ldp-demo", "analysis", "analysis.demo:main")
