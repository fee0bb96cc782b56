"""Heavy hitters over strings found without candidates: the discovery mechanisms (``pem``; Wang,
Li, Jha, arXiv 1708.06674; ``sfp``, the sequence fragment puzzle of Apple 2017) find the frequent
strings themselves (:func:`discover`, by ``Mechanism.discovery``), returning an
:class:`ItemsEstimate` (docs/math/heavy-hitters.md).

Significance: a one-sided test of "nobody holds this string", Bonferroni-corrected over the
strings of the last levels, so the expected number of false discoveries per run is at most
``alpha``. SFP confirms its strings against its word sketch, estimated as the sketch kind does
(:func:`analysis.kinds.sketch.estimate.estimate_sketch`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from analysis.kinds._common.items import (
    ALPHA,
    DiscoveredItem,
    ItemsEstimate,
    Outlook,
    bonferroni_z,
    finite,
    items_from_counts,
)
from analysis.kinds.sketch.estimate import estimate_sketch
from analysis.streaming import ReportSource, aggregate
from client_sdk.mechanisms.base import AggregateStatistic, Mechanism
from client_sdk.mechanisms.pem import PEM
from client_sdk.mechanisms.sfp import FRAGMENTS, SFP

__all__ = [
    "TOP",
    "discover",
    "discover_pem",
    "discover_pem_by_support",
    "discover_sfp",
]


SFP_METHOD = "sequence fragment puzzle; confirmation against the word sketch"
MAX_ASSEMBLED = 4096
"""At most this many strings are assembled from the fragments of one tag."""

TOP = 64
"""Default number of prefixes a discovery keeps per level (and of strings it reports)."""

PEM_METHOD = (
    "prefix extension over local hashing; exact binomial test of each string on the levels "
    "after it was finished"
)


def _level_reached(levels: Sequence[dict[str, Any]]) -> int | str | None:
    reached = [level["level"] for level in levels if level.get("above_noise")]
    return reached[-1] if reached else None


def _top_candidate(items: Sequence[DiscoveredItem]) -> tuple[str | None, float | None]:
    positive = [item for item in items if item.frequency > 0]
    return (positive[0].value, positive[0].frequency) if positive else (None, None)


def _selection_z(kept: int, candidates: int, observed: Sequence[float]) -> float:
    """The kept threshold in null standard errors: the median of the ``observed`` ones (the
    ``kept``-th largest estimate of each stage), at least the normal quantile z_(1 - kept /
    candidates) and 0 (only positive estimates are kept)."""
    normal = float(-special.ndtri(kept / candidates)) if kept < candidates else 0.0
    return max(normal, float(np.median(observed)) if len(observed) else 0.0, 0.0)


def _every_z(stages: int) -> float:
    """z_(0.5^(1/stages)): passing each of ``stages`` independent thresholds with probability
    0.5^(1/stages) passes them all half the time."""
    return float(special.ndtri(0.5 ** (1 / max(stages, 1))))


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
    alphabet: str | None = None,
) -> ItemsEstimate:
    """The frequent strings of PEM reports held in memory (:func:`discover_pem_by_support`)."""
    array = mechanism._check(_concatenate(mechanism, reports))
    levels = array["level"].astype(np.int64)
    per_level = np.bincount(levels, minlength=mechanism.levels).astype(np.int64)
    by_level = {level: array[levels == level] for level in range(mechanism.levels)}

    def support(level: int, prefixes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return mechanism.support_counts(by_level[level], level, prefixes)

    return discover_pem_by_support(
        mechanism,
        per_level,
        support,
        top=top,
        confidence=confidence,
        alpha=alpha,
        alphabet=alphabet,
    )


def discover_pem_by_support(
    mechanism: PEM,
    reports_per_level: npt.NDArray[np.int64],
    support: SupportCounter,
    *,
    top: int = TOP,
    confidence: float = 0.95,
    alpha: float = ALPHA,
    alphabet: str | None = None,
) -> ItemsEstimate:
    """The frequent strings of PEM reports (Wang, Li, Jha; docs/math/heavy-hitters.md), from
    the number of reports at each level and a ``support(level, prefixes)`` callable counting,
    for the reports of that level, how many support each prefix (wherever they live: in
    memory, in shards, on workers).

    Level 0 scores every plausible ``start_bits`` prefix; each later level scores the best
    ``top`` prefixes of the previous level (of positive estimate) extended by every suffix of
    ``step_bits``, pruned to plausible ones. A kept prefix that already determines its string
    (``PEM.complete``: a short string) is set aside as a finished string instead of being
    extended, and is scored on every later level.
    ``alphabet``: for a campaign of UTF-8 bytes, a hint that the values are written in these
    characters; prefixes with a byte of none of their UTF-8 encodings are not scored (strings
    outside it are not found). A campaign with a device alphabet (``PEM.alphabet``) needs no
    hint: its prefixes extend by valid character codes only, and the hint is refused.

    Each level is scored on its own devices, so a string's test is exact given how it was
    chosen (by earlier levels only): it is significant when P[Binomial(N, q*) >= C] <=
    alpha / (the number of strings tested), C its support among the N reports of the levels
    after it was finished (the last level for a string finished there), so the expected number
    of false discoveries per run is at most ``alpha``. The items are the ``top`` best tested
    strings; ``unconfirmed`` those not significant.
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
    last = mechanism.levels - 1

    def null_sd(reports: int) -> float:
        """The standard error of a frequency estimate from ``reports`` under the null."""
        return math.sqrt(q * (1 - q) / reports) / (p - q)

    if alphabet is not None and (not isinstance(alphabet, str) or not alphabet):
        raise ValueError(
            f"alphabet must be a non-empty string of the characters values use; got {alphabet!r}"
        )
    if alphabet is not None and mechanism.alphabet is not None:
        raise ValueError(
            "alphabet: the campaign's pem has a device alphabet (its config's 'alphabet'), so "
            "the decoder extends by its characters only; the hint is for byte campaigns"
        )
    allowed = None if alphabet is None else frozenset(alphabet.encode())
    length_bits, symbol_bits = mechanism.length_bits, mechanism.symbol_bits
    suffix_cache: dict[tuple[int, int, int], list[int]] = {}

    def suffixes(width: int, bits: int, length: int, tail: int) -> list[int]:
        key = (width, length, tail)
        if key not in suffix_cache:
            suffix_cache[key] = mechanism.extensions(width, bits, length, tail, allowed)
        return suffix_cache[key]

    def children(parent: int, level: int) -> list[int]:
        """The plausible extensions of a plausible parent: they depend only on the level, the
        parent's length and the bits of its last, partly covered symbol."""
        width = mechanism.level_bits(level - 1)
        step = mechanism.level_bits(level) - width
        partial = (width - length_bits) % symbol_bits
        length = parent >> (width - length_bits)
        return [
            (parent << step) | suffix
            for suffix in suffixes(width, step, length, parent & ((1 << partial) - 1))
        ]

    levels: list[dict[str, Any]] = []
    start = mechanism.level_bits(0) - length_bits
    prefixes = [
        (length << start) | suffix
        for length in range(mechanism.max_length + 1)
        for suffix in suffixes(length_bits, start, length, 0)
    ]
    kept: list[int] = []
    finished: list[int] = []  # finished strings as bit strings of total_bits
    finished_support = np.zeros(0, dtype=np.int64)
    finished_reports = np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=np.int64)
    thresholds: list[float] = []
    for level in range(mechanism.levels):
        width = mechanism.level_bits(level)
        if level:
            prefixes = [child for prefix in kept for child in children(prefix, level)]
        n_level = int(per_level[level])
        if n_level == 0:
            raise ValueError(f"pem: level {level} has no reports; discovery needs every level")
        scored = prefixes + [s >> (mechanism.total_bits - width) for s in finished]
        counts = np.asarray(support(level, mechanism.prefix_chunks(scored, level)))
        if counts.shape != (len(scored),):
            raise ValueError(
                f"support({level}, ...) returned shape {counts.shape} for {len(scored)} prefixes"
            )
        counts = counts.astype(np.int64)
        finished_support += counts[len(prefixes) :]
        finished_reports += n_level
        counts = counts[: len(prefixes)]
        estimates = (counts / n_level - q) / (p - q)
        best_z = finite(float(estimates.max() / null_sd(n_level))) if len(prefixes) else None
        order = np.argsort(-estimates, kind="stable")
        if level < last and len(prefixes) > top:  # the top-th estimate: the kept threshold
            thresholds.append(float(estimates[order[top - 1]] / null_sd(n_level)))
        done: list[int] = []
        if level < last:
            best = [prefixes[i] for i in order[:top] if estimates[i] > 0]
            finishes = [mechanism.complete(v, level) for v in best]
            done = list(itertools.compress(best, finishes))
            kept = [v for v, finish in zip(best, finishes, strict=True) if not finish]
            finished += [v << (mechanism.total_bits - width) for v in done]
            finished_support = np.r_[finished_support, np.zeros(len(done), np.int64)]
            finished_reports = np.r_[finished_reports, np.zeros(len(done), np.int64)]
        levels.append(
            {
                "level": level,
                "bits": width,
                "reports": n_level,
                "candidates": len(prefixes),
                "kept": len(kept) if level < last else 0,
                "finished": len(done) if level < last else len(prefixes),
                "best_z": best_z,
                "above_noise": best_z is not None
                and best_z > bonferroni_z(alpha, max(1, len(prefixes))),
            }
        )
    tested = list(zip(prefixes, counts.tolist(), itertools.repeat(n_level))) + list(
        zip(finished, finished_support.tolist(), finished_reports.tolist(), strict=True)
    )
    decoded: list[str | None] = []
    if mechanism.alphabet is None:  # bytes may not be UTF-8: decode each to know
        decoded = [mechanism.decode_prefix(v) for v, _, _ in tested]
        strings = [i for i, value in enumerate(decoded) if value is not None]
    else:  # every plausible bit string over an alphabet is a string: decode the items only
        strings = list(range(len(tested)))
    examined = max(1, len(strings))
    support_of = np.asarray([tested[i][1] for i in strings], dtype=np.int64)
    reports_of = np.asarray([tested[i][2] for i in strings], dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        frequencies = (support_of / reports_of - q) / (p - q)
    p_values = stats.binom.sf(support_of - 1, reports_of, q)
    significant = p_values <= alpha / examined
    order = np.argsort(-frequencies, kind="stable")[:top]
    plug = np.clip(frequencies[order], 0.0, 1.0)
    std_errors = np.sqrt(mechanism.frequency_variance(reports_of[order], n, plug)) * n
    null = np.sqrt(q * (1 - q) / reports_of[order]) / (p - q) * n
    critical = bonferroni_z(alpha, examined)
    values: list[str] = []
    for i in order:
        value = decoded[strings[i]] if decoded else mechanism.decode_prefix(tested[strings[i]][0])
        assert value is not None  # only strings were kept
        values.append(value)
    items = items_from_counts(
        values,
        frequencies[order] * n,
        std_errors,
        null,
        n,
        confidence=confidence,
        critical_z=critical,
        significant=significant[order],
    )
    outlook = None
    if not any(item.significant for item in items):
        outlook = pem_outlook(
            mechanism,
            n,
            levels,
            items,
            top=top,
            alpha=alpha,
            examined=examined,
            thresholds=thresholds,
        )
    return ItemsEstimate(
        items=items,
        n=n,
        confidence=confidence,
        alpha=alpha,
        critical_z=critical,
        examined=examined,
        mechanism=mechanism.to_config(),
        method=PEM_METHOD,
        levels=tuple(levels),
        unconfirmed=tuple(item.value for item in items if not item.significant),
        outlook=outlook,
    )


def pem_outlook(
    mechanism: PEM,
    n: int,
    levels: Sequence[dict[str, Any]],
    items: Sequence[DiscoveredItem],
    *,
    top: int,
    alpha: float,
    examined: int,
    thresholds: Sequence[float],
) -> Outlook:
    """A PEM discovery with nothing significant (:class:`Outlook`): each of the L levels holds
    about n/L reports, with null variance V* = q*(1-q*)/(p*-q*)^2 per report of a frequency
    estimate; a string's prefix must rank among the ``top`` kept at each of the L - 1 pruning
    levels (``thresholds``: the observed ``top``-th estimates in null standard errors), and the
    string pass the final test, z_(1 - alpha/examined) on the last level's reports."""
    p, q = mechanism.p_star, mechanism.q_star
    per_report = q * (1 - q) / (p - q) ** 2
    candidates = int(np.median([level["candidates"] for level in levels])) or 1
    value, frequency = _top_candidate(items)
    return Outlook(
        n=n,
        stages=len(levels),
        level_reached=_level_reached(levels),
        stages_above_noise=sum(bool(level.get("above_noise")) for level in levels),
        per_report=per_report,
        stage_share=mechanism.levels,
        selection_z=_selection_z(top, candidates, thresholds),
        every_z=_every_z(mechanism.levels - 1),
        final_per_report=per_report,
        final_share=mechanism.levels,
        final_z=bonferroni_z(alpha, max(1, examined)),
        top_value=value,
        top_frequency=frequency,
    )


def sfp_outlook(
    mechanism: SFP,
    n: int,
    levels: Sequence[dict[str, Any]],
    items: Sequence[DiscoveredItem],
    *,
    top: int,
    alpha: float,
    examined: int,
    thresholds: Sequence[float],
) -> Outlook:
    """An SFP discovery with nothing significant (:class:`Outlook`): a string's fragment must be
    among the 2 ``top`` kept at every one of the ``max_length`` offsets (n / max_length reports
    each, null variance v_f per report of the Hadamard fragment oracle; ``thresholds``: the
    observed 2 ``top``-th estimates in null standard errors), and its word pass the word
    sketch's test (null variance v_w per report of all n, Bonferroni over the candidates
    examined, ``top`` when none were), as ``client_sdk.mechanisms.sfp.resolved_share`` models
    it."""
    offsets = mechanism.offsets
    fragment = float(mechanism.fragment_oracle.variance(1, np.zeros(FRAGMENTS))[0])
    word = float(mechanism.word_sketch.count_variance(1, np.zeros(1), np.zeros(1))[0])
    value, frequency = _top_candidate(items)
    return Outlook(
        n=n,
        stages=len(levels),
        level_reached=_level_reached(levels),
        stages_above_noise=sum(bool(level.get("above_noise")) for level in levels),
        per_report=fragment,
        stage_share=offsets,
        selection_z=_selection_z(2 * top, FRAGMENTS, thresholds),
        every_z=_every_z(offsets),
        final_per_report=word,
        final_share=1,
        final_z=bonferroni_z(alpha, max(1, examined or top)),
        top_value=value,
        top_frequency=frequency,
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
    independent of the fragments': the candidates are tested by :func:`estimate_sketch` (the
    same debiasing through the word sketch's exact collisions with the significant candidates,
    the same null), Bonferroni over the assembled candidates, so E[false discoveries] <= alpha
    under the null it states (``ItemsEstimate.null``; heavy-hitters.md).
    """
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot discover from zero reports")
    word, fragments = mechanism.split(statistic)
    kept: list[dict[int, list[int]]] = []
    levels: list[dict[str, Any]] = []
    thresholds: list[float] = []  # the 2 top-th estimate of each offset, in null std errors
    for offset, fragment in enumerate(fragments):
        by_tag: dict[int, list[int]] = {}
        best_z = None
        if fragment.n:
            estimates = mechanism.fragment_counts(fragment)
            order = np.argsort(-estimates, kind="stable")[: 2 * top]
            for row in order[estimates[order] > 0]:
                by_tag.setdefault(int(row) // 256, []).append(int(row) % 256)
            null = np.sqrt(mechanism.fragment_variance(fragment, np.zeros(FRAGMENTS)))
            best_z = finite(float(estimates[order[0]] / null[order[0]]))
            thresholds.append(float(estimates[order[-1]] / null[order[-1]]))
        kept.append(by_tag)
        levels.append(
            {
                "level": offset,
                "reports": fragment.n,
                "candidates": FRAGMENTS,
                "kept": sum(map(len, by_tag.values())),
                "best_z": best_z,
                "above_noise": best_z is not None and best_z > bonferroni_z(alpha, FRAGMENTS),
            }
        )
    assembled: list[bytes] = []
    tag_of: list[int] = []
    for tag in sorted(set.intersection(*(set(k) for k in kept))) if kept else []:
        for combination in itertools.islice(
            itertools.product(*(k[tag] for k in kept)), MAX_ASSEMBLED
        ):
            assembled.append(bytes(combination).rstrip(b"\x00"))
            tag_of.append(tag)
    candidates: list[str] = []
    agree = mechanism.tags(assembled) == np.asarray(tag_of, dtype=np.int64)
    for raw in itertools.compress(assembled, agree):  # the fragments agree with their tag
        try:
            candidates.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    words = {"level": "words", "reports": word.n, "candidates": len(candidates), "kept": 0}
    if not candidates:
        levels.append({**words, "best_z": None, "above_noise": False})
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
            outlook=sfp_outlook(
                mechanism,
                statistic.n,
                levels,
                (),
                top=top,
                alpha=alpha,
                examined=0,
                thresholds=thresholds,
            ),
        )
    confirmed = estimate_sketch(
        mechanism.word_sketch, word, candidates, confidence=confidence, alpha=alpha
    )
    items = confirmed.items[:top]
    best_z = finite(max(item.z for item in confirmed.items))
    levels.append({**words, "best_z": best_z, "above_noise": bool(confirmed.significant)})
    outlook = None
    if not confirmed.significant:
        outlook = sfp_outlook(
            mechanism,
            statistic.n,
            levels,
            items,
            top=top,
            alpha=alpha,
            examined=len(candidates),
            thresholds=thresholds,
        )
    return dataclasses.replace(
        confirmed,
        items=items,
        mechanism=mechanism.to_config(),
        method=SFP_METHOD,
        levels=tuple(levels),
        unconfirmed=tuple(item.value for item in items if not item.significant),
        outlook=outlook,
    )


DECODERS: dict[str, Callable[..., ItemsEstimate]] = {
    "prefixes": discover_pem,
    "fragments": discover_sfp,
}
"""The decoder of each ``Mechanism.discovery``: a new discovery mechanism adds one entry."""


def discover(
    mechanism: Mechanism, reports: ReportSource, *, confidence: float = 0.95
) -> ItemsEstimate:
    """The discovery of ``mechanism`` (``estimate_kind`` ``"discovery"``): its decoder in
    :data:`DECODERS`, by ``mechanism.discovery``."""
    decoder = DECODERS.get(mechanism.discovery or "")
    if decoder is None:
        raise TypeError(f"no discovery decoder for mechanism {mechanism.name!r}")
    return decoder(mechanism, reports, confidence=confidence)
