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
    import counts: a circle held together by lazy imports is still a circle), and the modules
    its lazy-import table names (:data:`LAZY_IMPORT_TABLES`: those strings are arrows too)."""
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
        table = LAZY_IMPORT_TABLES.get(path.relative_to(root).as_posix())
        if table is not None:
            graph[module] |= table_arrows(tree, table) & modules
    return graph


# ---- lazy imports only through tables the graph reads ------------------------------------------
# ``importlib.import_module`` hides an import from readers, mypy and the checks above. It is
# allowed only where a table of module names says what may be imported, and the graph reads
# those names as arrows: the device registry (a device imports only the mechanism it builds)
# and the CLI's subcommands (each command's parser on demand). Issue 22, item 6.

LAZY_IMPORT_TABLES: dict[str, str] = {
    "client_sdk/mechanisms/registry.py": "MECHANISMS",
    "analysis/cli.py": "COMMAND_MODULES",
}
"""File -> the name of its table of ``"module"`` or ``"module:attribute"`` strings."""

LAZY_IMPORT_ALLOWED: dict[str, str] = {
    "client_sdk/_extras.py": "the console scripts' launchers: they start in the SDK, the one "
    "package every install has, and import a server package's entry point only once its extra "
    "is known to be installed (docs/packaging.md); arrows from the SDK to the server packages "
    "would be the very imports the first check forbids",
}
"""Justified exceptions without a table: file -> the reason."""


def table_arrows(tree: ast.AST, table: str) -> set[str]:
    """The modules named by the strings of the module-level assignment to ``table``."""
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == table for t in targets):
            value = getattr(node, "value", None)
            return (
                {
                    leaf.value.partition(":")[0]
                    for leaf in ast.walk(value)
                    if value is not None
                    if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str)
                }
                if value is not None
                else set()
            )
    raise AssertionError(f"no table {table!r}")


def dynamic_imports(source: str) -> list[int]:
    """The lines that import by a computed name: ``importlib.import_module(...)``,
    ``import_module(...)`` or ``__import__(...)``."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else None
            name = function.id if isinstance(function, ast.Name) else name
            if name in ("import_module", "__import__"):
                lines.add(node.lineno)
    return sorted(lines)


def test_no_dynamic_import_outside_the_lazy_tables() -> None:
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in LAZY_IMPORT_TABLES or relative in LAZY_IMPORT_ALLOWED:
                continue
            for line in dynamic_imports(path.read_text()):
                offenders[f"{relative}:{line}"] = path.read_text().splitlines()[line - 1].strip()
    assert not offenders, f"import by a direct import statement or through a table: {offenders}"
    graph = import_graph(ROOT, PACKAGES)
    assert "client_sdk.mechanisms.pem" in graph["client_sdk.mechanisms.registry"]
    assert "analysis.commands.estimate" in graph["analysis.cli"]


def test_the_check_detects_a_dynamic_import(tmp_path: Path) -> None:
    planted = (
        "import importlib\nm = importlib.import_module('analysis.gap')\n",
        "from importlib import import_module\ndef f():\n    return import_module(name)\n",
        "x = __import__('os')\n",
    )
    for source in planted:
        assert dynamic_imports(source), source
    assert dynamic_imports("import importlib.util\nspec = importlib.util.find_spec('x')\n") == []
    # a table's strings are arrows: a circle through one is found
    (tmp_path / "client_sdk" / "mechanisms").mkdir(parents=True)
    for package in ("client_sdk", "client_sdk/mechanisms"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "client_sdk/mechanisms/registry.py").write_text(
        "MECHANISMS: dict[str, str] = {'a': 'client_sdk.mechanisms.a:A'}\n"
    )
    (tmp_path / "client_sdk/mechanisms/a.py").write_text(
        "from client_sdk.mechanisms import registry\n"
    )
    assert import_circles(import_graph(tmp_path, ("client_sdk",))) == [
        ["client_sdk.mechanisms.a", "client_sdk.mechanisms.registry"]
    ]


# ---- estimators and views ------------------------------------------------------------------


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, stack = set(), [start]
    while stack:
        for target in graph.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def kind_folders() -> list[Path]:
    """The kind packages under ``analysis/kinds/`` (``_common`` holds no kind)."""
    root = ROOT / "analysis" / "kinds"
    return [p for p in root.iterdir() if (p / "__init__.py").is_file() and p.name[0] != "_"]


def not_for_estimators(module: str) -> bool:
    """A gap, view, plot, report, dashboard, command or collector module, or the KINDS table
    (which imports every kind's gap): what an estimator must not reach."""
    leaf = module.rpartition(".")[2]
    return (
        module in ("analysis.kinds", "analysis.gap", "analysis.plots", "analysis.cli")
        or leaf in ("gap", "view", "views")
        or leaf.endswith("_gap")
        or module.startswith(
            (
                "analysis.gap_",
                "analysis.report",
                "analysis.dashboard",
                "analysis.commands",
                "analysis.views",
                "collector",
            )
        )
    )


def estimator_offenders(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each ``analysis.kinds.<kind>.estimate`` and the forbidden modules it reaches."""
    offenders = {}
    for module in sorted(graph):
        parts = module.split(".")
        if len(parts) == 4 and parts[:2] == ["analysis", "kinds"] and parts[3] == "estimate":
            bad = sorted(m for m in reachable(graph, module) if not_for_estimators(m))
            if bad:
                offenders[module] = bad
    return offenders


def test_estimators_reach_no_gap_view_report_dashboard_command_or_collector() -> None:
    """An estimate kind's estimator is pure (a mechanism and its reports in, an estimate out):
    it reaches, through every import, none of what is built on estimates (issue 22, item 6)."""
    graph = import_graph(ROOT, PACKAGES)
    estimators = [m for m in graph if m.startswith("analysis.kinds.") and m.endswith(".estimate")]
    assert len(estimators) == len(kind_folders()) >= 10
    assert estimator_offenders(graph) == {}


def test_the_check_finds_an_estimator_reaching_a_gap() -> None:
    graph = {
        "analysis.kinds.mean.estimate": {"analysis.streaming"},
        "analysis.kinds.ranges.estimate": {"analysis.postprocess"},
        "analysis.postprocess": {"analysis.kinds._common.gap"},
        "analysis.kinds.multi.estimate": {"analysis.dataset"},
        "analysis.dataset": {"collector.storage"},
        "analysis.kinds.fourier.estimate": {"analysis.kinds.multi.view", "analysis.kinds"},
    }
    assert estimator_offenders(graph) == {
        "analysis.kinds.fourier.estimate": ["analysis.kinds", "analysis.kinds.multi.view"],
        "analysis.kinds.multi.estimate": ["collector.storage"],
        "analysis.kinds.ranges.estimate": ["analysis.kinds._common.gap"],
    }
    assert not not_for_estimators("analysis.kinds._common.items")
    assert not not_for_estimators("analysis.kinds.sketch.estimate")


def is_view(module: str) -> bool:
    """The report, the dashboard, the plots and the kinds' views."""
    return module.rpartition(".")[2] == "view" or module.startswith(
        ("analysis.report", "analysis.dashboard", "analysis.plots", "analysis.views")
    )


def view_offenders(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each view and the command modules it reaches."""
    offenders = {}
    for module in sorted(graph):
        if is_view(module):
            bad = sorted(
                m
                for m in reachable(graph, module)
                if m == "analysis.cli" or m.startswith("analysis.commands")
            )
            if bad:
                offenders[module] = bad
    return offenders


def test_views_import_no_command() -> None:
    """The report and the dashboard read the library (``analysis.loading``,
    ``analysis.documents``), never the argparse modules of ``analysis/commands/``."""
    graph = import_graph(ROOT, PACKAGES)
    assert "analysis.dashboard.data" in graph and "analysis.report" in graph
    assert view_offenders(graph) == {}


def test_the_check_finds_a_view_reaching_a_command() -> None:
    graph = {
        "analysis.dashboard.data": {"analysis.documents"},
        "analysis.documents": set(),
        "analysis.dashboard.app": {"analysis.loading"},
        "analysis.loading": {"analysis.commands.estimate"},
        "analysis.kinds.mean.view": {"analysis.commands._arguments"},
        "analysis.commands.dashboard": {"analysis.dashboard"},
    }
    assert view_offenders(graph) == {
        "analysis.dashboard.app": ["analysis.commands.estimate"],
        "analysis.kinds.mean.view": ["analysis.commands._arguments"],
    }


KIND_TABLES = (
    "analysis.kinds",
    "analysis.gap",
    "analysis.estimation",
    "analysis.report",
    "analysis.report_kinds",
    "analysis.dashboard.views",
)
"""``KINDS`` and the dispatchers over it: they import the views, so no view may import them."""


def is_kind_view(module: str) -> bool:
    """A kind's ``view.py`` or a leaf module the views share (``analysis.views``)."""
    parts = module.split(".")
    kind_view = len(parts) == 4 and parts[:2] == ["analysis", "kinds"] and parts[3] == "view"
    return kind_view or module == "analysis.views" or module.startswith("analysis.views.")


def kind_table_offenders(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each view and the tables of kinds (or dispatchers over them) it reaches."""
    offenders = {}
    for module in sorted(graph):
        if is_kind_view(module):
            bad = sorted(m for m in reachable(graph, module) if m in KIND_TABLES)
            if bad:
                offenders[module] = bad
    return offenders


def test_views_reach_no_table_of_kinds() -> None:
    """``KINDS`` holds every kind's views: a view given its kind's gap (the report's
    ``Context.gaps``) never looks it up in the table, so the table imports views, not the
    reverse (issue 22, item 1)."""
    graph = import_graph(ROOT, PACKAGES)
    views = [m for m in graph if is_kind_view(m)]
    assert len([m for m in views if m.endswith(".view")]) == len(kind_folders()) >= 10
    assert "analysis.views.report" in views
    assert kind_table_offenders(graph) == {}


def test_the_check_finds_a_view_reaching_the_table_of_kinds() -> None:
    graph = {
        "analysis.kinds.frequencies.view": {"analysis.kinds._common.gap", "analysis.gap"},
        "analysis.gap": {"analysis.kinds"},
        "analysis.views.report": {"analysis.plots"},
        "analysis.plots": set(),
        "analysis.views.cells": {"analysis.estimation"},
        "analysis.kinds": {"analysis.kinds.mean.view"},
        "analysis.kinds.mean.view": {"analysis.views.report"},
    }
    assert kind_table_offenders(graph) == {
        "analysis.kinds.frequencies.view": ["analysis.gap", "analysis.kinds"],
        "analysis.views.cells": ["analysis.estimation"],
    }
    assert not is_kind_view("analysis.kinds.mean.gap") and is_kind_view("analysis.views")


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


# ---- no switches on a mechanism's name ---------------------------------------------------------
# Behaviour belongs to the mechanism (a method or property), never to a comparison of its
# ``name`` or ``estimate_kind`` with a string, nor an ``isinstance`` of a concrete class: a new
# mechanism then touches its own module, not every caller (issue 22, items 4 and 6).

SWITCH_PACKAGES = ("client_sdk", "collector", "analysis", "shuffler")
SWITCH_EXEMPT = ("client_sdk/mechanisms/",)

# Justified exceptions, "path: the offending source line, stripped" -> the reason.
SWITCH_ALLOWED: dict[str, str] = {}


def concrete_mechanism_classes() -> set[str]:
    """The names of the instantiable ``Mechanism`` subclasses of ``client_sdk.mechanisms``
    (abstract interfaces such as ``FrequencyOracle`` or ``StringSketch`` may be checked)."""
    import importlib
    import inspect
    import pkgutil

    import client_sdk.mechanisms as package
    from client_sdk.mechanisms.base import Mechanism

    names: set[str] = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and issubclass(value, Mechanism)
                and not inspect.isabstract(value)
            ):
                names.add(name)
    return names


def _literals(node: ast.AST) -> set[str]:
    """The string literals of ``"x"`` or of a tuple, list or set of them (else empty)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_literals(element) for element in node.elts))
    return set()


def _attribute(node: ast.AST) -> str | None:
    """``x.attr`` -> attr; ``getattr(x, "attr", ...)`` -> attr; else None."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
    ):
        return str(node.args[1].value)
    return None


def name_switches(source: str, mechanism_names: set[str], classes: set[str]) -> list[int]:
    """The lines that compare an ``estimate_kind`` (or a variable holding one) with a string
    literal, a ``name`` with a registered mechanism's name, or ``isinstance``/``issubclass``
    a concrete mechanism class."""
    tree = ast.parse(source)
    kind_names = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _attribute(node.value) == "estimate_kind"
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def is_kind(node: ast.AST) -> bool:
        return _attribute(node) == "estimate_kind" or (
            isinstance(node, ast.Name) and node.id in kind_names
        )

    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            literals = set().union(*(_literals(operand) for operand in operands))
            if literals and any(is_kind(operand) for operand in operands):
                lines.add(node.lineno)
            if literals & mechanism_names and any(_attribute(o) == "name" for o in operands):
                lines.add(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            checked = node.args[1]
            elements = checked.elts if isinstance(checked, ast.Tuple) else [checked]
            for element in elements:
                name = element.attr if isinstance(element, ast.Attribute) else None
                name = element.id if isinstance(element, ast.Name) else name
                if name in classes:
                    lines.add(node.lineno)
    return sorted(lines)


def _switch_offenders(root: Path) -> dict[str, str]:
    from client_sdk.mechanisms.registry import MECHANISMS

    classes = concrete_mechanism_classes()
    offenders: dict[str, str] = {}
    for package in SWITCH_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(SWITCH_EXEMPT):
                continue
            source = path.read_text()
            text = source.splitlines()
            for line in name_switches(source, set(MECHANISMS), classes):
                key = f"{relative}: {text[line - 1].strip()}"
                if key not in SWITCH_ALLOWED:
                    offenders[f"{relative}:{line}"] = text[line - 1].strip()
    return offenders


def test_no_switch_on_a_mechanism_name() -> None:
    offenders = _switch_offenders(ROOT)
    assert not offenders, f"choose behaviour by a mechanism's method, not its name: {offenders}"


def test_the_check_detects_a_name_switch() -> None:
    """Each planted form is found; a table lookup, an abstract interface and a ``name`` compared
    with a string that names no mechanism are not switches."""
    classes = concrete_mechanism_classes()
    assert {"PEM", "GRR", "SquareWave", "Memoized"} <= classes
    assert not {"FrequencyOracle", "StringSketch", "NumericMechanism"} & classes
    names = {"grr", "pem", "oue"}
    planted = (
        "if m.name == 'pem':\n    pass\n",
        "x = 'grr' != oracle.name\n",
        "y = m.name in ('oue', 'olh')\n",
        "if getattr(m, 'estimate_kind', None) == 'sketch':\n    pass\n",
        "kind = m.estimate_kind\nif kind in ('discovery', 'sketch'):\n    pass\n",
        "ok = isinstance(m, PEM)\n",
        "ok = isinstance(m, (FrequencyOracle, pem.PEM))\n",
    )
    for source in planted:
        assert name_switches(source, names, classes), source
    clean = (
        "view = VIEWS[m.estimate_kind]\n"
        "ok = isinstance(m, (FrequencyOracle, StringSketch))\n"
        "init = path.name == '__init__.py'\n"
        "same = a.estimate_kind == b.estimate_kind\n"
    )
    assert name_switches(clean, names, classes) == []


# ---- no circles even through type-only imports -------------------------------------------------


def import_graph_with_type_imports(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """:func:`import_graph` with the ``if TYPE_CHECKING:`` imports counted as edges too."""
    files = {
        module_name(root, path): path
        for package in packages
        for path in (root / package).rglob("*.py")
    }
    modules = set(files)
    return {
        module: {
            target
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
            for target in _imported(node, module, path.name == "__init__.py", modules)
        }
        for module, path in files.items()
    }


def test_no_import_circles_even_through_type_checking_imports() -> None:
    """A circle held by type-only imports still ties two modules' designs together (issue 22:
    ``mechanisms/base.py`` <-> ``memoization.py``, now a Protocol in ``memoization.py``)."""
    circles = import_circles(import_graph_with_type_imports(ROOT, PACKAGES))
    assert not circles, f"import circles through type-only imports: {circles}"


def test_the_type_only_check_sees_a_type_checking_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\nthing = 1\n"
    )
    assert import_circles(import_graph(tmp_path, ("pkg",))) == []
    assert import_circles(import_graph_with_type_imports(tmp_path, ("pkg",))) == [
        ["pkg.a", "pkg.b"]
    ]
