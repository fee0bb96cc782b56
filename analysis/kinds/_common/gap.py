"""The utility gap: what the local model costs against a trusted central curator.

docs/math/central-and-shuffle.md. One histogram over k items, n users, one item each, the same
epsilon:

- **LDP**: the per-item variance of the frequency estimate, its f-independent term
  ``mechanism.variance_per_user() / n`` (Var*/n; the mechanism's own number).
- **Central Laplace** on the true histogram, n public: noise Lap(Delta_1/epsilon) per count, so
  Var[f_v] = 2 Delta_1^2 / (n^2 epsilon^2). Neighbouring datasets differ by one user changing
  value (``replace``, Delta_1 = 2: one count -1, another +1), giving 8/(n^2 eps^2); ``add-remove``
  (one user more or less, Delta_1 = 1) gives 2/(n^2 eps^2).
- **Central Gaussian** (the analytic calibration of Balle & Wang, ICML 2018, through
  ``client_sdk.mechanisms.gaussian_calibration``): Delta_2 = sqrt(2) under ``replace``, 1 under
  ``add-remove``; Var[f_v] = sigma^2 / n^2.
- **The price of locality** R = Var_LDP / Var_central, about n eps^2 Var*/8 (replace) or /2
  (add-remove): Theta(n) for every epsilon = O(1).
- **Users needed**: the LDP needs R * n users to match the central error at n users, and the
  central model needs n / sqrt(R) to match the LDP error at n; for a target standard deviation
  alpha on one frequency, n_L = Var*/alpha^2 against n_C = Delta_1 sqrt(2)/(eps alpha)
  (Laplace) or sigma/alpha (Gaussian).
- **Shuffling** the same reports: the central (epsilon, delta) they give behind a shuffler
  (:mod:`client_sdk.amplification`).
- **Secure aggregation (DAP)**: two aggregators each add discrete Laplace noise of scale
  Delta/epsilon to their share of the true histogram (Cook 2024; ``collector.dap.task``), so the
  Collector's count carries two independent draws: Var[f_v] = 2 Var[DL(Delta/epsilon)] / n^2
  (:func:`dap_variance`; docs/math/dap-noise.md), twice the geometric curator's.

With ground truth (simulations, the demo), :func:`empirical_gap` measures both errors: the LDP
one from real perturbed reports, the central one by running the central mechanisms on the true
histogram (numpy's generator: this is a simulation of a curator, not a device).

**Every estimate kind** compares itself with a curator through its own ``gap.py``
(``analysis/kinds/<kind>/gap.py``), which reads the baselines, the options and the simulated
populations defined here; :mod:`analysis.gap` dispatches on the kind through
:data:`analysis.kinds.KINDS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from analysis.kinds.frequencies.estimate import FrequencyEstimate
from client_sdk.amplification import ShuffleBound, shuffle_bound
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.sampling import DiscreteLaplace, floor_fraction

if TYPE_CHECKING:
    from collector.dap.task import TaskSpec

__all__ = [
    "DEFAULT_DELTA",
    "NEIGHBOURING",
    "EmpiricalGap",
    "ExactGap",
    "GapOptions",
    "MeasuredGap",
    "SimulatedGap",
    "Simulation",
    "UtilityGap",
    "central_gaussian_sigma",
    "central_gaussian_variance",
    "central_geometric_variance",
    "central_laplace_variance",
    "dap_gaussian_rho",
    "dap_gaussian_task",
    "dap_noise",
    "dap_task",
    "dap_variance",
    "empirical_gap",
    "error_curve",
    "first_reports",
    "gap_document",
    "histogram_vdaf",
    "laplace_sensitivity",
    "ldp_variance",
    "parse_simulation",
    "require_kind",
    "run_central_gaussian",
    "run_central_laplace",
    "run_dap",
    "users_needed",
    "utility_gap",
    "zipf_weights",
]

NEIGHBOURING: tuple[str, ...] = ("replace", "add-remove")
DEFAULT_DELTA = 1e-6
"""The delta of the Gaussian baseline and of the shuffle bound when none is given."""

FloatArray = npt.NDArray[np.float64]


def _check_neighbouring(neighbouring: str) -> str:
    if neighbouring not in NEIGHBOURING:
        raise ValueError(
            f"neighbouring must be one of {', '.join(NEIGHBOURING)}; got {neighbouring!r}"
        )
    return neighbouring


def require_kind(mechanism: Mechanism, kind: type[Any], what: str) -> Any:
    """``mechanism`` as a ``kind`` (each gap module's entry check), else a ValueError naming it:
    "mechanism 'oue' is not {what}"."""
    if not isinstance(mechanism, kind):
        raise ValueError(f"mechanism {mechanism.name!r} is not {what}")
    return mechanism


def _frequency_oracle(mechanism: Mechanism) -> FrequencyOracle:
    if not isinstance(mechanism, FrequencyOracle):
        raise ValueError(
            "the utility gap compares histograms: it needs a frequency oracle; got mechanism "
            f"{mechanism.name!r}"
        )
    return mechanism


def laplace_sensitivity(neighbouring: str = "replace") -> float:
    """Delta_1 of a histogram: 2 when one user changes value, 1 when one is added or removed."""
    return 2.0 if _check_neighbouring(neighbouring) == "replace" else 1.0


def gaussian_sensitivity(neighbouring: str = "replace") -> float:
    """Delta_2 of a histogram: sqrt(2) when one user changes value, 1 when added or removed."""
    return math.sqrt(2.0) if _check_neighbouring(neighbouring) == "replace" else 1.0


def ldp_variance(mechanism: Mechanism, n: int) -> float:
    """The f-independent per-item variance of the LDP frequency estimate: Var*/n."""
    return _frequency_oracle(mechanism).variance_per_user() / check_int(n, "n", minimum=1)


def central_laplace_variance(epsilon: float, n: int, neighbouring: str = "replace") -> float:
    """Var[f_v] of the central Laplace histogram: 2 (Delta_1/epsilon)^2 / n^2."""
    scale = laplace_sensitivity(neighbouring) / check_epsilon(epsilon)
    return 2.0 * scale * scale / check_int(n, "n", minimum=1) ** 2


def central_geometric_variance(epsilon: float, n: int, neighbouring: str = "replace") -> float:
    """Var[f_v] of a curator adding one discrete Laplace (two-sided geometric) draw of scale
    Delta_1/epsilon to each count (Ghosh, Roughgarden, Sundararajan, STOC 2009): 2r/(1-r)^2/n^2,
    r = exp(-epsilon/Delta_1)."""
    scale = Fraction(laplace_sensitivity(neighbouring)) / _rational_epsilon(epsilon)
    return DiscreteLaplace(scale).variance() / check_int(n, "n", minimum=1) ** 2


def _rational_epsilon(epsilon: float) -> Fraction:
    """epsilon as a task file would write it: its shortest decimal (``1.3`` is 13/10, as
    ``TaskSpec`` reads ``"laplace:1.3"``) when that has a denominator of at most 10^9, else
    rounded *down* to such a fraction (the exact samplers take a rational scale Delta/epsilon,
    numerator at most 2^40 for Delta up to 1099; rounding down only adds noise, so the guarantee
    holds, and moves the figures by a relative 1e-9 at most)."""
    decimal = Fraction(repr(check_epsilon(epsilon)))
    return decimal if decimal.denominator <= 10**9 else floor_fraction(decimal, 10**9)


def dap_task(vdaf: Mapping[str, Any], epsilon: float) -> TaskSpec:
    """The DAP task of ``vdaf`` with ``"dp": "laplace:EPSILON"``: its ``sensitivity``, ``noise``
    and ``noise_std_error`` are the ones the aggregators use (``collector.dap.task``), so the
    secure-aggregation column is the real task's noise, not a second formula. The endpoints are
    placeholders: nothing is sent."""
    return _dap_spec(vdaf, f"laplace:{_rational_epsilon(epsilon)}")


def dap_gaussian_rho(epsilon: float, delta: float) -> Fraction:
    """The rho of the Gaussian alternative at (epsilon, delta): the largest rho whose zCDP
    conversion is within epsilon at delta (``analysis.accounting.Zcdp.at_epsilon``: CKS 2020,
    Corollary 13, the conversion a device's policy applies), rounded *down* to a fraction of
    denominator at most 10^9 (less rho is more noise: the guarantee holds)."""
    from analysis.accounting import Zcdp

    rho = Zcdp.at_epsilon(check_epsilon(epsilon), delta).rho
    return floor_fraction(Fraction(rho), 10**9)


def dap_gaussian_task(vdaf: Mapping[str, Any], epsilon: float, delta: float) -> TaskSpec:
    """The DAP task of ``vdaf`` with ``"dp": "gaussian:RHO"`` at the same (epsilon, delta)
    (:func:`dap_gaussian_rho`): each aggregator's discrete Gaussian of sigma^2 at least
    Delta_2^2 / (2 rho), as ``collector.dap.task`` draws it (docs/math/dap-noise.md)."""
    return _dap_spec(vdaf, f"gaussian:{dap_gaussian_rho(epsilon, delta)}")


def _dap_spec(vdaf: Mapping[str, Any], dp: str) -> TaskSpec:
    from client_sdk.dap.messages import TASK_ID_SIZE
    from collector.dap.task import TaskSpec

    return TaskSpec(
        task_id=bytes(TASK_ID_SIZE),
        task_info="gap",
        leader="https://leader.invalid/dap/",
        helper="https://helper.invalid/dap/",
        vdaf=dict(vdaf),
        min_batch_size=1,
        time_precision=1,
        dp=dp,
    )


def dap_variance(task: TaskSpec, n: int) -> float:
    """Var[f_v] of one coordinate of the Collector's result over n reports: each of the two
    aggregators adds an independent draw (docs/math/dap-noise.md), so 2 Var[noise] / n^2."""
    return task.noise_std_error() ** 2 / check_int(n, "n", minimum=1) ** 2


def histogram_vdaf(k: int) -> dict[str, Any]:
    """The Prio3Histogram of a k-item question (chunk length isqrt(k): it sets the proof's size,
    not the noise)."""
    return {"type": "histogram", "length": int(k), "chunk_length": max(1, math.isqrt(int(k)))}


def central_gaussian_sigma(epsilon: float, delta: float, neighbouring: str = "replace") -> float:
    """The analytic Gaussian mechanism's sigma on the counts (Balle & Wang 2018)."""
    return analytic_gaussian_sigma(
        check_epsilon(epsilon), delta, gaussian_sensitivity(neighbouring)
    )


def central_gaussian_variance(
    epsilon: float, delta: float, n: int, neighbouring: str = "replace"
) -> float:
    """Var[f_v] of the central analytic Gaussian histogram: sigma^2 / n^2."""
    sigma = central_gaussian_sigma(epsilon, delta, neighbouring)
    return sigma * sigma / check_int(n, "n", minimum=1) ** 2


def users_needed(
    mechanism: Mechanism,
    target_std: float,
    *,
    delta: float = DEFAULT_DELTA,
    neighbouring: str = "replace",
) -> dict[str, float]:
    """Users each model needs for a standard deviation ``target_std`` on one frequency.

    n_L = Var*/alpha^2 (LDP), n_C = sqrt(2) Delta_1/(epsilon alpha) (central Laplace: the
    standard deviation sqrt(2) Delta_1/(epsilon n) of the count over n) and sigma/alpha (central
    Gaussian). At epsilon = 1, alpha = 1e-3 these give n_L = 3.68e6 (OUE) against
    n_C = 1.4e3 (add-remove).
    """
    oracle = _frequency_oracle(mechanism)
    if not (isinstance(target_std, (int, float)) and 0 < target_std < math.inf):
        raise ValueError(f"target_std must be a positive number; got {target_std!r}")
    epsilon = oracle.privacy_epsilon
    return {
        "target_std": float(target_std),
        "ldp_users": oracle.variance_per_user() / target_std**2,
        "central_laplace_users": math.sqrt(2.0)
        * laplace_sensitivity(neighbouring)
        / (epsilon * target_std),
        "central_gaussian_users": central_gaussian_sigma(epsilon, delta, neighbouring) / target_std,
    }


@dataclasses.dataclass(frozen=True)
class UtilityGap:
    """The LDP error against the central baselines at one (mechanism, epsilon, n, delta).

    Variances are per item on the frequency scale. ``variance_ratio`` is LDP over central
    Laplace (the price of locality), ``gaussian_variance_ratio`` LDP over central Gaussian.
    ``ldp_users_for_central_laplace_error`` is how many users the local model needs to match the
    central Laplace error at n users (R n); ``central_users_for_ldp_error`` how many the central
    Laplace curator needs to match the LDP error at n (n / sqrt(R)).
    """

    mechanism: dict[str, Any]
    epsilon: float
    n: int
    delta: float
    neighbouring: str
    ldp_variance: float
    central_laplace_variance: float
    central_gaussian_variance: float
    central_gaussian_sigma: float
    shuffle: ShuffleBound | None

    @property
    def variance_ratio(self) -> float:
        return self.ldp_variance / self.central_laplace_variance

    @property
    def gaussian_variance_ratio(self) -> float:
        return self.ldp_variance / self.central_gaussian_variance

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe figures (what ``ldp-analyze gap --format json`` prints)."""
        ratio = self.variance_ratio
        gaussian_ratio = self.gaussian_variance_ratio
        out: dict[str, Any] = {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "n": self.n,
            "delta": self.delta,
            "neighbouring": self.neighbouring,
            "ldp_variance": self.ldp_variance,
            "central_laplace_variance": self.central_laplace_variance,
            "central_gaussian_variance": self.central_gaussian_variance,
            "central_gaussian_sigma": self.central_gaussian_sigma,
            "variance_ratio": ratio,
            "gaussian_variance_ratio": gaussian_ratio,
            "ldp_std_error": math.sqrt(self.ldp_variance),
            "central_laplace_std_error": math.sqrt(self.central_laplace_variance),
            "central_gaussian_std_error": math.sqrt(self.central_gaussian_variance),
            "ldp_users_for_central_laplace_error": ratio * self.n,
            "ldp_users_for_central_gaussian_error": gaussian_ratio * self.n,
            "central_laplace_users_for_ldp_error": self.n / math.sqrt(ratio),
            "central_gaussian_users_for_ldp_error": self.n / math.sqrt(gaussian_ratio),
        }
        if self.shuffle is not None:
            out.update(self.shuffle.to_dict())
        else:
            out["shuffle_epsilon"] = None
            out["shuffle_epsilon_reason"] = "not computed"
        return out


def utility_gap(
    mechanism: Mechanism,
    n: int,
    *,
    delta: float = DEFAULT_DELTA,
    neighbouring: str = "replace",
    shuffle: bool = True,
) -> UtilityGap:
    """The LDP frequency-estimate variance against the central baselines (module docstring).

    ``shuffle`` adds the shuffle-model guarantee of the same n reports at ``delta``. It applies
    to pure epsilon0-LDP reports; a mechanism with a delta of its own gets none (``None``).
    """
    oracle = _frequency_oracle(mechanism)
    n = check_int(n, "n", minimum=1)
    epsilon = oracle.privacy_epsilon
    sigma = central_gaussian_sigma(epsilon, delta, neighbouring)
    bound = shuffle_bound(epsilon, n, delta) if shuffle and oracle.privacy_delta == 0 else None
    return UtilityGap(
        mechanism=oracle.to_config(),
        epsilon=epsilon,
        n=n,
        delta=float(delta),
        neighbouring=neighbouring,
        ldp_variance=ldp_variance(oracle, n),
        central_laplace_variance=central_laplace_variance(epsilon, n, neighbouring),
        central_gaussian_variance=sigma * sigma / n**2,
        central_gaussian_sigma=sigma,
        shuffle=bound,
    )


def error_curve(
    mechanism: Mechanism,
    ns: Sequence[int] | npt.ArrayLike,
    *,
    delta: float = DEFAULT_DELTA,
    neighbouring: str = "replace",
) -> dict[str, FloatArray]:
    """Per-item standard errors against n for the three models (for the error-versus-n plot)."""
    oracle = _frequency_oracle(mechanism)
    sizes = np.asarray(ns, dtype=np.float64)
    if sizes.ndim != 1 or sizes.size == 0 or np.any(sizes < 1):
        raise ValueError("ns must be a non-empty list of positive user counts")
    epsilon = oracle.privacy_epsilon
    sigma = central_gaussian_sigma(epsilon, delta, neighbouring)
    laplace_count_std = math.sqrt(2.0) * laplace_sensitivity(neighbouring) / epsilon
    return {
        "n": sizes,
        "ldp": np.sqrt(oracle.variance_per_user() / sizes),
        "central_laplace": laplace_count_std / sizes,
        "central_gaussian": sigma / sizes,
    }


# ---- with ground truth -----------------------------------------------------------------------


def run_central_laplace(
    counts: npt.ArrayLike,
    epsilon: float,
    *,
    neighbouring: str = "replace",
    rng: np.random.Generator,
) -> FloatArray:
    """The central Laplace mechanism on a true histogram: frequencies (n public)."""
    c = _true_counts(counts)
    noisy = c + rng.laplace(0.0, laplace_sensitivity(neighbouring) / check_epsilon(epsilon), c.size)
    return np.asarray(noisy / c.sum(), dtype=np.float64)


def run_central_gaussian(
    counts: npt.ArrayLike,
    epsilon: float,
    delta: float,
    *,
    neighbouring: str = "replace",
    rng: np.random.Generator,
) -> FloatArray:
    """The central analytic Gaussian mechanism on a true histogram: frequencies (n public)."""
    c = _true_counts(counts)
    sigma = central_gaussian_sigma(epsilon, delta, neighbouring)
    return np.asarray((c + rng.normal(0.0, sigma, c.size)) / c.sum(), dtype=np.float64)


def dap_noise(task: TaskSpec, size: int, *, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """What the Collector's result carries on each of ``size`` coordinates: each aggregator's
    draw from the task's own sampler (``task.noise()``, as ``collector.dap.aggregator`` adds it;
    ``rng`` in place of the OS CSPRNG: a simulation), summed; zeros for ``"dp": "none"``. The sum
    of the Prio3 shares is the true aggregate exactly, so only the noise is simulated."""
    noise = task.noise()
    if noise is None:
        return np.zeros(size, dtype=np.int64)
    return np.asarray(noise.sample(rng, size) + noise.sample(rng, size), dtype=np.int64)


def run_dap(counts: npt.ArrayLike, task: TaskSpec, *, rng: np.random.Generator) -> FloatArray:
    """The Collector's histogram of a DAP task on the true counts, as frequencies (n public)."""
    c = _true_counts(counts)
    return np.asarray((c + dap_noise(task, c.size, rng=rng)) / c.sum(), dtype=np.float64)


def _true_counts(counts: npt.ArrayLike) -> FloatArray:
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or np.any(c < 0) or not np.all(np.isfinite(c)) or c.sum() <= 0:
        raise ValueError("true counts must be a non-empty 1-D array of non-negative numbers")
    return c


@dataclasses.dataclass(frozen=True)
class EmpiricalGap:
    """Observed per-item mean squared errors of the three models against the true frequencies.

    ``*_mse`` are observed (the LDP one from the estimate given, the central ones averaged over
    ``repetitions`` runs of the central mechanism); ``*_expected`` are the exact expectations
    (for LDP the fixed-population variance averaged over items).
    """

    n: int
    k: int
    repetitions: int
    ldp_mse: float
    ldp_expected: float
    central_laplace_mse: float
    central_laplace_expected: float
    central_gaussian_mse: float
    central_gaussian_expected: float

    @property
    def mse_ratio(self) -> float:
        """Observed LDP over observed central Laplace mean squared error."""
        return self.ldp_mse / self.central_laplace_mse

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "mse_ratio": self.mse_ratio,
            "expected_ratio": self.ldp_expected / self.central_laplace_expected,
        }


def empirical_gap(
    estimate: FrequencyEstimate,
    true_counts: npt.ArrayLike,
    *,
    mechanism: Mechanism | None = None,
    delta: float = DEFAULT_DELTA,
    neighbouring: str = "replace",
    rng: np.random.Generator | int | None = None,
    repetitions: int = 1,
) -> EmpiricalGap:
    """The errors of an LDP estimate and of the central mechanisms on the same true histogram.

    ``true_counts`` is the histogram of the users' real values (known in a simulation); it must
    sum to ``estimate.n``. ``rng`` seeds the central noise (a Generator, a seed, or ``None`` for
    a fresh one).
    """
    counts = _true_counts(true_counts)
    if counts.size != estimate.frequencies.size:
        raise ValueError(
            f"true_counts has {counts.size} items; the estimate has {estimate.frequencies.size}"
        )
    if not math.isclose(counts.sum(), estimate.n):
        raise ValueError(f"true_counts sum to {counts.sum():g}; the estimate has n={estimate.n}")
    check_int(repetitions, "repetitions", minimum=1)
    oracle = _frequency_oracle(
        mechanism if mechanism is not None else mechanism_from_config(estimate.mechanism)
    )
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    truth = counts / counts.sum()
    n, k, epsilon = estimate.n, counts.size, oracle.privacy_epsilon
    laplace = [
        run_central_laplace(counts, epsilon, neighbouring=neighbouring, rng=generator)
        for _ in range(repetitions)
    ]
    gaussian = [
        run_central_gaussian(counts, epsilon, delta, neighbouring=neighbouring, rng=generator)
        for _ in range(repetitions)
    ]
    return EmpiricalGap(
        n=n,
        k=k,
        repetitions=repetitions,
        ldp_mse=float(np.mean((estimate.frequencies - truth) ** 2)),
        ldp_expected=float(np.mean(oracle.variance(n, truth))),
        central_laplace_mse=float(np.mean((np.asarray(laplace) - truth) ** 2)),
        central_laplace_expected=central_laplace_variance(epsilon, n, neighbouring),
        central_gaussian_mse=float(np.mean((np.asarray(gaussian) - truth) ** 2)),
        central_gaussian_expected=central_gaussian_variance(epsilon, delta, n, neighbouring),
    )


# ---- every estimate kind -----------------------------------------------------------------------


SIMULATION_FAMILIES: dict[str, float | None] = {"zipf": 1.1, "uniform": None, "lognormal": 1.0}
"""Population families of ``--simulate`` and their default parameter (module docstring of each
gap module says how its kind reads them)."""


@dataclasses.dataclass(frozen=True)
class Simulation:
    """A simulated population: ``zipf[:S]`` (ranks with P(r) proportional to r^-S, default
    S = 1.1), ``uniform``, or ``lognormal[:SIGMA]`` (numbers: log-normal of median a fifth of the
    range and shape SIGMA, default 1, clipped to the range)."""

    family: str
    parameter: float | None

    def describe(self) -> str:
        return self.family if self.parameter is None else f"{self.family}:{self.parameter:g}"


def parse_simulation(spec: str) -> Simulation:
    """``zipf``, ``zipf:1.3``, ``uniform``, ``lognormal:0.5`` -> :class:`Simulation`."""
    family, _, rest = str(spec).partition(":")
    if family not in SIMULATION_FAMILIES:
        raise ValueError(
            f"--simulate must be one of {', '.join(SIMULATION_FAMILIES)} (with ':PARAMETER' for "
            f"zipf and lognormal); got {spec!r}"
        )
    parameter = SIMULATION_FAMILIES[family]
    if rest:
        if parameter is None:
            raise ValueError(f"--simulate {family} takes no parameter; got {spec!r}")
        try:
            parameter = float(rest)
        except ValueError:
            parameter = math.nan
        if not (0 < parameter < 100):
            raise ValueError(
                f"--simulate {family}: the parameter must be in (0, 100); got {rest!r}"
            )
    return Simulation(family, parameter)


def first_reports(mechanism: Mechanism, values: Any, rng: np.random.Generator) -> Any:
    """One report from each simulated user: a memoizing mechanism's first report of a new
    device (``perturb_independent_devices``: its permanent draws fresh from ``rng``, the law of
    a device with a new secret), else ``perturb``."""
    if is_memoized(mechanism):
        return mechanism.perturb_independent_devices(values, rng=rng)  # type: ignore[attr-defined]
    return mechanism.perturb(values, rng=rng)


def zipf_weights(size: int, simulation: Simulation) -> FloatArray:
    """Population shares of ``size`` ranks: Zipf(S) or uniform (the rank order is the index)."""
    if simulation.family == "zipf":
        assert simulation.parameter is not None
        w = np.arange(1, size + 1, dtype=np.float64) ** -simulation.parameter
    elif simulation.family == "uniform":
        w = np.ones(size)
    else:
        raise ValueError(
            f"--simulate {simulation.family} draws numbers; this estimate needs zipf or uniform"
        )
    return np.asarray(w / w.sum(), dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class GapOptions:
    """How the central model is taken and, for heavy hitters, which question is asked.

    ``top``: the k of "which are the k most frequent items"; ``threshold``: the frequency T of
    "which items exceed T" (``None``: the k-th true frequency); ``vocabulary``: the number of
    distinct strings of a simulated heavy-hitters population (the curator's public candidate
    list); ``repetitions``: runs of each randomized central mechanism averaged;
    ``central_epsilon``: the central target of the shuffled column (``None``: the mechanism's
    epsilon); ``batch_sizes``: a stored shuffled campaign's real batch sizes.
    """

    delta: float = DEFAULT_DELTA
    neighbouring: str = "replace"
    top: int = 10
    threshold: float | None = None
    vocabulary: int = 1000
    repetitions: int = 10
    central_epsilon: float | None = None
    batch_sizes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _check_neighbouring(self.neighbouring)
        check_int(self.top, "top", minimum=1)
        check_int(self.vocabulary, "vocabulary", minimum=2)
        check_int(self.repetitions, "repetitions", minimum=1)
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1); got {self.delta!r}")
        if self.threshold is not None and not 0 < self.threshold < 1:
            raise ValueError(f"threshold must be a frequency in (0, 1); got {self.threshold!r}")
        if self.central_epsilon is not None:
            check_epsilon(self.central_epsilon, "central_epsilon")


# ---- what every kind's gap.py answers, and the document around it -----------------------------

ExactGap = Callable[[Any, int, GapOptions], dict[str, Any]]
"""``exact_gap(mechanism, n, options)``: the figures that follow from formulas alone (each
document says which of its numbers are ``"exact"`` and which need a simulation)."""

SimulatedGap = Callable[[Any, int, Simulation, GapOptions, np.random.Generator], dict[str, Any]]
"""``simulated_gap(mechanism, n, simulation, options, rng)``: a population drawn as
``simulation`` says, perturbed by the mechanism itself, estimated by its own estimator, and both
models' errors measured against the known truth."""

MeasuredGap = Callable[[Any, Any, Any, GapOptions, np.random.Generator], dict[str, Any]]
"""``measured_gap(mechanism, estimate, truth, options, rng)``: the same measurement for an
estimate whose truth is known (the demo's report)."""


def gap_document(mechanism: Mechanism, n: int, body: dict[str, Any]) -> dict[str, Any]:
    """A kind's gap figures ``body`` in the document every kind shares."""
    # "kind" after the figures: the frequency document keeps the order it always had
    return {
        "mechanism": mechanism.to_config(),
        "epsilon": mechanism.privacy_epsilon,
        "n": n,
        **body,
        "kind": mechanism.estimate_kind,
    }
