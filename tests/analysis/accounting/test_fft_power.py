"""Self-composition in one FFT (issue 21, item 11: calibrate must answer in seconds).

A full-precision account of 1000 subsampled Gaussian rounds used to take about 15 FFT
convolutions per direction (repeated squaring); ``DiscretePLD.power`` now takes the power in one
transform once squaring would need an FFT. The result must still dominate the true PLD: checked
against an exact convolution, and against repeated squaring within the two round-off allowances.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.accounting import _pld, gaussian, parallel_poisson
from analysis.accounting._pld import DiscretePLD


def _lattice_pld(seed: int) -> DiscretePLD:
    rng = np.random.default_rng(seed)
    indices = np.arange(-20, 41, dtype=np.int64)
    masses = rng.random(indices.size) ** 4
    masses *= (1 - 1e-3) / masses.sum()
    step = 0.01
    return DiscretePLD(step * indices.astype(np.float64), masses, 1e-3, step, indices)


def test_fft_power_matches_the_exact_convolution_and_dominates_it() -> None:
    base = _lattice_pld(seed=7)
    count = 37
    exact = np.ones(1)
    for _ in range(count):
        exact = np.convolve(exact, base.masses)  # exact up to float rounding (dense)
    first = count * int(base.indices[0])  # type: ignore[index]
    powered = _pld._fft_power(base, count)
    assert powered is not None and powered.indices is not None
    n = int(powered.indices[-1] - powered.indices[0]) + 1
    l2, _ = _pld._power_error(max(n, 16), count)
    # Every kept entry is the exact one up to the round-off bound (plus at most the window's
    # folded tails, which the allowance also counts).
    kept = exact[powered.indices - first]
    assert np.max(np.abs(powered.masses - kept)) <= l2 + powered.slack
    assert powered.inf_mass >= -math.expm1(count * math.log1p(-base.inf_mass))
    # Dominates the exact PLD, within its allowance.
    reference = DiscretePLD(
        base.step * (np.arange(exact.size) + first).astype(np.float64),  # type: ignore[operator]
        exact,
        -math.expm1(count * math.log1p(-base.inf_mass)),
    )
    eps = np.linspace(-2.0, 8.0, 201)
    got, want = powered.delta(eps), reference.delta(eps)
    assert np.all(got >= want - 1e-15)
    assert np.all(got <= want + powered.slack + 1e-15)


def _step() -> DiscretePLD:
    return parallel_poisson(gaussian(1.415), 0.01, num_workers=8).terms[0][0].remove


def test_fft_power_agrees_with_repeated_squaring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same lattice, the same exact convolution: the two results differ by no more than
    their round-off allowances, and the one-FFT power is not below the squaring's lower bound."""
    step = _step()
    fast = step.power(100)
    monkeypatch.setattr(_pld, "_fft_power", lambda a, count: None)
    slow = step.power(100)
    assert fast.step == slow.step and fast.rounding == pytest.approx(slow.rounding, rel=1e-12)
    eps = np.linspace(0.0, 3.0, 61)
    got, want = fast.delta(eps), slow.delta(eps)
    assert np.all(got >= want - slow.slack - 1e-15)
    assert np.all(got <= want + fast.slack + 1e-15)
    assert fast.slack < 1e-10  # the allowance stays far below any useful delta


def test_a_thousand_rounds_take_two_transforms_per_direction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The calibration example's full-precision account: at most 2 forward transforms per
    direction (repeated squaring: about 30 per direction)."""
    calls = 0
    rfft = _pld.fft.rfft

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        return rfft(*args, **kwargs)

    monkeypatch.setattr(_pld.fft, "rfft", counting)
    account = parallel_poisson(gaussian(1.415), 0.01, num_workers=8) * 1000
    assert account.delta_at(1.0) < 1.1e-5
    assert calls <= 4, calls


def test_a_power_whose_allowance_is_too_large_is_left_to_squaring() -> None:
    """Where the round-off bound of one transform would exceed ``_POWER_MAX_ALLOWANCE`` (here a
    very long power), the power falls back to repeated squaring."""
    base = _lattice_pld(seed=3)
    assert _pld._fft_power(base, 37) is not None
    assert _pld._power_error(1 << 20, 10**6)[1] > _pld._POWER_MAX_ALLOWANCE
    assert _pld._fft_power(base, 10**6) is None
