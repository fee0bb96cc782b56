"""Marginals of many binary attributes from sampled Fourier coefficients (docs/math/).

See docs/math/marginals.md. Cormode, Kulkarni & Srivastava, "Marginal release under local
differential privacy", SIGMOD 2018.

For x in {0, 1}^d and a set alpha of attributes, the Fourier (Hadamard) coefficient is
theta_alpha = E[(-1)^{alpha . x}] (theta_{} = 1), and every marginal on a set beta is
P(x_beta = gamma) = 2^-|beta| sum_{alpha subset of beta} (-1)^{alpha . gamma} theta_alpha. A
device draws one of the T = sum_{j=1..order} C(d, j) non-empty coefficients of order at most
``order`` uniformly (exact integer sampling, never from the values; through the client one per
device and campaign from its keyed source) and sends (alpha, its bit (alpha . x) mod 2 through
binary randomized response): kept with probability p = e^eps / (e^eps + 1) rounded down to the
sampler's 2^-64 grid, so p / (1 - p) <= e^eps and the report is exactly eps-LDP on whole tuples
(alpha is independent of x: its factor 1/T cancels).

Estimate (exactly unbiased for a fixed population, the SMP scaling T/n rather than 1/n_alpha):
theta_hat_alpha = T c (n_alpha - 2 ones_alpha) / n with c = 1 / (2p - 1). Each marginal cell is
linear in the coefficients; ``cell_variance`` is its exact fixed-population variance.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import is_plain_int, widest_int
from client_sdk.mechanisms.attributes import Attributes
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.memoization import DeviceKeyed, KeyedSource, check_keyed_source
from client_sdk.randomness import (
    RandomSource,
    bernoulli,
    probability_threshold,
    threshold_probability,
    uniform_below,
)

MAX_ORDER = 8
MAX_COEFFICIENTS = 1 << 20
MAX_ENUMERATED = 1 << 12
REPORT_DTYPE = np.dtype([("coefficient", np.int64), ("bit", np.uint8)])


@dataclasses.dataclass(frozen=True, eq=True)
class Fourier(DeviceKeyed, Mechanism):
    """Config: ``{"mechanism": "fourier", "epsilon": E, "attributes": [{"name": "wifi"}, ...],
    "order": 2}`` (binary attributes, ``labels`` optional; ``order``: the largest marginal, 1 to
    8). A device records a mapping attribute -> label (-> 0/1 without labels)."""

    name: ClassVar[str] = "fourier"
    value_kind: ClassVar[Literal["category", "number", "string", "record"]] = "record"
    estimate_kind: ClassVar[str] = "fourier"
    uses_device_choices: ClassVar[bool] = True
    """The sampled coefficient: one per device and campaign from the client's keyed source
    (``permanent``), from ``rng`` per report in simulation; never from the values."""

    epsilon: float
    attributes: Any
    order: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        parsed = Attributes.parse(self.attributes, binary=True)
        object.__setattr__(self, "attributes", parsed)
        order = check_int(self.order, "order", minimum=1, maximum=min(MAX_ORDER, len(parsed)))
        object.__setattr__(self, "order", order)
        if self.coefficients > MAX_COEFFICIENTS:
            raise ValueError(
                f"order {order} over {len(parsed)} attributes has {self.coefficients} "
                f"coefficients, more than {MAX_COEFFICIENTS}"
            )

    def to_config(self) -> dict[str, Any]:
        return {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "attributes": self.attributes.to_config(with_k=False),
            "order": self.order,
        }

    def encode_records(self, records: Sequence[Any]) -> npt.NDArray[np.int64]:
        """Records (mappings attribute -> label) as (n, d) 0/1 tuples."""
        return self.attributes.encode(records)

    # ---- structure ---------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        return self.attributes.names

    @property
    def d(self) -> int:
        return len(self.attributes)

    @property
    def coefficients(self) -> int:
        """T: the non-empty coefficients of order at most ``order``."""
        return sum(math.comb(self.d, j) for j in range(1, self.order + 1))

    @cached_property
    def masks(self) -> tuple[tuple[int, ...], ...]:
        """The coefficients as attribute sets, by order then lexicographically."""
        return tuple(
            subset
            for j in range(1, self.order + 1)
            for subset in itertools.combinations(range(self.d), j)
        )

    @cached_property
    def index(self) -> dict[tuple[int, ...], int]:
        """Coefficient index of each attribute set."""
        return {subset: i for i, subset in enumerate(self.masks)}

    @cached_property
    def _bitmasks(self) -> npt.NDArray[np.uint64]:
        return np.array([sum(1 << a for a in s) for s in self.masks], dtype=np.uint64)

    @cached_property
    def _keep_threshold(self) -> int:
        e = Fraction(math.exp(self.epsilon))
        return probability_threshold(e / (e + 1), rounding="down")

    @property
    def keep_probability(self) -> float:
        """The implemented p = P[the sent bit is the true parity]."""
        return float(threshold_probability(self._keep_threshold))

    @property
    def scale(self) -> float:
        """c = 1 / (2p - 1): E[c (1 - 2 bit)] is the coefficient's sign."""
        return 1.0 / (2.0 * self.keep_probability - 1.0)

    def check_tuples(self, values: Any) -> npt.NDArray[np.int64]:
        array = np.asarray(values)
        if array.ndim != 2 or array.shape[1] != self.d:
            raise ValueError(f"values must have shape (n, {self.d}); got shape {array.shape}")
        if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
            raise ValueError(f"values must be integers; got dtype {array.dtype}")
        array = array.astype(np.int64)
        bad = np.argwhere((array < 0) | (array > 1))
        if bad.size:
            row, column = (int(v) for v in bad[0])
            raise ValueError(f"values[{row}, {column}] ({self.names[column]}) must be 0 or 1")
        return array

    def parities(self, x: npt.NDArray[np.int64], coefficient: npt.ArrayLike) -> npt.NDArray[Any]:
        """(alpha . x) mod 2 for each tuple and its coefficient index."""
        packed = np.zeros(x.shape[0], dtype=np.uint64)
        for j in range(self.d):
            packed |= x[:, j].astype(np.uint64) << np.uint64(j)
        selected = packed & self._bitmasks[np.asarray(coefficient, dtype=np.int64)]
        return (np.bitwise_count(selected) & 1).astype(np.uint8)

    # ---- device side -------------------------------------------------------------------------

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        x = self.check_tuples(values)
        n = x.shape[0]
        if permanent is not None:
            keys = check_keyed_source(permanent, self.name)
            chosen = int(
                uniform_below(keys.source("fourier:coefficient", 0), self.coefficients, 1)[0]
            )
            coefficient = np.full(n, chosen, dtype=np.int64)
        else:
            coefficient = uniform_below(rng, self.coefficients, n)
        keep = bernoulli(rng, self._keep_threshold, n)
        reports = np.empty(n, dtype=REPORT_DTYPE)
        reports["coefficient"] = coefficient
        reports["bit"] = self.parities(x, coefficient) ^ (~keep).astype(np.uint8)
        return reports

    # ---- wire --------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return [widest_int(0, self.coefficients), 1]

    def to_wire(self, reports: Reports) -> list[Any]:
        """Each report as [coefficient index, bit]."""
        return [
            [int(c), int(b)] for c, b in zip(reports["coefficient"], reports["bit"], strict=True)
        ]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        good: list[tuple[int, int]] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            if not isinstance(payload, (list, tuple)) or len(payload) != 2:
                errors.append(WireFormatError(index, "payload must be [coefficient, bit]"))
            elif not is_plain_int(payload[0]) or not 0 <= int(payload[0]) < self.coefficients:
                errors.append(
                    WireFormatError(
                        index, f"coefficient must be an integer in [0, {self.coefficients})"
                    )
                )
            elif not is_plain_int(payload[1]) or int(payload[1]) not in (0, 1):
                errors.append(WireFormatError(index, "bit must be 0 or 1"))
            else:
                good.append((int(payload[0]), int(payload[1])))
        reports = np.array(good, dtype=REPORT_DTYPE).reshape(len(good))
        return reports, errors

    # ---- server side -------------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(2 * self.coefficients, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Ones per coefficient, then reports per coefficient."""
        t = self.coefficients
        c = np.asarray(reports["coefficient"], dtype=np.int64)
        ones = np.bincount(c[np.asarray(reports["bit"]) == 1], minlength=t)
        counts = np.concatenate([ones, np.bincount(c, minlength=t)]).astype(np.int64)
        return AggregateStatistic(counts, len(reports))

    def estimate_coefficients(self, statistic: AggregateStatistic) -> FloatArray:
        """Unbiased theta_hat_alpha for every coefficient (fixed population)."""
        if statistic.n <= 0:
            raise ValueError("cannot estimate from zero reports")
        t = self.coefficients
        counts = np.asarray(statistic.counts, dtype=np.float64)
        ones, totals = counts[:t], counts[t:]
        return np.asarray(t * self.scale * (totals - 2 * ones) / statistic.n)

    def marginal_matrix(self, attributes: tuple[int, ...]) -> tuple[FloatArray, list[int]]:
        """(W, coefficient indices): cells = 2^-k + W @ theta[indices] for the marginal on
        ``attributes`` (cells row-major, the first attribute most significant)."""
        k = len(attributes)
        if not 1 <= k <= self.order:
            raise ValueError(f"a marginal of {k} attributes needs order >= {k}; got {self.order}")
        subsets = list(range(1, 1 << k))  # bit i (from the top) <-> attributes[i]
        indices = [
            self.index[tuple(sorted(attributes[i] for i in range(k) if s >> (k - 1 - i) & 1))]
            for s in subsets
        ]
        cells = np.arange(1 << k)[:, None]
        parity = np.bitwise_count(cells & np.array(subsets)[None, :]).astype(np.int64) & 1
        signs = 1 - 2 * parity
        return signs / float(1 << k), indices

    def cell_variance(self, n: int, size: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var of a marginal cell of ``size`` attributes with true frequency f, for a fixed
        population: [(2^k - 1) T c^2 / 4^k - f (1 - 2^(1-k)) - 4^-k] / n."""
        f = np.asarray(frequencies, dtype=np.float64)
        k4 = 4.0**size
        t, c = self.coefficients, self.scale
        return np.asarray(
            ((2**size - 1) * t * c * c / k4 - f * (1 - 2.0 ** (1 - size)) - 1 / k4) / n
        )

    # ---- privacy -----------------------------------------------------------------------------

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def channel_matrices(self) -> Iterator[FloatArray]:
        """The whole-tuple channel: (2^d tuples, 2T outputs (coefficient, bit))."""
        if (1 << self.d) * 2 * self.coefficients > MAX_ENUMERATED * MAX_ENUMERATED:
            raise ValueError(f"2^{self.d} tuples are too many to enumerate")
        tuples = np.array(list(itertools.product((0, 1), repeat=self.d)), dtype=np.int64)
        p = float(threshold_probability(self._keep_threshold))
        t = self.coefficients
        rows = np.repeat(tuples, t, axis=0)
        parity = self.parities(rows, np.tile(np.arange(t), len(tuples))).reshape(len(tuples), t)
        matrix = np.empty((len(tuples), 2 * t))
        matrix[:, 0::2] = np.where(parity == 0, p, 1 - p) / t  # bit 0
        matrix[:, 1::2] = np.where(parity == 1, p, 1 - p) / t  # bit 1
        yield matrix

    def implemented_epsilon(self) -> float:
        """max over outputs and tuple pairs of the log ratio (``channel_matrices``)."""
        (matrix,) = list(self.channel_matrices())
        return float(np.max(np.log(matrix.max(axis=0)) - np.log(matrix.min(axis=0))))
