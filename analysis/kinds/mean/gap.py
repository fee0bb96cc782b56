"""The central gap of mean campaigns (the numeric mechanisms; docs/math/central-and-shuffle.md).

The local campaign estimates the mean of values clipped to the mechanism's input set: the
interval [lower, upper] (a scalar), the box [lower, upper]^dim, or the L2 ball of radius
``clip_norm`` (the vector Gaussian). A trusted curator at the same epsilon releases the sum of
the clipped values, centred on the set's centre, with noise, n public:

- **Laplace** on the sum with Delta_1 the L1 diameter of the input set under ``replace`` (one
  user's value replaced by any other: (upper - lower) per coordinate, dim (upper - lower) for
  the box, 2 clip_norm sqrt(dim) for the ball) and half of it under ``add-remove`` (one centred
  value more or less): Var[mean] = 2 (Delta_1/epsilon)^2 / n^2 per coordinate.
- **analytic Gaussian** (Balle & Wang, ICML 2018) with Delta_2 the L2 diameter ((upper - lower)
  sqrt(dim) for the box, 2 clip_norm for the ball; half under ``add-remove``):
  Var[mean] = sigma^2 / n^2 per coordinate.

Both exact. **Secure aggregation** (a scalar mean; docs/math/central-and-shuffle.md): a DAP
task of Prio3Sum with ``max_measurement`` M = :data:`DAP_SUM_MAX_MEASUREMENT`; each device
rounds (x - lower) M / span to an integer at random (up or down, unbiased), and each of the two
aggregators adds discrete Laplace noise of scale M/epsilon (the task's sensitivity) to the sum
(Cook 2024): Var[mean] = span^2 (2 Var[DL(M/epsilon)] / M^2 + sum_i p_i (1 - p_i) / M^2) / n^2
with p_i the rounding's fractional part, at most span^2/(4 M^2 n) for the rounding.

The LDP variance is the mechanism's exact per-report one (``variance``):
Var[mean] = (1/n^2) sum_i Var(x_i). Without the truth: at the worst-case value
(``worst_case_variance``, a data-free bound for a fixed population) and at the centre of the
input set; with the truth, at the true values. Measured in simulation: values drawn as the
simulation says, perturbed by the mechanism, the mean estimated by ``analysis.estimation``,
against the curator's noisy mean over ``repetitions`` runs (a memoizing mechanism by each user's
first report as a new device).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    dap_noise,
    dap_task,
    dap_variance,
    first_reports,
    require_kind,
    zipf_weights,
)
from analysis.kinds.mean.estimate import MeanEstimate, estimate_mean
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma
from client_sdk.mechanisms.numeric import NumericMechanism

__all__ = [
    "DAP_SUM_MAX_MEASUREMENT",
    "exact_gap",
    "measured_gap",
    "secure_aggregation",
    "sensitivities",
    "simulate_values",
    "simulated_gap",
]

FloatArray = npt.NDArray[np.float64]
DAP_SUM_MAX_MEASUREMENT = 1023
"""The Prio3Sum grid of the secure-aggregation column: 10 bits, a step of span/1023 (the
rounding's variance is then far below the noise's at any n up to about 10^9 at epsilon 1)."""
SIMULATED_BUCKETS = 10
"""``zipf``/``uniform`` draw one of this many equal buckets of the range, then a point in it."""


def _numeric(mechanism: Mechanism) -> NumericMechanism:
    return require_kind(mechanism, NumericMechanism, "a numeric (mean) mechanism")


def _ball_radius(m: NumericMechanism) -> float | None:
    radius = getattr(m, "clip_norm", None)
    return float(radius) if radius is not None else None


def _bounds(m: NumericMechanism) -> tuple[float, float]:
    """[lower, upper] of a scalar or box mechanism (every one but the ball has them)."""
    lower, upper = (float(getattr(m, name)) for name in ("lower", "upper"))
    return lower, upper


def sensitivities(m: NumericMechanism, neighbouring: str) -> tuple[float, float]:
    """(Delta_1, Delta_2) of the centred sum of the clipped values (module docstring)."""
    from analysis.kinds._common.gap import laplace_sensitivity

    factor = laplace_sensitivity(neighbouring) / 2.0  # 1 under replace, 1/2 under add-remove
    radius = _ball_radius(m)
    if radius is not None:
        return factor * 2 * radius * math.sqrt(m.width), factor * 2 * radius
    lower, upper = _bounds(m)
    span = upper - lower
    return factor * m.width * span, factor * math.sqrt(m.width) * span


def _central(m: NumericMechanism, n: int, options: GapOptions) -> dict[str, float]:
    l1, l2 = sensitivities(m, options.neighbouring)
    epsilon = m.privacy_epsilon
    sigma = analytic_gaussian_sigma(epsilon, options.delta, l2)
    return {
        "laplace_scale": l1 / epsilon,
        "gaussian_sigma": sigma,
        "laplace_variance": 2 * (l1 / epsilon) ** 2 / n**2,
        "gaussian_variance": sigma**2 / n**2,
        "l1_sensitivity": l1,
        "l2_sensitivity": l2,
    }


def _center_value(m: NumericMechanism) -> Any:
    return m.center if m.value_shape else float(m.center[0])


def secure_aggregation(m: NumericMechanism, n: int, options: GapOptions) -> dict[str, Any]:
    """The same mean by a DAP task of Prio3Sum at the mechanism's epsilon (module docstring):
    the noise's variance exactly, the rounding's at most span^2/(4 M^2 n)."""
    if m.value_shape or _ball_radius(m) is not None:
        return {
            "applies": False,
            "reason": "compared for a scalar mean (Prio3Sum); a vector would take SumVec",
        }
    lower, upper = _bounds(m)
    step = (upper - lower) / DAP_SUM_MAX_MEASUREMENT
    task = dap_task({"type": "sum", "max_measurement": DAP_SUM_MAX_MEASUREMENT}, m.privacy_epsilon)
    noise = dap_variance(task, n) * step**2
    rounding = step**2 / (4 * n)
    laplace = _central(m, n, options)["laplace_variance"]
    return {
        "applies": True,
        "trusts": "either of two aggregators (one honest suffices)",
        "vdaf": dict(task.vdaf),
        "dp": task.dp,
        "step": step,
        "noise_variance": noise,
        "rounding_variance_at_most": rounding,
        "variance_at_most": noise + rounding,
        "std_error_at_most": math.sqrt(noise + rounding),
        "std_error_over_central_laplace": math.sqrt((noise + rounding) / laplace),
    }


def _dap_runs(
    m: NumericMechanism, values: FloatArray, options: GapOptions, rng: np.random.Generator
) -> tuple[FloatArray, float]:
    """``options.repetitions`` means by the secure-aggregation column (each device's random
    rounding, then the noise from the task's sampler) and their exact variance at ``values``."""
    lower, upper = _bounds(m)
    grid = (np.clip(values, lower, upper) - lower) / (upper - lower) * DAP_SUM_MAX_MEASUREMENT
    floor = np.floor(grid)
    fraction = grid - floor
    task = dap_task({"type": "sum", "max_measurement": DAP_SUM_MAX_MEASUREMENT}, m.privacy_epsilon)
    step, n = (upper - lower) / DAP_SUM_MAX_MEASUREMENT, values.size
    means = np.empty(options.repetitions)
    for r in range(options.repetitions):
        rounded = floor + (rng.random(n) < fraction)
        noisy = float(rounded.sum()) + float(dap_noise(task, 1, rng=rng)[0])
        means[r] = lower + step * noisy / n
    expected = (
        step**2 * (float(np.sum(fraction * (1 - fraction))) / n**2)
        + dap_variance(task, n) * step**2
    )
    return means, expected


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _numeric(mechanism)
    central = _central(m, n, options)
    worst = float(np.max(m.worst_case_variance())) / n
    center = _center_value(m)
    at_center = float(np.max(m.variance(center[None] if m.value_shape else center))) / n
    return {
        "dim": m.width,
        "input_set": "ball" if _ball_radius(m) is not None else "box",
        "ldp_variance_worst_case": worst,
        "ldp_variance_at_center": at_center,
        "central_laplace_variance": central["laplace_variance"],
        "central_gaussian_variance": central["gaussian_variance"],
        "central_laplace_scale": central["laplace_scale"],
        "central_gaussian_sigma": central["gaussian_sigma"],
        "l1_sensitivity": central["l1_sensitivity"],
        "l2_sensitivity": central["l2_sensitivity"],
        "ldp_std_error_worst_case": math.sqrt(worst),
        "central_laplace_std_error": math.sqrt(central["laplace_variance"]),
        "central_gaussian_std_error": math.sqrt(central["gaussian_variance"]),
        "variance_ratio": worst / central["laplace_variance"],
        "variance_ratio_at_center": at_center / central["laplace_variance"],
        "gaussian_variance_ratio": worst / central["gaussian_variance"],
        "exact": "per coordinate: LDP at the worst-case value and at the centre of the input set "
        "(the mechanism's variance formula); central Laplace and analytic Gaussian on the "
        "centred sum",
        "secure_aggregation": secure_aggregation(m, n, options),
    }


def _clipped(m: NumericMechanism, values: FloatArray) -> FloatArray:
    radius = _ball_radius(m)
    if radius is not None:
        norms = np.linalg.norm(values, axis=1, keepdims=True)
        return np.asarray(values * np.minimum(1.0, radius / np.maximum(norms, 1e-300)))
    return np.clip(values, *_bounds(m))


def measured_gap(
    mechanism: Mechanism,
    estimate: MeanEstimate,
    truth: npt.ArrayLike,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the users' true values, shape (n,) or (n, dim)."""
    m = _numeric(mechanism)
    values = np.asarray(truth, dtype=np.float64)
    n = estimate.n
    if values.shape != (n, *m.value_shape):
        raise ValueError(
            f"the true values have shape {values.shape}; expected {(n, *m.value_shape)}"
        )
    true_mean = _clipped(m, values.reshape(n, -1) if m.value_shape else values).mean(axis=0)
    local = np.asarray(estimate.mean, dtype=np.float64).reshape(-1)
    expected = np.asarray(m.variance(values), dtype=np.float64).reshape(n, -1).mean(axis=0) / n
    central = _central(m, n, options)
    shape = (options.repetitions, m.width)
    laplace = true_mean + rng.laplace(0.0, central["laplace_scale"], shape) / n
    gaussian = true_mean + rng.normal(0.0, central["gaussian_sigma"], shape) / n
    error = local - np.reshape(true_mean, -1)
    dap: dict[str, Any] = {}
    if secure_aggregation(m, n, options)["applies"]:
        means, dap_expected = _dap_runs(m, values, options, rng)
        dap = {
            "secure_aggregation_mse": float(np.mean((means - true_mean) ** 2)),
            "secure_aggregation_expected": dap_expected,
        }
    return {
        "true_mean": np.reshape(true_mean, -1).tolist() if m.value_shape else float(true_mean),
        "ldp_squared_error": float(np.mean(error**2)),
        "ldp_expected": float(np.mean(expected)),
        "ldp_z": (error / np.sqrt(expected)).tolist()
        if m.value_shape
        else float(error[0] / math.sqrt(expected[0])),
        "central_laplace_mse": float(np.mean((laplace - true_mean) ** 2)),
        "central_laplace_expected": central["laplace_variance"],
        "central_gaussian_mse": float(np.mean((gaussian - true_mean) ** 2)),
        "central_gaussian_expected": central["gaussian_variance"],
        **dap,
        "measured": True,
        "note": "ldp_expected: the exact variance of the mean at the true values (averaged over "
        "coordinates); the curator's errors averaged over its repetitions",
    }


def simulate_values(
    m: NumericMechanism, n: int, simulation: Simulation, rng: np.random.Generator
) -> FloatArray:
    """Each coordinate on [lo, hi] (the bounds; the ball's inscribed cube for the vector
    Gaussian): ``lognormal[:SIGMA]`` of median a fifth of the way up, clipped; ``zipf``/
    ``uniform``: one of ``SIMULATED_BUCKETS`` buckets by the simulation's shares (the lowest the
    most frequent), uniform inside it."""
    radius = _ball_radius(m)
    if radius is not None:
        lo, hi = -radius / math.sqrt(m.width), radius / math.sqrt(m.width)
    else:
        lo, hi = _bounds(m)
    size = (n, m.width) if m.value_shape else n
    span = hi - lo
    if simulation.family == "lognormal":
        assert simulation.parameter is not None
        raw = rng.lognormal(math.log(span / 5), simulation.parameter, size)
        return np.asarray(np.clip(lo + raw, lo, hi))
    shares = zipf_weights(SIMULATED_BUCKETS, simulation)
    buckets = rng.choice(SIMULATED_BUCKETS, size=size, p=shares)
    return np.asarray(lo + (buckets + rng.random(size)) * span / SIMULATED_BUCKETS)


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _numeric(mechanism)
    values = simulate_values(m, n, simulation, rng)
    estimate = estimate_mean(m, first_reports(m, values, rng))
    return measured_gap(m, estimate, values, options, rng)
