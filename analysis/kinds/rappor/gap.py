"""The central gap of RAPPOR campaigns over a candidate list (docs/math/central-and-shuffle.md).

RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014) estimates the frequencies of S candidate strings
(``analysis.kinds.rappor.estimate.decode``). A trusted curator at the same epsilon
(``privacy_epsilon``, the one-report epsilon_1) answers the same question from the true strings: the
histogram of the S candidates and one bucket for every other string, with Laplace noise on each
count (Delta_1 = 2 under ``replace``, 1 under ``add-remove``): Var[f_c] = 2 (Delta_1/epsilon)^2 /
n^2, or the analytic Gaussian's sigma^2 / n^2. Exact.

The LDP side without reports: the exact variance of a lone candidate that nobody holds, whose h
Bloom bits are distinct in every cohort and that no other string sets. Each of its m h rows
(cohort j, bit i) is y = t_ij / N_j with Var = p**(1 - p**) / ((q** - p**)^2 N_j), and weighted
least squares with weights N_j gives Var[f_c] = p**(1 - p**) / ((q** - p**)^2 h n). More
candidates sharing bits, bits that collide in a cohort, and Bloom-bit mass from other strings
change it (usually raise it); the decoder's own standard errors, which include all of that and
the cohort assignment, are what a report shows, and the simulation measures both models.
Measured in simulation: ``vocabulary`` candidate strings with Zipf or uniform shares, one report
each from n new clients (``RAPPOR.simulate_clients``), decoded against the candidates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    central_gaussian_sigma,
    laplace_sensitivity,
    require_kind,
    run_central_gaussian,
    run_central_laplace,
    zipf_weights,
)
from analysis.kinds.rappor.estimate import RapporEstimate, decode
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.rappor import RAPPOR

__all__ = ["MAX_SIMULATED_CANDIDATES", "exact_gap", "measured_gap", "simulated_gap"]

MAX_SIMULATED_CANDIDATES = 2000
"""The simulation's candidate list is the first this many strings of the vocabulary at most."""


def _rappor(mechanism: Mechanism) -> RAPPOR:
    return require_kind(mechanism, RAPPOR, "a RAPPOR mechanism")


def lone_candidate_variance(m: RAPPOR, n: int) -> float:
    """Var[f_c] of a lone candidate nobody holds (module docstring)."""
    p2, q2 = (float(v) for v in m.report_probabilities)
    return p2 * (1 - p2) / ((q2 - p2) ** 2 * m.h * n)


def _central(m: RAPPOR, n: int, options: GapOptions) -> tuple[float, float]:
    epsilon = m.privacy_epsilon
    scale = laplace_sensitivity(options.neighbouring) / epsilon
    sigma = central_gaussian_sigma(epsilon, options.delta, options.neighbouring)
    return 2 * scale**2 / n**2, sigma**2 / n**2


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _rappor(mechanism)
    ldp = lone_candidate_variance(m, n)
    laplace, gaussian = _central(m, n, options)
    return {
        "epsilon_one": m.epsilon_one,
        "epsilon_inf": m.epsilon_inf,
        "ldp_variance_lone_candidate": ldp,
        "central_laplace_variance": laplace,
        "central_gaussian_variance": gaussian,
        "ldp_std_error_lone_candidate": math.sqrt(ldp),
        "central_laplace_std_error": math.sqrt(laplace),
        "central_gaussian_std_error": math.sqrt(gaussian),
        "variance_ratio": ldp / laplace,
        "gaussian_variance_ratio": ldp / gaussian,
        "exact": "LDP for a lone candidate nobody holds (h distinct bits per cohort, no other "
        "Bloom-bit mass); central Laplace and Gaussian on the candidates' histogram with one "
        "bucket for every other string",
    }


def measured_gap(
    mechanism: Mechanism,
    estimate: RapporEstimate,
    truth: Mapping[str, int],
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the true count of each string the users hold (strings outside the candidate
    list included: they form the curator's "other" bucket)."""
    m = _rappor(mechanism)
    n = estimate.n
    total = sum(int(v) for v in truth.values())
    if total != n:
        raise ValueError(f"the true counts sum to {total}; the estimate has n={n}")
    held = np.array([int(truth.get(c, 0)) for c in estimate.candidates], dtype=np.float64)
    counts = np.append(held, n - held.sum())
    f = held / n
    epsilon = m.privacy_epsilon
    laplace = np.array(
        [
            run_central_laplace(counts, epsilon, neighbouring=options.neighbouring, rng=rng)
            for _ in range(options.repetitions)
        ]
    )[:, :-1]
    gaussian = np.array(
        [
            run_central_gaussian(
                counts, epsilon, options.delta, neighbouring=options.neighbouring, rng=rng
            )
            for _ in range(options.repetitions)
        ]
    )[:, :-1]
    variance = np.asarray(estimate.std_errors, dtype=np.float64) ** 2
    finite = np.isfinite(variance)
    expected_laplace, expected_gaussian = _central(m, n, options)
    truly = set(np.flatnonzero(held > 0))
    found = set(np.flatnonzero(estimate.significant))
    return {
        "candidates": len(estimate.candidates),
        "held_candidates": len(truly),
        "ldp_mse": float(np.mean((estimate.frequencies - f) ** 2)),
        "ldp_reported_variance": float(np.mean(variance[finite])) if finite.any() else None,
        "central_laplace_mse": float(np.mean((laplace - f) ** 2)),
        "central_laplace_expected": expected_laplace,
        "central_gaussian_mse": float(np.mean((gaussian - f) ** 2)),
        "central_gaussian_expected": expected_gaussian,
        "ldp_detected": len(found),
        "ldp_false_discoveries": len(found - truly),
        "ldp_recall": len(found & truly) / len(truly) if truly else None,
        "outside_candidates": (n - held.sum()) / n,
        "measured": True,
        "note": "ldp_mse over all candidates (unselected ones estimated 0); "
        "ldp_reported_variance: the mean of the decoder's squared standard errors",
    }


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _rappor(mechanism)
    size = min(options.vocabulary, MAX_SIMULATED_CANDIDATES)
    words = [f"s{index:05d}" for index in rng.permutation(size)]
    items = rng.choice(size, size=n, p=zipf_weights(size, simulation))
    estimate = decode(m, m.simulate_clients([words[i] for i in items], rng=rng), words)
    held = np.bincount(items, minlength=size)
    truth = {w: int(c) for w, c in zip(words, held, strict=True) if c}
    return measured_gap(m, estimate, truth, options, rng)
