"""The task file: bad input refused naming the field and the value; sensitivity and noise."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from client_sdk.sampling import DiscreteGaussian, DiscreteLaplace
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
        ({"dp": "gaussian:0"}, "task dp must be"),
        ({"dp": "gaussian:x"}, "'gaussian:x'"),
        ({"report_expiry": 3600}, "report_expiry must be at least two time_precision units"),
        ({"report_expiry": "1d"}, "task report_expiry must be a positive integer; got '1d'"),
        ({"clock_skew": 0}, "task clock_skew must be a positive integer; got 0"),
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
        # min(2 max_weight, length): weight-bounded, then length-bounded
        ({"type": "multihotcountvec", "length": 8, "max_weight": 3, "chunk_length": 2}, 6),
        ({"type": "multihotcountvec", "length": 4, "max_weight": 4, "chunk_length": 2}, 4),
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


@pytest.mark.parametrize(
    ("vdaf", "l2_squared"),
    [
        ({"type": "count"}, 1),
        ({"type": "sum", "max_measurement": 100}, 100**2),
        ({"type": "histogram", "length": 4, "chunk_length": 2}, 2),
        ({"type": "sumvec", "length": 3, "max_measurement": 7, "chunk_length": 2}, 3 * 49),
        ({"type": "multihotcountvec", "length": 8, "max_weight": 3, "chunk_length": 2}, 6),
        ({"type": "multihotcountvec", "length": 4, "max_weight": 4, "chunk_length": 2}, 4),
    ],
)
def test_gaussian_noise_meets_rho_per_aggregator(vdaf: dict[str, Any], l2_squared: int) -> None:
    """Each aggregator's sigma^2 is at least Delta_2^2 / (2 rho), so its draw alone is rho-zCDP
    (CKS 2020, Theorem 14), and at most one unit above (the sampler's t*m grid)."""
    spec = TaskSpec.from_json({**GOOD, "vdaf": vdaf, "dp": "gaussian:1/8"})
    assert spec.l2_sensitivity_squared() == l2_squared
    assert spec.rho() == Fraction(1, 8) and spec.epsilon() is None
    noise = spec.noise()
    assert isinstance(noise, DiscreteGaussian)
    target = Fraction(l2_squared) / (2 * Fraction(1, 8))  # 4 Delta_2^2
    assert target <= noise.sigma2 <= target * Fraction(1001, 1000) + 1
    assert Fraction(l2_squared, 2 * noise.sigma2) <= Fraction(1, 8)  # the rho it gives
    assert spec.noise_std_error() == math.sqrt(2 * noise.variance())


def test_too_much_noise_for_the_exact_sampler_is_refused_at_load() -> None:
    huge = {"type": "sumvec", "length": 1000, "max_measurement": 2**20, "chunk_length": 10}
    with pytest.raises(ValueError, match="above the exact sampler"):
        TaskSpec.from_json({**GOOD, "vdaf": huge, "dp": "gaussian:1/1000000"})


def test_multihot_sensitivity_is_attained() -> None:
    """The bound min(2 W, L) is tight: two weight-W vectors with disjoint supports (or, when
    2 W > L, complementary ones) differ by one in that many coordinates, so L1 = L2^2 = it."""
    for length, weight in ((8, 3), (4, 4), (5, 3)):
        vdaf = {"type": "multihotcountvec", "length": length, "max_weight": weight}
        spec = TaskSpec.from_json({**GOOD, "vdaf": {**vdaf, "chunk_length": 2}})
        first = [i < weight for i in range(length)]
        second = [i >= length - weight for i in range(length)]
        if 2 * weight > length:
            second = [not bit for bit in first]
        diff = [int(a) - int(b) for a, b in zip(first, second, strict=True)]
        attained = sum(abs(d) for d in diff)
        assert spec.sensitivity() == spec.l2_sensitivity_squared() == attained
