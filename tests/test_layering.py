"""Imports flow device -> collector -> analysis (docs/architecture.md): client_sdk imports neither
of the others nor any server-only dependency, and collector never imports analysis; and no module
of the three packages takes part in an import circle. Checked on the source, statically; and the
SDK is run with every server-only module made unimportable (records, flushes, seals, shards)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.process import CollectorProcess
from tests import bare_device

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    # The server packages and every module only a server extra installs (pyproject.toml).
    "client_sdk": set(bare_device.SERVER_ONLY),
    "collector": {"analysis", "shuffler", "scipy", "matplotlib"},
    # The shuffler reuses the SDK and the collector's problem+json and server helpers; it never
    # sees analysis (nor does the collector see it: the check above).
    "shuffler": {"analysis", "scipy", "matplotlib"},
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


def test_the_sdk_records_flushes_and_seals_without_server_modules(tmp_path: Path) -> None:
    """At run time too: the SDK, with flask, scipy, ... and the server packages unimportable,
    imports all its modules, records and flushes to a real collector, seals and shards."""
    collector = CollectorProcess(tmp_path / "collector.db", workers=1, log_dir=tmp_path)
    collector.start(timeout=60)
    try:
        collector.create_campaign(bare_device.CAMPAIGN)
        device = subprocess.run(
            bare_device.command([sys.executable], collector.url, str(tmp_path / "d"), poison=True),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        collector.stop()
    assert device.returncode == 0, device.stderr
    result = json.loads(device.stdout)
    assert result["server_modules"] == []
    assert result["recorded"] == result["acknowledged"] == len(bare_device.VALUES)
    assert result["sealed_payloads"] == result["payloads"] and result["prio3_shares"] == 2


# ---- no import circles -------------------------------------------------------------------------

PACKAGES = ("client_sdk", "collector", "analysis", "shuffler")


def module_name(root: Path, path: Path) -> str:
    """``pkg/sub/mod.py`` -> ``pkg.sub.mod``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: never executed, so no edge of the import graph."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                skipped.update(id(sub) for child in node.body for sub in ast.walk(child))
    return skipped


def _imported(node: ast.AST, module: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    """The project modules an import statement names (``from a import b``: a.b if a module)."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        prefix = node.module or ""
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join([*base, *([node.module] if node.module else [])])
        targets = [
            f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix
            for alias in node.names
        ]
    else:
        return
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != module:
            yield target


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, at any depth of the file (a function-level
    import counts: a circle held together by lazy imports is still a circle)."""
    files = {
        module_name(root, path): path
        for package in packages
        for path in (root / package).rglob("*.py")
    }
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped = _type_checking_only(tree)
        graph[module] = {
            target
            for node in ast.walk(tree)
            if id(node) not in skipped
            for target in _imported(node, module, path.name == "__init__.py", modules)
        }
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circles() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert len(graph) > 50 and "client_sdk.mechanisms.registry" in graph
    circles = import_circles(graph)
    assert not circles, f"import circles: {circles}"


def test_the_check_detects_an_import_circle(tmp_path: Path) -> None:
    """A circle through a lazy import and a relative one is found; a TYPE_CHECKING import and an
    import of a sibling module that is not part of the circle are not edges."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def thing():\n    from . import c\n    return c\n")
    (package / "c.py").write_text("import pkg.a\nfrom pkg import d\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n"
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.b"] == {"pkg.c"} and graph["pkg.d"] == set()
    assert import_circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    (package / "c.py").write_text("from pkg import d\n")
    assert import_circles(import_graph(tmp_path, ("pkg",))) == []
