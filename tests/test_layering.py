"""Imports flow device -> collector -> analysis (DESIGN.md): client_sdk imports neither of the
others, and collector never imports analysis. Checked on the source, statically."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "client_sdk": {"collector", "analysis", "flask", "sqlite_utils", "scipy", "matplotlib"},
    "collector": {"analysis", "scipy", "matplotlib"},
}


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_downstream(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no sources found for {package}"
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_top_levels(path) & FORBIDDEN[package])
        for path in files
    }
    offenders = {path: names for path, names in offenders.items() if names}
    assert not offenders, f"{package} imports what it must not: {offenders}"


def test_the_check_detects_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from analysis.estimation import estimate\nimport flask\n")
    assert imported_top_levels(bad) >= {"analysis", "flask"}
