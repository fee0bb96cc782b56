"""Packaging by role (docs/packaging.md): ``pip install ldp-telemetry`` is the device SDK alone;
the collector, shuffler and analysis come with extras, and without them a server package's import
and its console script say in one line which extra to install.

The last test builds the wheel and installs it without extras into a fresh virtual environment
(pip from the registry the project's environment uses), then records and flushes through it to a
real collector.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from client_sdk._extras import EXTRAS
from collector.process import CollectorProcess
from tests import bare_device
from tests.test_layering import imported_top_levels

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SELF = re.compile(r"^ldp-telemetry\[([a-z,]+)\]$")
# Each console script, the extra it needs, and a module of that extra to make unimportable.
SCRIPTS = {
    "ldp-collector": ("collector", "flask"),
    "ldp-shuffler": ("shuffler", "gunicorn"),
    "ldp-analyze": ("analysis", "scipy"),
    "ldp-demo": ("analysis", "matplotlib"),
}


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_names(extra: str | None) -> set[str]:
    """The distributions an extra (``None``: the base install) requires, self-references
    (``ldp-telemetry[collector]``) expanded."""
    project = PYPROJECT["project"]
    requirements = (
        project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    )
    names: set[str] = set()
    for requirement in requirements:
        own = SELF.match(requirement)
        if own:
            for other in own.group(1).split(","):
                names |= _requirement_names(other)
        else:
            names.add(_normalized(re.match(r"[A-Za-z0-9._-]+", requirement).group(0)))  # type: ignore[union-attr]
    return names


def _import_names(distribution: str) -> set[str]:
    """The top-level modules an installed distribution provides."""
    return {
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if distribution in {_normalized(owner) for owner in owners}
    }


def test_the_base_install_is_what_client_sdk_imports() -> None:
    """The base requirements are exactly the third-party modules client_sdk imports."""
    imported = set().union(*(imported_top_levels(p) for p in (ROOT / "client_sdk").rglob("*.py")))
    third_party = imported - set(sys.stdlib_module_names) - {"client_sdk"}
    provided = set().union(*(_import_names(d) for d in _requirement_names(None)))
    assert third_party == {"numpy", "requests", "urllib3", "nacl", "Cryptodome", "pyhpke"}
    assert third_party <= provided, f"client_sdk imports {third_party - provided} unrequired"
    assert not any(
        _import_names(d) & set().union(*EXTRAS.values()) for d in _requirement_names(None)
    )


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_guard_table_matches_pyproject(extra: str) -> None:
    """client_sdk._extras.EXTRAS[extra] names one module of every distribution the extra adds to
    the base install, and nothing else."""
    added = _requirement_names(extra) - _requirement_names(None)
    provided = {d: _import_names(d) & set(EXTRAS[extra]) for d in added}
    assert all(provided.values()), f"[{extra}] distributions without a guarded module: {provided}"
    assert set().union(*provided.values()) == set(EXTRAS[extra])


def test_all_and_test_contain_every_role() -> None:
    every = set().union(*(_requirement_names(extra) for extra in EXTRAS))
    assert every <= _requirement_names("all") <= _requirement_names("test")


def _run_without(missing: str, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter of this environment where ``missing`` cannot be imported."""
    prelude = f"import sys; sys.modules[{missing!r}] = None\n"
    return subprocess.run(
        [sys.executable, "-I", "-c", prelude + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("package", "missing"),
    [("collector", "flask"), ("shuffler", "prometheus_client"), ("analysis", "scipy")],
)
def test_importing_a_server_package_without_its_extra_names_the_extra(
    package: str, missing: str
) -> None:
    done = _run_without(
        missing,
        f"try:\n    import {package}\nexcept ImportError as error:\n"
        "    print(type(error).__name__, error, sep='|')\n",
    )
    assert done.returncode == 0, done.stderr
    kind, message = done.stdout.rstrip("\n").split("|")
    assert kind == "MissingExtra"
    assert message == (
        f"{package} needs the [{package}] extra ({missing} not installed): "
        f'pip install "ldp-telemetry[{package}]"'
    )


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_console_script_without_its_extra_says_so_in_one_line(script: str) -> None:
    """The entry point pyproject.toml names, called as the installed script calls it."""
    extra, missing = SCRIPTS[script]
    module, _, function = PYPROJECT["project"]["scripts"][script].partition(":")
    done = _run_without(
        missing,
        f"sys.argv = [{script!r}, '--help']\n"
        f"from {module} import {function}\nsys.exit({function}())\n",
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"{script} needs the [{extra}] extra ({missing} not installed): "
        f'pip install "ldp-telemetry[{extra}]"\n'
    )


def _venv_mb(venv: Path) -> float:
    return sum(p.stat().st_size for p in venv.rglob("*") if p.is_file()) / 1e6


@pytest.mark.slow
def test_the_wheel_without_extras_is_the_sdk_and_uploads(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for package in ("client_sdk", "collector", "analysis", "shuffler"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", tmp_path / "dist", source], check=True)
    (wheel,) = (tmp_path / "dist").glob("ldp_telemetry-*.whl")
    venv = tmp_path / "venv"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", wheel], check=True, timeout=300)
    print(f"bare install: {time.perf_counter() - start:.1f} s, {_venv_mb(venv):.0f} MB")
    python = str(venv / "bin" / "python")

    absent = ("flask", "gunicorn", "scipy", "matplotlib", "tqdm", "sqlite_utils")
    found = subprocess.run(
        [
            python,
            "-I",
            "-c",
            f"import importlib.util as u; print([n for n in {absent!r} if u.find_spec(n)])",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "[]", f"the bare install has {found.stdout}"

    for script, (extra, _) in SCRIPTS.items():
        done = subprocess.run(
            [venv / "bin" / script, "--help"], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 2 and done.stdout == "", (script, done)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{script} needs the [{extra}] extra ("), (
            lines
        )
        assert lines[0].endswith(f'pip install "ldp-telemetry[{extra}]"'), lines

    collector = CollectorProcess(tmp_path / "collector.db", workers=1, log_dir=tmp_path)
    collector.start(timeout=60)
    try:
        collector.create_campaign(bare_device.CAMPAIGN)
        device = subprocess.run(
            bare_device.command([python], collector.url, str(tmp_path / "d"), poison=False),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        collector.stop()
    assert device.returncode == 0, device.stderr
    result = json.loads(device.stdout)
    assert Path(result["client_sdk"]).is_relative_to(venv), result["client_sdk"]
    assert result["server_modules"] == []
    assert result["recorded"] == result["acknowledged"] == len(bare_device.VALUES)
    assert result["sealed_payloads"] == result["payloads"] and result["prio3_shares"] == 2
