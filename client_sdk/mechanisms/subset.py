"""Subset selection (k-subset): report a random size-d subset of the domain.

Ye & Barg, IEEE Trans. Inf. Theory 64(8), 2018; Wang, Huang, Wang, Nie, Xu, Yang, Li, Qiao,
arXiv:1607.08025 (docs/math/subset-selection.md). P(Y | x) is proportional to e^eps when x is in Y
and to 1 otherwise: with probability p = d e^eps/(d e^eps + k - d) the subset is x plus d-1 uniform
other values, otherwise d uniform values other than x. Report Y supports every member, so p* = p and
q* = [p(d-1) + (1-p)d]/(k-1) = (d-p)/(k-1).

Reports are packed bitmaps of length k with exactly d ones (``numpy.packbits`` rows, as unary
encoding). A bitmap is a function of the set alone, so neither the report nor its wire form can
carry an order: a list of members with the true value first (as one published library sent) would
reveal it outright.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import bits_text, decode_bits, encode_bit_rows
from client_sdk.mechanisms.base import FloatArray, FrequencyOracle, Reports, WireFormatError
from client_sdk.mechanisms.unary import check_bit_vector_k, column_counts, rows_per_chunk
from client_sdk.randomness import (
    RandomSource,
    bernoulli,
    probability_threshold,
    threshold_probability,
    uniform_below_32,
)

MAX_ENUMERATED_OUTPUTS = 1 << 12
"""Largest number of subsets C(k, d) that ``channel_matrices`` enumerates."""

FLOYD_BLOCK_DRAWS = 1 << 20
"""Uniform draws made in one call while sampling subsets (8 MiB of int64 at most)."""


def inclusion_probability(k: int, d: Any, e: Any) -> Any:
    """p = d e^eps / (d e^eps + k - d): P[x in Y] (Fractions, floats or numpy arrays)."""
    return d * e / (d * e + k - d)


def other_support_probability(k: int, d: Any, p: Any) -> Any:
    """q* = [p(d-1) + (1-p)d]/(k-1) = (d-p)/(k-1): P[v in Y] for v other than the input."""
    return (d - p) / (k - 1)


def optimal_subset_size(k: int, epsilon: float) -> int:
    """The d in [1, k-1] with the least total error k Var*(d) + (1-p*-q*)/(p*-q*) (section 0).

    Every d is scanned (vectorized over d, O(k)); on a tie the smaller d (a smaller report
    when members are listed) wins. This is ``SS(epsilon, k, d).total_variance()`` evaluated for
    all d at once (from the ideal p; the implemented p differs by at most 2**-64).
    """
    d = np.arange(1, k, dtype=np.float64)
    p = inclusion_probability(k, d, math.exp(epsilon))
    q = other_support_probability(k, d, p)
    total = k * q * (1 - q) / (p - q) ** 2 + (1 - p - q) / (p - q)
    return int(np.argmin(total)) + 1


def colex_rank(packed: npt.NDArray[np.uint8], k: int, d: int) -> npt.NDArray[np.int64]:
    """The rank of each d-subset of [0, k) in colexicographic order: sum_i C(c_i, i).

    c_1 < ... < c_d are the members; the combinatorial number system maps the C(k, d) subsets
    one-to-one onto [0, C(k, d)). Needs C(k, d) < 2**63.
    """
    if math.comb(k, d) >= 1 << 63:
        raise ValueError(f"C({k}, {d}) subsets do not fit in an int64 rank")
    table = np.array([[math.comb(c, i) for i in range(d + 1)] for c in range(k)], dtype=np.int64)
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), axis=1, count=k).astype(bool)
    order = np.cumsum(bits, axis=1)  # i for the i-th member, counting from 1
    ranks = table[np.arange(k)[None, :], np.minimum(order, d)]
    return np.where(bits, ranks, 0).sum(axis=1)


@dataclasses.dataclass(frozen=True)
class SS(FrequencyOracle):
    """Subset selection. ``d`` (subset size) is chosen by :func:`optimal_subset_size` if omitted.

    The chosen d is stored in the object and so written by ``to_config()``: a campaign's config
    pins its subset size, and a later change of the selection rule cannot silently change the
    channel under an existing config id.
    """

    name: ClassVar[str] = "ss"
    resolved_shape: ClassVar[str | None] = "d"
    epsilon: float
    k: int
    d: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_bit_vector_k(self.k))
        if self.d is None:
            object.__setattr__(self, "d", optimal_subset_size(self.k, self.epsilon))
        else:
            object.__setattr__(self, "d", check_int(self.d, "d", minimum=1, maximum=self.k - 1))

    @property
    def size(self) -> int:
        """The subset size d (never None after construction)."""
        assert self.d is not None
        return self.d

    # The worst ratio of the implemented channel is P[Y | x] / P[Y | x'] for Y containing x but
    # not x': [p / C(k-1, d-1)] / [(1-p) / C(k-1, d)] = p(k-d) / ((1-p)d), increasing in p. So p
    # is rounded *down* to the sampler's 2**-64 grid: the ratio never exceeds e^eps, and falls
    # short of it by a relative 2**-64/(1-p) at most, so the claim stays tight.
    @cached_property
    def _include_threshold(self) -> int:
        p = inclusion_probability(self.k, self.size, Fraction(math.exp(self.epsilon)))
        return probability_threshold(p, rounding="down")

    @cached_property
    def _include_probability(self) -> Fraction:
        return threshold_probability(self._include_threshold)

    @property
    def p_star(self) -> float:
        return float(self._include_probability)

    @property
    def q_star(self) -> float:
        return float(other_support_probability(self.k, self.size, self._include_probability))

    @property
    def report_bytes(self) -> int:
        """Bytes per packed report: ceil(k/8)."""
        return (self.k + 7) // 8

    def subset_probabilities(self) -> tuple[Fraction, Fraction]:
        """Exact P[Y | x] for one subset Y containing x, and for one not containing x."""
        p = self._include_probability
        k, d = self.k, self.size
        return p / math.comb(k - 1, d - 1), (1 - p) / math.comb(k - 1, d)

    def mixture_column_profile(self) -> tuple[Fraction, Fraction, bool]:
        """Exact: R = P[Y | x in Y] / P[Y | x not in Y], and M = (d R + k - d)/k (d members)."""
        inside, outside = self.subset_probabilities()
        high = inside / outside
        d = self.size
        return high, (d * high + self.k - d) / self.k, True

    # ---- device side -------------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """Packed bitmaps with exactly d ones, sampled exactly and vectorized over reports.

        Per report, Bernoulli(p) decides whether x is a member; the other members are a uniform
        subset of the k-1 values other than x, drawn by Floyd's algorithm run across all reports
        of a chunk at once (one vectorized step per member, a membership bitmap per chunk). When
        d > k/2 the complement (k-d values, with x a member exactly when x is not in Y) is drawn
        instead and inverted, so the work is min(d, k-d) steps.
        """
        x = check_values(values, self.k)
        k, d = self.k, self.size
        include = bernoulli(rng, self._include_threshold, x.size)
        complement = 2 * d > k
        members = k - d if complement else d
        out = np.empty((x.size, self.report_bytes), dtype=np.uint8)
        step = rows_per_chunk(k)
        for start in range(0, x.size, step):
            rows = x[start : start + step]
            has_x = include[start : start + step] != complement
            bitmap = _floyd_bitmaps(rng, rows, has_x, members, k)
            if complement:
                np.logical_not(bitmap, out=bitmap)
            out[start : start + rows.size] = np.packbits(bitmap, axis=1)
        return out

    # ---- wire ---------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return bits_text(self.k)

    def to_wire(self, reports: Reports) -> list[Any]:
        return list(encode_bit_rows(reports, self.k))

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return decode_bits(payloads, self.k, exact_ones=self.size)

    # ---- server side --------------------------------------------------------------------------

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return column_counts(reports, self.k)

    def channel_matrices(self) -> Iterator[FloatArray]:
        """P[Y | x] over all C(k, d) subsets, column = colexicographic rank of Y."""
        k, d = self.k, self.size
        outputs = math.comb(k, d)
        if outputs > MAX_ENUMERATED_OUTPUTS:
            raise ValueError(
                f"C({k}, {d}) = {outputs} subsets are too many to enumerate "
                f"(limit {MAX_ENUMERATED_OUTPUTS})"
            )
        inside, outside = (float(v) for v in self.subset_probabilities())
        membership = np.zeros((outputs, k), dtype=bool)
        for subset in itertools.combinations(range(k), d):
            rank = sum(math.comb(c, i + 1) for i, c in enumerate(subset))
            membership[rank, list(subset)] = True
        yield np.where(membership.T, inside, outside)

    def output_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The column of ``channel_matrices`` each report falls in (its colex rank)."""
        return colex_rank(reports, self.k, self.size)


def _floyd_bitmaps(
    rng: RandomSource | None,
    x: npt.NDArray[np.int64],
    has_x: npt.NDArray[np.bool_],
    members: int,
    k: int,
) -> npt.NDArray[np.bool_]:
    """Bitmaps (len(x), k): x set where ``has_x``, plus uniform others up to ``members`` ones.

    Floyd's algorithm (Bentley & Floyd, CACM 1987) draws a uniform m-subset of [0, N) in m steps:
    for j = N-m .. N-1, draw t uniform in [0, j] and add t, or j if t is already a member. Here
    N = k-1 indexes the values other than x: index i stands for value i, except that index x
    stands for value k-1 (a bijection onto [0, k) minus x, applied once at the end by moving
    column x to column k-1). A row that already holds x needs members-1 others, so it skips the
    first step.
    """
    rows = x.size
    others = k - 1
    flat = np.zeros(rows * k, dtype=bool)
    base = np.arange(rows, dtype=np.int64) * k
    first = others - members
    active = np.flatnonzero(~has_x)
    block = max(1, FLOYD_BLOCK_DRAWS // max(rows, 1))
    for block_start in range(first, others, block):
        steps = np.arange(block_start, min(others, block_start + block))
        # t uniform in [0, j] for every step j of the block and every row, in one call.
        draws = uniform_below_32(rng, steps[:, None] + 1, (steps.size, rows))
        for j, t in zip(steps.tolist(), draws, strict=True):
            row_base = base[active] if j == first else base
            candidate = (t[active] if j == first else t) + row_base
            taken = flat[candidate]
            flat[np.where(taken, row_base + j, candidate)] = True
    at_x = base + x
    flat[base + others] = flat[at_x]  # index x stands for value k-1 (no-op when x == k-1)
    flat[at_x] = has_x
    return flat.reshape(rows, k)
