"""What the string kinds share (``sketch`` and ``discovery``; docs/math/heavy-hitters.md): the
:class:`ItemsEstimate` both return, items most frequent first, each with its frequency, standard
error and significance, in the ``items`` shape of ``ldp-analyze estimate``.

Significance: a one-sided test of "nobody holds this string", Bonferroni-corrected over every
string examined (all candidates; for PEM, the strings of the last levels), so the expected
number of false discoveries per run is at most ``alpha`` (:func:`bonferroni_z`).
"""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from analysis.streaming import z_value

__all__ = [
    "ALPHA",
    "DiscoveredItem",
    "ItemsEstimate",
    "Outlook",
    "bonferroni_z",
    "finite",
    "items_from_counts",
]

ALPHA = 0.05
"""Default bound on the expected number of false discoveries per run."""


@dataclasses.dataclass(frozen=True)
class DiscoveredItem:
    """One string: its estimated frequency, standard error, interval and significance."""

    value: str
    frequency: float
    std_error: float
    ci_low: float
    ci_high: float
    z: float
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "frequency": self.frequency,
            "std_error": finite(self.std_error),
            "ci_low": finite(self.ci_low),
            "ci_high": finite(self.ci_high),
            "z": finite(self.z),
            "significant": self.significant,
        }


REFERENCE_FREQUENCIES = (0.2, 0.1, 0.05, 0.02, 0.01)
"""The frequencies an empty discovery says how many reports would find."""


@dataclasses.dataclass(frozen=True)
class Outlook:
    """Where a discovery that found nothing significant stands (docs/math/heavy-hitters.md,
    "Nothing discovered yet"): a normal state early in every campaign, not a failure.

    ``level_reached`` is the last stage (``ItemsEstimate.levels``) whose best candidate stood
    above the noise (``above_noise``: its z beyond Bonferroni over that stage's candidates), or
    ``None``. How many reports find a string of frequency f about half the time
    (:meth:`reports_for`) comes from the mechanism's null variance per report ``per_report``
    (v): each selection stage (PEM's L - 1 pruning levels, SFP's offsets) sees n /
    ``stage_share`` reports, where the string's estimate, N(f, (v + f(1 - f)) share / n) (the
    noise, and which devices that stage drew), must pass the kept threshold ``selection_z``
    sqrt(v share / n) at every one of the S stages with probability 1/2 (``every_z`` =
    z_(0.5^(1/S)) more standard errors); then the final test
    needs ``final_z`` null standard errors (variance ``final_per_report`` over n /
    ``final_share`` reports). ``selection_z`` is the threshold observed in these reports (the
    null's upper tail is far from normal at small n), never below its normal quantile.
    ``top_value``, ``top_frequency``: the candidate with the largest positive estimate, if any.
    """

    n: int
    stages: int
    level_reached: int | str | None
    stages_above_noise: int
    per_report: float
    stage_share: int
    selection_z: float
    every_z: float
    final_per_report: float
    final_share: int
    final_z: float
    top_value: str | None = None
    top_frequency: float | None = None

    def reports_for(self, frequency: float) -> int:
        """About how many reports find a string of this frequency half the time."""
        f, v = frequency, self.per_report
        selection = self.selection_z * math.sqrt(v) + self.every_z * math.sqrt(v + f * (1 - f))
        final = self.final_z**2 * self.final_per_report * self.final_share
        return math.ceil(max(self.stage_share * selection**2, final) / f**2)

    @property
    def detectable_frequency(self) -> float | None:
        """The frequency a string needs to be found about half the time at this n (``None``:
        not even a string every device holds)."""
        if self.reports_for(1.0) > self.n:
            return None
        low, high = 0.0, 1.0
        for _ in range(60):  # reports_for falls as f grows: bisection
            middle = (low + high) / 2
            low, high = (low, middle) if self.reports_for(middle) <= self.n else (middle, high)
        return high

    @property
    def top_reports(self) -> int | None:
        if self.top_frequency is None or self.top_frequency <= 0:
            return None
        return self.reports_for(min(self.top_frequency, 1.0))

    def describe(self) -> str:
        reached = (
            f"no stage's best candidate stood above the noise (of {self.stages} stages)"
            if self.level_reached is None
            else f"the best candidate stood above the noise at {self.stages_above_noise} of "
            f"{self.stages} stages, the last of them level {self.level_reached}"
        )
        detectable = self.detectable_frequency
        found = (
            "not even a string every device holds would be found half the time"
            if detectable is None
            else f"a string is found about half the time once its frequency exceeds "
            f"{detectable:.3g}"
        )
        examples = ", ".join(
            f"f = {f:g}: {self.reports_for(f):,}" for f in REFERENCE_FREQUENCIES[:3]
        )
        top = (
            "no candidate has a positive estimate yet"
            if self.top_reports is None
            else f"the most frequent candidate (estimated {self.top_frequency:.3g}) would need "
            f"about {self.top_reports:,}"
        )
        return (
            f"Nothing discovered yet, the normal state early in a campaign: at n = {self.n:,} "
            f"{reached}, and {found}. Reports needed to find a string of frequency f about "
            f"half the time (from the mechanism's variance; a rough guide: 0.75 to 2.4 times "
            f"the n that found half in seeded checks): {examples}; {top}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "note": self.describe(),
            "level_reached": self.level_reached,
            "stages_above_noise": self.stages_above_noise,
            "stages": self.stages,
            "detectable_frequency": self.detectable_frequency,
            "reports_for_frequency": {f"{f:g}": self.reports_for(f) for f in REFERENCE_FREQUENCIES},
            "top": None
            if self.top_reports is None
            else {
                "value": self.top_value,
                "frequency": self.top_frequency,
                "reports_needed": self.top_reports,
            },
        }


@dataclasses.dataclass(frozen=True)
class ItemsEstimate:
    """Estimated frequencies of strings (a ``DocumentedEstimate``).

    ``items`` most frequent first; ``critical_z`` the one-sided threshold after Bonferroni over
    ``examined`` strings at ``alpha``; ``levels`` what each stage of a discovery used (its
    reports and candidates); ``unconfirmed`` the strings that reached the last stage but did
    not pass the test.
    """

    items: tuple[DiscoveredItem, ...]
    n: int
    confidence: float
    alpha: float
    critical_z: float
    examined: int
    mechanism: dict[str, Any]
    method: str
    levels: tuple[dict[str, Any], ...] = ()
    unconfirmed: tuple[str, ...] = ()
    null: str = ""
    """What the test's null distribution includes (sketches: ``SKETCH_NULL``)."""
    outlook: Outlook | None = None
    """For a discovery with no significant string: how far it got and what n it needs."""

    @property
    def significant(self) -> tuple[DiscoveredItem, ...]:
        return tuple(item for item in self.items if item.significant)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mechanism": self.mechanism,
            "items": [item.to_dict() for item in self.items],
            "confidence": self.confidence,
            "method": self.method,
            "correction": "bonferroni",
            "alpha": self.alpha,
            "critical_z": finite(self.critical_z),
            "examined": self.examined,
            "detected": len(self.significant),
            "levels": list(self.levels),
            "unconfirmed": list(self.unconfirmed),
            "null": self.null,
            "nothing_discovered": None if self.outlook is None else self.outlook.to_dict(),
        }

    def format_table(self, show_all: bool = False) -> str:
        """The significant strings with their intervals (``show_all``: every string tested, and
        the ones that reached the last stage unconfirmed)."""
        out = io.StringIO()
        shown = self.items if show_all else self.significant
        width = max([5, *(len(item.value) for item in shown)])
        out.write(
            f"{'value':<{width}}  {'frequency':>10}  {'std_error':>10}  {'ci_low':>10}  "
            f"{'ci_high':>10}  significant\n"
        )
        for item in shown:
            mark = "yes" if item.significant else "no"
            out.write(
                f"{item.value:<{width}}  {item.frequency:>10.5f}  {item.std_error:>10.5f}  "
                f"{item.ci_low:>10.5f}  {item.ci_high:>10.5f}  {mark}\n"
            )
        hidden = len(self.items) - len(shown)
        if hidden:
            out.write(f"({hidden} strings not significant are not shown: --all shows them)\n")
        test = (
            f"Bonferroni over {self.examined} strings, alpha = {self.alpha}, "
            f"z > {self.critical_z:.3f}"
            if self.examined
            else "no string was assembled, so none was tested"
        )
        out.write(
            f"n = {self.n}; {len(self.significant)} of {len(self.items)} significant ({test})\n"
        )
        for level in self.levels:
            out.write("level {level}: {reports} reports, {candidates} candidates".format(**level))
            if level.get("best_z") is not None:
                out.write(f", best z {level['best_z']:.2f}")
            out.write("\n")
        if self.unconfirmed and show_all:
            out.write(f"not confirmed: {', '.join(self.unconfirmed)}\n")
        if self.null:
            out.write(f"null: {self.null}\n")
        if self.outlook is not None:
            out.write(f"{self.outlook.describe()}\n")
        return out.getvalue()


def items_from_counts(
    values: Sequence[str],
    counts: np.ndarray,
    std_errors: np.ndarray,
    null_std_errors: np.ndarray,
    n: int,
    *,
    confidence: float,
    critical_z: float,
    significant: np.ndarray | None = None,
) -> tuple[DiscoveredItem, ...]:
    """Items (most frequent first) from count estimates and their standard errors; significant
    when the null z exceeds ``critical_z`` (or as ``significant`` says)."""
    z_ci = z_value(confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(null_std_errors > 0, counts / null_std_errors, np.inf * np.sign(counts))
    order = np.argsort(-counts, kind="stable")
    return tuple(
        DiscoveredItem(
            value=values[i],
            frequency=float(counts[i] / n),
            std_error=float(std_errors[i] / n),
            ci_low=float((counts[i] - z_ci * std_errors[i]) / n),
            ci_high=float((counts[i] + z_ci * std_errors[i]) / n),
            z=float(z[i]),
            significant=bool(z[i] > critical_z if significant is None else significant[i]),
        )
        for i in order
    )


def bonferroni_z(alpha: float, items: int) -> float:
    """z_{1 - alpha/items}: the one-sided critical value after Bonferroni over ``items`` tests
    (also ``analysis.heavy_hitters.bonferroni_z``)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    if items < 1:
        raise ValueError(f"items must be >= 1; got {items!r}")
    return float(-special.ndtri(alpha / items))


def finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
