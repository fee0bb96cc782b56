"""Range queries over an ordered domain: the B-ary hierarchical histogram with consistency.

Hay, Rastogi, Miklau & Suciu, "Boosting the accuracy of differentially private histograms
through consistency", PVLDB 3(1) 2010; Cormode, Kulkarni & Srivastava, "Answering range queries
under local differential privacy", PVLDB 12(10) 2019 (docs/math/richer-data.md).

The items [0, k) are the first k leaves of a complete B-ary tree of height h = ceil(log_B k).
Each device draws one level l in {1..h} uniformly (exact integer sampling from ``rng``, never
from the value) and reports the node of its value at that level, v // B^(h - l), through the
better of GRR and OUE over that level's B^l nodes (the registry's own classes, at the full
epsilon). The report is (level, the oracle's report); the level carries no information, so the
report is epsilon-LDP with the level oracle's exact channel (``channel_matrices``).

Server side: node frequencies f_u = h (C_u - n_l q*) / (n (p* - q*)) are unbiased (a user lands in
level l with probability 1/h); the consistent leaf frequencies are the least-squares fit of all
node estimates with the root known (sum = 1), a fixed linear map W (the OLS that Hay et al.'s
two passes compute, here solved directly so padded leaves drop out). Every range is then a fixed
linear functional of the node estimates, whose exact fixed-population variance has the closed
form of ``functional_variance`` (level sampling plus the oracles' noise).

``{"variant": "haar"}`` selects the Haar wavelet variant of Cormode, Kulkarni & Srivastava
(:class:`HaarWavelet`): each device reports one Haar coefficient level through Hadamard
randomized response; the leaves, ranges and their exact variances come out the same way.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import (
    decode_bits,
    encode_bits,
    is_plain_int,
    widest_int,
    wire_length,
)
from client_sdk.mechanisms.base import (
    SUMMARY_QUANTILES,
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
    normal_items,
    normal_z,
)
from client_sdk.mechanisms.grid import exp_below
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.hadamard import fwht
from client_sdk.mechanisms.memoization import DeviceKeyed, KeyedSource, check_keyed_source
from client_sdk.mechanisms.simplex import project_simplex
from client_sdk.mechanisms.unary import OUE
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli,
    probability_threshold,
    uniform_below,
)

MAX_K = 1 << 11
"""The consistency map is a dense k x nodes matrix from a k x k solve: k up to 2048 (32 MB for
the solve), the range-query sizes of Cormode, Kulkarni & Srivastava."""
MAX_BRANCHING = 16
HAAR = "haar"


def tree_height(k: int, branching: int) -> int:
    """h = ceil(log_B k): the least h with B^h >= k (at least 1)."""
    h, size = 1, branching
    while size < k:
        h, size = h + 1, size * branching
    return h


def best_branching(k: int) -> int:
    """The B in [2, 16] minimising the worst-case range variance bound 2(B - 1) h^2 V* (Cormode,
    Kulkarni & Srivastava 2019), h = ceil(log_B k); ties go to the smaller B."""
    scores = {b: (b - 1) * tree_height(k, b) ** 2 for b in range(2, MAX_BRANCHING + 1)}
    return min(scores, key=lambda b: (scores[b], b))


def first_at_least(cumulative: FloatArray, q: float) -> int:
    """The first index where ``cumulative`` reaches q (the last index if it never does): the
    q-quantile item of an estimated CDF, which need not be monotone."""
    above = np.flatnonzero(np.asarray(cumulative) >= q - 1e-12)
    return int(above[0]) if above.size else int(np.size(cumulative)) - 1


def least_squares_with_total(design: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(W, c) with x = W y + c the least-squares x of ||y - A x||^2 subject to sum(x) = 1.

    ``design`` is A (rows of estimates, k leaves). The KKT system [[G, 1], [1^T, 0]] with
    G = A^T A is solved once for every right-hand side; it is nonsingular when A's null space
    holds no vector of zero sum (a tree's leaves, or Haar coefficients whose null space is the
    constant vector, whose sum is not zero).
    """
    a = np.asarray(design, dtype=np.float64)
    k = a.shape[1]
    kkt = np.zeros((k + 1, k + 1))
    kkt[:k, :k] = a.T @ a
    kkt[:k, k] = kkt[k, :k] = 1.0
    rhs = np.zeros((k + 1, a.shape[0] + 1))
    rhs[:k, :-1] = a.T
    rhs[k, -1] = 1.0
    solved = np.linalg.solve(kkt, rhs)[:k]
    return np.asarray(solved[:, :-1]), np.asarray(solved[:, -1])


class RangeMechanism(DeviceKeyed, Mechanism):
    """What both range mechanisms share: ordered items [0, k), one uniform level per device
    (from the client's keyed source, or ``rng`` in simulation), unbiased linear estimates ``y``
    with a ``design`` A (E[y] = A f), consistent leaves by :func:`least_squares_with_total`, and
    the exact fixed-population variance of any linear functional of y
    (``functional_variance``). ``analysis.kinds.ranges.estimate`` reads only this interface."""

    name: ClassVar[str] = "hierarchical"
    value_kind: ClassVar[Literal["category", "number", "string", "record"]] = "category"
    estimate_kind: ClassVar[str] = "range"
    uses_device_choices: ClassVar[bool] = True
    """The level: one per device and campaign from the client's keyed source (``permanent``),
    from ``rng`` per report in simulation; never from the value."""
    level_label: ClassVar[str] = "hierarchical:level"
    longitudinal_refusal: ClassVar[str] = (
        "the level is already one per device, but a memoized range report would need a "
        "permanent response per node of that level, which is not built: repeated reports "
        "compose and the ledger charges each"
    )

    epsilon: float
    k: int

    @property
    @abc.abstractmethod
    def height(self) -> int:
        """h: the number of levels a device draws from."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """One line naming the variant and its shape (for tables)."""

    @property
    @abc.abstractmethod
    def design(self) -> FloatArray:
        """A (estimates, k): E[y] = A f for the unbiased estimates y of :meth:`estimates`."""

    @abc.abstractmethod
    def estimates(self, statistic: AggregateStatistic) -> FloatArray:
        """The unbiased linear estimates y (node frequencies, or Haar coefficients)."""

    @abc.abstractmethod
    def functional_variance(
        self, weights: FloatArray, frequencies: npt.ArrayLike, n: int
    ) -> FloatArray:
        """Exact Var[sum_u a_u y_u] for rows a of ``weights`` (., estimates), for a fixed
        population of n users with these leaf frequencies."""

    @abc.abstractmethod
    def channel_matrices(self) -> Iterator[FloatArray]:
        """Per level, P[output | item] over that level's outputs."""

    def device_levels(
        self, n: int, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> npt.NDArray[np.int64]:
        """Levels 1..h for n reports: the device's one level (``permanent``) or i.i.d. uniform."""
        if permanent is not None:
            keys = check_keyed_source(permanent, self.name)
            level = int(uniform_below(keys.source(self.level_label, 0), self.height, 1)[0])
            return np.full(n, level + 1, dtype=np.int64)
        return uniform_below(rng, self.height, n) + 1

    def split_payload(
        self, index: int, payload: Any, errors: list[WireFormatError]
    ) -> tuple[int, Any] | None:
        """``(level, report)`` of a ``[level, report]`` payload with a valid level, or ``None``
        with the reason appended to ``errors`` (both variants' wire starts this way)."""
        if not isinstance(payload, (list, tuple)) or len(payload) != 2:
            errors.append(WireFormatError(index, "payload must be [level, report]"))
            return None
        level, report = payload
        if not is_plain_int(level) or not 1 <= int(level) <= self.height:
            errors.append(
                WireFormatError(
                    index, f"level must be an integer in [1, {self.height}]; got {level!r}"
                )
            )
            return None
        return int(level), report

    @cached_property
    def consistency(self) -> tuple[FloatArray, FloatArray]:
        """(W, c): the least-squares leaves with the known total, x = W y + c (W: k x estimates)."""
        return least_squares_with_total(self.design)

    def estimate_leaves(self, statistic: AggregateStatistic) -> FloatArray:
        """The consistent (least-squares, summing to one) leaf frequencies: unbiased."""
        w, c = self.consistency
        return np.asarray(w @ self.estimates(statistic) + c)

    def leaf_estimates(
        self, statistic: AggregateStatistic
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(leaves, plug-in, standard errors): the consistent leaves, their projection onto the
        simplex, and the exact standard errors at that plug-in (as the frequency oracles' are)."""
        leaves = self.estimate_leaves(statistic)
        plug_in = np.asarray(project_simplex(leaves)[0])
        w, _ = self.consistency
        variances = self.functional_variance(w, plug_in, statistic.n)
        return leaves, plug_in, np.sqrt(np.maximum(variances, 0.0))

    def prefix_estimates(
        self, leaves: FloatArray, plug_in: FloatArray, n: int
    ) -> tuple[FloatArray, FloatArray]:
        """The unbiased F(r) = P[v <= r] for every r, with its exact standard error."""
        w, _ = self.consistency
        variances = self.functional_variance(np.cumsum(w, axis=0), plug_in, n)
        return np.cumsum(leaves), np.sqrt(np.maximum(variances, 0.0))

    def node_tree(self) -> Hierarchical:
        """The B-ary tree whose node counts a curator would release for the same ranges: a
        binary one here (the Haar variant's estimates are wavelet coefficients, not node
        counts); a :class:`Hierarchical` mechanism is its own."""
        return Hierarchical(self.epsilon, self.k, branching=2)

    def summary(
        self,
        statistic: AggregateStatistic,
        *,
        confidence: float,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """The consistent leaves with their exact errors, and quantiles with the intervals of
        the exact CDF errors (docs/math/richer-data.md)."""
        leaves, plug_in, std_errors = self.leaf_estimates(statistic)
        cumulative, cdf_errors = self.prefix_estimates(leaves, plug_in, statistic.n)
        z = normal_z(confidence)
        labels = labels or [str(v) for v in range(self.k)]
        return {
            "variant": self.description,
            "postprocessing": "consistency (least squares, known total)",
            "items": normal_items(labels, leaves, std_errors, z),
            "quantiles": [
                {
                    "q": q,
                    "value": first_at_least(cumulative, q),
                    "ci_low": first_at_least(cumulative + z * cdf_errors, q),
                    "ci_high": first_at_least(cumulative - z * cdf_errors, q),
                }
                for q in SUMMARY_QUANTILES
            ],
        }

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def implemented_epsilon(self) -> float:
        """The worst log-ratio of two items' output probabilities, over every level's channel."""
        worst = 0.0
        for matrix in self.channel_matrices():
            high, low = matrix.max(axis=0), matrix.min(axis=0)
            if np.any((low <= 0) & (high > 0)):
                return math.inf
            keep = low > 0
            worst = max(worst, float(np.max(np.log(high[keep]) - np.log(low[keep]))))
        return worst


@dataclasses.dataclass(frozen=True)
class Hierarchical(RangeMechanism):
    """The hierarchical histogram over the ordered items [0, k).

    Config: ``{"mechanism": "hierarchical", "epsilon", "k"}`` and optionally ``"branching"``
    (B; chosen by ``best_branching`` when omitted); ``"variant": "haar"`` builds
    :class:`HaarWavelet` instead.
    """

    epsilon: float
    k: int
    branching: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=MAX_K))
        if self.branching is not None:
            object.__setattr__(
                self,
                "branching",
                check_int(self.branching, "branching", minimum=2, maximum=MAX_BRANCHING),
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Any:
        """The B-ary tree, or :class:`HaarWavelet` for ``"variant": "haar"`` (typed ``Any``: the
        registry names one class per mechanism, and this one builds either range mechanism)."""
        if isinstance(config, Mapping) and "variant" in config:
            if config["variant"] != HAAR:
                raise ValueError(
                    f"variant must be {HAAR!r} (or omitted for the B-ary tree); "
                    f"got {config['variant']!r}"
                )
            return HaarWavelet.from_config(config)
        return super().from_config(config)

    # ---- the tree ----------------------------------------------------------------------------

    def node_tree(self) -> Hierarchical:
        """This tree itself: its estimates are node counts already."""
        return self

    @property
    def b(self) -> int:
        """The branching factor in use."""
        return self.branching if self.branching is not None else best_branching(self.k)

    @property
    def height(self) -> int:
        return tree_height(self.k, self.b)

    @property
    def description(self) -> str:
        return f"hierarchical histogram, B = {self.b}, h = {self.height}"

    def level_size(self, level: int) -> int:
        """B^l nodes at level l (1..h)."""
        return int(self.b**level)

    def node_of(self, values: npt.NDArray[np.int64], level: int) -> npt.NDArray[np.int64]:
        return np.asarray(values // self.b ** (self.height - level), dtype=np.int64)

    @cached_property
    def oracles(self) -> tuple[FrequencyOracle, ...]:
        """The oracle of each level 1..h: GRR or OUE, whichever has the smaller total variance."""
        chosen = []
        for level in range(1, self.height + 1):
            size = self.level_size(level)
            classes: list[Any] = [GRR, OUE]
            candidates = [cls(self.epsilon, size) for cls in classes]
            oracles = [c for c in candidates if isinstance(c, FrequencyOracle)]
            chosen.append(min(oracles, key=lambda o: o.total_variance()))
        return tuple(chosen)

    @cached_property
    def offsets(self) -> npt.NDArray[np.int64]:
        """Where each level's nodes start in the concatenated node vector (length h + 1)."""
        sizes = [self.level_size(level) for level in range(1, self.height + 1)]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def nodes(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def _bytes(self) -> int:
        return max([1] + [(o.k + 7) // 8 for o in self.oracles if o.name == "oue"])

    @cached_property
    def report_dtype(self) -> np.dtype[Any]:
        return np.dtype(
            [("level", np.int64), ("value", np.int64), ("bits", np.uint8, (self._bytes,))]
        )

    # ---- device side -------------------------------------------------------------------------

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """One (level, report) per value; the level is uniform on 1..h: the device's (from
        ``permanent``) or drawn from ``rng`` per report."""
        items = check_values(values, self.k)
        n = items.size
        reports = np.zeros(n, dtype=self.report_dtype)
        levels = self.device_levels(n, rng, permanent)
        reports["level"] = levels
        for level, oracle in enumerate(self.oracles, start=1):
            mask = levels == level
            if not mask.any():
                continue
            out = oracle.perturb(self.node_of(items[mask], level), rng=rng)
            if oracle.name == "oue":
                bits = np.zeros((int(mask.sum()), self._bytes), dtype=np.uint8)
                bits[:, : out.shape[1]] = out
                reports["bits"][mask] = bits
            else:
                reports["value"][mask] = out
        return reports

    # ---- wire --------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        reports = [o.largest_wire_payload() for o in self.oracles]
        return [widest_int(1, self.height + 1), max(reports, key=wire_length)]

    def to_wire(self, reports: Reports) -> list[Any]:
        """[level, payload]: an integer for a GRR level, a base64 bit vector for an OUE level."""
        out: list[Any] = []
        for row in reports:
            oracle = self.oracles[int(row["level"]) - 1]
            if oracle.name == "oue":
                payload: Any = encode_bits(row["bits"][None, : (oracle.k + 7) // 8])[0]
            else:
                payload = int(row["value"])
            out.append([int(row["level"]), payload])
        return out

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        rows: list[tuple[int, int, npt.NDArray[np.uint8]]] = []
        errors: list[WireFormatError] = []
        empty = np.zeros(self._bytes, dtype=np.uint8)
        for index, payload in enumerate(payloads):
            parsed = self.split_payload(index, payload, errors)
            if parsed is None:
                continue
            level, report = parsed
            oracle = self.oracles[int(level) - 1]
            if oracle.name == "oue":
                packed, bad = decode_bits([report], oracle.k)
                if bad:
                    errors.append(WireFormatError(index, f"level {level}: {bad[0].reason}"))
                    continue
                bits = empty.copy()
                bits[: packed.shape[1]] = packed[0]
                rows.append((int(level), 0, bits))
            else:
                if not is_plain_int(report) or not 0 <= int(report) < oracle.k:
                    errors.append(
                        WireFormatError(
                            index, f"level {level}: report must be an integer in [0, {oracle.k})"
                        )
                    )
                    continue
                rows.append((int(level), int(report), empty))
        reports = np.zeros(len(rows), dtype=self.report_dtype)
        if rows:
            reports["level"] = [r[0] for r in rows]
            reports["value"] = [r[1] for r in rows]
            reports["bits"] = np.stack([r[2] for r in rows])
        return reports, errors

    # ---- server side -------------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(self.nodes + self.height, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Support counts of every node (levels concatenated), then the reports per level."""
        counts = np.zeros(self.nodes + self.height, dtype=np.int64)
        levels = np.asarray(reports["level"])
        for level, oracle in enumerate(self.oracles, start=1):
            mask = levels == level
            start, stop = self.offsets[level - 1], self.offsets[level]
            counts[self.nodes + level - 1] = int(mask.sum())
            if not mask.any():
                continue
            if oracle.name == "oue":
                part = reports["bits"][mask][:, : (oracle.k + 7) // 8]
            else:
                part = reports["value"][mask]
            counts[start:stop] = oracle.support_counts(part)
        return AggregateStatistic(counts, len(reports))

    def node_estimates(self, statistic: AggregateStatistic) -> FloatArray:
        """Unbiased node frequencies h (C_u - n_l q*) / (n (p* - q*)), levels concatenated."""
        if statistic.counts.shape != (self.nodes + self.height,):
            raise ValueError(
                f"statistic of shape {statistic.counts.shape} is not one of hierarchical "
                f"(expected ({self.nodes + self.height},))"
            )
        if statistic.n <= 0:
            raise ValueError("cannot estimate from zero reports")
        counts = np.asarray(statistic.counts, dtype=np.float64)
        out = np.empty(self.nodes)
        h, n = self.height, statistic.n
        for level, oracle in enumerate(self.oracles, start=1):
            start, stop = self.offsets[level - 1], self.offsets[level]
            n_level = counts[self.nodes + level - 1]
            p, q = oracle.p_star, oracle.q_star
            out[start:stop] = h * (counts[start:stop] - n_level * q) / (n * (p - q))
        return out

    def estimates(self, statistic: AggregateStatistic) -> FloatArray:
        return self.node_estimates(statistic)

    @cached_property
    def design(self) -> npt.NDArray[np.float64]:
        """A (nodes, k): A[u, x] = 1 when leaf x lies under node u."""
        a = np.zeros((self.nodes, self.k))
        leaves = np.arange(self.k)
        for level in range(1, self.height + 1):
            a[self.offsets[level - 1] + self.node_of(leaves, level), leaves] = 1.0
        return a

    def functional_variance(
        self, weights: FloatArray, frequencies: npt.ArrayLike, n: int
    ) -> FloatArray:
        """Exact Var[sum_u a_u y_u] for rows a of ``weights`` (., nodes), for a fixed population
        of n users with these leaf frequencies (levels drawn i.i.d. uniform; see the module
        docstring and docs/math/richer-data.md)."""
        a = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        f = np.asarray(frequencies, dtype=np.float64)
        h = self.height
        node_f = self.design @ f  # the frequency of every node
        # level sampling: (h/n) sum_u a_u^2 f_u - (1/n) sum_x f_x (A^T a)_x^2
        total = (h * (a * a) @ node_f - ((a @ self.design) ** 2) @ f) / n
        for level, oracle in enumerate(self.oracles, start=1):
            start, stop = self.offsets[level - 1], self.offsets[level]
            al, fl = a[:, start:stop], node_f[start:stop]
            p, q = oracle.p_star, oracle.q_star
            scale = h / (n * (p - q) ** 2)
            if oracle.name == "oue":  # independent bits
                per_user = (al * al) @ (fl * p * (1 - p) + (1 - fl) * q * (1 - q))
            else:  # GRR: Var[a_Y] for the one reported node Y
                a1, a2 = al.sum(axis=1, keepdims=True), (al * al).sum(axis=1, keepdims=True)
                mean = q * a1 + (p - q) * al
                per_user = ((q * a2 + (p - q) * al * al - mean * mean) @ fl[:, None])[:, 0]
            total = total + scale * per_user
        return np.asarray(total)

    # ---- privacy -----------------------------------------------------------------------------

    def channel_matrices(self) -> Iterator[FloatArray]:
        """Per level, row x is the level oracle's output distribution for x's node (the uniform
        level is public and independent of x, and levels have disjoint outputs)."""
        for level, oracle in enumerate(self.oracles, start=1):
            nodes = self.node_of(np.arange(self.k), level)
            for matrix in oracle.channel_matrices():
                yield matrix[nodes]


def haar_height(k: int) -> int:
    """h = ceil(log2 k): the Haar tree has D = 2^h >= k leaves (at least 1 level)."""
    return max(1, (k - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class HaarWavelet(RangeMechanism):
    """The Haar wavelet variant (Cormode, Kulkarni & Srivastava, PVLDB 2019), over [0, k).

    Config: ``{"mechanism": "hierarchical", "epsilon", "k", "variant": "haar"}``.

    The items are the first k of D = 2^h leaves. Coefficient level l in 1..h has 2^(l-1) nodes,
    each covering 2^(h-l+1) leaves in two halves; a user's coefficient at level l is s = +1 in
    the left half of its node u and -1 in the right, so the level's coefficient vector is the
    signed one-hot s e_u and its population average is c_u = f(left half) - f(right half).
    A device draws a level (like the tree's), then a uniform Hadamard row j in [0, 2^(l-1)),
    and sends the bit t = H[j, u] s (H[j, u] = (-1)^popcount(j & u)) through binary randomized
    response: kept with probability p = e^eps / (1 + e^eps) (a 64-bit threshold rounded down).
    The report is (l, 2 j + [sent = +1]).

    Since the mean of H[j, u] H[j, v] over j is [u = v], E[(2p - 1)^-1 sent H[j, v]] = s [u = v]:
    with D_l[j] the count of +1 minus the count of -1 at (l, j), the coefficients
    c_l = h fwht(D_l) / (n (2p - 1)) are unbiased, and every sent value squares to one, which
    gives ``functional_variance`` its exact closed form.
    """

    level_label: ClassVar[str] = "haar:level"

    epsilon: float
    k: int
    variant: str = HAAR

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=MAX_K))
        if self.variant != HAAR:
            raise ValueError(
                f"variant must be {HAAR!r} (or omitted for the B-ary tree); got {self.variant!r}"
            )

    # ---- the tree ----------------------------------------------------------------------------

    @property
    def height(self) -> int:
        return haar_height(self.k)

    @property
    def b(self) -> int:
        """The Haar tree is binary."""
        return 2

    @property
    def description(self) -> str:
        return f"Haar wavelet, D = {1 << self.height} leaves, h = {self.height}"

    @property
    def coefficients(self) -> int:
        """D - 1 coefficients: 2^(l-1) at each level l = 1..h (level l starts at 2^(l-1) - 1)."""
        return (1 << self.height) - 1

    def node_and_sign(
        self, items: npt.NDArray[np.int64], levels: npt.NDArray[np.int64] | int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """(node u at its level, True where the item lies in u's right half: s = -1)."""
        shift = self.height - np.asarray(levels, dtype=np.int64)
        nodes = np.right_shift(items, shift + 1)
        right = (np.right_shift(items, shift) & 1).astype(bool)
        return np.asarray(nodes, dtype=np.int64), np.asarray(right)

    @cached_property
    def _keep(self) -> int:
        e = Fraction(exp_below(self.epsilon))
        return probability_threshold(e / (1 + e), rounding="down")

    @property
    def p(self) -> float:
        """The implemented probability of sending the true bit."""
        return self._keep / WORD_SPAN

    @property
    def scale(self) -> float:
        """1 / (2p - 1)."""
        return 1.0 / (2.0 * self.p - 1.0)

    report_dtype: ClassVar[np.dtype[Any]] = np.dtype([("level", np.int64), ("value", np.int64)])

    # ---- device side -------------------------------------------------------------------------

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """One (level, 2 j + bit) per value; see the class docstring."""
        items = check_values(values, self.k)
        n = items.size
        levels = self.device_levels(n, rng, permanent)
        nodes, right = self.node_and_sign(items, levels)
        rows = uniform_below(rng, np.left_shift(1, levels - 1), n) if n else levels
        truth = (np.bitwise_count(rows & nodes) & 1).astype(bool) ^ right  # True: t = -1
        sent_minus = truth ^ ~bernoulli(rng, self._keep, n)
        reports = np.zeros(n, dtype=self.report_dtype)
        reports["level"] = levels
        reports["value"] = 2 * rows + (~sent_minus).astype(np.int64)
        return reports

    # ---- wire --------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return [widest_int(1, self.height + 1), widest_int(0, 1 << self.height)]

    def to_wire(self, reports: Reports) -> list[Any]:
        """[level, 2 j + bit] with 2 j + bit in [0, 2^level)."""
        return [
            [int(level), int(value)]
            for level, value in zip(
                reports["level"].tolist(), reports["value"].tolist(), strict=True
            )
        ]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        rows: list[tuple[int, int]] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            parsed = self.split_payload(index, payload, errors)
            if parsed is None:
                continue
            level, value = parsed
            if not is_plain_int(value) or not 0 <= int(value) < (1 << int(level)):
                errors.append(
                    WireFormatError(
                        index,
                        f"level {level}: report must be an integer in [0, {1 << int(level)})",
                    )
                )
                continue
            rows.append((int(level), int(value)))
        reports = np.zeros(len(rows), dtype=self.report_dtype)
        if rows:
            reports["level"] = [r[0] for r in rows]
            reports["value"] = [r[1] for r in rows]
        return reports, errors

    # ---- server side -------------------------------------------------------------------------

    @property
    def statistic_size(self) -> int:
        """2^l counts at each level l (level l starts at 2^l - 2): 2^(h+1) - 2."""
        return (1 << (self.height + 1)) - 2

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(self.statistic_size, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Counts of every (level, 2 j + bit)."""
        levels = np.asarray(reports["level"], dtype=np.int64)
        values = np.asarray(reports["value"], dtype=np.int64)
        if levels.size and (
            levels.min() < 1
            or levels.max() > self.height
            or values.min() < 0
            or np.any(values >= np.left_shift(1, levels))
        ):
            raise ValueError("hierarchical (haar) reports out of range")
        index = np.left_shift(1, levels) - 2 + values
        counts = np.bincount(index, minlength=self.statistic_size).astype(np.int64)
        return AggregateStatistic(counts, int(levels.size))

    def estimates(self, statistic: AggregateStatistic) -> FloatArray:
        """Unbiased coefficients h fwht(D_l) / (n (2p - 1)), levels concatenated."""
        if statistic.counts.shape != (self.statistic_size,):
            raise ValueError(
                f"statistic of shape {statistic.counts.shape} is not one of hierarchical (haar) "
                f"(expected ({self.statistic_size},))"
            )
        if statistic.n <= 0:
            raise ValueError("cannot estimate from zero reports")
        counts = np.asarray(statistic.counts, dtype=np.int64)
        out = np.empty(self.coefficients)
        for level in range(1, self.height + 1):
            size = 1 << (level - 1)
            part = counts[2 * size - 2 : 4 * size - 2].reshape(size, 2)
            out[size - 1 : 2 * size - 1] = fwht(part[:, 1] - part[:, 0])
        return np.asarray(out * (self.height * self.scale / statistic.n))

    @cached_property
    def design(self) -> FloatArray:
        """S (D - 1, k): S[(l, u), x] = +1 / -1 when x lies in the left / right half of u."""
        s = np.zeros((self.coefficients, self.k))
        leaves = np.arange(self.k)
        for level in range(1, self.height + 1):
            nodes, right = self.node_and_sign(leaves, level)
            s[(1 << (level - 1)) - 1 + nodes, leaves] = np.where(right, -1.0, 1.0)
        return s

    def functional_variance(
        self, weights: FloatArray, frequencies: npt.ArrayLike, n: int
    ) -> FloatArray:
        """Exact Var[sum a y] = (h (2p - 1)^-2 ||a||^2 - sum_x f_x (S^T a)_x^2) / n.

        One user contributes Z = h sent (H a_l)[j] / (n (2p - 1)) for its level l and row j; sent
        squares to one and, by Parseval, the mean of (H a_l)[j]^2 over j is ||a_l||^2, so
        E[Z^2] = h ||a||^2 / (n (2p - 1))^2 whatever the value, and E[Z] = (S^T a)_x / n.
        """
        a = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        f = np.asarray(frequencies, dtype=np.float64)
        noise = self.height * self.scale**2 * (a * a).sum(axis=1)
        return np.asarray((noise - ((a @ self.design) ** 2) @ f) / n)

    # ---- privacy -----------------------------------------------------------------------------

    def channel_matrices(self) -> Iterator[FloatArray]:
        """Per level l, P[(j, bit) | x] = 2^-(l-1) (p or 1 - p) over the 2^l outputs (the level
        is public and independent of x, and levels have disjoint outputs)."""
        p = Fraction(self._keep, WORD_SPAN)
        leaves = np.arange(self.k)
        for level in range(1, self.height + 1):
            size = 1 << (level - 1)
            nodes, right = self.node_and_sign(leaves, level)
            rows = np.arange(size)
            minus = (np.bitwise_count(rows[None, :] & nodes[:, None]) & 1).astype(bool)
            minus ^= right[:, None]  # the true bit at every (x, j): True for -1
            matrix = np.empty((self.k, size, 2))
            matrix[:, :, 1] = np.where(minus, float(1 - p), float(p)) / size
            matrix[:, :, 0] = np.where(minus, float(p), float(1 - p)) / size
            yield matrix.reshape(self.k, 2 * size)
