"""The central gap of heavy hitters (estimate kinds ``discovery`` and ``sketch``;
docs/math/central-and-shuffle.md, docs/math/heavy-hitters.md).

Two questions, asked of both models on the same users:

- **top k**: "which are the k most frequent strings". Locally: the significant strings among the
  k first of the kind's own estimator (``analysis.kinds.discovery``: PEM or SFP discovery, or a
  CMS/HCMS sketch against the vocabulary). Centrally, at the same epsilon in all, on the true
  counts over the vocabulary (a public candidate list, as a pure-epsilon curator needs), from
  ``analysis.selection``'s exact samplers: k rounds of the exponential mechanism at epsilon/k
  each (peeling; the law of one-shot top-k with Gumbel noise), k rounds of permute-and-flip, and
  k rounds of report noisy max (discrete Laplace), each epsilon-DP by composition; and report
  noisy max with Gaussian noise in one shot, (epsilon, delta)-DP. Scores are counts, of
  sensitivity 1 under both neighbouring relations (each score moves by at most one).
- **above T**: "which strings have frequency at least T". Locally: the significant strings whose
  estimate is at least T. Centrally: the sparse vector technique (AboveThreshold with cutoff c =
  k, Lyu, Su, Li 2017, Algorithm 1) over the vocabulary in a fixed public order.

Recall = |answer and truth| / |truth|, precision = |answer and truth| / |answer| (``None`` for
an empty answer). Measured in simulation (the truth is known); the central ones averaged over
``repetitions`` runs. Exact figures beside them:

- a lower bound on the central expected top-k recall. While a true top-k string remains, one
  round picks a string r outside the top k with probability at most
  beta = sum_{r not in top k} exp(-eps' (u_(k) - u_r) / 2) (exponential mechanism and
  permute-and-flip: the remaining maximum is at least u_(k); report noisy max: twice the
  discrete Laplace tail at half the gap), so E[misses] <= k beta and E[recall] >= 1 - beta.
  The Gaussian one-shot top k (``analysis.selection.gaussian_top_k``, the only (epsilon, delta)
  answer) lets r in only if it beats some true top-k string t, so E[misses] <= sum_{r, t}
  Phi(-(u_t - u_r) / (sqrt 2 s)) with s the noise's standard deviation;
- the detection thresholds: the smallest frequency the local decoder can call significant
  (critical z times its null standard error) against a curator's noisy histogram with the same
  Bonferroni rule (Laplace of scale Delta_1/epsilon over the vocabulary: a count passes
  b ln(V / (2 alpha)) with probability at most alpha / V when nobody holds the string).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    first_reports,
    laplace_sensitivity,
    zipf_weights,
)
from analysis.kinds._common.items import ALPHA, ItemsEstimate, bonferroni_z
from analysis.selection import (
    gaussian_noise,
    gaussian_top_k,
    permute_and_flip,
    rational_epsilon,
    report_noisy_max,
    sparse_vector,
    top_k,
)
from client_sdk.mechanisms.base import Mechanism
from client_sdk.sampling import DiscreteLaplace

__all__ = [
    "CENTRAL_TOP_K",
    "Decoder",
    "central_recall_bound",
    "detection_thresholds",
    "exact_gap",
    "measured_gap",
    "recall_precision",
    "simulated_items_gap",
    "vocabulary",
]

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def vocabulary(size: int, max_length: int, rng: np.random.Generator) -> list[str]:
    """``size`` distinct ASCII strings of at most ``max_length`` bytes, in a random order (so the
    public query order of the sparse vector says nothing about the ranks)."""
    width = max(1, math.ceil(math.log(size, len(_ALPHABET)))) if size > 1 else 1
    if width > max_length:
        raise ValueError(
            f"a vocabulary of {size} strings needs {width} bytes each; the mechanism's "
            f"max_length is {max_length}"
        )
    words = []
    for index in rng.permutation(size):
        digits = []
        for _ in range(width):
            index, digit = divmod(int(index), len(_ALPHABET))
            digits.append(_ALPHABET[digit])
        words.append("".join(digits))
    return words


def recall_precision(answer: Sequence[str], truth: set[str]) -> dict[str, float | int | None]:
    found = set(answer)
    hits = len(found & truth)
    return {
        "answered": len(found),
        "correct": hits,
        "recall": hits / len(truth) if truth else None,
        "precision": hits / len(found) if found else None,
    }


def _sorted_counts(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _truth_sets(
    counts: Mapping[str, int], n: int, options: GapOptions
) -> tuple[set[str], float, set[str]]:
    ranked = [(value, count) for value, count in _sorted_counts(counts) if count > 0]
    k = min(options.top, len(ranked))
    kth = ranked[k - 1][1] if k else 1
    top = {value for value, count in ranked if count >= kth}
    threshold = options.threshold if options.threshold is not None else kth / n
    above = {value for value, count in ranked if count >= threshold * n}
    return top, threshold, above


def _peel(
    pick: Callable[[npt.NDArray[np.int64], Fraction], int],
    scores: npt.NDArray[np.int64],
    k: int,
    epsilon: Fraction,
) -> list[int]:
    remaining = np.arange(scores.size)
    chosen: list[int] = []
    for _ in range(k):
        index = pick(scores[remaining], epsilon)
        chosen.append(int(remaining[index]))
        remaining = np.delete(remaining, index)
    return chosen


CENTRAL_TOP_K: dict[str, str] = {
    "exponential_mechanism": "exponential mechanism, k peeling rounds at epsilon/k "
    "(the law of one-shot Gumbel top-k)",
    "permute_and_flip": "permute-and-flip, k peeling rounds at epsilon/k",
    "report_noisy_max": "report noisy max (discrete Laplace), k peeling rounds at epsilon/k",
    "gaussian_top_k": "report noisy max with Gaussian noise: the histogram plus discrete "
    "Gaussian noise once, the k largest ((epsilon, delta)-DP)",
}
"""The central top-k answers and how each spends epsilon."""


def _l2(options: GapOptions) -> float:
    return math.sqrt(2.0) if options.neighbouring == "replace" else 1.0


def _central_top_k(
    name: str,
    scores: npt.NDArray[np.int64],
    k: int,
    epsilon: float,
    options: GapOptions,
    rng: np.random.Generator,
) -> list[int]:
    per_round = rational_epsilon(epsilon) / k
    if name == "gaussian_top_k":
        return gaussian_top_k(
            scores, k, epsilon, options.delta, l2_sensitivity=_l2(options), rng=rng
        )
    if name == "exponential_mechanism":
        return top_k(scores, k, per_round, rng=rng)
    if name == "permute_and_flip":
        return _peel(lambda s, e: permute_and_flip(s, e, rng=rng), scores, k, per_round)
    return _peel(lambda s, e: report_noisy_max(s, e, rng=rng), scores, k, per_round)


def central_recall_bound(
    scores: npt.ArrayLike,
    k: int,
    epsilon: float,
    mechanism: str = "exponential_mechanism",
    options: GapOptions | None = None,
) -> float:
    """A lower bound on the expected recall of the true top k by ``mechanism`` (module
    docstring); ties at the k-th count give 0."""
    u = np.sort(np.asarray(scores, dtype=np.int64))[::-1]
    if k >= u.size:
        return 1.0
    per_round = float(rational_epsilon(epsilon) / k)
    gaps = u[k - 1] - u[k:]
    if mechanism == "gaussian_top_k":
        options = options or GapOptions()
        scale, gaussian = gaussian_noise(epsilon, options.delta, _l2(options))
        sd = math.sqrt(2 * gaussian.sigma2) / scale  # of the difference of two noisy counts
        pairs = u[:k, None] - u[None, k:]  # a true top-k string against one outside
        misses = float(np.sum(special.ndtr(-pairs / sd)))
        return max(0.0, 1.0 - misses / k)
    if mechanism == "report_noisy_max":
        noise = DiscreteLaplace(Fraction(2) / (rational_epsilon(epsilon) / k))
        beta = float(sum(2 * noise.tail(max(1, math.ceil(g / 2))) if g > 0 else 1.0 for g in gaps))
    else:
        beta = float(np.sum(np.exp(-per_round * gaps / 2)))
    return max(0.0, 1.0 - beta)


def _central_threshold(
    scores: npt.NDArray[np.int64], threshold: int, cutoff: int, epsilon: float, rng: Any
) -> list[int]:
    answers = sparse_vector(scores, threshold, epsilon, cutoff=cutoff, rng=rng)
    return [i for i, above in enumerate(answers) if above]


def detection_thresholds(
    mechanism: Mechanism, n: int, vocabulary_size: int, options: GapOptions, alpha: float = ALPHA
) -> dict[str, Any]:
    """The smallest frequencies each model calls significant (module docstring): the curator's
    exactly; the local one from the mechanism's null variance where it has a closed form (PEM's
    last level; a sketch's with every other report a distinct string, the least collisions)."""
    epsilon = mechanism.privacy_epsilon
    scale = laplace_sensitivity(options.neighbouring) / epsilon
    central = scale * math.log(vocabulary_size / (2 * alpha)) / n
    local: float | None = None
    note = "needs the estimate (the decoder's own null standard error)"
    closed_form = mechanism.null_detection_frequency(n, bonferroni_z(alpha, vocabulary_size))
    if closed_form is not None:
        local, note = closed_form
    return {
        "alpha": alpha,
        "candidates": vocabulary_size,
        "local_frequency": local,
        "local_note": note,
        "central_laplace_frequency": central,
        "ratio": None if local is None else local / central,
    }


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    return {
        "question": {"top": options.top, "threshold": options.threshold},
        "central_mechanisms": {**CENTRAL_TOP_K, "sparse_vector": _svt_note(options.top)},
        "detection": detection_thresholds(mechanism, n, options.vocabulary, options),
        "exact": "detection thresholds; recall and precision need the truth (--simulate)",
    }


def _svt_note(cutoff: int) -> str:
    return (
        f"sparse vector (AboveThreshold, Lyu-Su-Li Algorithm 1, cutoff {cutoff}) over the "
        "vocabulary in a fixed public order"
    )


def _local_answers(estimate: ItemsEstimate, k: int, threshold: float) -> tuple[list[str], ...]:
    top = [item.value for item in estimate.items[:k] if item.significant]
    above = [
        item.value for item in estimate.items if item.significant and item.frequency >= threshold
    ]
    return top, above


def _mean(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("answered", "correct", "recall", "precision"):
        values = [row[key] for row in rows if row[key] is not None]
        out[key] = float(np.mean(values)) if values else None
    out["runs"] = len(rows)
    return out


def measured_gap(
    mechanism: Mechanism,
    estimate: ItemsEstimate,
    truth: Mapping[str, int],
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the true count of every string of the vocabulary (0 for those nobody holds);
    its strings are the curator's public candidate list."""
    counts = {str(value): int(count) for value, count in truth.items()}
    n = estimate.n
    if sum(counts.values()) != n or min(counts.values(), default=0) < 0:
        raise ValueError(f"the true counts sum to {sum(counts.values())}; the estimate has n={n}")
    words = sorted(counts)
    scores = np.asarray([counts[w] for w in words], dtype=np.int64)
    k = min(options.top, int(np.count_nonzero(scores)))
    if k == 0:
        raise ValueError("the true counts hold no string")
    top, threshold, above = _truth_sets(counts, n, options)
    local_top, local_above = _local_answers(estimate, k, threshold)
    epsilon = mechanism.privacy_epsilon
    central: dict[str, Any] = {}
    for name in CENTRAL_TOP_K:
        runs = [
            recall_precision(
                [words[i] for i in _central_top_k(name, scores, k, epsilon, options, rng)], top
            )
            for _ in range(options.repetitions)
        ]
        central[name] = {
            **_mean(runs),
            "recall_bound": central_recall_bound(scores, k, epsilon, name, options),
        }
    order = rng.permutation(len(words))  # the fixed public order of the queries
    threshold_count = math.ceil(threshold * n)
    svt_runs = [
        recall_precision(
            [
                words[order[i]]
                for i in _central_threshold(scores[order], threshold_count, k, epsilon, rng)
            ],
            above,
        )
        for _ in range(options.repetitions)
    ]
    false_discoveries = sum(1 for item in estimate.significant if counts.get(item.value, 0) == 0)
    return {
        "top_k": {
            "k": k,
            "truth": sorted(top),
            "true_frequencies": {value: counts[value] / n for value in sorted(top)},
            "local": recall_precision(local_top, top),
            "central": central,
        },
        "above_threshold": {
            "threshold": threshold,
            "truth": sorted(above),
            "local": recall_precision(local_above, above),
            "central": {"sparse_vector": {**_mean(svt_runs), "cutoff": k}},
        },
        "local_false_discoveries": false_discoveries,
        "local_expected_false_discoveries_at_most": estimate.alpha,
        "measured": True,
    }


Decoder = Callable[[Any, list[str]], ItemsEstimate]
"""A string kind's estimator as its gap calls it: ``decode(reports, vocabulary)`` (a sketch
estimates the vocabulary as its candidates; a discovery ignores it)."""


def simulated_items_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
    decode: Decoder,
) -> dict[str, Any]:
    """A vocabulary of ``options.vocabulary`` strings with the simulation's shares by rank, n users
    drawn from it, perturbed by the mechanism (a memoizing one's first report of each new device:
    :func:`~analysis.kinds._common.gap.first_reports`) and decoded by the kind's own estimator
    (``decode``)."""
    max_length = int(getattr(mechanism, "max_length", 64))
    words = vocabulary(options.vocabulary, max_length, rng)
    items = rng.choice(len(words), size=n, p=zipf_weights(len(words), simulation))
    values = [words[i] for i in items]
    reports = first_reports(mechanism, values, rng)
    estimate = decode(reports, words)
    held = np.bincount(items, minlength=len(words))
    truth = {word: int(count) for word, count in zip(words, held, strict=True)}
    out = measured_gap(mechanism, estimate, truth, options, rng)
    out["vocabulary"] = len(words)
    out["local_estimate"] = estimate.to_dict()
    return out
