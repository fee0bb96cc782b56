"""Tests of analysis.postprocess.transforms: base-pos, norm and the simplex projection (norm-sub).

Exact checks (brute force, the projection's invariants) use tolerances of float rounding.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from analysis.postprocess import (
    PostProcessedEstimate,
    base_pos,
    norm,
    norm_sub,
    project_simplex,
)
from tests.analysis.postprocess.common import estimate_of, zipf_population

# ---- the simplex projection (norm-sub) --------------------------------------------------------


def _brute_force_projection(v: np.ndarray) -> np.ndarray:
    """argmin ||x - v|| over the simplex by enumerating supports (the KKT point of each face)."""
    best, best_distance = None, math.inf
    for size in range(1, v.size + 1):
        for support in itertools.combinations(range(v.size), size):
            idx = list(support)
            x = np.zeros_like(v)
            x[idx] = v[idx] - (v[idx].sum() - 1.0) / size
            if np.all(x[idx] >= 0):
                distance = float(np.sum((x - v) ** 2))
                if distance < best_distance:
                    best, best_distance = x, distance
    assert best is not None
    return best


def test_project_simplex_equals_brute_force() -> None:
    rng = np.random.default_rng(11)
    for trial in range(300):
        k = int(rng.integers(1, 7))
        v = rng.normal(scale=[0.1, 0.5, 2.0][trial % 3], size=k) + rng.normal(0, 0.3)
        projected, theta = project_simplex(v)
        expected = _brute_force_projection(v)
        np.testing.assert_allclose(projected, expected, atol=1e-12)
        np.testing.assert_allclose(projected, np.maximum(v - theta, 0.0), atol=1e-15)
        assert projected.sum() == pytest.approx(1.0, abs=1e-12)


def test_project_simplex_rows_and_invariants() -> None:
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(50, 9))
    projected, theta = project_simplex(rows)
    for row, out, t in zip(rows, projected, theta, strict=True):
        single, single_theta = project_simplex(row)
        np.testing.assert_array_equal(out, single)
        assert t == single_theta
    distribution = rng.dirichlet(np.ones(9))
    np.testing.assert_allclose(project_simplex(distribution)[0], distribution, atol=1e-15)
    with pytest.raises(ValueError, match="finite"):
        project_simplex([0.5, np.nan])


def test_norm_sub_estimate_records_theta_and_is_the_projection() -> None:
    est = estimate_of({"mechanism": "oue", "epsilon": 0.5, "k": 6}, zipf_population(6, 300), 1)
    result = norm_sub(est, replicates=20)
    assert isinstance(result, PostProcessedEstimate)
    assert result.postprocessing == "norm-sub"
    np.testing.assert_allclose(
        result.frequencies, _brute_force_projection(est.frequencies), atol=1e-12
    )
    theta = result.details["theta"]
    kept = result.frequencies > 0
    np.testing.assert_allclose(result.frequencies[kept], est.frequencies[kept] - theta)
    assert result.details["zeroed_items"] == int(np.sum(~kept))
    assert result.raw is est


# ---- base-pos and norm -------------------------------------------------------------------------


def test_base_pos_clips_estimate_and_interval() -> None:
    est = estimate_of({"mechanism": "grr", "epsilon": 0.5, "k": 12}, zipf_population(12, 400), 2)
    assert np.any(est.frequencies < 0), "the fixture should have negative estimates"
    result = base_pos(est)
    np.testing.assert_array_equal(result.frequencies, np.maximum(est.frequencies, 0))
    np.testing.assert_array_equal(result.ci_low, np.maximum(est.ci_low, 0))
    np.testing.assert_array_equal(result.ci_high, np.maximum(est.ci_high, 0))
    assert result.details["clipped_items"] == int(np.sum(est.frequencies < 0))


def test_norm_shifts_every_item_equally_to_sum_one() -> None:
    est = estimate_of({"mechanism": "oue", "epsilon": 1.0, "k": 8}, zipf_population(8, 500), 3)
    result = norm(est, replicates=30)
    assert result.frequencies.sum() == pytest.approx(1.0, abs=1e-12)
    shift = result.details["shift"]
    np.testing.assert_allclose(result.frequencies - est.frequencies, shift, atol=1e-15)
    assert shift == pytest.approx((1 - est.frequencies.sum()) / 8)
