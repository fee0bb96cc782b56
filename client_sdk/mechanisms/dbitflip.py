"""dBitFlip: Microsoft's memoized histogram mechanism (Ding, Kulkarni, Yekhanin, NeurIPS 2017).

docs/math/memoization.md. Each device samples d of the k buckets uniformly without replacement,
once, and reports one bit per sampled bucket j: 1 with probability p = e^(eps/2)/(e^(eps/2)+1)
if its value is j, with probability q = 1 - p otherwise. Two values change at most two of the
bits, so a report is eps-LDP (with d = 1 a report carries a single bit and the guarantee is
eps/2, which ``privacy_epsilon`` states: the claim is always the exact, tight one).

Estimator (Horvitz-Thompson over the devices that sampled v, as in the paper). With N_v the
number of reports that sampled v and S_v those of them whose bit for v is 1,

    f_v = (k / (n d)) (S_v - q N_v) / (p - q),

unbiased because bucket v is sampled with probability d/k. Per device, Z = (k/d) [v sampled]
(b - q)/(p - q) has variance (k/d) q(1-q)/(p-q)^2 if it does not hold v and (k/d) p(1-p)/(p-q)^2
+ k/d - 1 if it does, so for a fixed population (derived here, checked by Monte Carlo in the tests)

    n Var[f_v] = (k/d) q(1-q)/(p-q)^2 + f_v [ (k/d)(p(1-p) - q(1-q))/(p-q)^2 + k/d - 1 ],

which for the symmetric p = 1 - q is k e^(eps/2)/(d (e^(eps/2)-1)^2) + f_v (k/d - 1). At d = k every
bucket is sampled and this is exactly SUE. The statistic is (N_v, S_v) per bucket: shape (2, k).

Memoization (``memoize``, the default; the paper's point). The bucket set is drawn once per
device and campaign (from the injected keyed source: HMAC-SHA256 under the device secret), and the
bits are memoized per *pattern*: what the report depends on is only phi(v) = v if v is a sampled
bucket and "none" otherwise, so the device draws one permanent bit vector per phi, at most
min(d + 1, k) of them in its lifetime (the accounting of multi-freq-ldpy's dBitFlipPM; the paper
memoizes per bucket value). Repeated reports of a value are identical and reveal nothing more;
every value outside the sampled buckets gives the same report; the ledger charges eps once per
distinct phi (``memo_keys``), so a device's lifetime spend is at most min(d + 1, k) eps.
Caveat: identical reports show when phi did not change (RAPPOR's caveat too).
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
from client_sdk.mechanisms._wire import (
    bits_text,
    decode_bits,
    encode_bits,
    is_plain_int,
    widest_int,
)
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.memoization import KeyedSource, check_keyed_source
from client_sdk.mechanisms.self_memoizing import SwitchableMemoization
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    probability_threshold,
    raw_words,
    sample_subsets,
    threshold_probability,
)

__all__ = ["DBitFlip"]

MAX_K = 1 << 20
MAX_ENUMERATED_CONDITIONS = 4096
MAX_ENUMERATED_BITS = 12
BUCKETS_LABEL = "dbitflip/buckets"
BITS_LABEL = "dbitflip/bits"


@dataclasses.dataclass(frozen=True)
class DBitFlip(SwitchableMemoization, FrequencyOracle):
    """dBitFlip over k buckets, d bits per report (module docstring).

    Config: ``{"mechanism": "dbitflip", "epsilon", "k", "d"}`` and ``"memoize"`` (default true:
    ``perturb`` then needs ``permanent=``, a keyed source, as the longitudinal wrapper does).
    Reports are structured: ``buckets`` (d sorted indices) and ``bits`` (d booleans). The wire
    payload is ``{"buckets": [j, ...], "bits": base64 of the d packed bits}``.
    """

    name: ClassVar[str] = "dbitflip"
    epsilon: float
    k: int
    d: int
    memoize: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=MAX_K))
        object.__setattr__(self, "d", check_int(self.d, "d", minimum=1, maximum=self.k))
        self._check_memoize()

    # ---- probabilities ---------------------------------------------------------------------

    # p is rounded down and q = 1 - p exactly (threshold 2**64 - T_p), so the two-bit ratio
    # (p/q)^2 never exceeds e^eps.
    @cached_property
    def _thresholds(self) -> tuple[int, int]:
        half = Fraction(math.exp(self.epsilon / 2))
        high = probability_threshold(half / (half + 1), rounding="down")
        return high, WORD_SPAN - high

    @cached_property
    def _pq(self) -> tuple[Fraction, Fraction]:
        high, low = self._thresholds
        return threshold_probability(high), threshold_probability(low)

    @property
    def privacy_epsilon(self) -> float:
        """eps for d >= 2; eps/2 for d = 1 (one bit). Exact for the implemented p and q."""
        p, q = self._pq
        per_bit = math.log(p.numerator * q.denominator) - math.log(q.numerator * p.denominator)
        return per_bit * min(self.d, 2)

    @property
    def epsilon_inf(self) -> float:
        """What unlimited reports of one value reveal when memoized: one report's epsilon."""
        return self.privacy_epsilon

    # ---- linkability (docs/math/memoization.md, "What an observer can link") ----------------

    @property
    def deterministic_pseudonym(self) -> bool:
        """Memoized, every report of a value is the same report, and its d buckets are the same
        in all of the device's reports in the campaign: a deterministic pseudonym."""
        return self.memoize

    @property
    def linkability(self) -> str:
        """What an observer can link across a device's reports."""
        if not self.memoize:
            return "nothing: fresh buckets and bits in every report"
        return (
            f"deterministic pseudonym: the d = {self.d} buckets (one of C(k, d) = "
            f"{math.comb(self.k, self.d)}) are the same in every report of the device in this "
            "campaign, and every report of one pattern phi(v) is identical (recurs with "
            "probability 1), so any two reports show whether phi changed"
        )

    @property
    def lifetime_epsilon(self) -> float:
        """A device's total over any sequence of values, memoized: min(d+1, k) patterns."""
        return min(self.d + 1, self.k) * self.privacy_epsilon

    @property
    def p_star(self) -> float:
        """P[v sampled and its bit 1 | the device holds v] = (d/k) p."""
        return float(self._pq[0] * self.d / self.k)

    @property
    def q_star(self) -> float:
        """P[v sampled and its bit 1 | the device holds another value] = (d/k) q."""
        return float(self._pq[1] * self.d / self.k)

    @cached_property
    def report_dtype(self) -> np.dtype[Any]:
        return np.dtype([("buckets", np.int64, (self.d,)), ("bits", np.bool_, (self.d,))])

    # ---- device side ---------------------------------------------------------------------

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """One report per value. Memoized: needs the keyed source of the device and campaign
        (``permanent``); the report is then a function of that source and phi(v)."""
        x = check_values(values, self.k)
        keys = self.keyed_source(permanent)
        if keys is None:
            return self.perturb_independent_devices(x, rng=rng)
        buckets = self.device_buckets(permanent=keys)
        patterns = self._patterns(x, buckets)
        reports = np.empty(x.size, dtype=self.report_dtype)
        reports["buckets"] = buckets
        thresholds = self._bit_thresholds(np.broadcast_to(buckets, (x.size, self.d)), x)
        for pattern in np.unique(patterns).tolist():
            rows = np.flatnonzero(patterns == pattern)
            words = raw_words(keys.source(BITS_LABEL, pattern), self.d)
            reports["bits"][rows] = words[None, :] < thresholds[rows]
        return reports

    def perturb_independent_devices(
        self, values: Any, *, rng: RandomSource | None = None
    ) -> Reports:
        """Each value reported by its own new device: fresh buckets and bits from ``rng``."""
        x = check_values(values, self.k)
        reports = np.empty(x.size, dtype=self.report_dtype)
        buckets = sample_subsets(rng, x.size, self.k, self.d)
        reports["buckets"] = buckets
        words = raw_words(rng, x.size * self.d).reshape(x.size, self.d)
        reports["bits"] = words < self._bit_thresholds(buckets, x)
        return reports

    def device_buckets(self, *, permanent: KeyedSource) -> npt.NDArray[np.int64]:
        """The d buckets this device reports on in this campaign (sorted), memoized."""
        source = check_keyed_source(permanent, self.name).source(BUCKETS_LABEL, 0)
        return sample_subsets(source, 1, self.k, self.d)[0]

    def memo_keys(self, values: Any, *, permanent: KeyedSource) -> list[str]:
        """The ledger's key of each value: its pattern phi(v), keyed by the source."""
        x = check_values(values, self.k)
        keys = check_keyed_source(permanent, self.name)
        patterns = self._patterns(x, self.device_buckets(permanent=keys))
        return [keys.key(BITS_LABEL, int(p)) for p in patterns.tolist()]

    def _patterns(
        self, x: npt.NDArray[np.int64], buckets: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """phi(v): v when v is one of the device's buckets, k ("none") otherwise."""
        return np.where(np.isin(x, buckets), x, self.k)

    def _bit_thresholds(
        self, buckets: npt.NDArray[np.int64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.uint64]:
        high, low = self._thresholds
        return np.where(buckets == x[:, None], np.uint64(high), np.uint64(low))

    # ---- wire ----------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return {"buckets": [widest_int(0, self.k)] * self.d, "bits": bits_text(self.d)}

    def to_wire(self, reports: Reports) -> list[Any]:
        r = self._as_reports(reports)
        bits = encode_bits(np.packbits(r["bits"].reshape(len(r), self.d), axis=1))
        return [
            {"buckets": buckets, "bits": packed}
            for buckets, packed in zip(
                r["buckets"].reshape(len(r), self.d).tolist(), bits, strict=True
            )
        ]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        good_buckets: list[list[int]] = []
        good_bits: list[npt.NDArray[np.bool_]] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            reason = self._payload_error(payload)
            if reason is None:
                packed, bit_errors = decode_bits([payload["bits"]], self.d)
                if bit_errors:
                    reason = bit_errors[0].reason
                else:
                    good_buckets.append([int(j) for j in payload["buckets"]])
                    good_bits.append(np.unpackbits(packed[0], count=self.d).astype(bool))
                    continue
            errors.append(WireFormatError(index, reason))
        reports = np.empty(len(good_buckets), dtype=self.report_dtype)
        if good_buckets:
            reports["buckets"] = np.asarray(good_buckets, dtype=np.int64)
            reports["bits"] = np.stack(good_bits)
        return reports, errors

    def _payload_error(self, payload: Any) -> str | None:
        if not isinstance(payload, dict):
            return f'payload must be an object {{"buckets", "bits"}}; got {type(payload).__name__}'
        if set(payload) != {"buckets", "bits"}:
            return f"payload must have exactly buckets and bits; got {sorted(map(str, payload))}"
        buckets = payload["buckets"]
        if not isinstance(buckets, list) or len(buckets) != self.d:
            return f"buckets must be a list of {self.d} integers"
        if not all(is_plain_int(j) and 0 <= int(j) < self.k for j in buckets):
            return f"buckets must be integers in [0, {self.k})"
        if any(int(a) >= int(b) for a, b in itertools.pairwise(buckets)):
            return "buckets must be strictly increasing"
        return None

    # ---- server side ---------------------------------------------------------------------

    def _as_reports(self, reports: Reports) -> Reports:
        r = np.asarray(reports)
        if r.dtype.names is None or set(r.dtype.names) != {"buckets", "bits"}:
            raise ValueError(
                f"reports must be a structured array with fields buckets and bits; got {r.dtype}"
            )
        return r.reshape(-1)

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros((2, self.k), dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """(N_v, S_v): how many reports sampled v, and how many of those set v's bit."""
        r = self._as_reports(reports)
        buckets = r["buckets"].reshape(-1)
        if buckets.size and (buckets.min() < 0 or buckets.max() >= self.k):
            raise ValueError(f"report buckets must be in [0, {self.k})")
        sampled = np.bincount(buckets, minlength=self.k)
        ones = np.bincount(buckets[r["bits"].reshape(-1)], minlength=self.k)
        return AggregateStatistic(np.stack([sampled, ones]).astype(np.int64), len(r))

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return np.asarray(self.aggregate(reports).counts[1], dtype=np.int64)

    def support_from_statistic(self, statistic: AggregateStatistic) -> FloatArray:
        return np.asarray(self._check_statistic(statistic)[1], dtype=np.float64)

    def _check_statistic(self, statistic: AggregateStatistic) -> npt.NDArray[Any]:
        counts = np.asarray(statistic.counts)
        if counts.shape != (2, self.k):
            raise ValueError(f"statistic must have shape (2, {self.k}); got {counts.shape}")
        return counts

    def estimate_frequencies(self, statistic: AggregateStatistic) -> FloatArray:
        """f_v = (k/(n d)) (S_v - q N_v)/(p - q) (module docstring)."""
        counts = self._check_statistic(statistic).astype(np.float64)
        if statistic.n <= 0:
            raise ValueError("cannot estimate frequencies from zero reports")
        p, q = (float(v) for v in self._pq)
        scale = self.k / (statistic.n * self.d * (p - q))
        return np.asarray(scale * (counts[1] - q * counts[0]), dtype=np.float64)

    def variance_per_user(self) -> float:
        """(k/d) q(1-q)/(p-q)^2."""
        p, q = (float(v) for v in self._pq)
        return (self.k / self.d) * q * (1 - q) / (p - q) ** 2

    def frequency_coefficient(self) -> float:
        """(k/d)(p(1-p) - q(1-q))/(p-q)^2 + k/d - 1 (k/d - 1 for the symmetric p = 1 - q)."""
        p, q = (float(v) for v in self._pq)
        ratio = self.k / self.d
        return ratio * (p * (1 - p) - q * (1 - q)) / (p - q) ** 2 + ratio - 1

    # variance() and total_variance() of FrequencyOracle use the two methods above.

    # ---- exact privacy ---------------------------------------------------------------------

    def channel_matrices(self) -> Iterator[FloatArray]:
        """P[bits | x, buckets] (k, 2**d) for every bucket set (public, value-independent).

        Column y holds the bits of y, bucket i of the (sorted) set as bit i of y.
        """
        conditions = math.comb(self.k, self.d)
        if conditions > MAX_ENUMERATED_CONDITIONS or self.d > MAX_ENUMERATED_BITS:
            raise ValueError(
                f"k={self.k}, d={self.d}: {conditions} bucket sets are too many to enumerate"
            )
        p, q = (float(v) for v in self._pq)
        outputs = np.arange(1 << self.d)
        bits = (outputs[:, None] >> np.arange(self.d)) & 1  # (2**d, d)
        items = np.arange(self.k)
        for buckets in itertools.combinations(range(self.k), self.d):
            one = np.where(items[:, None] == np.asarray(buckets)[None, :], p, q)  # (k, d)
            per_bit = np.where(bits[None, :, :] == 1, one[:, None, :], 1 - one[:, None, :])
            yield per_bit.prod(axis=2)

    def bits_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """Bits of each report as the integer sum_i bit_i 2**i (the column given its buckets)."""
        r = self._as_reports(reports)
        weights = np.int64(1) << np.arange(self.d, dtype=np.int64)
        return np.asarray(r["bits"].reshape(len(r), self.d).astype(np.int64) @ weights)
