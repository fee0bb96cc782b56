"""``client_sdk`` as a library other code lives on (issue 23, item 5): ``__all__`` is the public
API, every public name has a docstring and type hints, ``__version__`` is the package's, and
every ``ldp-*`` command answers ``--version``."""

from __future__ import annotations

import importlib.metadata
import inspect
import subprocess
from typing import Any

import pytest

import client_sdk
from collector.process import entry_point

API_CALLABLES = [
    name
    for name in client_sdk.__all__
    if inspect.isclass(getattr(client_sdk, name)) or inspect.isfunction(getattr(client_sdk, name))
]


def public_members(cls: type) -> list[tuple[str, Any]]:
    """The class's own public methods and properties (those defined in ``client_sdk``)."""
    members = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        function = member.fget if isinstance(member, property) else member
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        if inspect.isfunction(function):
            members.append((name, function))
    return members


def test_all_lists_what_an_app_needs() -> None:
    exported = set(client_sdk.__all__)
    for name in (
        "TelemetryClient",
        "PrivacyPolicy",
        "PolicyViolation",
        "UploadError",
        "CampaignChangedError",
        "CampaignClosedError",
        "CampaignVerificationError",
        "BudgetExceededError",
        "HmacWordSource",
        "mechanism_from_config",
        "__version__",
    ):
        assert name in exported, name
    assert all(hasattr(client_sdk, name) for name in exported)


@pytest.mark.parametrize("name", API_CALLABLES)
def test_every_public_name_has_a_docstring_and_type_hints(name: str) -> None:
    obj = getattr(client_sdk, name)
    assert inspect.getdoc(obj), f"{name} has no docstring"
    functions = [(name, obj)] if inspect.isfunction(obj) else public_members(obj)
    if inspect.isclass(obj) and "__init__" in vars(obj):
        functions.append((f"{name}.__init__", vars(obj)["__init__"]))
    for member, function in functions:
        if not member.endswith("__init__"):
            assert inspect.getdoc(function), f"{name}.{member} has no docstring"
        signature = inspect.signature(function)
        for parameter in signature.parameters.values():
            if parameter.name in ("self", "cls"):
                continue
            assert parameter.annotation is not inspect.Parameter.empty, (
                f"{name}.{member}: parameter {parameter.name} has no type hint"
            )
        assert signature.return_annotation is not inspect.Signature.empty, (
            f"{name}.{member} has no return type hint"
        )


def test_version_is_the_installed_package_version() -> None:
    assert client_sdk.__version__ == importlib.metadata.version("ldp-telemetry")


@pytest.mark.parametrize(
    ("script", "module"),
    [
        ("ldp-collector", "collector.cli"),
        ("ldp-analyze", "analysis.cli"),
        ("ldp-shuffler", "shuffler.cli"),
        ("ldp-demo", "analysis.demo"),
    ],
)
def test_every_command_answers_version(script: str, module: str) -> None:
    done = subprocess.run(
        [*entry_point(script, module), "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{script} {client_sdk.__version__}"
