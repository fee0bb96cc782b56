"""Local hashing: binary (BLH) and optimized (OLH) local hashing.

Bassily & Smith, STOC 2015 (the one-bit hashing idea); Wang, Blocki, Li, Jha, USENIX Security 2017
(the names and the optimal g); docs/math/local-hashing.md. Each report draws a **fresh** hash
function h from a universal family mapping the domain [k] to [g], hashes its value and applies
randomized response over [g]: it keeps h(x) with probability p = e^eps/(e^eps + g - 1), otherwise
it reports one of the other g - 1 buckets uniformly. It sends (seed, y); the report supports every
item v with h(v) = y. BLH uses g = 2; OLH uses g = round(e^eps + 1) (Python's round, at least 2),
which minimizes the variance.

The hash family (part of the wire contract; stored reports are decoded with it, so it never
changes). Let P = 2**31 - 1 (a Mersenne prime) and SEED_SPACE = (P - 1) * P. A seed is an integer
s in [0, SEED_SPACE), drawn uniformly from that whole range; it encodes

    a = s // P + 1          (a in [1, P - 1])
    b = s %  P              (b in [0, P - 1])

and, for an item x in [0, k) (k < P is required) and g buckets,

    r       = (a * x + b) mod P                  (Carter & Wegman, JCSS 1979)
    h_s(x)  = floor(g * r / P)                   (in [0, g))

Every (a, b) pair is a distinct function, so the seed space is exactly the set of functions the
family uses (no seed folds onto another, none is left out). The last step maps [0, P) onto [0, g)
by ranges rather than by ``r mod g``: it is as cheap to evaluate and it turns the server's test
"h_s(v) == y" into "r lies in the interval [ceil(yP/g), ceil((y+1)P/g))", which lets the
aggregation walk r from one item to the next with one addition modulo P and no division.

Exactness. For x != x', the map (a, b) -> (r_x, r_x') is a bijection from the seeds onto the
pairs of *distinct* residues, so (r_x, r_x') is a uniform distinct pair and the collision
probability P[h(x) = h(x')] is the same constant c for every pair of items:

    c = sum_j m_j (m_j - 1) / (P (P - 1)),   m_j = |{r in [0, P): floor(g r / P) = j}|,

where the m_j are floor(P/g) or ceil(P/g). c <= 1/g (so the family is universal) and
1/g - c = O(1/P) (for g = 2, c = 1/2 - 1/(2P)). The support probability of a non-holder is then
exactly q* = p c + (1 - p)(1 - c)/(g - 1) (y is uniform over the g - 1 buckets other than h(x)),
which is 1/g only when c = 1/g; this module uses the exact value, so the estimator is exactly
unbiased and the textbook variance (docs/math/local-hashing.md) is exact, with p the implemented
keep probability.

Privacy. The seed is public and independent of the value, so the check conditions on it: given
the seed, the channel is randomized response over [g] applied to h_s(x), whose worst ratio is
p (g - 1)/(1 - p) <= e^eps (p is rounded down to the sampler's grid), whether or not inputs
collide (docs/math/local-hashing.md).
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import is_plain_int, widest_int
from client_sdk.mechanisms.base import FloatArray, FrequencyOracle, Reports, WireFormatError
from client_sdk.mechanisms.grr import (
    RandomizedResponseChain,
    keep_or_other,
    keep_or_other_compact,
    other_probability,
)
from client_sdk.mechanisms.memoization import Chain
from client_sdk.randomness import (
    RandomSource,
    probability_threshold,
    threshold_probability,
    uniform_below,
    uniform_below_bits,
)

__all__ = [
    "BLH",
    "HASH_PRIME",
    "OLH",
    "REPORT_DTYPE",
    "SEED_SPACE",
    "hash_parameters",
    "local_hash",
]

HASH_PRIME = (1 << 31) - 1
"""P, the Mersenne prime of the hash family."""

SEED_SPACE = (HASH_PRIME - 1) * HASH_PRIME
"""Seeds are uniform in [0, SEED_SPACE): one per (a, b) with a in [1, P-1] and b in [0, P-1]."""

MAX_BUCKETS = HASH_PRIME - 1
MAX_ENUMERATED_K = 4096

REPORT_DTYPE = np.dtype([("seed", np.uint64), ("y", np.uint32)])
"""One report: the public hash seed and the randomized bucket y in [0, g)."""

_SEED_HEX_DIGITS = 16
_SEED_PATTERN = re.compile(r"[0-9a-f]{16}")

# Reports per block of the incremental aggregation: 5 uint32/bool work vectors of this length
# (320 KiB) stay in a 512 KiB L2 cache (1 << 16 was 1.7x slower at k = 120 on such a core, and
# no faster at k = 1024).
_AGGREGATION_BLOCK = 1 << 14
# Below this many reports per chunk, evaluating the (reports x items) hash table directly beats
# the per-item loop of the incremental pass, whose cost is dominated by numpy call overhead.
_DIRECT_BELOW = 512
_DIRECT_CELLS = 1 << 18
# Up to this many buckets the intervals' starts are one table looked up by y (int64 floor
# divisions by g cost about 12 ns a report, most of a block's setup at small k).
_INTERVAL_TABLE_MAX = 1 << 16


def hash_parameters(
    seeds: npt.ArrayLike,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """The Carter-Wegman parameters (a, b) of each seed: a = s // P + 1, b = s % P."""
    s = np.asarray(seeds, dtype=np.uint64)
    prime = np.uint64(HASH_PRIME)
    return s // prime + np.uint64(1), s % prime


def local_hash(seeds: npt.ArrayLike, items: npt.ArrayLike, g: int) -> npt.NDArray[np.int64]:
    """h_s(x) = floor(g * ((a x + b) mod P) / P), broadcasting ``seeds`` against ``items``.

    Seeds must be in [0, SEED_SPACE) and items in [0, P - 1), which keeps every intermediate
    below 2**63 in uint64 arithmetic (a x < 2**62).
    """
    a, b = hash_parameters(seeds)
    x = np.asarray(items, dtype=np.uint64)
    r = (a * x + b) % np.uint64(HASH_PRIME)
    return ((r * np.uint64(g)) // np.uint64(HASH_PRIME)).astype(np.int64)


def _bucket_intervals(
    y: npt.NDArray[np.integer], g: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For each bucket y, the residues r with floor(g r / P) == y: [low, low + width)."""
    yy = np.asarray(y, dtype=np.int64)
    low = (yy * HASH_PRIME + g - 1) // g
    high = ((yy + 1) * HASH_PRIME + g - 1) // g
    return low, high - low


def _interval_starts(g: int) -> npt.NDArray[np.int64]:
    """ceil(y P / g) for y in [0, g]: bucket y's residues are [starts[y], starts[y + 1])."""
    y = np.arange(g + 1, dtype=np.int64)
    return (y * HASH_PRIME + g - 1) // g


def _start_residues(
    b: npt.NDArray[np.uint64], low: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint32]:
    """(b - low) mod P for b, low in [0, P), in uint32 without a division: t = b + (P - low)
    lies in [1, 2P) and is below 2**32; t - P wraps around to a huge value exactly when t < P,
    so the minimum of t and t - P is t mod P."""
    t = b.astype(np.uint32)
    t += (HASH_PRIME - low).astype(np.uint32)
    return np.minimum(t, t - np.uint32(HASH_PRIME))


class _LocalHashing(FrequencyOracle):
    """Shared implementation of BLH and OLH; subclasses fix the number of buckets."""

    epsilon: float
    k: int

    @property
    @abc.abstractmethod
    def buckets(self) -> int:
        """g, the size of the hash range."""

    def _check_common(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=HASH_PRIME - 1))
        if self.epsilon > 700:  # e^eps would overflow a float
            raise ValueError(f"epsilon must be at most 700 for {self.name}; got {self.epsilon!r}")

    # ---- implemented probabilities -------------------------------------------------------

    # The keep probability is rounded *down*, so p (g-1)/(1-p) never exceeds e^eps.
    @cached_property
    def _keep_threshold(self) -> int:
        e = Fraction(math.exp(self.epsilon))
        return probability_threshold(e / (e + self.buckets - 1), rounding="down")

    @cached_property
    def _keep_probability(self) -> Fraction:
        return threshold_probability(self._keep_threshold)

    @cached_property
    def collision_probability(self) -> Fraction:
        """c = P[h(x) = h(x')] for x != x' over a uniform seed, exactly (module docstring)."""
        g = self.buckets
        q, rem = divmod(HASH_PRIME, g)
        pairs = rem * (q + 1) * q + (g - rem) * q * (q - 1)
        return Fraction(pairs, HASH_PRIME * (HASH_PRIME - 1))

    @property
    def p_star(self) -> float:
        return float(self._keep_probability)

    @cached_property
    def _q_star(self) -> Fraction:
        return self.support_probability(self._keep_probability)

    def support_probability(self, keep: Fraction) -> Fraction:
        """q* = p c + (1 - p)(1 - c)/(g - 1) when the bucket is kept with probability p: the
        probability that a report supports an item other than the user's (module docstring).

        Used with p = the keep probability here, and with the composed keep probability of the
        longitudinal chain (``client_sdk.mechanisms.memoized_oracle``)."""
        c = self.collision_probability
        return keep * c + (1 - keep) * (1 - c) / (self.buckets - 1)

    def memoization_chain(self, target: Fraction) -> Chain:
        """L-LH: the report (seed, y) memoized whole, then randomized response over [g] on y."""
        return HashedChain(self, target)

    @property
    def q_star(self) -> float:
        """p c + (1 - p)(1 - c)/(g - 1): 1/g up to O(1/P) (module docstring)."""
        return float(self._q_star)

    # ---- device side ---------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """Reports with a fresh uniform seed each and y = GRR over [g] of h_seed(x)."""
        x = check_values(values, self.k)
        n = x.size
        g = self.buckets
        seeds = uniform_below(rng, SEED_SPACE, n).astype(np.uint64)
        hashed = local_hash(seeds, x, g)
        reports = np.empty(n, dtype=REPORT_DTYPE)
        reports["seed"] = seeds
        reports["y"] = keep_or_other(rng, hashed, self._keep_threshold, g)
        return reports

    def perturb_compact(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """The reports of :meth:`perturb` (the same distribution): the seed uniform on
        [0, SEED_SPACE) as (a - 1) P + b from a - 1 uniform on [0, P - 1) and b on [0, P) (the
        bijection of :func:`hash_parameters`; 31-bit draws by :func:`uniform_below_bits`, no
        64-bit division), the randomized response over [g] from fewer random bits
        (:func:`keep_or_other_compact`); ``perturb`` keeps the stream memoized reports need."""
        x = check_values(values, self.k)
        a_less_one = uniform_below_bits(rng, HASH_PRIME - 1, x.size)
        b = uniform_below_bits(rng, HASH_PRIME, x.size)
        seeds = (a_less_one * HASH_PRIME + b).view(np.uint64)  # below 2**62: the same bits
        reports = np.empty(x.size, dtype=REPORT_DTYPE)
        reports["seed"] = seeds
        reports["y"] = keep_or_other_compact(
            rng, local_hash(seeds, x, self.buckets), self._keep_threshold, self.buckets
        )
        return reports

    # ---- wire ----------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return {"seed": "0" * 16, "y": widest_int(0, self.buckets)}

    def to_wire(self, reports: Reports) -> list[Any]:
        """``{"seed": 16 lowercase hex digits, "y": int}`` per report (JSON integers < 2**53)."""
        r = self._as_reports(reports)
        return [
            {"seed": f"{int(s):016x}", "y": int(y)}
            for s, y in zip(r["seed"].tolist(), r["y"].tolist(), strict=True)
        ]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        g = self.buckets
        seeds: list[int] = []
        ys: list[int] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            reason = _payload_error(payload, g)
            if reason is not None:
                errors.append(WireFormatError(index, reason))
                continue
            seeds.append(int(payload["seed"], 16))
            ys.append(int(payload["y"]))
        reports = np.empty(len(seeds), dtype=REPORT_DTYPE)
        reports["seed"] = np.asarray(seeds, dtype=np.uint64)
        reports["y"] = np.asarray(ys, dtype=np.uint32)
        return reports, errors

    # ---- server side ---------------------------------------------------------------------

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """C_v = #{reports with h_seed(v) == y} for every v, vectorized over reports and items.

        Large chunks go through the incremental pass: for a block of reports, s = (a v + b -
        low_y) mod P is advanced from item v to v + 1 by adding a modulo P (in uint32, no
        division), and the report supports v exactly when s < width_y (the bucket's interval).
        """
        r = self._as_reports(reports)
        counts = np.zeros(self.k, dtype=np.int64)
        if r.size == 0:
            return counts
        self._check_reports(r)
        for start in range(0, r.size, _AGGREGATION_BLOCK):
            block = r[start : start + _AGGREGATION_BLOCK]
            if block.size < _DIRECT_BELOW:
                self._count_direct(block, counts)
            else:
                self._count_incremental(block, counts)
        return counts

    @cached_property
    def _starts(self) -> npt.NDArray[np.int64] | None:
        """``_interval_starts(g)`` when g is small enough to tabulate, else None."""
        g = self.buckets
        return _interval_starts(g) if g <= _INTERVAL_TABLE_MAX else None

    def _intervals(
        self, y: npt.NDArray[np.integer]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``_bucket_intervals(y, g)`` (y checked to be below g), by table lookup for small g."""
        starts = self._starts
        if starts is None:
            return _bucket_intervals(y, self.buckets)
        index = np.asarray(y, dtype=np.intp)
        low = np.take(starts, index)
        return low, np.take(starts, index + 1) - low

    def _count_incremental(self, block: Reports, counts: npt.NDArray[np.int64]) -> None:
        a, b = hash_parameters(block["seed"])
        low, width = self._intervals(block["y"])
        prime = np.uint32(HASH_PRIME)
        # s_0 = (b - low) mod P; every value below fits in uint32 (s + a < 2P < 2**32).
        s = _start_residues(b, low)
        step = a.astype(np.uint32)
        widths = width.astype(np.uint32)
        scratch = np.empty_like(s)
        hit = np.empty(s.size, dtype=bool)
        for v in range(self.k):
            np.less(s, widths, out=hit)
            counts[v] += np.count_nonzero(hit)
            np.add(s, step, out=s)
            # s - P wraps around to a huge value when s < P, so the minimum is s mod P.
            np.subtract(s, prime, out=scratch)
            np.minimum(s, scratch, out=s)

    def _count_direct(self, block: Reports, counts: npt.NDArray[np.int64]) -> None:
        a, b = hash_parameters(block["seed"])
        low, width = self._intervals(block["y"])
        prime = np.uint64(HASH_PRIME)
        a2, b2 = a[:, None], b[:, None]
        low2 = low.astype(np.uint64)[:, None]
        width2 = width.astype(np.uint64)[:, None]
        step = max(1, _DIRECT_CELLS // block.size)
        for start in range(0, self.k, step):
            items = np.arange(start, min(self.k, start + step), dtype=np.uint64)[None, :]
            residues = (a2 * items + b2) % prime
            counts[start : start + items.shape[1]] += np.count_nonzero(
                (residues - low2) < width2, axis=0
            )

    # ---- exact privacy ---------------------------------------------------------------------

    def check_seeds(self) -> list[int]:
        """The fixed seeds ``channel_matrices`` conditions on.

        Seed 0 (a = 1, b = 0) maps every small item to bucket 0 (all inputs collide); a =
        ceil(P/g), b = 0 separates items 0 and 1; the last seed of the space; and two arbitrary
        constants.
        """
        g = self.buckets
        separating = (-(-HASH_PRIME // g) - 1) * HASH_PRIME
        return [
            0,
            separating,
            SEED_SPACE - 1,
            0x2545F4914F6CDD1D % SEED_SPACE,
            0x9E3779B97F4A7C15 % SEED_SPACE,
        ]

    def channel_matrices(self) -> Iterator[FloatArray]:
        """P[y | x, seed] as a (k, g) matrix for each of ``check_seeds()`` (the seed is public)."""
        if self.k > MAX_ENUMERATED_K:
            raise ValueError(f"k={self.k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        g = self.buckets
        p = self._keep_probability
        other = float(other_probability(p, g))
        items = np.arange(self.k)
        for seed in self.check_seeds():
            hashed = local_hash(np.uint64(seed), items, g)
            matrix = np.full((self.k, g), other)
            matrix[items, hashed] = float(p)
            yield matrix

    # ---- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _as_reports(reports: Reports) -> Reports:
        r = np.asarray(reports)
        if r.dtype.names is None or set(r.dtype.names) != {"seed", "y"}:
            raise ValueError(
                f"reports must be a structured array with fields seed and y; got dtype {r.dtype}"
            )
        return r.reshape(-1)

    def _check_reports(self, r: Reports) -> None:
        if np.any(r["seed"] >= np.uint64(SEED_SPACE)):
            index = int(np.flatnonzero(r["seed"] >= np.uint64(SEED_SPACE))[0])
            raise ValueError(f"reports[{index}].seed must be below {SEED_SPACE}")
        if np.any(r["y"] >= self.buckets):
            index = int(np.flatnonzero(r["y"] >= self.buckets)[0])
            raise ValueError(f"reports[{index}].y must be in [0, {self.buckets})")


def _payload_error(payload: Any, g: int) -> str | None:
    """Why a local-hashing payload is malformed, or None if it is valid."""
    if not isinstance(payload, dict):
        return f'payload must be an object {{"seed", "y"}}; got {type(payload).__name__}'
    if set(payload) != {"seed", "y"}:
        return f"payload must have exactly the fields seed and y; got {sorted(map(str, payload))}"
    seed = payload["seed"]
    if not isinstance(seed, str):
        return f"seed must be a string of 16 hex digits; got {type(seed).__name__}"
    if len(seed) != _SEED_HEX_DIGITS:
        return f"seed must be {_SEED_HEX_DIGITS} hex digits; got {len(seed)} characters"
    if not _SEED_PATTERN.fullmatch(seed):
        return "seed must be lowercase hex digits [0-9a-f]"
    if int(seed, 16) >= SEED_SPACE:
        return f"seed {seed} is outside the seed space [0, {SEED_SPACE:x})"
    y = payload["y"]
    if not is_plain_int(y):
        return f"y must be an integer; got {type(y).__name__}"
    if not 0 <= int(y) < g:
        return f"y must be in [0, {g}); got {y}"
    return None


class HashedChain(RandomizedResponseChain):
    """L-LH: the permanent report (seed, y) memoized whole; the instantaneous step is randomized
    response over the g buckets applied to y, the seed kept.

    Given the public seed this is L-GRR over [g] (``RandomizedResponseChain``), and a report
    supports a non-holder with ``support_probability`` of the composed keep probability.
    """

    kind = "l-lh"
    deterministic_pseudonym = True

    def __init__(self, inner: _LocalHashing, target: Fraction) -> None:
        self.hashing = inner
        super().__init__(inner, target, permanent_keep=inner._keep_probability, size=inner.buckets)

    def linkability(self) -> str:
        p2 = float(self.parameter)
        return (
            "deterministic pseudonym: the permanent report's hash seed (one of about 2^62) is "
            "sent with every report of the value, so it names (device, campaign, value) and any "
            "two reports show whether the value changed; the bucket y equals the permanent one "
            f"with probability p2 = {p2:.4g}"
        )

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        out = np.array(permanent, copy=True)
        y = np.asarray(out["y"], dtype=np.int64)
        out["y"] = keep_or_other(rng, y, self.threshold, self.size)
        return out

    def support(self) -> tuple[Fraction, Fraction]:
        keep, _ = super().support()
        return keep, self.hashing.support_probability(keep)


@dataclasses.dataclass(frozen=True)
class BLH(_LocalHashing):
    """Binary local hashing: g = 2 (Bassily & Smith, STOC 2015; docs/math/local-hashing.md)."""

    name: ClassVar[str] = "blh"
    epsilon: float
    k: int

    def __post_init__(self) -> None:
        self._check_common()

    @property
    def buckets(self) -> int:
        return 2


@dataclasses.dataclass(frozen=True)
class OLH(_LocalHashing):
    """Optimized local hashing (Wang et al., USENIX Security 2017; docs/math/local-hashing.md).

    ``g`` defaults to round(e^eps + 1) (at least 2) and is recorded in the config once resolved,
    so stored reports are decoded with the g they were made with on every platform. An explicit
    ``g`` in [2, 2**31 - 2] is honoured (general local hashing).
    """

    name: ClassVar[str] = "olh"
    resolved_shape: ClassVar[str | None] = "g"
    epsilon: float
    k: int
    g: int | None = None

    def __post_init__(self) -> None:
        self._check_common()
        if self.g is None:
            optimal = math.exp(self.epsilon) + 1
            if optimal > MAX_BUCKETS:
                raise ValueError(
                    f"epsilon={self.epsilon!r} is too large for olh: g = round(e^eps + 1) "
                    f"would exceed {MAX_BUCKETS}"
                )
            object.__setattr__(self, "g", max(2, round(optimal)))
        else:
            object.__setattr__(self, "g", check_int(self.g, "g", minimum=2, maximum=MAX_BUCKETS))

    @property
    def buckets(self) -> int:
        assert self.g is not None  # resolved in __post_init__
        return self.g
