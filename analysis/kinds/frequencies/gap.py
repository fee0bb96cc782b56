"""The central gap of frequency estimates, with the shuffled column
(docs/math/central-and-shuffle.md).

The price of locality at the same epsilon is :func:`analysis.gap.utility_gap`. The *shuffled
column* compares three ways of collecting the same histogram at the same **central** guarantee
(epsilon_c, delta):

- **local only**: every report epsilon_c-LDP (no shuffler; the guarantee holds against anyone);
- **shuffled**: every report epsilon0-LDP, epsilon0 the largest local epsilon whose shuffled
  batch of n reports is (epsilon_c, delta)-DP by the numerical clone bound of Feldman, McMillan,
  Talwar (FOCS 2021; ``client_sdk.amplification.calibrate_local_epsilon``). For a stored shuffled
  campaign the column is the campaign itself: its epsilon0, and the epsilon_c that the batches it
  actually received give (the smallest batch binds; ``collector.calibration.central_guarantee``);
- **trusted curator**: Laplace at epsilon_c (pure, so stronger than the target) and the analytic
  Gaussian at (epsilon_c, delta) on the true histogram.

The exact LDP variances are the mechanism's own f-independent Var*/n at each epsilon (the same
mechanism rebuilt at epsilon_c and at epsilon0; at a large epsilon0 the f-dependent term of the
fixed-population variance is no longer negligible, and the measured columns give the exact
expectation at the true frequencies, ``*_expected``, beside the observed error), and, since at a
large epsilon0 another oracle may be better, the best of GRR and OUE at epsilon0 too. With a
simulation (or the truth) each column is also measured: the same population perturbed at both
local epsilons, the curator run on its histogram.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    central_gaussian_variance,
    central_laplace_variance,
    empirical_gap,
    first_reports,
    require_kind,
    run_central_gaussian,
    run_central_laplace,
    utility_gap,
    zipf_weights,
)
from analysis.kinds.frequencies.estimate import FrequencyEstimate, estimate_frequencies
from client_sdk.amplification import calibrate_local_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism

__all__ = ["exact_gap", "measured_gap", "shuffled_column", "simulated_gap"]


def _oracle(mechanism: Mechanism) -> FrequencyOracle:
    return require_kind(mechanism, FrequencyOracle, "a frequency oracle")


def at_epsilon(mechanism: FrequencyOracle, epsilon: float) -> FrequencyOracle:
    """The same mechanism (same config) at another epsilon."""
    return _oracle(mechanism_from_config({**mechanism.to_config(), "epsilon": float(epsilon)}))


def _best_at(mechanism: FrequencyOracle, epsilon: float) -> FrequencyOracle:
    """The lower-variance of GRR and OUE over the same k at ``epsilon`` (the oracle one would pick
    at a large local epsilon)."""
    candidates = [
        _oracle(mechanism_from_config({"mechanism": name, "epsilon": float(epsilon), "k": k}))
        for name, k in (("grr", mechanism.k), ("oue", mechanism.k))
    ]
    return min(candidates, key=lambda m: m.variance_per_user())


def _target(mechanism: FrequencyOracle, n: int, options: GapOptions) -> dict[str, Any]:
    """(central epsilon, local epsilon of the shuffled reports, where the figures come from)."""
    if options.batch_sizes:
        from collector.calibration import central_guarantee

        guarantee = central_guarantee(
            mechanism.privacy_epsilon, list(options.batch_sizes), options.delta
        )
        assert guarantee is not None
        return {
            "central_epsilon": guarantee["epsilon"],
            "local_epsilon": mechanism.privacy_epsilon,
            "source": "the batches this campaign received (the smallest binds)",
            "batches": guarantee["batches"],
            "smallest_batch": guarantee["smallest_batch"],
        }
    central = (
        options.central_epsilon
        if options.central_epsilon is not None
        else mechanism.privacy_epsilon
    )
    return {
        "central_epsilon": central,
        "local_epsilon": calibrate_local_epsilon(central, n, options.delta),
        "source": f"calibrated for one shuffled batch of n = {n} reports",
    }


def shuffled_column(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    """Exact per-item variances of local-only, shuffled and curator collection at the same
    central (epsilon_c, delta)."""
    oracle = _oracle(mechanism)
    if oracle.privacy_delta != 0:
        return {"applies": False, "reason": "the shuffle bound needs a pure epsilon0-LDP mechanism"}
    target = _target(oracle, n, options)
    central, local = target["central_epsilon"], target["local_epsilon"]
    local_only = at_epsilon(oracle, central)
    shuffled = oracle if options.batch_sizes else at_epsilon(oracle, local)
    best = _best_at(oracle, local)
    laplace = central_laplace_variance(central, n, options.neighbouring)
    gaussian = central_gaussian_variance(central, options.delta, n, options.neighbouring)
    v_local, v_shuffled = local_only.variance_per_user() / n, shuffled.variance_per_user() / n
    v_best = best.variance_per_user() / n
    return {
        "applies": True,
        **target,
        "delta": options.delta,
        "exact": {
            "local_only_variance": v_local,
            "shuffled_variance": v_shuffled,
            "shuffled_best_oracle": best.to_config(),
            "shuffled_best_variance": v_best,
            "central_laplace_variance": laplace,
            "central_gaussian_variance": gaussian,
            "local_over_shuffled": v_local / v_shuffled,
            "shuffled_over_central_gaussian": v_shuffled / gaussian,
            "share_of_gap_closed": _closed(v_local, v_shuffled, gaussian),
        },
    }


def _closed(local: float, shuffled: float, curator: float) -> float:
    """How much of the distance from local-only to the curator shuffling closes, on a log scale:
    log(local/shuffled) / log(local/curator) (1 = all of it)."""
    whole = math.log(local / curator)
    return math.log(local / shuffled) / whole if whole > 0 else 1.0


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    gap = utility_gap(mechanism, n, delta=options.delta, neighbouring=options.neighbouring)
    out = gap.to_dict()
    for key in ("mechanism", "epsilon", "n"):
        out.pop(key)
    out["shuffled_column"] = shuffled_column(mechanism, n, options)
    return out


def _mse(estimate: npt.NDArray[np.float64], truth: npt.NDArray[np.float64]) -> float:
    return float(np.mean((estimate - truth) ** 2))


def _measured_shuffled(
    mechanism: FrequencyOracle,
    items: npt.NDArray[np.int64],
    column: dict[str, Any],
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Local-only and shuffled collection of the same users' items, and the curator on their
    histogram, measured (mean squared error per item, the curator over ``repetitions`` runs)."""
    counts = np.bincount(items, minlength=mechanism.k).astype(np.float64)
    truth = counts / counts.sum()
    local_only = at_epsilon(mechanism, column["central_epsilon"])
    shuffled = mechanism if options.batch_sizes else at_epsilon(mechanism, column["local_epsilon"])
    observed = {}
    n = int(items.size)
    for name, oracle in (("local_only", local_only), ("shuffled", shuffled)):
        estimate = estimate_frequencies(oracle, first_reports(oracle, items, rng))
        observed[f"{name}_mse"] = _mse(estimate.frequencies, truth)
        variances = oracle.variance(n, truth)
        observed[f"{name}_expected"] = float(np.mean(variances))
        # the standard error of a mean of k squared errors, each about normal
        observed[f"{name}_mse_std_error"] = float(np.sqrt(2 * np.sum(variances**2)) / truth.size)
    central = column["central_epsilon"]
    laplace = [
        run_central_laplace(counts, central, neighbouring=options.neighbouring, rng=rng)
        for _ in range(options.repetitions)
    ]
    gaussian = [
        run_central_gaussian(
            counts, central, options.delta, neighbouring=options.neighbouring, rng=rng
        )
        for _ in range(options.repetitions)
    ]
    observed["central_laplace_mse"] = _mse(np.asarray(laplace), truth)
    observed["central_gaussian_mse"] = _mse(np.asarray(gaussian), truth)
    observed["local_over_shuffled"] = observed["local_only_mse"] / observed["shuffled_mse"]
    return observed


def _items_of(counts: npt.ArrayLike) -> npt.NDArray[np.int64]:
    c = np.asarray(counts, dtype=np.int64)
    return np.repeat(np.arange(c.size), c)


def measured_gap(
    mechanism: Mechanism,
    estimate: FrequencyEstimate,
    truth: npt.ArrayLike,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the true count of every item."""
    oracle = _oracle(mechanism)
    out: dict[str, Any] = {
        "empirical_gap": empirical_gap(
            estimate,
            truth,
            mechanism=oracle,
            delta=options.delta,
            neighbouring=options.neighbouring,
            rng=rng,
            repetitions=options.repetitions,
        ).to_dict()
    }
    column = shuffled_column(oracle, estimate.n, options)
    if column["applies"]:
        out["shuffled_column_measured"] = _measured_shuffled(
            oracle, _items_of(truth), column, options, rng
        )
    return out


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Items drawn i.i.d. from the simulation's shares over the k items (rank = index)."""
    oracle = _oracle(mechanism)
    items = rng.choice(oracle.k, size=n, p=zipf_weights(oracle.k, simulation))
    counts = np.bincount(items, minlength=oracle.k)
    estimate = estimate_frequencies(oracle, first_reports(oracle, items, rng))
    return measured_gap(oracle, estimate, counts, options, rng)
