"""Heavy hitters over strings: sketch estimates against candidates, and discovery without them.

The sketch oracles (``cms``, ``hcms``; Apple 2017) estimate the count of any string from the
merged sketch; :func:`estimate_sketch` does so for a candidate list. The discovery mechanisms
(``pem``; Wang, Li, Jha, arXiv 1708.06674) find the frequent strings themselves
(:func:`discover_pem`). Both return an :class:`ItemsEstimate`: items most frequent first, each
with its frequency, standard error and significance, in the ``items`` shape of
``ldp-analyze estimate`` (docs/math/heavy-hitters.md).

Significance: a one-sided z test of "nobody holds this string" with the null standard error,
Bonferroni-corrected over every string examined (all candidates; for discovery, the candidates
of every level), so the expected number of false discoveries per run is at most ``alpha``.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from analysis.streaming import ReportSource, aggregate, z_value
from client_sdk.mechanisms.base import AggregateStatistic
from client_sdk.mechanisms.pem import PEM
from client_sdk.mechanisms.sfp import SFP
from client_sdk.mechanisms.sketch import StringSketch

__all__ = [
    "ALPHA",
    "TOP",
    "DiscoveredItem",
    "ItemsEstimate",
    "discover",
    "discover_pem",
    "discover_pem_by_support",
    "discover_sfp",
    "estimate_sketch",
]

ALPHA = 0.05
"""Default bound on the expected number of false discoveries per run."""

SFP_METHOD = "sequence fragment puzzle; confirmation against the word sketch"
MAX_ASSEMBLED = 4096
"""At most this many strings are assembled from the fragments of one tag."""

TOP = 64
"""Default number of prefixes a discovery keeps per level (and of strings it reports)."""


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
            "std_error": _finite(self.std_error),
            "ci_low": _finite(self.ci_low),
            "ci_high": _finite(self.ci_high),
            "z": _finite(self.z),
            "significant": self.significant,
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
            "critical_z": self.critical_z,
            "examined": self.examined,
            "detected": len(self.significant),
            "levels": list(self.levels),
            "unconfirmed": list(self.unconfirmed),
        }

    def format_table(self) -> str:
        out = io.StringIO()
        width = max([5, *(len(item.value) for item in self.items)])
        out.write(f"{'value':<{width}}  {'frequency':>10}  {'std_error':>10}  significant\n")
        for item in self.items:
            mark = "yes" if item.significant else "no"
            out.write(
                f"{item.value:<{width}}  {item.frequency:>10.5f}  {item.std_error:>10.5f}  {mark}\n"
            )
        out.write(
            f"n = {self.n}; {len(self.significant)} of {len(self.items)} significant (Bonferroni "
            f"over {self.examined} strings, alpha = {self.alpha}, z > {self.critical_z:.3f})\n"
        )
        for level in self.levels:
            out.write("level {level}: {reports} reports, {candidates} candidates\n".format(**level))
        if self.unconfirmed:
            out.write(f"not confirmed: {', '.join(self.unconfirmed)}\n")
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


def estimate_sketch(
    mechanism: StringSketch,
    reports: ReportSource | AggregateStatistic,
    candidates: Sequence[str],
    *,
    confidence: float = 0.95,
    alpha: float = ALPHA,
) -> ItemsEstimate:
    """Frequencies of ``candidates`` from a CMS or HCMS sketch (docs/math/heavy-hitters.md).

    Standard errors: the variance over the reports' noise and a random hash family with the
    candidates' estimates plugged in (``StringSketch.standard_errors``); significance: the
    estimate over its null standard error above ``z_{1 - alpha / len(candidates)}``.
    """
    if not isinstance(mechanism, StringSketch):
        raise TypeError(f"estimate_sketch needs a cms or hcms mechanism; got {mechanism.name!r}")
    values = list(dict.fromkeys(candidates))
    if not values:
        raise ValueError("candidates must list at least one string")
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    counts = mechanism.estimate_counts(statistic, values)
    std_errors = mechanism.standard_errors(statistic, values)
    null = mechanism.standard_errors(statistic, values, null=True)
    critical = bonferroni_z(alpha, len(values))
    items = items_from_counts(
        values, counts, std_errors, null, statistic.n, confidence=confidence, critical_z=critical
    )
    return ItemsEstimate(
        items=items,
        n=statistic.n,
        confidence=confidence,
        alpha=alpha,
        critical_z=critical,
        examined=len(values),
        mechanism=mechanism.to_config(),
        method="count mean sketch against candidates",
    )


def _concatenate(mechanism: Any, reports: ReportSource) -> np.ndarray:
    """The reports of an array or of an iterable of chunks, as one array."""
    if isinstance(reports, AggregateStatistic):
        raise TypeError(
            f"{mechanism.name} discovery reads the reports themselves (which prefixes to score "
            "depends on the previous levels), not a merged statistic"
        )
    if isinstance(reports, np.ndarray):
        return reports
    chunks = [np.asarray(chunk) for chunk in reports]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=mechanism.report_dtype)


SupportCounter = Callable[[int, npt.NDArray[np.int64]], npt.NDArray[np.int64]]
"""``support(level, prefixes)``: for the reports of ``level``, how many support each prefix.

``prefixes`` is an int64 array of shape ``(k, PEM.chunk_count(level))``: row j holds prefix j's
30-bit chunks (``PEM.prefix_chunks``; a prefix of up to 262 bits does not fit one int64). The
answer is an int64 array of shape ``(k,)``; for reports spread over shards it is the sum of
``PEM.support_counts(shard_reports, level, prefixes)`` over the shards."""


def discover_pem(
    mechanism: PEM,
    reports: ReportSource,
    *,
    top: int = TOP,
    confidence: float = 0.95,
    alpha: float = ALPHA,
) -> ItemsEstimate:
    """The frequent strings of PEM reports held in memory (:func:`discover_pem_by_support`)."""
    array = mechanism._check(_concatenate(mechanism, reports))
    levels = array["level"].astype(np.int64)
    per_level = np.bincount(levels, minlength=mechanism.levels).astype(np.int64)
    by_level = {level: array[levels == level] for level in range(mechanism.levels)}

    def support(level: int, prefixes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return mechanism.support_counts(by_level[level], level, prefixes)

    return discover_pem_by_support(
        mechanism, per_level, support, top=top, confidence=confidence, alpha=alpha
    )


def discover_pem_by_support(
    mechanism: PEM,
    reports_per_level: npt.NDArray[np.int64],
    support: SupportCounter,
    *,
    top: int = TOP,
    confidence: float = 0.95,
    alpha: float = ALPHA,
) -> ItemsEstimate:
    """The frequent strings of PEM reports (Wang, Li, Jha; docs/math/heavy-hitters.md), from
    the number of reports at each level and a ``support(level, prefixes)`` callable counting,
    for the reports of that level, how many support each prefix (wherever they live: in
    memory, in shards, on workers).

    Level 0 scores every plausible ``start_bits`` prefix; each later level scores the ``top``
    best prefixes of the previous level (of positive estimate) extended by every suffix of
    ``step_bits``, pruned to plausible ones. Each level is scored on its own devices, so the
    last level's test of "nobody holds this string" is exact given its candidates: a string is
    significant when P[Binomial(n_last, q*) >= C] <= alpha / (its number of candidates), so the
    expected number of false discoveries per run is at most ``alpha``. The items are the
    ``top`` best strings of the last level; ``unconfirmed`` those not significant.
    """
    per_level = np.asarray(reports_per_level, dtype=np.int64)
    if per_level.shape != (mechanism.levels,):
        raise ValueError(
            f"reports_per_level must have one count per level ({mechanism.levels}); "
            f"got shape {per_level.shape}"
        )
    n = int(per_level.sum())
    if n <= 0:
        raise ValueError("cannot discover from zero reports")
    p, q = mechanism.p_star, mechanism.q_star
    levels: list[dict[str, Any]] = []
    prefixes = [v for v in range(1 << mechanism.level_bits(0)) if mechanism.plausible(v, 0)]
    kept: list[int] = []
    counts = np.zeros(0, dtype=np.int64)
    n_level = 0
    for level in range(mechanism.levels):
        if level:
            step = mechanism.level_bits(level) - mechanism.level_bits(level - 1)
            prefixes = [
                (prefix << step) | suffix
                for prefix in kept
                for suffix in range(1 << step)
                if mechanism.plausible((prefix << step) | suffix, level)
            ]
        n_level = int(per_level[level])
        if n_level == 0:
            raise ValueError(f"pem: level {level} has no reports; discovery needs every level")
        counts = np.asarray(support(level, mechanism.prefix_chunks(prefixes, level)))
        if counts.shape != (len(prefixes),):
            raise ValueError(
                f"support({level}, ...) returned shape {counts.shape} for {len(prefixes)} prefixes"
            )
        counts = counts.astype(np.int64)
        estimates = (counts / n_level - q) / (p - q)
        order = np.argsort(-estimates, kind="stable")
        kept = [prefixes[i] for i in order[:top] if estimates[i] > 0]
        levels.append(
            {
                "level": level,
                "bits": mechanism.level_bits(level),
                "reports": n_level,
                "candidates": len(prefixes),
                "kept": len(kept),
            }
        )
    decoded = [(mechanism.decode_prefix(v), i) for i, v in enumerate(prefixes)]
    strings = [(value, i) for value, i in decoded if value is not None]
    examined = max(1, len(strings))
    index = np.asarray([i for _, i in strings], dtype=np.int64)
    values = [value for value, _ in strings]
    final_counts = counts[index]
    frequencies = (final_counts / n_level - q) / (p - q)
    p_values = stats.binom.sf(final_counts - 1, n_level, q)
    significant = p_values <= alpha / examined
    order = np.argsort(-frequencies, kind="stable")[:top]
    plug = np.clip(frequencies[order], 0.0, 1.0)
    std_errors = np.sqrt(mechanism.frequency_variance(n_level, n, plug)) * n
    null = np.full(order.size, math.sqrt(q * (1 - q) / n_level) / (p - q) * n)
    items = items_from_counts(
        [values[i] for i in order],
        frequencies[order] * n,
        std_errors,
        null,
        n,
        confidence=confidence,
        critical_z=bonferroni_z(alpha, examined),
        significant=significant[order],
    )
    return ItemsEstimate(
        items=items,
        n=n,
        confidence=confidence,
        alpha=alpha,
        critical_z=bonferroni_z(alpha, examined),
        examined=examined,
        mechanism=mechanism.to_config(),
        method="prefix extension over local hashing; exact binomial test at the last level",
        levels=tuple(levels),
        unconfirmed=tuple(item.value for item in items if not item.significant),
    )


def discover_sfp(
    mechanism: SFP,
    reports: ReportSource | AggregateStatistic,
    *,
    top: int = TOP,
    confidence: float = 0.95,
    alpha: float = ALPHA,
) -> ItemsEstimate:
    """The frequent strings of SFP reports (Apple 2017; docs/math/heavy-hitters.md).

    From the merged statistic alone: at each offset, the ``2 * top`` (tag, byte) fragments with
    the largest positive estimates (Hadamard response over the 65,536 fragments) are kept; the
    strings whose tag has a kept fragment at every offset are assembled (at most
    ``MAX_ASSEMBLED`` per tag), and confirmed against the word sketch, whose randomness is
    independent of the fragments': its estimates are unbiased given the assembled candidates,
    and a candidate is significant when its z over the null standard error exceeds
    z_{1 - alpha / candidates} (Bonferroni), so E[false discoveries] <= alpha (with the
    collisions of the word sketch's hashes as a random family's: heavy-hitters.md).
    """
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot discover from zero reports")
    word, fragments = mechanism.split(statistic)
    kept: list[dict[int, list[int]]] = []
    levels: list[dict[str, Any]] = []
    for offset, fragment in enumerate(fragments):
        by_tag: dict[int, list[int]] = {}
        if fragment.n:
            estimates = mechanism.fragment_counts(fragment)
            order = np.argsort(-estimates, kind="stable")[: 2 * top]
            for row in order[estimates[order] > 0]:
                by_tag.setdefault(int(row) // 256, []).append(int(row) % 256)
        kept.append(by_tag)
        levels.append(
            {
                "level": offset,
                "reports": fragment.n,
                "candidates": 256 * 256,
                "kept": sum(map(len, by_tag.values())),
            }
        )
    candidates: list[str] = []
    for tag in set.intersection(*(set(k) for k in kept)) if kept else set():
        for combination in itertools.islice(
            itertools.product(*(k[tag] for k in kept)), MAX_ASSEMBLED
        ):
            raw = bytes(combination).rstrip(b"\x00")
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if mechanism.tags([raw])[0] == tag:  # the fragments agree with their tag
                candidates.append(value)
    levels.append({"level": "words", "reports": word.n, "candidates": len(candidates), "kept": 0})
    if not candidates:
        return ItemsEstimate(
            items=(),
            n=statistic.n,
            confidence=confidence,
            alpha=alpha,
            critical_z=math.inf,
            examined=0,
            mechanism=mechanism.to_config(),
            method=SFP_METHOD,
            levels=tuple(levels),
        )
    confirmed = estimate_sketch(
        mechanism.word_sketch, word, candidates, confidence=confidence, alpha=alpha
    )
    items = confirmed.items[:top]
    return dataclasses.replace(
        confirmed,
        items=items,
        mechanism=mechanism.to_config(),
        method=SFP_METHOD,
        levels=tuple(levels),
        unconfirmed=tuple(item.value for item in items if not item.significant),
    )


def discover(
    mechanism: PEM | SFP, reports: ReportSource, *, confidence: float = 0.95
) -> ItemsEstimate:
    """The discovery of ``mechanism`` (``estimate_kind`` ``"discovery"``): PEM or SFP."""
    if isinstance(mechanism, PEM):
        return discover_pem(mechanism, reports, confidence=confidence)
    if isinstance(mechanism, SFP):
        return discover_sfp(mechanism, reports, confidence=confidence)
    raise TypeError(f"no discovery decoder for mechanism {mechanism.name!r}")


def bonferroni_z(alpha: float, items: int) -> float:
    """z_{1 - alpha/items}, as ``analysis.heavy_hitters.bonferroni_z`` (which this module cannot
    import: that module imports the estimation module, which imports this one)."""
    if not 0 < alpha < 1 or items < 1:
        raise ValueError(f"alpha must be in (0, 1) and items >= 1; got {alpha!r}, {items!r}")
    return float(-special.ndtri(alpha / items))


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
