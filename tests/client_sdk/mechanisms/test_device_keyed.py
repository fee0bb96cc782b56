"""One declaration of the device-keyed ``perturb`` (client_sdk.mechanisms.memoization.DeviceKeyed):
every mechanism whose reports may depend on the device's keyed source takes ``permanent=``
through it, and implements only ``_perturb``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import client_sdk.mechanisms as package
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.memoization import DeviceKeyed
from client_sdk.mechanisms.rappor import RAPPOR


def mechanism_classes() -> set[type[Mechanism]]:
    found: set[type[Mechanism]] = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, Mechanism):
                found.add(value)
    return found


def test_every_keyed_perturb_is_the_one_declaration() -> None:
    keyed = {
        cls
        for cls in mechanism_classes()
        if "permanent" in inspect.signature(cls.perturb).parameters
    }
    own = {cls.__name__ for cls in keyed if cls.perturb is not DeviceKeyed.perturb}
    assert own == set()  # RAPPOR too: its cohort comes from the keys (campaign_cohort)
    names = {cls.__name__ for cls in keyed if issubclass(cls, DeviceKeyed)}
    assert {
        RAPPOR.__name__, "DBitFlip", "OneBitMean", "Fourier", "Hierarchical", "HaarWavelet",
        "Memoized", "Multi", "PEM", "MemoizedPEM", "MemoizedSFP", "MemoizedCMS", "MemoizedHCMS",
    } <= names  # fmt: skip
