"""Heavy hitters: the top items of an estimate, and which of them stand above the noise.

RAPPOR reports only what stands above its noise (Erlingsson, Pihur, Korolova, CCS 2014,
section 5); the Base-Cut of Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li (NDSS 2020) uses the same
threshold (docs/math/postprocessing.md). Item v is ``significant`` when its raw, unbiased
estimate passes a one-sided z-test of f_v = 0 at level alpha after a Bonferroni correction over
the d items of the domain:

    f_v / SE_v > z_{1 - alpha/d},

so the chance that any item with f_v = 0 is reported is at most alpha. SE_v is the raw
estimate's standard error (the exact variance with the clipped estimate plugged in). For the
oracles whose variance grows with f_v (GRR, unary encoding, OLH, SS) that is at least the null
standard error, so the test is conservative; for BLH and HR (coefficient -1) it is smaller by
f_v/n, negligible against Var*/n >= 1/n for items near the threshold.

Estimates from fewer reports than a campaign's ``min_batch_size`` are refused
(:class:`InsufficientReports`, from :mod:`analysis.min_batch`), here and in the CLI.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from analysis.kinds._common.items import bonferroni_z
from analysis.kinds.frequencies.estimate import FrequencyEstimate
from analysis.min_batch import InsufficientReports, require_min_batch

__all__ = ["HeavyHitter", "InsufficientReports", "bonferroni_z", "require_min_batch", "top_k"]


@dataclasses.dataclass(frozen=True)
class HeavyHitter:
    """One of the top items: its index in the domain, the estimate's numbers and the test.

    ``frequency``, ``std_error``, ``ci_low`` and ``ci_high`` are those of the estimate given
    (post-processed or not); ``z`` is the raw estimate over its standard error, ``threshold``
    the frequency the raw estimate had to exceed, and ``significant`` whether it did.
    """

    index: int
    frequency: float
    std_error: float
    ci_low: float
    ci_high: float
    z: float
    threshold: float
    significant: bool


def top_k(
    estimate: FrequencyEstimate,
    k: int,
    alpha: float = 0.05,
    *,
    min_batch_size: int | None = None,
    campaign: str | None = None,
) -> list[HeavyHitter]:
    """The ``k`` items with the largest estimated frequencies, each tested against zero.

    Items are ranked by ``estimate.frequencies`` (ties by index); significance is always tested
    on the raw unbiased estimate (``estimate.raw`` for a post-processed one), with the
    Bonferroni threshold over the whole domain (module docstring). Raises
    :class:`InsufficientReports` when ``estimate.n`` is below ``min_batch_size``.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    require_min_batch(estimate.n, min_batch_size, campaign)
    raw = getattr(estimate, "raw", None)
    tested = raw if isinstance(raw, FrequencyEstimate) else estimate
    domain = len(estimate.frequencies)
    z_critical = bonferroni_z(alpha, domain)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(
            tested.std_errors > 0,
            tested.frequencies / tested.std_errors,
            np.where(tested.frequencies > 0, math.inf, 0.0),
        )
    order = np.lexsort((np.arange(domain), -estimate.frequencies))[: int(k)]
    return [
        HeavyHitter(
            index=int(v),
            frequency=float(estimate.frequencies[v]),
            std_error=float(estimate.std_errors[v]),
            ci_low=float(estimate.ci_low[v]),
            ci_high=float(estimate.ci_high[v]),
            z=float(z[v]),
            threshold=float(z_critical * tested.std_errors[v]),
            significant=bool(z[v] > z_critical),
        )
        for v in order
    ]
