"""One Attributes value object for the record mechanisms (client_sdk/mechanisms/attributes.py):
``multi`` and ``fourier`` parse, encode and write back their attributes through it, and a device
building ``fourier`` does not import ``multi``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.attributes import Attribute, Attributes

CONFIG = [{"name": "os", "k": 3, "labels": ["android", "ios", "web"]}, {"name": "size", "k": 4}]


def test_both_record_mechanisms_hold_one_attributes_value() -> None:
    multi = mechanism_from_config(
        {"mechanism": "multi", "epsilon": 1.0, "protocol": "spl", "attributes": CONFIG}
    )
    fourier = mechanism_from_config(
        {"mechanism": "fourier", "epsilon": 1.0, "attributes": [{"name": "a"}, {"name": "b"}]}
    )
    assert isinstance(multi.attributes, Attributes)  # type: ignore[attr-defined]
    assert isinstance(fourier.attributes, Attributes)  # type: ignore[attr-defined]
    assert multi.attributes[0] == Attribute("os", 3, ("android", "ios", "web"))  # type: ignore[attr-defined]
    assert fourier.to_config()["attributes"] == [{"name": "a"}, {"name": "b"}]
    assert multi.to_config()["attributes"] == CONFIG


def test_parse_encode_and_write_back() -> None:
    attributes = Attributes.parse(CONFIG)
    assert attributes.names == ("os", "size") and attributes.ks == (3, 4)
    assert Attributes.parse(attributes) == attributes  # already parsed: the same value
    assert attributes.to_config() == CONFIG
    encoded = attributes.encode([{"os": "web", "size": 2}, {"os": "android", "size": 0}])
    assert encoded.tolist() == [[2, 2], [0, 0]] and encoded.dtype == np.int64
    with pytest.raises(ValueError, match=r"position 0, attribute 'size'"):
        attributes.encode([{"os": "web", "size": 4}])
    with pytest.raises(ValueError, match=r"attributes\[0\]\.k must be 2 .*got 3"):
        Attributes.parse(CONFIG, binary=True)
    assert Attributes.parse([{"name": "x"}], binary=True).ks == (2,)


def test_a_fourier_device_does_not_import_multi() -> None:
    code = (
        "import sys; import client_sdk.mechanisms.fourier; "
        "print('client_sdk.mechanisms.multi' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
