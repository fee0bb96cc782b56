"""The task file: bad input refused naming the field and the value; sensitivity and noise."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from client_sdk.sampling import DiscreteLaplace
from collector.dap.task import TaskSpec, b64encode, signed

GOOD: dict[str, Any] = {
    "task_id": b64encode(bytes(32)),
    "leader": "http://127.0.0.1:1/dap/",
    "helper": "http://127.0.0.1:2/dap/",
    "vdaf": {"type": "histogram", "length": 4, "chunk_length": 2},
    "min_batch_size": 10,
    "time_precision": 3600,
    "dp": "laplace:1/2",
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"task_id": "abc"}, "task_id must be 32 bytes"),
        ({"leader": "ftp://x"}, "task leader must be an http(s) URL; got 'ftp://x'"),
        ({"vdaf": {"type": "poisson"}}, "task vdaf.type must be one of"),
        ({"vdaf": {"type": "sum"}}, "task vdaf sum takes ['max_measurement']"),
        ({"vdaf": {"type": "sum", "max_measurement": 0}}, "vdaf.max_measurement must be a"),
        ({"min_batch_size": 0}, "task min_batch_size must be a positive integer; got 0"),
        ({"dp": "laplace:-1"}, "task dp must be"),
        ({"dp": "gauss:1"}, "'gauss:1'"),
        ({"extra": 1}, "unknown field 'extra'"),
    ],
)
def test_bad_task_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        TaskSpec.from_json({**GOOD, **change})
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("vdaf", "sensitivity"),
    [
        ({"type": "count"}, 1),
        ({"type": "sum", "max_measurement": 100}, 100),
        ({"type": "histogram", "length": 4, "chunk_length": 2}, 2),
        ({"type": "sumvec", "length": 3, "max_measurement": 7, "chunk_length": 2}, 21),
    ],
)
def test_sensitivity_and_noise_scale(vdaf: dict[str, Any], sensitivity: int) -> None:
    spec = TaskSpec.from_json({**GOOD, "vdaf": vdaf})
    assert spec.sensitivity() == sensitivity
    assert spec.noise() == DiscreteLaplace(Fraction(sensitivity) * 2)  # epsilon 1/2
    expected = math.sqrt(2 * DiscreteLaplace(Fraction(sensitivity) * 2).variance())
    assert spec.noise_std_error() == expected
    assert TaskSpec.from_json({**GOOD, "vdaf": vdaf, "dp": "none"}).noise_std_error() == 0.0


def test_field_elements_above_half_decode_negative() -> None:
    p = 2**64 - 2**32 + 1
    assert [signed(x, p) for x in (0, 5, p // 2, p // 2 + 1, p - 3)] == [
        0,
        5,
        p // 2,
        -(p // 2),
        -3,
    ]
