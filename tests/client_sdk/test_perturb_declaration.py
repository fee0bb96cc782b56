"""One declaration of the keyed ``perturb(values, *, rng, permanent)``: ``DeviceKeyed.perturb``
(client_sdk/mechanisms/memoization.py). A mechanism whose reports depend on the device's keyed
source implements ``_perturb``; none declares its own ``perturb`` taking ``permanent``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import client_sdk.mechanisms
from client_sdk.mechanisms.memoization import DeviceKeyed


def _mechanism_classes() -> list[type]:
    classes: dict[str, type] = {}
    for info in pkgutil.iter_modules(client_sdk.mechanisms.__path__):
        module = importlib.import_module(f"client_sdk.mechanisms.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                classes[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(classes.values())


def test_only_device_keyed_declares_the_keyed_perturb() -> None:
    copies = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _mechanism_classes()
        if cls is not DeviceKeyed
        and "perturb" in vars(cls)
        and "permanent" in inspect.signature(vars(cls)["perturb"]).parameters
    ]
    assert copies == []
    assert len(_mechanism_classes()) > 20  # the walk found the mechanisms
