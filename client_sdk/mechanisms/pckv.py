"""Key-value data: PCKV with padding-and-sampling, GRR or UE (Gu, Li, Cheng, Xiong & Cao, USENIX
Security 2020; docs/math/richer-data.md).

A value is a mapping key index in [0, k) -> number in [-1, 1] (a sequence of them for
``perturb``). The device pads its pairs with the ``padding`` (l) dummy keys k..k+l-1 (value 0) to
max(|S|, l) items and samples one uniformly; the value v becomes x = +1 with probability
(1 + v)/2, else -1. Then, with K = k + l keys:

* **PCKV-GRR** (the default, ``"variant": "grr"``): with probability a the key is kept (and x
  kept with probability p, flipped otherwise), otherwise a uniform other key of the K and a
  uniform sign are sent; a = (l(e^eps - 1) + 2) / (l(e^eps - 1) + 2K),
  p = (l(e^eps - 1) + 1) / (l(e^eps - 1) + 2), b = (1 - a) / (K - 1) per other key. The report
  is one integer 2 key + [sign = +1]. The paper's privacy claim uses the amplification from
  sampling one of l items.
* **PCKV-UE** (``"variant": "ue"``): a vector y in {-1, 0, +1}^K; the sampled key gets x with
  probability a p, -x with a (1 - p) and 0 with 1 - a; every other key gets +-1 with b/2 each
  and 0 with 1 - b, where a = 1/2, p = e^eps / (e^eps + 1), b = 2 / (e^eps + 3) (the paper's
  allocation eps_2 = eps, e^eps_1 = (e^eps + 1)/2). The report is two packed bit rows (+1, -1).

Privacy, stated exactly: P[y | S] = Q(y) sum_items w_item rho(y_key, x) with Q(y) the product of
the other-key probabilities and rho the sampled key's likelihood ratio, so the worst ratio is at
most max(rho) / min(rho); for UE that is max(p / (1 - p), 2 p (1 - b) / b) = e^eps (reached by l
agreeing keys against l disagreeing ones); ``epsilon_closed_form`` has both variants' exact
worst ratio for k >= l. ``channel_matrices`` enumerates every key set with
every sign pattern (the extreme values; any value is a mixture of them) against every output,
for small k and l, and ``implemented_epsilon`` is the exact worst ratio of the implemented
probabilities (64-bit thresholds rounded towards less information).

Both variants share the estimators: with n1, n2 the reports giving key j the value +1, -1,
f_j = l ((n1 + n2)/n - b) / (a - b) and the paper's 2x2 solve for the means.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import (
    bits_text,
    decode_bits,
    encode_bits,
    parse_int_payloads,
    widest_int,
)
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    Mechanism,
    Reports,
    WireFormatError,
    normal_z,
)
from client_sdk.mechanisms.grid import exp_below
from client_sdk.mechanisms.unary import column_counts, rows_per_chunk
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli_lazy,
    probability_threshold,
    random_bits,
    raw_words,
    uniform_below,
)

MAX_K = 1 << 16
MAX_ENUMERATED_INPUTS = 1 << 10
MAX_ENUMERATED_UE_KEYS = 6
"""UE's outputs are 3^K vectors: ``channel_matrices`` enumerates K = k + l up to 6."""
VARIANTS = ("grr", "ue")
NUMBER_TYPES = (int, float, np.integer, np.floating)


@dataclasses.dataclass(frozen=True)
class Pairs:
    """Records flattened: ``sizes[i]`` pairs for record i, their ``keys`` and ``values`` in
    record order (what ``perturb`` samples from, without a loop over records). Within a record,
    ``PCKV.pack`` puts the pairs in ascending key order (:meth:`canonical`)."""

    sizes: npt.NDArray[np.int64]
    keys: npt.NDArray[np.int64]
    values: FloatArray

    def canonical(self) -> Pairs:
        """The same records with each one's pairs in ascending key order: the device protocol's
        order (docs/protocol.md), so a report never depends on the order of a mapping (a
        JavaScript object cannot keep integer keys in any order but ascending)."""
        record = np.repeat(np.arange(self.sizes.size), self.sizes)
        order = np.lexsort((self.keys, record))
        if bool(np.all(order == np.arange(order.size))):
            return self
        return Pairs(self.sizes, self.keys[order], self.values[order])

    @property
    def starts(self) -> npt.NDArray[np.int64]:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)


PADDING_ADVICE = (
    "padding (l, an integer >= 1) is required: a record is padded to l pairs and one is sampled, "
    "so a device holding more than l pairs samples each with probability 1/|S| < 1/l and its "
    "keys are under-counted (Gu et al., USENIX Security 2020); there is no safe default. Choose "
    "about the 99th percentile of the number of pairs a device holds (a larger l costs variance: "
    "each key is sampled with probability 1/l)"
)


@dataclasses.dataclass(frozen=True)
class PCKV(Mechanism):
    """Config: ``{"mechanism": "pckv", "epsilon", "k", "padding"}`` (padding l >= 1, required:
    :data:`PADDING_ADVICE`) and optionally ``"variant": "ue"`` (PCKV-UE; omitted or ``"grr"``:
    PCKV-GRR)."""

    name: ClassVar[str] = "pckv"
    value_kind: ClassVar[Literal["category", "number", "string", "record"]] = "record"
    estimate_kind: ClassVar[str] = "key-value"
    longitudinal_refusal: ClassVar[str] = (
        "each report samples a pair afresh, so memoizing would need a permanent response per "
        "key-value pair, which is not built: repeated reports compose and the ledger charges each"
    )

    epsilon: float
    k: int
    padding: int
    variant: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PCKV:
        """As every mechanism's, with the missing ``padding`` explained (no default is safe)."""
        if isinstance(config, Mapping) and "padding" not in config:
            raise ValueError(f"config for 'pckv' is missing padding: {PADDING_ADVICE}")
        return super().from_config(config)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=MAX_K))
        object.__setattr__(
            self, "padding", check_int(self.padding, "padding", minimum=1, maximum=MAX_K)
        )
        if self.variant is not None and self.variant not in VARIANTS:
            raise ValueError(f"variant must be 'grr' or 'ue'; got {self.variant!r}")

    @property
    def ue(self) -> bool:
        return self.variant == "ue"

    # ---- parameters (implemented) --------------------------------------------------------------

    @property
    def keys(self) -> int:
        """k + l: real and dummy keys."""
        return self.k + self.padding

    @cached_property
    def _thresholds(self) -> tuple[int, int, int]:
        """(keep key, keep sign, other key nonzero) thresholds, rounded towards less information:
        GRR's a and p down; UE's a = 1/2 exactly, p down and b up (so 2p(1 - b)/b <= e^eps)."""
        e = Fraction(exp_below(self.epsilon))
        if self.ue:
            p = e / (e + 1)
            b = 2 / (e + 3)
            return (
                WORD_SPAN // 2,
                probability_threshold(p, rounding="down"),
                probability_threshold(b, rounding="up"),
            )
        el = self.padding * (e - 1)
        a = (el + 2) / (el + 2 * self.keys)
        p = (el + 1) / (el + 2)
        return (
            probability_threshold(a, rounding="down"),
            probability_threshold(p, rounding="down"),
            0,
        )

    @property
    def a(self) -> float:
        """P[the sampled key is reported with a sign]."""
        return self._thresholds[0] / WORD_SPAN

    @property
    def p(self) -> float:
        """P[that sign is x]."""
        return self._thresholds[1] / WORD_SPAN

    @property
    def b(self) -> float:
        """P[any other key is reported with a sign] (a uniform sign)."""
        if self.ue:
            return self._thresholds[2] / WORD_SPAN
        return (1 - self.a) / (self.keys - 1)

    # ---- device side -------------------------------------------------------------------------

    def check_records(self, values: Any) -> list[dict[int, float]]:
        if isinstance(values, Mapping) or not isinstance(values, Sequence):
            raise ValueError("values must be a sequence of mappings key index -> number")
        out = []
        for position, record in enumerate(values):
            if not isinstance(record, Mapping):
                raise ValueError(
                    f"the value at position {position} must be a mapping key -> number; "
                    f"got a {type(record).__name__}"
                )
            pairs: dict[int, float] = {}
            for key, number in record.items():
                if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
                    raise ValueError(f"the value at position {position} has a non-integer key")
                if not 0 <= int(key) < self.k:
                    raise ValueError(
                        f"the value at position {position} has a key outside [0, {self.k})"
                    )
                if isinstance(number, bool) or not isinstance(number, (int, float, np.number)):
                    raise ValueError(
                        f"the value at position {position}, key {int(key)}, must be a number"
                    )
                if not (math.isfinite(float(number)) and -1 <= float(number) <= 1):
                    raise ValueError(
                        f"the value at position {position}, key {int(key)}, must be in [-1, 1]"
                    )
                pairs[int(key)] = float(number)
            out.append(pairs)
        return out

    def record_from_json(self, value: Any) -> Any:
        """A key-value record from JSON, whose object keys are text: the integer keys back."""
        return {int(key): number for key, number in value.items()}

    def encode_records(self, records: Sequence[Any]) -> list[dict[int, float]]:
        """What the client records: checked mappings (errors never echo a value)."""
        return self.check_records(records)

    def device_counters(self, values: Any) -> dict[str, int]:
        """What the device counts about its own records (never sent): how many had more pairs
        than ``padding``, whose keys the estimate under-counts (:meth:`bias_note`)."""
        sizes = self.pack(values).sizes
        return {"pckv_records_over_padding": int(np.count_nonzero(sizes > self.padding))}

    def bias_note(self) -> str:
        """What the estimates assume about the devices' records, for every estimate's notes."""
        ell = self.padding
        return (
            f"Frequencies are unbiased for devices holding at most padding = {ell} pairs. A "
            f"device with |S| > {ell} pairs samples each with probability 1/|S|, so each of its "
            f"keys counts {ell}/|S| of a holder: a key's frequency is biased low by the sum, over "
            f"its holders with more than {ell} pairs, of (1 - {ell}/|S|)/n, and its mean weights "
            f"those holders by {ell}/|S|. Devices count such records themselves "
            f"(TelemetryClient.counters); padding should be about the 99th percentile of the "
            f"pairs a device holds (Gu et al., USENIX Security 2020)."
        )

    def pack(self, values: Any) -> Pairs:
        """Flatten and check records without a Python loop over them (C-level iteration and
        array checks); on any problem the record-by-record check names the position."""
        if isinstance(values, Pairs):
            return self._check_pairs(values)
        if isinstance(values, Mapping) or not isinstance(values, Sequence):
            raise ValueError("values must be a sequence of mappings key index -> number")
        if not all(issubclass(t, Mapping) for t in set(map(type, values))):
            self.check_records(values)  # raises, naming the first record that is no mapping
        sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        keys = list(itertools.chain.from_iterable(values))
        numbers = list(itertools.chain.from_iterable(map(operator.methodcaller("values"), values)))
        key_types, number_types = set(map(type, keys)), set(map(type, numbers))
        good_types = all(issubclass(t, (int, np.integer)) and t is not bool for t in key_types)
        good_types &= all(
            issubclass(t, NUMBER_TYPES) and not issubclass(t, (bool, np.bool_))
            for t in number_types
        )
        if good_types:
            key_array = np.asarray(keys, dtype=np.int64).reshape(-1)
            value_array = np.asarray(numbers, dtype=np.float64).reshape(-1)
            in_domain = key_array.size == 0 or (key_array.min() >= 0 and key_array.max() < self.k)
            if in_domain and bool(np.all(np.abs(value_array) <= 1.0)):  # NaN fails too
                return Pairs(sizes, key_array, value_array).canonical()
        self.check_records(values)  # raises, naming the first bad record
        raise AssertionError("unreachable: check_records accepted what pack refused")

    def _check_pairs(self, pairs: Pairs) -> Pairs:
        sizes, keys, values = (np.asarray(a) for a in (pairs.sizes, pairs.keys, pairs.values))
        if sizes.ndim != 1 or (sizes.size and sizes.min() < 0) or int(sizes.sum()) != keys.size:
            raise ValueError(f"Pairs.sizes must be non-negative and sum to {keys.size} keys")
        if keys.shape != values.shape or not np.issubdtype(keys.dtype, np.integer):
            raise ValueError("Pairs.keys must be integers, one per value")
        if keys.size and (keys.min() < 0 or keys.max() >= self.k):
            raise ValueError(f"Pairs.keys must be in [0, {self.k})")
        if not bool(np.all(np.abs(values.astype(np.float64)) <= 1.0)):
            raise ValueError("Pairs.values must be numbers in [-1, 1]")
        return Pairs(
            sizes.astype(np.int64), keys.astype(np.int64), values.astype(np.float64)
        ).canonical()

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """Padding-and-sampling, then the variant's perturbation; vectorized over reports.

        ``values`` is a sequence of mappings (or :class:`Pairs`)."""
        pairs = self.pack(values)
        n = pairs.sizes.size
        slots = uniform_below(rng, np.maximum(pairs.sizes, self.padding), n) if n else pairs.sizes
        real = slots < pairs.sizes
        dummy = uniform_below(rng, self.padding, n) + self.k
        chosen = np.where(real, pairs.starts + slots, 0)
        keys = np.where(real, pairs.keys[chosen] if pairs.keys.size else 0, dummy)
        numbers = np.where(real, pairs.values[chosen] if pairs.values.size else 0.0, 0.0)
        scaled = np.minimum(np.floor((1 + numbers) / 2 * 2.0**64), math.nextafter(2.0**64, 0))
        plus = (raw_words(rng, n) < scaled.astype(np.uint64)) | (numbers >= 1.0)
        keep_sign = raw_words(rng, n) < np.uint64(self._thresholds[1])
        if self.ue:
            return self._perturb_ue(keys, np.where(keep_sign, plus, ~plus), rng)
        keep = raw_words(rng, n) < np.uint64(self._thresholds[0])
        other = uniform_below(rng, self.keys - 1, n)
        other = np.where(other < keys, other, other + 1)
        random_sign = uniform_below(rng, 2, n).astype(bool)
        out_key = np.where(keep, keys, other)
        out_sign = np.where(keep, np.where(keep_sign, plus, ~plus), random_sign)
        return np.asarray(2 * out_key + out_sign.astype(np.int64), dtype=np.int64)

    @property
    def report_bytes(self) -> int:
        return (self.keys + 7) // 8

    def _perturb_ue(
        self, keys: npt.NDArray[np.int64], sign: npt.NDArray[np.bool_], rng: RandomSource | None
    ) -> Reports:
        """UE rows, chunk by chunk: every key nonzero with probability b and a uniform sign, then
        the sampled key nonzero with probability a (1/2) carrying ``sign`` (x kept w.p. p)."""
        n, width = keys.size, self.keys
        out = np.zeros((n, 2, self.report_bytes), dtype=np.uint8)
        step = rows_per_chunk(2 * width)
        for start in range(0, n, step):
            rows = keys[start : start + step]
            m = rows.size
            nonzero = bernoulli_lazy(rng, self._thresholds[2], (m, width))
            positive = random_bits(rng, m * width).reshape(m, width)
            index = np.arange(m)
            nonzero[index, rows] = random_bits(rng, m)  # a = 1/2 exactly
            positive[index, rows] = sign[start : start + m]
            out[start : start + m, 0] = np.packbits(nonzero & positive, axis=1)
            out[start : start + m, 1] = np.packbits(nonzero & ~positive, axis=1)
        return out

    # ---- wire --------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        if self.ue:
            return [bits_text(self.keys)] * 2
        return widest_int(0, 2 * self.keys)

    def to_wire(self, reports: Reports) -> list[Any]:
        """GRR: the integer 2 key + [sign = +1]. UE: [plus bits, minus bits], base64 rows."""
        if self.ue:
            rows = np.asarray(reports, dtype=np.uint8)
            if rows.ndim != 3 or rows.shape[1:] != (2, self.report_bytes):
                raise ValueError(
                    f"pckv-ue reports must have shape (n, 2, {self.report_bytes}); got {rows.shape}"
                )
            plus, minus = encode_bits(rows[:, 0]), encode_bits(rows[:, 1])
            return [[a, b] for a, b in zip(plus, minus, strict=True)]
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        if not self.ue:
            return parse_int_payloads(payloads, 2 * self.keys, "output")
        rows: list[npt.NDArray[np.uint8]] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            if not isinstance(payload, (list, tuple)) or len(payload) != 2:
                errors.append(WireFormatError(index, "payload must be [plus bits, minus bits]"))
                continue
            packed, bad = decode_bits(list(payload), self.keys)
            if bad:
                which = "plus" if bad[0].index == 0 else "minus"
                errors.append(WireFormatError(index, f"{which} bits: {bad[0].reason}"))
                continue
            if np.any(packed[0] & packed[1]):
                errors.append(WireFormatError(index, "a key is both +1 and -1"))
                continue
            rows.append(packed)
        out = np.stack(rows) if rows else np.zeros((0, 2, self.report_bytes), dtype=np.uint8)
        return out, errors

    # ---- server side -------------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(2 * self.keys, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Counts of (key, sign) at 2 key + [sign = +1], both variants."""
        if self.ue:
            rows = np.asarray(reports, dtype=np.uint8)
            counts = np.empty(2 * self.keys, dtype=np.int64)
            counts[1::2] = column_counts(rows[:, 0], self.keys)
            counts[0::2] = column_counts(rows[:, 1], self.keys)
            return AggregateStatistic(counts, int(rows.shape[0]))
        outputs = np.asarray(reports, dtype=np.int64).reshape(-1)
        return AggregateStatistic(np.bincount(outputs, minlength=2 * self.keys), outputs.size)

    def _counts(self, statistic: AggregateStatistic) -> tuple[FloatArray, FloatArray, int]:
        if statistic.n <= 0:
            raise ValueError("cannot estimate from zero reports")
        counts = np.asarray(statistic.counts, dtype=np.float64).reshape(self.keys, 2)[: self.k]
        return counts[:, 1], counts[:, 0], statistic.n  # n1 (+1), n2 (-1)

    def frequencies(self, statistic: AggregateStatistic) -> FloatArray:
        """f_k = l ((n1 + n2)/n - b) / (a - b): unbiased when every |S| <= l."""
        n1, n2, n = self._counts(statistic)
        return np.asarray(self.padding * ((n1 + n2) / n - self.b) / (self.a - self.b))

    def frequency_variance(self, n: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var[f_k] for a fixed population (|S| <= l): p* = b + (a - b)/l, q* = b."""
        f = np.asarray(frequencies, dtype=np.float64)
        p, q = self.b + (self.a - self.b) / self.padding, self.b
        return np.asarray((q * (1 - q) + f * (p * (1 - p) - q * (1 - q))) / (n * (p - q) ** 2))

    def frequency_standard_errors(self, statistic: AggregateStatistic) -> FloatArray:
        """The exact standard errors at the estimate clipped to [0, 1] (the plug-in)."""
        plug_in = np.clip(self.frequencies(statistic), 0.0, 1.0)
        return np.sqrt(np.maximum(self.frequency_variance(statistic.n, plug_in), 0.0))

    def means(self, statistic: AggregateStatistic) -> tuple[FloatArray, FloatArray]:
        """(mean, delta-method standard error) per key: m = (N1 - N2) / S with N the 2x2 solve
        of the paper and S = n f / l, clipped to [-1, 1]."""
        n1, n2, n = self._counts(statistic)
        a, b, p = self.a, self.b, self.p
        difference = (n1 - n2) / (a * (2 * p - 1))
        total = (n1 + n2 - n * b) / (a - b)
        safe = np.maximum(total, 1.0)
        ratio = np.clip(difference / safe, -1.0, 1.0)
        # multinomial covariance of (n1, n2) at the observed shares
        pi1, pi2 = n1 / n, n2 / n
        var1, var2, cov = n * pi1 * (1 - pi1), n * pi2 * (1 - pi2), -n * pi1 * pi2
        cd, cs = 1 / (a * (2 * p - 1)), 1 / (a - b)
        var_d = cd**2 * (var1 + var2 - 2 * cov)
        var_s = cs**2 * (var1 + var2 + 2 * cov)
        cov_ds = cd * cs * (var1 - var2)
        variance = (var_d - 2 * ratio * cov_ds + ratio**2 * var_s) / safe**2
        return np.asarray(ratio), np.asarray(np.sqrt(np.maximum(variance, 0.0)))

    def summary(
        self,
        statistic: AggregateStatistic,
        *,
        confidence: float,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """Per-key frequencies and means with their standard errors and normal intervals."""
        frequencies = self.frequencies(statistic)
        frequency_errors = self.frequency_standard_errors(statistic)
        means, mean_errors = self.means(statistic)
        z = normal_z(confidence)
        return {
            "notes": [self.bias_note()],
            "keys": [
                {
                    "key": key,
                    "frequency": float(f),
                    "frequency_std_error": float(fs),
                    "frequency_ci": [float(f - z * fs), float(f + z * fs)],
                    "mean": float(m),
                    "mean_std_error": float(ms),
                    "mean_ci": [float(m - z * ms), float(m + z * ms)],
                }
                for key, (f, fs, m, ms) in enumerate(
                    zip(frequencies, frequency_errors, means, mean_errors, strict=True)
                )
            ],
        }

    # ---- privacy -----------------------------------------------------------------------------

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def _items(self, pairs: Mapping[int, int]) -> list[tuple[float, int, float]]:
        """(weight, key, P[x = +1]) of every item the device may sample (padding-and-sampling)."""
        size = max(len(pairs), self.padding)
        items = [(1 / size, key, 1.0 if sign > 0 else 0.0) for key, sign in pairs.items()]
        dummies = self.padding - min(len(pairs), self.padding)
        items += [(dummies / size / self.padding, d, 0.5) for d in range(self.k, self.keys)]
        return [item for item in items if item[0] > 0]

    def output_distribution(self, pairs: Mapping[int, int]) -> FloatArray:
        """P[output] for a key set with signs +-1 (the extreme values), as implemented: GRR over
        the 2K integers, UE over the 3^K vectors (column sum_j 3^j (y_j + 1))."""
        a, p, b = self.a, self.p, self.b
        if self.ue:
            if self.keys > MAX_ENUMERATED_UE_KEYS:
                raise ValueError(f"{self.keys} keys are too many to enumerate (3^K outputs)")
            y = np.array(list(itertools.product((-1, 0, 1), repeat=self.keys)))[:, ::-1]
            other = np.where(y == 0, 1 - b, b / 2)
            out = np.zeros(y.shape[0])
            for weight, key, plus in self._items(pairs):
                sampled = np.select(
                    [y[:, key] == 1, y[:, key] == -1],
                    [a * (plus * p + (1 - plus) * (1 - p)), a * (plus * (1 - p) + (1 - plus) * p)],
                    1 - a,
                )
                rest = np.prod(np.delete(other, key, axis=1), axis=1)
                out += weight * sampled * rest
            return out
        out = np.zeros(2 * self.keys)
        for weight, key, plus in self._items(pairs):
            item = np.full(2 * self.keys, b / 2)
            item[2 * key + 1] = a * (plus * p + (1 - plus) * (1 - p))
            item[2 * key] = a * (plus * (1 - p) + (1 - plus) * p)
            out += weight * item
        return out

    def channel_matrices(self) -> Iterator[FloatArray]:
        """Every key set (every size, above the padding too) with every sign pattern, against
        every output."""
        inputs: list[dict[int, int]] = []
        for size in range(self.k + 1):
            for subset in itertools.combinations(range(self.k), size):
                for signs in itertools.product((-1, 1), repeat=size):
                    inputs.append(dict(zip(subset, signs, strict=True)))
                    if len(inputs) > MAX_ENUMERATED_INPUTS:
                        raise ValueError("too many key sets to enumerate")
        yield np.array([self.output_distribution(pairs) for pairs in inputs])

    def implemented_epsilon(self) -> float:
        (matrix,) = list(self.channel_matrices())
        high, low = matrix.max(axis=0), matrix.min(axis=0)
        return float(np.max(np.log(high) - np.log(low)))

    def epsilon_closed_form(self) -> float:
        """The worst log-ratio in closed form, exact when k >= l (checked against the
        enumeration). With rho the likelihood ratio of an output to the sampled item:

        * UE: every key of y counts, so l agreeing keys against l disagreeing ones reach
          max(rho) / min(rho), rho in {2ap/b, 2a(1-p)/b, (1-a)/(1-b)};
        * GRR: the output (j, s) names one key, which a holder samples with probability at most
          1/l (rho = 1 for every other item): [(2ap/b)/l + 1 - 1/l] over
          min(1, (2a(1-p)/b)/l + 1 - 1/l); a dummy key's output reaches (a/b)/l + 1 - 1/l
          (an empty record) against 1 (l real keys).
        """
        a, p, b, ell = self.a, self.p, self.b, self.padding
        if self.ue:
            rho = [2 * a * p / b, 2 * a * (1 - p) / b, (1 - a) / (1 - b)]
            return math.log(max(rho) / min(rho))
        rest = 1 - 1 / ell
        real = (2 * a * p / b / ell + rest) / min(1.0, 2 * a * (1 - p) / b / ell + rest)
        dummy = a / b / ell + rest
        return math.log(max(real, dummy))
