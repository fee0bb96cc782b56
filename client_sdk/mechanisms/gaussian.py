"""The Gaussian mechanism for bounded scalars and L2-clipped vectors, (epsilon, delta)-LDP.

**Calibration** (docs/math/numeric.md). Under local DP any two inputs are neighbours, so the
L2 sensitivity is the diameter of the input set: ``upper - lower`` for a scalar, ``2 clip_norm``
for a vector clipped to the ball of radius ``clip_norm``. ``sigma`` is the analytic Gaussian
mechanism's (Balle & Wang, ICML 2018; ``gaussian_calibration``), the smallest noise for which
N(0, sigma^2) is (epsilon, delta)-DP; ``calibration="classic"`` uses the textbook
Delta sqrt(2 ln(1.25/delta))/epsilon instead (for comparison; refused for epsilon >= 1).

**Exact sampling on a grid** (docs/math/numeric.md; docs/architecture.md). The device adds
discrete Gaussian noise (Canonne, Kamath & Steinke, NeurIPS 2020) to the value snapped to a grid:

* grid step g: for a scalar, (upper - lower)/N with N = ceil((upper - lower) 2**22 / sigma) by
  default (so sigma is about 2**22 steps) or N = ceil((upper - lower)/granularity); for a vector,
  g = sigma/2**22 by default, or ``granularity``. The value (clipped) is snapped to the grid by
  randomized rounding per coordinate, which is unbiased;
* grid sensitivity Delta_g: N for a scalar (snapped values lie in {0..N}); for a vector
  2 clip_norm/g (1 + 2**-40) + 2 sqrt(dim), since rounding moves a point by less than one step
  per coordinate (so by less than sqrt(dim) in L2);
* noise N_Z(0, s^2) per coordinate with s^2 = t*m >= sigma_1^2 + 16^2, where sigma_1 is the
  calibrated sigma scaled to sensitivity Delta_g (in grid steps).

**Privacy claim of the discretized mechanism.** With s^2 = sigma_1^2 + 16^2, the discrete
Gaussian over Z^dim is, up to a statistical distance below 1e-1000, a post-processing of the
continuous Gaussian mechanism with noise sigma_1 on the snapped input (the convolution lemma:
Peikert, CRYPTO 2010, Theorem 3.1, with a continuous first Gaussian; 16 grid steps is far above
the smoothing parameter of Z^dim, Micciancio & Regev 2004, Lemma 3.3). So the mechanism is
(epsilon, delta_impl)-LDP with delta_impl = the analytic delta of noise sqrt(s^2 - 256) at
sensitivity Delta_g (``implemented_delta``), and delta_impl <= delta by construction (the
tests check it, and, for a scalar on a coarse grid, check the exact discrete privacy loss of
CKS 2020, Theorem 7, against it too). The extra 16^2 and the grid cost a relative 1e-11 of
noise variance for a scalar; for a vector, the rounding slack raises the noise's standard
deviation above ``sigma`` by a relative sqrt(dim) g / clip_norm (about 2e-6 sqrt(dim)/epsilon at
delta = 1e-5; ``noise_std`` is the exact figure).

The wire carries the noisy grid indices (an integer, or a list of ``dim`` integers, each of
absolute value < 2**53); the server's estimate is lower + index * g (index * g for vectors),
unbiased, with variance g^2 (Var Z + phi(1 - phi)) per coordinate.

**Impossible reports are refused.** ``parse_wire`` accepts a scalar index only in [-M, N + M]
and a vector's coordinates only in [-(B + M), B + M] (B = ceil(clip_norm/g (1 + 2**-40)), the
largest snapped coordinate), with M = ``DiscreteGaussian.magnitude_bound`` at probability
2**-64 (2**-64/dim per coordinate for a vector; about 9.5 s, i.e. 9.5 sigma). An honest
device's report is refused with probability at most 2**-64 whatever its value (the
false-rejection rate per report), and one accepted report moves the mean of n by at most
(high - low) g/n per coordinate (``estimate_range``), where an index of 2**53 - 1 used to
move a mean on [0, 1] to 9.1e6.
"""

from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_probability
from client_sdk.mechanisms._wire import (
    IMPLAUSIBLE_PROBABILITY,
    SIGNED_WIRE_LIMIT,
    parse_int_payloads,
    parse_int_vectors,
    widest_int,
)
from client_sdk.mechanisms.base import FloatArray, Reports, WireFormatError
from client_sdk.mechanisms.gaussian_calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
)
from client_sdk.mechanisms.grid import (
    grid_steps,
    randomized_round,
    rounding_split,
)
from client_sdk.mechanisms.numeric import (
    NumericMechanism,
)
from client_sdk.mechanisms.numeric_checks import (
    MAX_DIM,
    check_bounds,
    check_positive,
    check_scalar_values,
    check_vector_values,
)
from client_sdk.mechanisms.privacy import ApproximateEvent, GaussianEvent
from client_sdk.randomness import RandomSource
from client_sdk.sampling import MAX_GAUSSIAN_T, DiscreteGaussian

SIGMA_GRID_BITS = 22
"""By default sigma spans about 2**22 grid steps."""
SMOOTHING_SIGMA = 16
"""The share of the discrete noise (in grid steps) that the convolution argument sets aside."""
MIN_GRID_SIGMA = 64
"""sigma_1 must span at least this many grid steps (the grid must be fine against the noise)."""
CALIBRATIONS = ("analytic", "classic")


@dataclasses.dataclass(frozen=True)
class Gaussian(NumericMechanism):
    """The Gaussian mechanism, scalar or vector.

    Scalar config: ``{"mechanism": "gaussian", "epsilon", "delta", "lower", "upper"}``. Vector
    config: ``{"mechanism": "gaussian", "epsilon", "delta", "dim", "clip_norm"}`` (values are
    clipped to the L2 ball of radius ``clip_norm``). Optional: ``"calibration"`` ("analytic",
    the default, or "classic") and ``"granularity"`` (the grid step).
    """

    name: ClassVar[str] = "gaussian"
    epsilon: float
    delta: float
    lower: float | None = None
    upper: float | None = None
    dim: int | None = None
    clip_norm: float | None = None
    calibration: str = "analytic"
    granularity: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_probability(self.delta, "delta"))
        scalar = self.lower is not None or self.upper is not None
        vector = self.dim is not None or self.clip_norm is not None
        if scalar and vector:
            raise ValueError(
                "gaussian takes lower/upper (a scalar) or dim/clip_norm (a vector), not both; "
                f"got lower={self.lower!r}, upper={self.upper!r}, dim={self.dim!r}, "
                f"clip_norm={self.clip_norm!r}"
            )
        if scalar:
            lower, upper = check_bounds(self.lower, self.upper)
            object.__setattr__(self, "lower", lower)
            object.__setattr__(self, "upper", upper)
        elif vector:
            if self.dim is None or self.clip_norm is None:
                raise ValueError(
                    "a vector gaussian needs both dim and clip_norm; "
                    f"got dim={self.dim!r}, clip_norm={self.clip_norm!r}"
                )
            object.__setattr__(self, "dim", check_int(self.dim, "dim", minimum=1, maximum=MAX_DIM))
            object.__setattr__(self, "clip_norm", check_positive(self.clip_norm, "clip_norm"))
        else:
            raise ValueError(
                "gaussian needs lower and upper (a scalar) or dim and clip_norm (a vector)"
            )
        if self.calibration not in CALIBRATIONS:
            raise ValueError(
                f"calibration must be one of {', '.join(CALIBRATIONS)}; got {self.calibration!r}"
            )
        if self.granularity is not None:
            object.__setattr__(self, "granularity", check_positive(self.granularity, "granularity"))
        _ = self.noise  # validates the grid against sigma

    # ---- calibration -------------------------------------------------------------------------

    @property
    def sensitivity(self) -> float:
        """The L2 diameter of the input set: upper - lower, or 2 clip_norm."""
        if self.dim is None:
            assert self.lower is not None and self.upper is not None
            return self.upper - self.lower
        assert self.clip_norm is not None
        return 2.0 * self.clip_norm

    @cached_property
    def sigma(self) -> float:
        """The calibrated noise scale, in the value's units (analytic unless ``classic``)."""
        if self.calibration == "classic":
            return classic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)
        return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)

    @property
    def privacy_delta(self) -> float:
        return self.delta

    def privacy_event(self) -> GaussianEvent:
        """Gaussian noise of ``sigma`` over the L2 sensitivity, with the (epsilon, delta) claim.

        The grid-sampled noise is a post-processing of a continuous Gaussian at least that wide
        (module docstring), so this describes the mechanism from above.
        """
        claim = ApproximateEvent(self.privacy_epsilon, self.privacy_delta)
        return GaussianEvent(self.sigma / self.sensitivity, claim=claim)

    # ---- the grid and the noise ----------------------------------------------------------------

    @cached_property
    def grid_steps(self) -> int | None:
        """N, the grid steps across [lower, upper] (scalars); None for vectors."""
        if self.dim is not None:
            return None
        width = self.sensitivity
        default = math.ceil(width * (1 << SIGMA_GRID_BITS) / self.sigma)
        return grid_steps(width, self.granularity, default)

    @cached_property
    def grid_step(self) -> float:
        """g, in the value's units."""
        if self.grid_steps is not None:
            return self.sensitivity / self.grid_steps
        if self.granularity is not None:
            return self.granularity
        return self.sigma / (1 << SIGMA_GRID_BITS)

    @cached_property
    def grid_sensitivity(self) -> float:
        """Delta_g: the largest L2 distance between two snapped inputs, in grid steps."""
        if self.grid_steps is not None:
            return float(self.grid_steps)
        assert self.dim is not None and self.clip_norm is not None
        radius = self.clip_norm / self.grid_step * (1 + 2.0**-40)
        return 2 * radius + 2 * math.sqrt(self.dim)

    @cached_property
    def noise(self) -> DiscreteGaussian:
        """N_Z(0, t*m) with t*m >= sigma_1^2 + 16^2 (grid steps; see the module docstring)."""
        sigma_1 = self.sigma * self.grid_sensitivity / self.sensitivity
        if sigma_1 < MIN_GRID_SIGMA:
            raise ValueError(
                f"granularity={self.granularity!r} is too coarse: the grid step must be at most "
                f"sigma/{MIN_GRID_SIGMA} (sigma = {self.sigma:.6g})"
            )
        if sigma_1 > MAX_GAUSSIAN_T * 0.99:
            raise ValueError(
                f"granularity={self.granularity!r} is too fine: the grid step must be at least "
                f"sigma/2**23 (sigma = {self.sigma:.6g})"
            )
        return DiscreteGaussian.at_least(sigma_1**2 + SMOOTHING_SIGMA**2)

    @property
    def noise_std(self) -> float:
        """The standard deviation of the noise actually added, in the value's units (slightly
        above ``sigma``: see the module docstring)."""
        return self.grid_step * math.sqrt(self.noise.variance())

    def implemented_delta(self) -> float:
        """The delta the discretized mechanism guarantees at ``epsilon`` (at most ``delta``)."""
        sigma_1 = math.sqrt(self.noise.sigma2 - SMOOTHING_SIGMA**2)
        return analytic_gaussian_delta(sigma_1, self.epsilon, self.grid_sensitivity)

    # ---- shape -------------------------------------------------------------------------------

    @property
    def value_shape(self) -> tuple[int, ...]:
        return () if self.dim is None else (self.dim,)

    @property
    def center(self) -> FloatArray:
        if self.dim is None:
            assert self.lower is not None and self.upper is not None
            return np.array([(self.lower + self.upper) / 2.0])
        return np.zeros(self.dim)

    def _grid_position(self, values: Any) -> FloatArray:
        """Clipped values, in grid steps from lower (scalars) or from 0 (vectors)."""
        if self.dim is None:
            assert self.lower is not None and self.upper is not None
            x = np.clip(check_scalar_values(values), self.lower, self.upper)
            return (x - self.lower) / self.grid_step
        assert self.clip_norm is not None
        x = check_vector_values(values, self.dim)
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))
        shrink = np.minimum(1.0, self.clip_norm / np.maximum(norms, np.finfo(float).tiny))
        return x * (shrink / self.grid_step)[:, None]

    # ---- device side -------------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        position = self._grid_position(values)
        snapped = randomized_round(rng, position, top=self.grid_steps)
        noise = self.noise.sample(rng, snapped.size).reshape(snapped.shape)
        return snapped + noise

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        low, high = self.plausible_range
        widest = widest_int(low, high + 1)
        return widest if self.dim is None else [widest] * self.dim

    def to_wire(self, reports: Reports) -> list[Any]:
        array = np.asarray(reports, dtype=np.int64)
        return array.tolist()

    @cached_property
    def plausible_range(self) -> tuple[int, int]:
        """The accepted indices (per coordinate): outside them an honest report falls with
        probability at most ``IMPLAUSIBLE_PROBABILITY`` (module docstring)."""
        if self.grid_steps is not None:
            margin = self.noise.magnitude_bound(IMPLAUSIBLE_PROBABILITY)
            low, high = -margin, self.grid_steps + margin
        else:
            assert self.dim is not None and self.clip_norm is not None
            margin = self.noise.magnitude_bound(IMPLAUSIBLE_PROBABILITY / self.dim)
            largest = math.ceil(self.clip_norm / self.grid_step * (1 + 2.0**-40))
            low, high = -(largest + margin), largest + margin
        return max(1 - SIGNED_WIRE_LIMIT, low), min(SIGNED_WIRE_LIMIT - 1, high)

    def estimate_range(self) -> tuple[float, float]:
        """The smallest and largest estimate (per coordinate) one accepted report can have:
        one report moves the mean of n by at most (high - low)/n per coordinate."""
        low, high = self.plausible_range
        offset = 0.0 if self.lower is None else self.lower
        return offset + low * self.grid_step, offset + high * self.grid_step

    def parse_wire(self, payloads: Any) -> tuple[Reports, list[WireFormatError]]:
        low, high = self.plausible_range
        if self.dim is None:
            return parse_int_payloads(payloads, high + 1, "grid index", low=low)
        return parse_int_vectors(payloads, self.dim, low, high + 1, "grid index")

    # ---- server side -------------------------------------------------------------------------

    def estimates(self, reports: Reports) -> FloatArray:
        indices = np.asarray(reports, dtype=np.float64)
        if self.dim is None:
            assert self.lower is not None
            return self.lower + indices * self.grid_step
        return indices * self.grid_step

    def variance(self, values: Any) -> FloatArray:
        _, phi = rounding_split(self._grid_position(values), self.grid_steps)
        return self.grid_step**2 * (self.noise.variance() + phi * (1 - phi))

    def worst_case_variance(self) -> FloatArray:
        return np.full(self.width, self.grid_step**2 * (self.noise.variance() + 0.25))
