"""Tests of the analysis.postprocess dispatcher: names, errors, and the raw estimate kept intact."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.postprocess import (
    METHODS,
    postprocess,
)
from tests.analysis.postprocess.common import estimate_of, zipf_population

# ---- the raw estimate is never touched ---------------------------------------------------------


def test_postprocessing_never_mutates_the_raw_estimate() -> None:
    est = estimate_of({"mechanism": "oue", "epsilon": 0.5, "k": 10}, zipf_population(10, 400), 9)
    saved = {
        name: np.copy(getattr(est, name))
        for name in ("frequencies", "std_errors", "ci_low", "ci_high")
    }
    counts = np.copy(est.statistic.counts)
    for method in [*METHODS, "em"]:
        result = postprocess(est, method, replicates=20)
        assert result.raw is est
        for name, before in saved.items():
            np.testing.assert_array_equal(getattr(est, name), before)
            assert not np.shares_memory(getattr(result, name), getattr(est, name))
        np.testing.assert_array_equal(est.statistic.counts, counts)
        assert est.postprocessing == "base"
    # Post-processing a post-processed estimate starts again from the raw one.
    twice = postprocess(postprocess(est, "norm-sub", replicates=0), "base-pos")
    np.testing.assert_array_equal(twice.frequencies, np.maximum(est.frequencies, 0))


def test_dispatcher_names_and_errors() -> None:
    est = estimate_of({"mechanism": "grr", "epsilon": 1.0, "k": 4}, zipf_population(4, 200), 1)
    assert [postprocess(est, m, replicates=0).postprocessing for m in METHODS] == list(METHODS)
    assert postprocess(est, "em", replicates=0).postprocessing == "mle"
    assert postprocess(est, "ibu", replicates=0).postprocessing == "mle"
    with pytest.raises(ValueError, match=r"norm-sub.*got 'nrom-sub'"):
        postprocess(est, "nrom-sub")
    with pytest.raises(ValueError, match="sampler"):
        postprocess(est, "norm-sub", sampler="magic")
    oue = estimate_of({"mechanism": "oue", "epsilon": 1.0, "k": 4}, zipf_population(4, 200), 1)
    with pytest.raises(ValueError, match="needs an exact channel"):
        postprocess(oue, "norm-sub", sampler="multinomial")
    with pytest.raises(ValueError, match="exact diagonal channel"):
        postprocess(oue, "norm-sub", sampler="exact")
    no_intervals = postprocess(est, "norm-sub", replicates=0)
    assert np.all(np.isnan(no_intervals.std_errors))
    assert "not computed" in no_intervals.details["intervals"]
