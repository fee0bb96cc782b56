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

The *trust models* (:func:`trust_models`) put the same question, n and central epsilon under
each model side by side: **local** (the campaign's oracle at that epsilon), **shuffled** (the
column above), **secure aggregation** (a DAP task of Prio3Histogram whose two aggregators each
add discrete Laplace noise of scale Delta/epsilon, Cook 2024: epsilon-DP if either aggregator is
honest) and the **trusted curator** (Laplace; the geometric curator beside it), each with the
share of the log distance from local to the curator it closes. The DAP model also states its
**Gaussian alternative** at the same (epsilon, delta): the task with ``"dp": "gaussian:RHO"``, RHO
the largest rho whose zCDP guarantee converts to epsilon at delta (Canonne, Kamath, Steinke 2020,
Corollary 13), each aggregator adding the discrete Gaussian of sigma^2 >= Delta_2^2 / (2 rho)
(``secure_aggregation.gaussian``). Measured: the local and shuffled columns as above, the DAP
noise (both tasks) drawn by the task's own sampler, the curator run on the truth.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    central_gaussian_variance,
    central_geometric_variance,
    central_laplace_variance,
    dap_gaussian_task,
    dap_task,
    dap_variance,
    empirical_gap,
    first_reports,
    histogram_vdaf,
    require_kind,
    run_central_gaussian,
    run_central_laplace,
    run_dap,
    utility_gap,
    zipf_weights,
)
from analysis.kinds.frequencies.estimate import FrequencyEstimate, estimate_frequencies
from client_sdk.amplification import calibrate_local_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism
from client_sdk.sampling import DiscreteGaussian

if TYPE_CHECKING:
    from collector.dap.task import TaskSpec

__all__ = [
    "TRUST_MODELS",
    "exact_gap",
    "measured_gap",
    "shuffled_column",
    "simulated_gap",
    "trust_models",
]

TRUST_MODELS: tuple[str, ...] = ("local", "shuffled", "secure_aggregation", "curator")
"""The models of :func:`trust_models`, from trusting nobody to trusting one curator."""


def _oracle(mechanism: Mechanism) -> FrequencyOracle:
    return require_kind(mechanism, FrequencyOracle, "a frequency oracle")


def at_epsilon(mechanism: FrequencyOracle, epsilon: float) -> FrequencyOracle:
    """The same mechanism at another epsilon: the same config, except that a shape the oracle
    resolves from its epsilon (``resolved_shape``: OLH's g, SS's d, HR's blocks) is resolved
    again at the new one, as a campaign configured at that epsilon would have it (OLH's
    g = e^eps + 1 at epsilon 1 is 4; kept at a shuffled epsilon0 of 7 it would cost 100 times
    the variance). At its own epsilon the mechanism is returned as it is."""
    if float(epsilon) == mechanism.privacy_epsilon:
        return mechanism
    config = {**mechanism.to_config(), "epsilon": float(epsilon)}
    if mechanism.resolved_shape is not None:
        config.pop(mechanism.resolved_shape, None)
    return _oracle(mechanism_from_config(config))


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


def _central_epsilon(oracle: FrequencyOracle, column: dict[str, Any]) -> float:
    """The epsilon every trust model is held to: the shuffled column's central target, else
    (no shuffle bound for this oracle) the oracle's own epsilon."""
    return float(column["central_epsilon"]) if column["applies"] else oracle.privacy_epsilon


def _figures(variance: float, local: float, curator: float) -> dict[str, float]:
    return {
        "variance": variance,
        "std_error": math.sqrt(variance),
        "std_error_over_curator": math.sqrt(variance / curator),
        "share_of_gap_closed": _closed(local, variance, curator),
    }


def trust_models(
    mechanism: Mechanism, n: int, options: GapOptions, column: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Exact per-item variances of one histogram question under each trust model at the same
    central epsilon and n (:data:`TRUST_MODELS`; module docstring). ``column``: the shuffled
    column if already computed."""
    oracle = _oracle(mechanism)
    column = column if column is not None else shuffled_column(oracle, n, options)
    epsilon = _central_epsilon(oracle, column)
    local = at_epsilon(oracle, epsilon)
    task = dap_task(histogram_vdaf(oracle.k), epsilon)
    gaussian = dap_gaussian_task(histogram_vdaf(oracle.k), epsilon, options.delta)
    v_local = local.variance_per_user() / n
    v_curator = central_laplace_variance(epsilon, n, options.neighbouring)
    shuffled: dict[str, Any]
    if column["applies"]:
        shuffled = {
            "applies": True,
            "trusts": "a shuffler that does not collude with the collector",
            "guarantee": f"(epsilon, {options.delta:g})-DP against the collector; each report "
            "keeps its local epsilon against the shuffler",
            "local_epsilon": column["local_epsilon"],
            **_figures(column["exact"]["shuffled_variance"], v_local, v_curator),
        }
    else:
        shuffled = {"applies": False, "reason": column["reason"]}
    return {
        "central_epsilon": epsilon,
        "n": n,
        "reference": "curator (Laplace): share_of_gap_closed is log(local/model) over "
        "log(local/curator), std_error_over_curator the ratio of standard errors",
        "models": {
            "local": {
                "trusts": "nobody",
                "guarantee": "epsilon-LDP: each report, against everyone",
                "mechanism": local.to_config(),
                **_figures(v_local, v_local, v_curator),
            },
            "shuffled": shuffled,
            "secure_aggregation": {
                "trusts": "either of two aggregators (one honest suffices)",
                "guarantee": "epsilon-DP against the Collector and either aggregator",
                "protocol": "DAP with Prio3Histogram",
                "vdaf": dict(task.vdaf),
                "dp": task.dp,
                "noise": f"discrete Laplace of scale {task.sensitivity()}/epsilon from each "
                "of the two aggregators",
                **_figures(dap_variance(task, n), v_local, v_curator),
                "gaussian": _gaussian_alternative(gaussian, n, options.delta, v_local, v_curator),
            },
            "curator": {
                "trusts": "one curator with every raw value",
                "guarantee": "epsilon-DP against whoever reads the release",
                "noise": "Laplace of scale Delta_1/epsilon per count",
                **_figures(v_curator, v_local, v_curator),
                "geometric_variance": central_geometric_variance(epsilon, n, options.neighbouring),
            },
        },
    }


def _gaussian_alternative(
    task: TaskSpec, n: int, delta: float, local: float, curator: float
) -> dict[str, Any]:
    """The DAP row's Gaussian alternative (module docstring): its rho, the epsilon that rho
    gives at delta, each aggregator's sigma, and the figures of the Collector's result."""
    from analysis.accounting import Zcdp

    rho = task.rho()
    noise = task.noise()
    assert rho is not None and isinstance(noise, DiscreteGaussian)
    return {
        "dp": task.dp,
        "rho": float(rho),
        "delta": delta,
        "epsilon_at_delta": Zcdp(float(rho)).epsilon_at(delta),
        "guarantee": "rho-zCDP, so (epsilon, delta)-DP, against the Collector and either "
        "aggregator",
        "noise": f"discrete Gaussian of sigma^2 = {noise.sigma2} (at least Delta_2^2 / (2 rho) = "
        f"{task.l2_sensitivity_squared()}/(2 rho)) from each of the two aggregators",
        "sigma2": noise.sigma2,
        "sigma": math.sqrt(noise.sigma2),
        **_figures(dap_variance(task, n), local, curator),
    }


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    gap = utility_gap(mechanism, n, delta=options.delta, neighbouring=options.neighbouring)
    out = gap.to_dict()
    for key in ("mechanism", "epsilon", "n"):
        out.pop(key)
    column = shuffled_column(mechanism, n, options)
    out["shuffled_column"] = column
    out["trust_models"] = trust_models(mechanism, n, options, column)
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
    shuffled = None
    if column["applies"]:
        shuffled = _measured_shuffled(oracle, _items_of(truth), column, options, rng)
        out["shuffled_column_measured"] = shuffled
    out["trust_models_measured"] = _measured_trust_models(
        oracle, estimate, truth, column, shuffled, options, rng
    )
    return out


def _mse_and_error(
    runs: npt.NDArray[np.float64], truth: npt.NDArray[np.float64]
) -> tuple[float, float]:
    """The mean squared error of ``runs`` (repetitions x k) and its standard error (from the
    spread of the squared errors: coordinates and runs are independent)."""
    squared = ((runs - truth) ** 2).ravel()
    return float(np.mean(squared)), float(np.std(squared, ddof=1) / math.sqrt(squared.size))


def _measured_trust_models(
    oracle: FrequencyOracle,
    estimate: FrequencyEstimate,
    truth: npt.ArrayLike,
    column: dict[str, Any],
    shuffled: dict[str, Any] | None,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Each trust model measured on the same true histogram (mean squared error per item beside
    its exact expectation): local and shuffled from perturbed reports (the shuffled column's,
    else this estimate), secure aggregation with the DAP task's own noise sampler and the curator
    on the truth, each over ``options.repetitions`` runs."""
    counts = np.asarray(truth, dtype=np.float64)
    n = estimate.n
    frequencies = counts / counts.sum()
    epsilon = _central_epsilon(oracle, column)
    out: dict[str, Any] = {"central_epsilon": epsilon, "repetitions": options.repetitions}
    if shuffled is not None:
        for name, key in (("local", "local_only"), ("shuffled", "shuffled")):
            out[name] = {
                "mse": shuffled[f"{key}_mse"],
                "mse_std_error": shuffled[f"{key}_mse_std_error"],
                "expected": shuffled[f"{key}_expected"],
            }
    else:
        # no shuffle bound: the local model is this oracle at its own epsilon, i.e. the estimate
        variances = oracle.variance(n, frequencies)
        out["local"] = {
            "mse": _mse(estimate.frequencies, frequencies),
            "mse_std_error": float(np.sqrt(2 * np.sum(variances**2)) / frequencies.size),
            "expected": float(np.mean(variances)),
        }
        out["shuffled"] = {"applies": False, "reason": column["reason"]}
    task = dap_task(histogram_vdaf(oracle.k), epsilon)
    gaussian = dap_gaussian_task(histogram_vdaf(oracle.k), epsilon, options.delta)
    runs = {
        "secure_aggregation": (
            [run_dap(counts, task, rng=rng) for _ in range(options.repetitions)],
            dap_variance(task, n),
        ),
        "curator": (
            [
                run_central_laplace(counts, epsilon, neighbouring=options.neighbouring, rng=rng)
                for _ in range(options.repetitions)
            ],
            central_laplace_variance(epsilon, n, options.neighbouring),
        ),
        # drawn last, so the other models' seeded draws are those they had without it
        "secure_aggregation_gaussian": (
            [run_dap(counts, gaussian, rng=rng) for _ in range(options.repetitions)],
            dap_variance(gaussian, n),
        ),
    }
    for name, (estimates, expected) in runs.items():
        mse, error = _mse_and_error(np.asarray(estimates), frequencies)
        out[name] = {"mse": mse, "mse_std_error": error, "expected": expected}
    out["secure_aggregation"]["gaussian"] = out.pop("secure_aggregation_gaussian")
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
