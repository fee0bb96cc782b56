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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import decode_bits, encode_bits, is_plain_int
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.memoization import KeyedSource, check_keyed_source
from client_sdk.mechanisms.registry import mechanism_class
from client_sdk.randomness import RandomSource, uniform_below

MAX_K = 1 << 11
"""The consistency map is a dense k x nodes matrix from a k x k solve: k up to 2048 (32 MB for
the solve), the range-query sizes of Cormode, Kulkarni & Srivastava."""
MAX_BRANCHING = 16


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


@dataclasses.dataclass(frozen=True)
class Hierarchical(Mechanism):
    """The hierarchical histogram over the ordered items [0, k).

    Config: ``{"mechanism": "hierarchical", "epsilon", "k"}`` and optionally ``"branching"``
    (B; chosen by ``best_branching`` when omitted).
    """

    name: ClassVar[str] = "hierarchical"
    value_kind: ClassVar[Literal["category", "number", "string"]] = "category"
    estimate_kind: ClassVar[str] = "range"
    uses_device_choices: ClassVar[bool] = True
    """The level: one per device and campaign from the client's keyed source (``permanent``),
    from ``rng`` per report in simulation; never from the value."""

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

    # ---- the tree ----------------------------------------------------------------------------

    @property
    def b(self) -> int:
        """The branching factor in use."""
        return self.branching if self.branching is not None else best_branching(self.k)

    @property
    def height(self) -> int:
        return tree_height(self.k, self.b)

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
            classes: list[Any] = [mechanism_class(name) for name in ("grr", "oue")]
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

    def perturb(
        self,
        values: Any,
        *,
        rng: RandomSource | None = None,
        permanent: KeyedSource | None = None,
    ) -> Reports:
        """One (level, report) per value; the level is uniform on 1..h: the device's (from
        ``permanent``) or drawn from ``rng`` per report."""
        items = check_values(values, self.k)
        n = items.size
        reports = np.zeros(n, dtype=self.report_dtype)
        if permanent is not None:
            keys = check_keyed_source(permanent, self.name)
            level = int(uniform_below(keys.source("hierarchical:level", 0), self.height, 1)[0])
            levels = np.full(n, level + 1, dtype=np.int64)
        else:
            levels = uniform_below(rng, self.height, n) + 1
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
            if not isinstance(payload, (list, tuple)) or len(payload) != 2:
                errors.append(WireFormatError(index, "payload must be [level, report]"))
                continue
            level, report = payload
            if not is_plain_int(level) or not 1 <= int(level) <= self.height:
                errors.append(
                    WireFormatError(
                        index, f"level must be an integer in [1, {self.height}]; got {level!r}"
                    )
                )
                continue
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

    @cached_property
    def design(self) -> npt.NDArray[np.float64]:
        """A (nodes, k): A[u, x] = 1 when leaf x lies under node u."""
        a = np.zeros((self.nodes, self.k))
        leaves = np.arange(self.k)
        for level in range(1, self.height + 1):
            a[self.offsets[level - 1] + self.node_of(leaves, level), leaves] = 1.0
        return a

    @cached_property
    def consistency(self) -> tuple[FloatArray, FloatArray]:
        """(W, c): the least-squares leaves with a known total, x = W y + c (W is k x nodes).

        Minimises ||y - A x||^2 subject to sum(x) = 1: with G = A^T A,
        x = G^-1 (A^T y - mu 1), mu = (1^T G^-1 A^T y - 1) / (1^T G^-1 1).
        """
        a = self.design
        gram = a.T @ a
        solved = np.linalg.solve(gram, np.concatenate([a.T, np.ones((self.k, 1))], axis=1))
        g_at, g_one = solved[:, :-1], solved[:, -1]
        scale = float(g_one.sum())
        w = g_at - np.outer(g_one, g_at.sum(axis=0)) / scale
        return w, g_one / scale

    def estimate_leaves(self, statistic: AggregateStatistic) -> FloatArray:
        """The consistent (least-squares, summing to one) leaf frequencies: unbiased."""
        w, c = self.consistency
        return np.asarray(w @ self.node_estimates(statistic) + c)

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

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def channel_matrices(self) -> Iterator[FloatArray]:
        """Per level, row x is the level oracle's output distribution for x's node (the uniform
        level is public and independent of x, and levels have disjoint outputs)."""
        for level, oracle in enumerate(self.oracles, start=1):
            nodes = self.node_of(np.arange(self.k), level)
            for matrix in oracle.channel_matrices():
                yield matrix[nodes]

    def implemented_epsilon(self) -> float:
        worst = 0.0
        for matrix in self.channel_matrices():
            high, low = matrix.max(axis=0), matrix.min(axis=0)
            if np.any((low <= 0) & (high > 0)):
                return math.inf
            keep = low > 0
            worst = max(worst, float(np.max(np.log(high[keep]) - np.log(low[keep]))))
        return worst
