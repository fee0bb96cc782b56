"""The explicit registry from config names to mechanism classes (no ``globals()`` scans).

Entries are ``"module:Class"`` strings imported on first use, so a device that only ever builds
one mechanism imports only that module. This module is a leaf: it imports no mechanism module
and knows nothing about building one from a config (``client_sdk.mechanisms.factory`` does).
Adding a mechanism adds one line here.
"""

from __future__ import annotations

import importlib

from client_sdk.mechanisms.base import Mechanism

MECHANISMS: dict[str, str] = {
    "grr": "client_sdk.mechanisms.grr:GRR",
    "sue": "client_sdk.mechanisms.unary:SUE",
    "oue": "client_sdk.mechanisms.unary:OUE",
    "ss": "client_sdk.mechanisms.subset:SS",
    "blh": "client_sdk.mechanisms.local_hashing:BLH",
    "olh": "client_sdk.mechanisms.local_hashing:OLH",
    "hr": "client_sdk.mechanisms.hadamard:HR",
    "rappor": "client_sdk.mechanisms.rappor:RAPPOR",
    "laplace": "client_sdk.mechanisms.laplace:Laplace",
    "gaussian": "client_sdk.mechanisms.gaussian:Gaussian",
    "duchi": "client_sdk.mechanisms.duchi:Duchi",
    "piecewise": "client_sdk.mechanisms.piecewise:Piecewise",
    "hybrid": "client_sdk.mechanisms.piecewise:Hybrid",
    "dbitflip": "client_sdk.mechanisms.dbitflip:DBitFlip",
    "onebitmean": "client_sdk.mechanisms.onebitmean:OneBitMean",
    "cms": "client_sdk.mechanisms.sketch:CMS",
    "hcms": "client_sdk.mechanisms.sketch:HCMS",
    "pem": "client_sdk.mechanisms.pem:PEM",
    "sfp": "client_sdk.mechanisms.sfp:SFP",
    "square_wave": "client_sdk.mechanisms.square_wave:SquareWave",
    "hierarchical": "client_sdk.mechanisms.hierarchical:Hierarchical",
    "multi": "client_sdk.mechanisms.multi:Multi",
    "fourier": "client_sdk.mechanisms.fourier:Fourier",
    "pckv": "client_sdk.mechanisms.pckv:PCKV",
}


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name``; ``ValueError`` listing the known names otherwise."""
    if not isinstance(name, str) or name not in MECHANISMS:
        known = ", ".join(sorted(MECHANISMS))
        raise ValueError(f"mechanism must be one of {known}; got {name!r}")
    module_name, _, class_name = MECHANISMS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(cls, Mechanism)
    return cls
