"""Hadamard response (HR), basic and blocked, decoded with a fast Walsh-Hadamard transform.

Acharya, Sun, Zhang, "Hadamard Response: Estimating Distributions Privately, Efficiently, and
with Little Communication", AISTATS 2019 (docs/math/hadamard.md).

Layout. The output space is ``blocks`` blocks of ``b`` outputs each (b a power of two); output
y = c * b + o is offset o of block c. Symbol x lives in block j = x // (b - 1) and owns row
r = x % (b - 1) + 1 of the Sylvester Hadamard matrix H_b (row 0, all ones, is never used), i.e. the
half-set C_x = {o : popcount(r & o) even} of its block (b/2 outputs). The report is drawn with

    P(y | x) = alpha  for y in x's half-set,   beta  for every other output,   alpha/beta = e^eps.

Equivalently, with probability p = e^eps / (e^eps + 2*blocks - 1) it is uniform on x's half-set,
otherwise uniform on the other 2*blocks - 1 half-blocks (the other half of x's block, and both
halves of every other block). ``blocks = 1`` is the basic high-privacy form (b = K =
2^ceil(log2(k+1)), p* = e^eps/(e^eps+1), q* = 1/2); more blocks suit large epsilon.

Choice of the form. A block of size b holds b - 1 symbols, so b determines
blocks = ceil(k / (b - 1)) (no empty block: an empty block only adds outputs of weight beta and
raises the variance). The paper's rule is blocks = 2^floor(log2 min(2k, e^eps)) and b =
2^ceil(log2(k/blocks + 1)); here, when ``blocks`` is not given, every power of two b in [2, K] is
considered and the one with the lowest exact total variance E||f_hat - f||^2 at the uniform
distribution is kept (ties go to fewer blocks). The same family as the paper's, never worse at the
uniform distribution, and deterministic in (k, epsilon); the resolved ``blocks`` is recorded in
the config, so stored reports are decoded with the layout they were made with.

Estimator (derived here, checked by Monte Carlo in the tests). Per report, let A_v = [y in v's
half-set] and M_v = [y in v's block] (nested: A_v implies M_v), and D_v = 2 A_v - M_v, which is
H_b[r_v, o] for a report in v's block and 0 elsewhere. With alpha, beta as implemented:

    E[D_v] = (b/2)(alpha - beta)  if the user holds v,  0 for every other user,

because a same-block symbol's half-set meets C_v in exactly b/4 outputs and a user of another
block puts the same mass beta on both halves of v's block. Hence the estimator

    f_hat_v = kappa * sum(D_v) / n,   kappa = 2 / (b (alpha - beta)) = 1 / (p - (1-p)/(2B-1))

is unbiased: this is the support count of v (2 sum A_v) corrected by the mass of v's block
(sum M_v), the paper's "block-mass correction". All the sums D_v of one block are its
Walsh-Hadamard transform, so every estimate comes from one FWHT per block of the output
histogram: O(n + K log K) in all. Var[D] = P[M] - E[D]^2 per user, and users are independent, so
for a fixed population with frequencies f and block masses F_j (the sum of f over block j):

    n Var[f_hat_v] = kappa^2 b beta + kappa F_{j(v)} - f_v
                   = 2 (1-p) kappa^2 / (2B - 1) + kappa F_{j(v)} - f_v.

With one block F = 1 and this is the textbook Var* = (e^eps+1)^2/(e^eps-1)^2 with f-coefficient
-1 (docs/math/hadamard.md).

Sampling: a bernoulli(p) picks the half-set or one of the other half-blocks (``uniform_below``);
the offset is uniform in [0, b), and XOR with the lowest set bit of r (an element of odd parity
against row r) moves it into the wanted half, a bijection, so it stays uniform there.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import parse_int_payloads, widest_int
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    EMChannel,
    FloatArray,
    FrequencyOracle,
    Reports,
    WireFormatError,
    histogram_observation,
)
from client_sdk.randomness import (
    RandomSource,
    bernoulli,
    probability_threshold,
    raw_words,
    threshold_probability,
    uniform_below,
)

__all__ = ["HR", "fwht", "valid_block_counts"]

MAX_K = (1 << 24) - 1
"""The output space (at most 2^ceil(log2(k+1)) outputs) and its histogram stay small."""
MAX_ENUMERATED_K = 4096
MAX_ENUMERATED_OUTPUTS = 1 << 16


MATRIX_FWHT_MAX = 1 << 14
"""Float transforms up to this length are two small matrix products (see :func:`fwht`)."""


def fwht(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """Fast Walsh-Hadamard transform along the last axis (Sylvester order, unnormalized).

    ``out[..., r] = sum_o (-1)^popcount(r & o) * values[..., o]``; the last axis must have a
    power-of-two length. Integer inputs are transformed exactly in int64 with log2 K vectorized
    butterfly passes, O(K log K) per row. Float inputs (float64) of length K <= 2^14 use
    H_K = H_L (x) H_R (Kronecker, Sylvester order, L R = K): with the last axis reshaped to
    (L, R) the transform is H_L X H_R, two small BLAS products, several times faster than the
    butterflies when EM transforms a few rows thousands of times; longer ones use butterflies.

    >>> fwht([1, 0, 0, 0]).tolist(), fwht([0.0, 1.0]).tolist()
    ([1, 1, 1, 1], [1.0, -1.0])
    """
    array = np.asarray(values)
    exact = array.dtype == np.bool_ or np.issubdtype(array.dtype, np.integer)
    if array.ndim == 0:
        raise ValueError("fwht needs at least one axis")
    size = array.shape[-1]
    if size < 1 or size & (size - 1):
        raise ValueError(f"the last axis must have a power-of-two length; got {size}")
    lead = array.shape[:-1]
    if not exact and size <= MATRIX_FWHT_MAX:
        bits = size.bit_length() - 1
        left, right = 1 << (bits // 2), 1 << (bits - bits // 2)
        square = np.asarray(array, dtype=np.float64).reshape(*lead, left, right)
        product = _sylvester(left) @ square @ _sylvester(right)
        return np.asarray(product, dtype=np.float64).reshape(*lead, size)
    out: npt.NDArray[Any] = np.array(array, dtype=np.int64 if exact else np.float64, copy=True)
    half = 1
    while half < size:
        view = out.reshape(*lead, size // (2 * half), 2, half)
        top = view[..., 0, :].copy()
        bottom = view[..., 1, :]
        view[..., 0, :] += bottom
        np.subtract(top, bottom, out=bottom)
        half *= 2
    return out


@functools.lru_cache(maxsize=32)
def _sylvester(size: int) -> FloatArray:
    """The Sylvester Hadamard matrix H_size, H[r, o] = (-1)^popcount(r & o), read-only."""
    index = np.arange(size, dtype=np.int64)
    matrix = np.where(_parity(index[:, None] & index[None, :]), -1.0, 1.0)
    matrix.flags.writeable = False
    return matrix


def _parity(values: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """popcount(v) mod 2 for non-negative int64 values."""
    bitwise_count = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if bitwise_count is not None:
        return (bitwise_count(values) & 1).astype(bool)
    v = values.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        v ^= v >> shift
    return (v & 1).astype(bool)


def _full_size(k: int) -> int:
    """K = 2^ceil(log2(k + 1)), the output space of the basic form."""
    return 1 << k.bit_length()  # k.bit_length() = ceil(log2(k + 1))


def valid_block_counts(k: int) -> list[int]:
    """The block counts ceil(k/(b-1)) for b = 2, 4, ..., K (largest first); one per b."""
    counts = []
    b = 2
    while b <= _full_size(k):
        counts.append(-(-k // (b - 1)))
        b *= 2
    return counts


@dataclasses.dataclass(frozen=True)
class HR(FrequencyOracle):
    """Hadamard response over ``blocks`` blocks (1: the basic form). Reports are int64 outputs.

    ``blocks`` is resolved when omitted (module docstring) and then kept in the config.
    """

    name: ClassVar[str] = "hr"
    resolved_shape: ClassVar[str | None] = "blocks"
    epsilon: float
    k: int
    blocks: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=MAX_K))
        if self.epsilon > 700:  # e^eps would overflow a float
            raise ValueError(f"epsilon must be at most 700 for hr; got {self.epsilon!r}")
        valid = valid_block_counts(self.k)
        if self.blocks is None:
            object.__setattr__(self, "blocks", self._best_block_count(valid))
            return
        blocks = check_int(self.blocks, "blocks", minimum=1)
        if blocks not in valid:
            raise ValueError(
                f"blocks must be one of {sorted(valid)} for k={self.k} (one per power-of-two "
                f"block size); got {self.blocks!r}"
            )
        object.__setattr__(self, "blocks", blocks)

    def _best_block_count(self, valid: list[int]) -> int:
        best: HR | None = None
        for blocks in sorted(valid):  # fewest blocks first, so ties keep fewer blocks
            candidate = HR(self.epsilon, self.k, blocks=blocks)
            if best is None or candidate.total_variance() < best.total_variance() * (1 - 1e-12):
                best = candidate
        assert best is not None and best.blocks is not None
        return best.blocks

    # ---- layout -------------------------------------------------------------------------------

    @property
    def num_blocks(self) -> int:
        """The number of blocks B (resolved; 1 for the basic form)."""
        assert self.blocks is not None  # resolved in __post_init__
        return self.blocks

    @cached_property
    def block_size(self) -> int:
        """b: the smallest power of two with (b - 1) * B >= k."""
        per_block = -(-self.k // self.num_blocks)
        return 1 << per_block.bit_length()  # 2^ceil(log2(per_block + 1))

    @property
    def num_outputs(self) -> int:
        """The size of the output space, B * b."""
        return self.num_blocks * self.block_size

    @cached_property
    def _item_block(self) -> npt.NDArray[np.int64]:
        return np.arange(self.k, dtype=np.int64) // (self.block_size - 1)

    @cached_property
    def _item_row(self) -> npt.NDArray[np.int64]:
        return np.arange(self.k, dtype=np.int64) % (self.block_size - 1) + 1

    def fewest_holders(self) -> int:
        """The least c in [1, k-1] such that some output lies in exactly c symbols' half-sets.

        A block holding m symbols gives them rows 1..m of H_b (``_item_row``); output offset o
        lies in the half-set of row r iff H_b[r, o] = +1, so the count at o is
        (m + sum_{r <= m} H_b[r, o]) / 2: one FWHT of the rows' indicator per block size.
        """
        k, b = self.k, self.block_size
        fewest = k
        for rows in set(np.bincount(self._item_block).tolist()):
            indicator = np.zeros(b, dtype=np.int64)
            indicator[1 : rows + 1] = 1
            counts = (rows + fwht(indicator)) // 2
            useful = counts[(counts >= 1) & (counts <= k - 1)]
            if useful.size:
                fewest = min(fewest, int(useful.min()))
        if fewest >= k:
            raise ValueError("no output of the Hadamard response separates two inputs")
        return fewest

    def mixture_column_profile(self) -> tuple[Fraction, Fraction, bool]:
        """Exact: R = alpha/beta, and M = (c R + k - c)/k for c = ``fewest_holders``."""
        alpha, beta = self._levels
        high = Fraction(alpha) / Fraction(beta)
        fewest = self.fewest_holders()
        return high, (fewest * high + self.k - fewest) / self.k, True

    # ---- implemented probabilities ---------------------------------------------------------

    # p is rounded *down*, so alpha/beta = p (2B - 1)/(1 - p) never exceeds e^eps.
    @cached_property
    def _keep_threshold(self) -> int:
        e = Fraction(math.exp(self.epsilon))
        return probability_threshold(e / (e + 2 * self.num_blocks - 1), rounding="down")

    @cached_property
    def _keep_probability(self) -> Fraction:
        return threshold_probability(self._keep_threshold)

    @cached_property
    def _levels(self) -> tuple[Fraction, Fraction]:
        """(alpha, beta): the probability of each output inside / outside x's half-set."""
        p, b, others = self._keep_probability, self.block_size, 2 * self.num_blocks - 1
        return p / (b // 2), (1 - p) / (others * (b // 2))

    @cached_property
    def _kappa(self) -> Fraction:
        alpha, beta = self._levels
        return 2 / (self.block_size * (alpha - beta))

    @property
    def p_star(self) -> float:
        """P[y in v's half-set | the user holds v] = p."""
        return float(self._keep_probability)

    @property
    def q_star(self) -> float:
        """P[y in v's half-set | the user holds another symbol of v's block] = (b/4)(alpha+beta).

        With one block this is every other symbol and equals 1/2 exactly. With several blocks a
        user of another block supports v with probability ``q_star_other_block`` instead; the
        estimator removes both through the block mass (module docstring).
        """
        alpha, beta = self._levels
        return float(Fraction(self.block_size, 4) * (alpha + beta))

    @property
    def q_star_other_block(self) -> float:
        """P[y in v's half-set | the user holds a symbol of another block] = (b/2) beta."""
        return float(Fraction(self.block_size, 2) * self._levels[1])

    # ---- device side ---------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        x = check_values(values, self.k)
        n = x.size
        b, blocks = self.block_size, self.num_blocks
        block = x // (b - 1)
        row = x % (b - 1) + 1
        keep = bernoulli(rng, self._keep_threshold, n)
        # Half-block index w = 2c + h: block c, h = 0 for x's half-set C_x, 1 for its complement.
        if blocks == 1:
            other = np.ones(n, dtype=np.int64)
        else:
            other = uniform_below(rng, 2 * blocks - 1, n)  # any half-block but (block, 0)
            other += other >= 2 * block
        half = np.where(keep, 2 * block, other)
        offset = (raw_words(rng, n) & np.uint64(b - 1)).astype(np.int64)
        wrong_half = _parity(row & offset) != (half & 1).astype(bool)
        offset ^= (row & -row) * wrong_half
        return (half >> 1) * b + offset

    # ---- wire ----------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return widest_int(0, self.num_outputs)

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, self.num_outputs, what="output")

    # ---- server side ---------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        """The output histogram of zero reports (length B * b)."""
        return AggregateStatistic(np.zeros(self.num_outputs, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """The output histogram: the sufficient statistic, O(n)."""
        y = self._check_reports(reports)
        counts = np.bincount(y, minlength=self.num_outputs).astype(np.int64)
        return AggregateStatistic(counts, int(y.size))

    def _transform(self, statistic: AggregateStatistic) -> npt.NDArray[np.int64]:
        """sum D_v for every v: the FWHT of each block of the histogram, read at v's row."""
        counts = np.asarray(statistic.counts, dtype=np.int64)
        if counts.shape != (self.num_outputs,):
            raise ValueError(f"statistic must have shape ({self.num_outputs},); got {counts.shape}")
        spectrum = fwht(counts.reshape(self.num_blocks, self.block_size))
        return np.asarray(spectrum[self._item_block, self._item_row], dtype=np.int64)

    def support_from_statistic(self, statistic: AggregateStatistic) -> FloatArray:
        """C_v = #{y in v's half-set} = (block count + sum D_v) / 2, from the transform."""
        counts = np.asarray(statistic.counts, dtype=np.int64)
        block_totals = counts.reshape(self.num_blocks, self.block_size).sum(axis=1)
        return (block_totals[self._item_block] + self._transform(statistic)) / 2.0

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return self.support_from_statistic(self.aggregate(reports)).astype(np.int64)

    def estimate_frequencies(self, statistic: AggregateStatistic) -> FloatArray:
        """f_v = kappa * sum D_v / n (block-mass corrected; module docstring)."""
        if statistic.n <= 0:
            raise ValueError("cannot estimate frequencies from zero reports")
        return float(self._kappa) * self._transform(statistic) / statistic.n

    def variance(self, n: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var[f_v] = [2(1-p) kappa^2/(2B-1) + kappa F_j(v) - f_v] / n (fixed population)."""
        f = np.asarray(frequencies, dtype=np.float64)
        block_mass = np.bincount(self._item_block, weights=f, minlength=self.num_blocks)
        kappa = float(self._kappa)
        floor = float(2 * (1 - self._keep_probability) * self._kappa**2) / (2 * self.num_blocks - 1)
        return (floor + kappa * block_mass[self._item_block] - f) / n

    def total_variance(self, n: int = 1) -> float:
        """E||f_hat - f||^2 at the uniform distribution, exactly (the sum of ``variance``)."""
        return float(np.sum(self.variance(n, np.full(self.k, 1.0 / self.k))))

    def frequency_coefficient(self) -> float:
        """The coefficient of f_v in n Var[f_v]: -1 for both forms."""
        return -1.0

    def variance_per_user(self) -> float:
        """Var* such that total_variance = (k Var* + coefficient) / n, i.e. the f-independent
        part of n Var[f_v] averaged at the uniform distribution (block masses included; for the
        basic form it is the textbook (e^eps+1)^2/(e^eps-1)^2)."""
        return (self.total_variance(1) - self.frequency_coefficient()) / self.k

    def em_channel(self) -> EMChannel:
        """The exact channel on the output histogram, applied with fast Walsh-Hadamard transforms.

        With the layout above (symbol x owns row r_x of H_b in block j_x; P(y|x) = alpha on its
        half-set, beta elsewhere), [y = (c, o) in C_x] = [c = j_x] (1 + H_b[r_x, o]) / 2, so

            (theta A)(c, o) = beta sum(theta) + (alpha - beta)/2 (F_c + FWHT(theta~_c)[o])
            (A r)_x         = beta sum(r) + (alpha - beta)/2 (R_{j_x} + FWHT(r_{j_x})[r_x])

        where theta~_c places block c's frequencies at their rows and F_c, R_c are block sums:
        about O(K log K) per row instead of the dense O(k K). The tests check both maps against
        ``channel_matrices()``.
        """
        alpha, beta = (float(level) for level in self._levels)
        b, blocks = self.block_size, self.num_blocks
        block_of, row_of = self._item_block, self._item_row
        half = (alpha - beta) / 2.0

        def forward(theta: FloatArray) -> FloatArray:
            lead = theta.shape[:-1]
            placed = np.zeros((*lead, blocks, b))
            placed[..., block_of, row_of] = theta
            spectrum = fwht(placed)
            spectrum += placed.sum(axis=-1, keepdims=True)
            out = beta * theta.sum(axis=-1)[..., None, None] + half * spectrum
            return np.asarray(out.reshape(*lead, blocks * b), dtype=np.float64)

        def backward(ratio: FloatArray) -> FloatArray:
            lead = ratio.shape[:-1]
            blocked = ratio.reshape(*lead, blocks, b)
            spectrum = fwht(blocked)
            totals = blocked.sum(axis=-1)
            picked = spectrum[..., block_of, row_of] + totals[..., block_of]
            return np.asarray(
                beta * ratio.sum(axis=-1, keepdims=True) + half * picked, dtype=np.float64
            )

        return EMChannel("exact", self.k, forward, backward, histogram_observation)

    # ---- exact privacy ---------------------------------------------------------------------

    def channel_matrices(self) -> Iterator[FloatArray]:
        if self.k > MAX_ENUMERATED_K or self.num_outputs > MAX_ENUMERATED_OUTPUTS:
            raise ValueError(
                f"k={self.k} with {self.num_outputs} outputs is too large to enumerate"
            )
        alpha, beta = self._levels
        b = self.block_size
        offsets = np.arange(b, dtype=np.int64)
        matrix = np.full((self.k, self.num_outputs), float(beta))
        for x in range(self.k):
            block, row = int(self._item_block[x]), int(self._item_row[x])
            in_half = ~_parity(row & offsets)
            matrix[x, block * b + offsets[in_half]] = float(alpha)
        yield matrix

    def output_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The column of ``channel_matrices`` each report falls in (its output y)."""
        return np.asarray(reports, dtype=np.int64)

    def _check_reports(self, reports: Reports) -> npt.NDArray[np.int64]:
        y = np.asarray(reports)
        if y.ndim != 1 or not (y.size == 0 or np.issubdtype(y.dtype, np.integer)):
            raise ValueError(
                f"reports must be a 1-D integer array; got shape {y.shape}, dtype {y.dtype}"
            )
        y = y.astype(np.int64, copy=False)
        bad = np.flatnonzero((y < 0) | (y >= self.num_outputs))
        if bad.size:
            raise ValueError(
                f"reports[{int(bad[0])}] must be in [0, {self.num_outputs}); got {y[bad[0]]}"
            )
        return y
