"""RAPPOR, bit for bit as Google's reference C++ client encodes strings.

Erlingsson, Pihur, Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal
Response", CCS 2014 (docs/math/rappor.md); reference client ``google/rappor``,
``client/cpp/encoder.cc`` and ``openssl_hash_impl.cc``. A client holds a secret (at least
``MIN_SECRET_BYTES`` random bytes, kept on the device) and reports a string ``v`` as follows.

1. **Cohort**: the little-endian uint32 of the first 4 bytes of ``H(secret, b"")``, modulo ``m``
   (the reference masks with ``m - 1`` and requires a power of two; the two agree there). ``H`` is
   HMAC-SHA256 when ``k <= 32`` and HMAC-DRBG (below) when ``k > 32``, as the reference's
   ``AssignCohort`` uses whichever HMAC function the encoder is configured with. That cohort
   depends on the secret alone, so it would be the same in every campaign of a device (a
   log2(m)-bit link across campaigns): on a device (``perturb`` with a keyed source) the cohort is
   instead drawn uniformly from the campaign's keyed source (``campaign_cohort``), independent
   across campaigns; ``perturb_with_secret`` keeps the reference's derivation. Given the cohort,
   steps 2-4 are the reference's, bit for bit.
2. **Bloom filter** B: ``d = MD5(cohort as 4 bytes big-endian || v)``; hash i sets bit
   ``d[i] mod k`` (i < h). Bits are numbered from the least significant: bit i is ``1 << i``.
3. **Permanent randomized response** (PRR), memoized by being a deterministic function of the
   secret: a stream ``s`` of ``k`` bytes, ``HMAC-SHA256(secret, 0x01 || encoder_id || B)`` (B as 4
   bytes big-endian) when ``k <= 32``, else ``HMAC-DRBG(secret, 0x01 || encoder_id || B)`` (B as
   k/8 bytes big-endian). Bit i uses byte ``s[i]``: when ``s[i] >> 1 < 128 f`` (probability f) it
   is replaced by the fair coin ``s[i] & 1``, otherwise it is ``B_i``. So a PRR bit is 1 with
   probability f/2, 0 with f/2, B_i with 1-f; both flips (1 -> 0 and 0 -> 1) happen.
   ``encoder_id`` (the metric or campaign name) makes the PRRs of two metrics independent.
4. **Instantaneous randomized response** (IRR), fresh for every report from
   :mod:`client_sdk.randomness` (the OS CSPRNG by default): a PRR bit 1 is sent as 1 with
   probability q, a PRR bit 0 with probability p.

The report is the cohort and the k IRR bits. Google's files write the bits as a k-character
string, most significant first: character j is bit ``k - 1 - j``. Report arrays here pack that
string with ``numpy.packbits`` (so for k a multiple of 8 the bytes are the big-endian integer, the
reference's byte-vector output), and the wire payload is ``{"cohort": c, "bits": "0110..."}``.

Only ``f`` is quantized: the PRR compares 7 bits of a byte with ``128 f``, so the implemented f
is a multiple of 1/128. For other values Google's clients disagree (C++ truncates ``128 f``, the
Python client in effect rounds it up, Java rounds it to nearest); this one rounds to nearest like
Java, and every privacy figure and the decoding use the implemented value. p and q are drawn on
the 2**-64 grid of the sampler, p rounded up and q down, so the implemented one-report epsilon
never exceeds the nominal one.

What the reference repository's Python client does differently: it keys the PRR with
``HMAC-SHA256(secret, B)`` (no ``0x01``, no encoder id) and supports only ``k <= 32``; the Java
client hashes two MD5 bytes per Bloom bit. Reports from any of them decode the same way as long
as the Bloom function (which the server recomputes) is the MD5-byte one used here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import itertools
import math
import struct
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_int, check_probability
from client_sdk.mechanisms._wire import is_plain_int, widest_int
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.memoization import DeviceKeyed, KeyedSource, check_keyed_source
from client_sdk.mechanisms.privacy import ChannelEvent, PermanentResponseEvent, PureEvent
from client_sdk.randomness import (
    RandomSource,
    bernoulli_lazy,
    probability_threshold,
    raw_words,
    threshold_probability,
    uniform_below,
)

MAX_K = 256
"""Largest Bloom filter: one MD5 byte (mod k) chooses each bit, as in the reference."""

HMAC_SHA256_MAX_K = 32
"""Up to this k the PRR stream is one HMAC-SHA256 (32 bytes); above it, HMAC-DRBG."""

MAX_HASHES = 16
"""At most one hash per MD5 byte."""

MAX_COHORTS = 1 << 16

MIN_SECRET_BYTES = 16
"""A client secret shorter than this is refused: whoever guesses it recomputes every PRR."""

MAX_ENUMERATED_K = 10
"""Largest k whose 2**k outputs the exact privacy check enumerates."""

CHUNK_BITS = 1 << 23
"""Bits randomized per chunk (an 8 MiB boolean array at most)."""

MEMO_LABEL = "rappor"
"""The label of a value's memo key (``KeyedSource.key("rappor:<value>", 0)``)."""

COHORT_LABEL = "rappor-cohort"
"""The label of a device's cohort draw in one campaign (``KeyedSource.source(COHORT_LABEL, 0)``)."""

PRR_PREFIX = b"\x01"
"""``kHmacPrrPrefix`` of the reference: separates PRR streams from the cohort stream."""

# _BIT_TABLE[b, j] is bit j (most significant first, as numpy.packbits) of the byte b.
_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


# ---- the reference algorithm, one value at a time (Python ints: bit i is 1 << i) ---------------


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104)."""
    return hmac.new(key, message, hashlib.sha256).digest()


def hmac_drbg(key: bytes, data: bytes, nbytes: int) -> bytes:
    """``nbytes`` bytes of HMAC_DRBG (NIST SP 800-90A, SHA-256) seeded with ``key || data``.

    As the reference's ``HmacDrbg``: instantiate (K = 0x00*32, V = 0x01*32, update with the
    provided data), then one generate call without the final update. Deterministic: the same key
    and data always give the same bytes.
    """
    k_state = b"\x00" * 32
    v_state = b"\x01" * 32
    provided = key + data
    k_state = hmac_sha256(k_state, v_state + b"\x00" + provided)
    v_state = hmac_sha256(k_state, v_state)
    k_state = hmac_sha256(k_state, v_state + b"\x01" + provided)
    v_state = hmac_sha256(k_state, v_state)
    out = bytearray()
    while len(out) < nbytes:
        v_state = hmac_sha256(k_state, v_state)
        out += v_state
    return bytes(out[:nbytes])


def secret_stream(secret: bytes, message: bytes, k: int) -> bytes:
    """The reference's ``hmac_func_``: HMAC-SHA256 when k <= 32, else k bytes of HMAC-DRBG."""
    if k <= HMAC_SHA256_MAX_K:
        return hmac_sha256(secret, message)
    return hmac_drbg(secret, message, max(k, 32))


def assign_cohort(secret: bytes, m: int, k: int) -> int:
    """The cohort of a client: little-endian uint32 of ``H(secret, b"")[:4]``, modulo m.

    The reference passes the C string ``"\\x00"`` as the message, which C++ reads as the empty
    string; for m a power of two, ``x mod m`` is the reference's ``x & (m - 1)``. For other m
    the assignment is uniform up to a relative 2**-32.
    """
    (word,) = struct.unpack("<I", secret_stream(secret, b"", k)[:4])
    return word % m


def bloom_indices(value: bytes, cohort: int, h: int, k: int) -> list[int]:
    """The h Bloom bits of ``value`` in ``cohort``: ``MD5(cohort_be32 || value)[i] mod k``."""
    digest = hashlib.md5(struct.pack(">I", cohort) + value).digest()
    return [digest[i] % k for i in range(h)]


def bloom_filter(value: bytes, cohort: int, h: int, k: int) -> int:
    """The Bloom filter of ``value`` in ``cohort`` as an integer (bit i is ``1 << i``)."""
    bloom = 0
    for index in bloom_indices(value, cohort, h, k):
        bloom |= 1 << index
    return bloom


def prr_message(encoder_id: bytes, bloom: int, k: int) -> bytes:
    """``0x01 || encoder_id || B``, B as 4 big-endian bytes (k <= 32) or k/8 bytes (k > 32)."""
    width = 4 if k <= HMAC_SHA256_MAX_K else k // 8
    return PRR_PREFIX + encoder_id + bloom.to_bytes(width, "big")


def prr_from_stream(bloom: int, stream: bytes, f_times_128: int, k: int) -> int:
    """The PRR of ``bloom`` given its pseudorandom stream (``get_prr_masks`` + combination).

    Byte i of the stream decides bit i: noise when ``byte >> 1 < f_times_128`` (probability
    f), the noise bit being ``byte & 1``; otherwise the Bloom bit is kept.
    """
    uniform = 0
    f_mask = 0
    for i in range(k):
        byte = stream[i]
        uniform |= (byte & 1) << i
        f_mask |= int((byte >> 1) < f_times_128) << i
    return (bloom & ~f_mask) | (uniform & f_mask)


def bit_string(bits: int, k: int) -> str:
    """Google's report string: k characters, bit k-1 first (``rappor.bit_string``)."""
    return format(bits, f"0{k}b")


# ---- helpers ------------------------------------------------------------------------------------


def _utf8(value: str) -> bytes:
    """UTF-8, with a lone surrogate written as its 3 bytes (never refused: a refusal would send
    nothing and tell a collector expecting a report about the value; nor shown in an error)."""
    return value.encode("utf-8", "surrogatepass")


def _value_bytes(value: Any, index: int) -> bytes:
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise ValueError(f"values[{index}] must be a string (or bytes); got {type(value).__name__}")


def _values_list(values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, bytearray)):
        return [values]
    if isinstance(values, np.ndarray):
        return list(values.tolist())
    if not isinstance(values, Sequence):
        raise ValueError(f"values must be a sequence of strings; got {type(values).__name__}")
    return list(values)


def _values_bytes(values: Any) -> list[bytes]:
    return [_value_bytes(v, i) for i, v in enumerate(_values_list(values))]


def _distinct_values(values: Any) -> tuple[list[bytes], npt.NDArray[np.int64]]:
    """Distinct values as UTF-8 bytes (first-seen order) and the index of each value among them.

    Deduplicates the objects first, so each distinct string is validated and encoded once.
    """
    items = _values_list(values)
    position: dict[Any, int] = {}
    try:
        inverse = np.fromiter(
            (position.setdefault(v, len(position)) for v in items), dtype=np.int64, count=len(items)
        )
    except TypeError:  # unhashable: a bytearray (fine) or junk (named by _values_bytes)
        return _dedupe(_values_bytes(items))
    distinct = list(position)
    if not all(isinstance(v, (str, bytes)) for v in distinct):
        return _dedupe(_values_bytes(items))  # raises naming the first bad index, if any
    encoded = [_utf8(v) if isinstance(v, str) else v for v in distinct]
    if len(set(encoded)) < len(encoded):  # "a" and b"a" hash apart but encode alike
        unique, remap = _dedupe(encoded)
        return unique, remap[inverse]
    return encoded, inverse


def _dedupe(values: list[bytes]) -> tuple[list[bytes], npt.NDArray[np.int64]]:
    """Distinct values (first-seen order) and the index of each value among them."""
    position: dict[bytes, int] = {}
    inverse = np.fromiter(
        (position.setdefault(v, len(position)) for v in values), dtype=np.int64, count=len(values)
    )
    return list(position), inverse


def _int_bits(value: int, k: int) -> npt.NDArray[np.bool_]:
    """Bits 0..k-1 of an integer as a bool vector (index i is bit i)."""
    raw = np.frombuffer(value.to_bytes((k + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little", count=k).astype(bool)


def _rows_per_chunk(k: int) -> int:
    return max(1, CHUNK_BITS // max(1, k))


# ---- the mechanism ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RAPPOR(DeviceKeyed, Mechanism):
    """String RAPPOR with cohorts, a memoized PRR and a fresh IRR (Erlingsson et al. 2014).

    Config fields: ``k`` Bloom bits (1..256; a multiple of 8 above 32, as the reference's
    HMAC-DRBG path needs), ``h`` hashes (1..min(16, k)), ``m`` cohorts, ``f`` PRR noise
    probability (in (0, 1), quantized to a multiple of 1/128), ``p`` = P[IRR 1 | PRR 0] and
    ``q`` = P[IRR 1 | PRR 1] with ``0 <= p < q <= 1``.

    Reports are a structured array with fields ``cohort`` (int32) and ``bits`` (uint8, shape
    ``(ceil(k/8),)``: Google's bit string packed with ``numpy.packbits``). In boolean arrays
    (``bloom_table``, ``permanent_response``) and in the statistic, column i is bit i.

    Privacy (docs/math/rappor.md): one report is ``epsilon_one``-LDP (this is ``privacy_epsilon``);
    any number of reports of one value reveal at most ``epsilon_inf``. Each distinct value a
    client ever reports has its own PRR, so ``epsilon_inf`` is spent per distinct value.
    """

    name: ClassVar[str] = "rappor"
    memoizes_itself: ClassVar[bool] = True
    value_kind: ClassVar[Literal["category", "number", "string"]] = "string"
    estimate_kind: ClassVar[str] = "rappor"
    k: int
    h: int
    m: int
    f: float
    p: float
    q: float

    def __post_init__(self) -> None:
        k = check_int(self.k, "k", minimum=1, maximum=MAX_K)
        if k > HMAC_SHA256_MAX_K and k % 8:
            raise ValueError(
                f"k must be a multiple of 8 when above {HMAC_SHA256_MAX_K} (the PRR then comes "
                f"from HMAC-DRBG, byte-aligned as in the reference); got {self.k!r}"
            )
        h = check_int(self.h, "h", minimum=1, maximum=min(MAX_HASHES, k))
        m = check_int(self.m, "m", minimum=1, maximum=MAX_COHORTS)
        f = check_probability(self.f, "f")
        f_times_128 = math.floor(Fraction(f) * 128 + Fraction(1, 2))
        if not 1 <= f_times_128 <= 127:
            raise ValueError(
                "f must round to a multiple of 1/128 in [1/128, 127/128] (the PRR compares 7 bits "
                f"of a byte with 128 f); got {self.f!r}"
            )
        p = check_probability(self.p, "p", open_low=False, open_high=False)
        q = check_probability(self.q, "q", open_low=False, open_high=False)
        if not p < q:
            raise ValueError(f"q must be greater than p; got p={self.p!r}, q={self.q!r}")
        for field, value in (("k", k), ("h", h), ("m", m), ("f", f), ("p", p), ("q", q)):
            object.__setattr__(self, field, value)

    # ---- implemented probabilities --------------------------------------------------------

    @cached_property
    def f_times_128(self) -> int:
        """128 times the implemented f (Java's rounding: to nearest, halves up)."""
        return math.floor(Fraction(self.f) * 128 + Fraction(1, 2))

    @cached_property
    def _irr_thresholds(self) -> tuple[int, int]:
        # p up and q down: the per-bit odds ratio q**(1-p**)/(p**(1-q**)) shrinks as p and q
        # move together, so the implemented epsilon_one is at most the nominal one.
        return (
            probability_threshold(self.p, rounding="up"),
            probability_threshold(self.q, rounding="down"),
        )

    @property
    def prr_f(self) -> Fraction:
        """The implemented f: a multiple of 1/128."""
        return Fraction(self.f_times_128, 128)

    @property
    def irr_p(self) -> Fraction:
        """The implemented P[IRR bit 1 | PRR bit 0]."""
        return threshold_probability(self._irr_thresholds[0])

    @property
    def irr_q(self) -> Fraction:
        """The implemented P[IRR bit 1 | PRR bit 1]."""
        return threshold_probability(self._irr_thresholds[1])

    @property
    def prr_probabilities(self) -> tuple[Fraction, Fraction]:
        """(P[PRR bit 1 | Bloom bit 0], P[PRR bit 1 | Bloom bit 1]) = (f/2, 1 - f/2)."""
        half = self.prr_f / 2
        return half, 1 - half

    @property
    def report_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p**, q**): P[reported bit 1 | Bloom bit 0], P[reported bit 1 | Bloom bit 1].

        p** = (f/2) q + (1 - f/2) p and q** = (1 - f/2) q + (f/2) p (Erlingsson et al. 2014,
        section 6; docs/math/rappor.md), from the implemented f, p and q.
        """
        zero, one = self.prr_probabilities
        p, q = self.irr_p, self.irr_q
        return zero * q + (1 - zero) * p, one * q + (1 - one) * p

    # ---- privacy --------------------------------------------------------------------------

    @property
    def epsilon_one(self) -> float:
        """epsilon_1 = h ln[q**(1-p**) / (p**(1-q**))]: the privacy of one report."""
        p2, q2 = self.report_probabilities
        return self.h * math.log(q2 * (1 - p2) / (p2 * (1 - q2)))

    @property
    def epsilon_inf(self) -> float:
        """epsilon_inf = 2h ln[(1-f/2)/(f/2)]: any number of reports of one value (the PRR)."""
        zero, one = self.prr_probabilities
        return 2 * self.h * math.log(one / zero)

    def privacy_event(self) -> PermanentResponseEvent:
        """One report is epsilon_1-DP; the reports of one value share its PRR, whose exact
        channel is ``channel_matrices(stage="permanent")`` (epsilon_inf where too large)."""
        permanent = ChannelEvent(self, fallback=PureEvent(self.epsilon_inf), stage="permanent")
        return PermanentResponseEvent(self.privacy_epsilon, permanent)

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon_one

    def channel_matrices(self, stage: str = "report") -> Iterator[FloatArray]:
        """Exact P[output | Bloom filter] over every Bloom filter of 1..h bits (small k only).

        ``stage="report"`` is one report (PRR then IRR, per bit p** / q**); ``stage="permanent"``
        the PRR alone (per bit f/2 / 1-f/2). Rows are inputs, columns the 2**k outputs (column y
        has bit i equal to ``(y >> i) & 1``).
        """
        if self.k > MAX_ENUMERATED_K:
            raise ValueError(f"k={self.k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        if stage == "report":
            zero, one = self.report_probabilities
        elif stage == "permanent":
            zero, one = self.prr_probabilities
        else:
            raise ValueError(f"stage must be 'report' or 'permanent'; got {stage!r}")
        inputs = [
            sum(1 << i for i in chosen)
            for weight in range(1, self.h + 1)
            for chosen in itertools.combinations(range(self.k), weight)
        ]
        shifts = np.arange(self.k)
        in_bits = (np.asarray(inputs)[:, None] >> shifts) & 1  # (inputs, k)
        out_bits = (np.arange(1 << self.k)[:, None] >> shifts) & 1  # (outputs, k)
        p_one = np.where(in_bits == 1, float(one), float(zero))  # P[bit i = 1 | input]
        per_bit = np.where(out_bits[None, :, :] == 1, p_one[:, None, :], 1 - p_one[:, None, :])
        yield per_bit.prod(axis=2)

    def implemented_epsilon(self, stage: str = "report") -> float:
        """max over outputs and Bloom-filter pairs of ln(P[y|B]/P[y|B']), enumerated."""
        worst = 0.0
        for matrix in self.channel_matrices(stage):
            worst = max(worst, float(np.max(np.log(matrix.max(axis=0) / matrix.min(axis=0)))))
        return worst

    # ---- encoding primitives --------------------------------------------------------------

    @property
    def report_bytes(self) -> int:
        """Bytes of packed bits per report: ceil(k/8)."""
        return (self.k + 7) // 8

    @property
    def report_dtype(self) -> np.dtype[Any]:
        """The structured dtype of a report array."""
        return np.dtype([("cohort", "<i4"), ("bits", "u1", (self.report_bytes,))])

    def cohort_of(self, secret: bytes) -> int:
        """The reference's cohort of a client with this secret (step 1 of the module docstring)."""
        return assign_cohort(_check_secret(secret), self.m, self.k)

    def campaign_cohort(self, permanent: KeyedSource) -> int:
        """The device's cohort in the campaign of ``permanent``: uniform in [0, m), drawn from the
        campaign's keyed source, so two campaigns of one device get independent cohorts."""
        keys = check_keyed_source(permanent, self.name)
        if self.m == 1:
            return 0
        return int(uniform_below(keys.source(COHORT_LABEL, 0), self.m, 1)[0])

    # ---- linkability (docs/math/memoization.md, "What an observer can link") ----------------

    deterministic_pseudonym: ClassVar[bool] = False
    """The cohort is constant per (device, campaign) but shared by 1/m of the devices; the bits
    carry no deterministic component."""

    @property
    def bit_recurrence(self) -> tuple[float, float]:
        """P[a report bit equals its PRR bit] for a PRR bit 1 (q) and for a PRR bit 0 (1 - p)."""
        return float(self.irr_q), float(1 - self.irr_p)

    @property
    def linkability(self) -> str:
        """What an observer can link across a device's reports, with this config's figures."""
        one, zero = self.bit_recurrence
        return (
            f"the cohort ({math.log2(self.m):.3g} bits, one of m = {self.m}) is the same in every "
            "report of the device in this campaign, drawn per campaign (independent across "
            "campaigns); reports of one value are i.i.d. given the PRR, a report bit equal to its "
            f"PRR bit with probability q = {one:.4g} (PRR bit 1) or 1 - p = {zero:.4g} (PRR bit "
            "0); no deterministic pseudonym of the value"
        )

    def bloom_bits(self, value: str | bytes, cohort: int) -> int:
        """The Bloom filter of one value in one cohort, as an integer (bit i is ``1 << i``)."""
        c = check_int(cohort, "cohort", minimum=0, maximum=self.m - 1)
        return bloom_filter(_value_bytes(value, 0), c, self.h, self.k)

    def bloom_table(self, values: Sequence[str | bytes]) -> npt.NDArray[np.bool_]:
        """Bloom filters of every value in every cohort: bool array (len(values), m, k).

        Entry [v, j, i] is bit i of the filter of ``values[v]`` in cohort j. The analysis builds
        its design matrix from this, so client and server share one Bloom function.
        """
        encoded = _values_bytes(values)
        out = np.zeros((len(encoded), self.m, self.k), dtype=bool)
        prefixes = [struct.pack(">I", c) for c in range(self.m)]
        for v, value in enumerate(encoded):
            for c, prefix in enumerate(prefixes):
                digest = hashlib.md5(prefix + value).digest()
                for i in range(self.h):
                    out[v, c, digest[i] % self.k] = True
        return out

    def permanent_response(
        self,
        values: Sequence[str | bytes],
        *,
        secret: bytes,
        encoder_id: str | bytes = "",
        cohort: int | None = None,
    ) -> tuple[int, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """(cohort, Bloom bits, PRR bits) of a client's values; bool (n, k), column i = bit i.

        For tests and audits only: the Bloom filter and the PRR must never leave the device.
        Nothing is cached; the PRR is recomputed from the secret every time.
        """
        key = _check_secret(secret)
        eid = _encoder_id_bytes(encoder_id)
        c = self._resolve_cohort(key, cohort)
        distinct, inverse = _distinct_values(values)
        blooms = np.zeros((len(distinct), self.k), dtype=bool)
        prrs = np.zeros((len(distinct), self.k), dtype=bool)
        for row, value in enumerate(distinct):
            bloom = bloom_filter(value, c, self.h, self.k)
            stream = secret_stream(key, prr_message(eid, bloom, self.k), self.k)
            blooms[row] = _int_bits(bloom, self.k)
            prrs[row] = _int_bits(prr_from_stream(bloom, stream, self.f_times_128, self.k), self.k)
        return c, blooms[inverse], prrs[inverse]

    def _resolve_cohort(self, secret: bytes, cohort: int | None) -> int:
        if cohort is None:
            return assign_cohort(secret, self.m, self.k)
        return check_int(cohort, "cohort", minimum=0, maximum=self.m - 1)

    def _instantaneous(
        self, prr: npt.NDArray[np.bool_], rng: RandomSource | None
    ) -> npt.NDArray[np.uint8]:
        """IRR of PRR rows (bool (n, k), column i = bit i), packed in Google's string order."""
        p_threshold, q_threshold = self._irr_thresholds
        out = np.empty((prr.shape[0], self.report_bytes), dtype=np.uint8)
        step = _rows_per_chunk(self.k)
        for start in range(0, prr.shape[0], step):
            rows = prr[start : start + step]
            p_bits = bernoulli_lazy(rng, p_threshold, rows.shape)
            q_bits = bernoulli_lazy(rng, q_threshold, rows.shape)
            irr = np.where(rows, q_bits, p_bits)
            out[start : start + rows.shape[0]] = self._pack(irr)
        return out

    def _pack(self, bits: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint8]:
        """Bool rows (column i = bit i) packed in Google's string order (bit k-1 first)."""
        if self.k % 8 == 0:  # the big-endian integer: little-endian bit packing, bytes reversed
            return np.packbits(bits, axis=1, bitorder="little")[:, ::-1]
        return np.packbits(bits[:, ::-1], axis=1)

    def _reports(self, cohorts: npt.ArrayLike, packed: npt.NDArray[np.uint8]) -> Reports:
        reports = np.empty(packed.shape[0], dtype=self.report_dtype)
        reports["cohort"] = cohorts
        reports["bits"] = packed
        return reports

    # ---- device side ----------------------------------------------------------------------

    @property
    def memoized(self) -> bool:
        """Always: every report's PRR is memoized (step 3 of the module docstring)."""
        return True

    def memo_keys(self, values: Any, *, permanent: KeyedSource) -> list[str]:
        """The ledger's key of each value: one permanent response per distinct string."""
        keys = check_keyed_source(permanent, self.name)
        return [keys.key(f"{MEMO_LABEL}:{value}", 0) for value in values]

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """Reports of one client: ``values`` (strings) under the client's keyed source.

        ``permanent`` (required) gives the client secret of the reference derivation
        (``reference_secret``) and the encoder id (``scope``: the campaign configuration, so
        different campaigns get independent PRRs) and the cohort (:meth:`campaign_cohort`).
        See :meth:`perturb_with_secret`.
        """
        keys = check_keyed_source(permanent, self.name)
        cohort = self.campaign_cohort(keys)
        return self.perturb_with_secret(
            values, secret=keys.reference_secret, encoder_id=keys.scope, cohort=cohort, rng=rng
        )

    def perturb_with_secret(
        self,
        values: Any,
        *,
        secret: bytes | None,
        encoder_id: str | bytes = "",
        cohort: int | None = None,
        rng: RandomSource | None = None,
    ) -> Reports:
        """Reports of one client from its raw ``secret``, as the reference encoder makes them.

        ``secret``: the client's secret bytes (at least ``MIN_SECRET_BYTES``; draw 32 with
        ``os.urandom`` once per device and keep them on it). Required: without it there is no
        memoization and repeated reports would leak the value by averaging.
        ``encoder_id``: the metric or campaign name; different ids give independent PRRs.
        ``cohort``: by default derived from the secret; pass one only to reproduce a reference
        encoder whose cohort was set explicitly.
        The PRR is recomputed from the secret for every call (never stored); the IRR is fresh
        from ``rng`` (``None``: the OS CSPRNG).
        """
        if secret is None:
            raise ValueError(
                "rappor: perturb needs the client's secret; the permanent randomized response is "
                "derived from it. To simulate a population of clients that report once each, "
                "use simulate_clients()"
            )
        c, _, prr = self.permanent_response(
            values, secret=secret, encoder_id=encoder_id, cohort=cohort
        )
        return self._reports(np.full(prr.shape[0], c), self._instantaneous(prr, rng))

    def simulate_clients(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """One report from each of ``len(values)`` distinct new clients, vectorized.

        For simulations and benchmarks: client i holds ``values[i]``; its cohort is uniform in
        [0, m) and its PRR bits are drawn as the reference derives them from a fresh secret
        (a uniform byte per bit: noise when its top 7 bits are below 128 f, the noise bit being
        its low bit), all from ``rng``. Under the random-oracle view of HMAC this is the
        distribution of ``perturb`` over random secrets. Not for devices: a device reporting
        twice must use ``perturb`` with its secret.
        """
        distinct, inverse = _distinct_values(values)
        table = self.bloom_table(distinct)
        n = inverse.size
        cohorts = uniform_below(rng, self.m, n) if self.m > 1 else np.zeros(n, dtype=np.int64)
        packed = np.empty((n, self.report_bytes), dtype=np.uint8)
        step = _rows_per_chunk(self.k)
        for start in range(0, n, step):
            stop = min(n, start + step)
            bloom = table[inverse[start:stop], cohorts[start:stop]]
            count = (stop - start) * self.k
            noise = raw_words(rng, (count + 7) // 8).view(np.uint8)[:count].reshape(bloom.shape)
            prr = np.where((noise >> 1) < self.f_times_128, (noise & 1).astype(bool), bloom)
            packed[start:stop] = self._instantaneous(prr, rng)
        return self._reports(cohorts, packed)

    # ---- wire -----------------------------------------------------------------------------

    def _check_reports(self, reports: Reports) -> Reports:
        array = np.asarray(reports)
        if array.dtype != self.report_dtype or array.ndim != 1:
            raise ValueError(
                f"reports must be a 1-D array of dtype {self.report_dtype}; got "
                f"{array.dtype} with shape {array.shape}"
            )
        if array.size and (array["cohort"].min() < 0 or array["cohort"].max() >= self.m):
            raise ValueError(f"report cohorts must be in [0, {self.m})")
        return array

    def bit_strings(self, reports: Reports) -> list[str]:
        """Google's k-character bit strings of reports (bit k-1 first)."""
        array = self._check_reports(reports)
        bits = np.unpackbits(array["bits"], axis=1, count=self.k)
        chars = np.where(bits == 1, np.uint8(ord("1")), np.uint8(ord("0"))).astype(np.uint8)
        return [row.tobytes().decode("ascii") for row in chars]

    def reports_from_strings(self, cohorts: npt.ArrayLike, bits: Sequence[str]) -> Reports:
        """Reports from cohorts and Google bit strings, vectorized.

        Every string must have exactly k characters, each '0' or '1'; every cohort an
        integer in [0, m). The first bad row raises :class:`WireFormatError` (a ``ValueError``)
        with its index.
        """
        cohort_array = np.asarray(cohorts)
        if cohort_array.shape != (len(bits),):
            raise ValueError(f"got {cohort_array.size} cohorts for {len(bits)} bit strings")
        if cohort_array.size and not np.issubdtype(cohort_array.dtype, np.integer):
            raise ValueError(f"cohorts must be integers; got dtype {cohort_array.dtype}")
        bad = np.flatnonzero((cohort_array < 0) | (cohort_array >= self.m))
        if bad.size:
            raise WireFormatError(
                int(bad[0]), f"cohort must be in [0, {self.m}); got {cohort_array[bad[0]]}"
            )
        lengths = np.fromiter((len(s) for s in bits), dtype=np.int64, count=len(bits))
        bad = np.flatnonzero(lengths != self.k)
        if bad.size:
            raise WireFormatError(
                int(bad[0]),
                f"bits must have exactly {self.k} characters; got {int(lengths[bad[0]])}",
            )
        # One byte per character ("replace" keeps the length), so rows stay aligned.
        raw = "".join(bits).encode("ascii", errors="replace")
        chars = np.frombuffer(raw, dtype=np.uint8).reshape(len(bits), self.k)
        bad = np.flatnonzero(((chars != ord("0")) & (chars != ord("1"))).any(axis=1))
        if bad.size:
            raise WireFormatError(int(bad[0]), "bits must contain only '0' and '1'")
        return self._reports(cohort_array, np.packbits(chars == ord("1"), axis=1))

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return {"cohort": widest_int(0, self.m), "bits": "0" * self.k}

    def to_wire(self, reports: Reports) -> list[Any]:
        """``{"cohort": c, "bits": "<k characters, bit k-1 first>"}`` per report."""
        array = self._check_reports(reports)
        return [
            {"cohort": int(c), "bits": s}
            for c, s in zip(array["cohort"], self.bit_strings(array), strict=True)
        ]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        cohorts: list[int] = []
        strings: list[str] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            reason = self._payload_problem(payload)
            if reason:
                errors.append(WireFormatError(index, reason))
            else:
                cohorts.append(int(payload["cohort"]))
                strings.append(payload["bits"])
        return self.reports_from_strings(np.asarray(cohorts, dtype=np.int64), strings), errors

    def _payload_problem(self, payload: Any) -> str:
        if not isinstance(payload, dict):
            return f"payload must be an object with cohort and bits; got {type(payload).__name__}"
        keys = set(payload)
        if keys != {"cohort", "bits"}:
            missing = sorted({"cohort", "bits"} - keys)
            extra = sorted(str(key) for key in keys - {"cohort", "bits"})
            return "payload " + "; ".join(
                ([f"is missing {', '.join(missing)}"] if missing else [])
                + ([f"has unknown field(s) {', '.join(extra)}"] if extra else [])
            )
        cohort, bits = payload["cohort"], payload["bits"]
        if not is_plain_int(cohort) or not 0 <= int(cohort) < self.m:
            return f"cohort must be an integer in [0, {self.m}); got {cohort!r}"
        if not isinstance(bits, str):
            return f"bits must be a string of {self.k} characters; got {type(bits).__name__}"
        if len(bits) != self.k:
            return f"bits must have exactly {self.k} characters; got {len(bits)}"
        if bits.strip("01"):
            return "bits must contain only '0' and '1'"
        return ""

    # ---- server side ----------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros((self.m, self.k + 1), dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Per-cohort counts, shape (m, k+1): column 0 the cohort's reports, column 1+i bit i.

        This is Google's ``counts.csv`` (``sum_bits.py``). Vectorized: per chunk, one
        ``bincount`` of (cohort, byte column, byte value) and a product with the bit table.
        """
        array = self._check_reports(reports)
        nbytes = self.report_bytes
        counts = np.zeros((self.m, self.k + 1), dtype=np.int64)
        counts[:, 0] = np.bincount(array["cohort"], minlength=self.m)
        histogram = np.zeros(self.m * nbytes * 256, dtype=np.int64)
        offsets = np.arange(nbytes, dtype=np.int64) * 256
        step = _rows_per_chunk(8 * nbytes)
        for start in range(0, array.size, step):
            chunk = array[start : start + step]
            cohort_keys = chunk["cohort"].astype(np.int64)[:, None] * (nbytes * 256)
            keys = cohort_keys + offsets + chunk["bits"]
            histogram += np.bincount(keys.ravel(), minlength=histogram.size)
        # (m, nbytes, 256) x (256, 8) -> (m, nbytes * 8) bit counts in string order.
        string_order = (histogram.reshape(self.m, nbytes, 256) @ _BIT_TABLE).reshape(self.m, -1)
        counts[:, 1:] = string_order[:, : self.k][:, ::-1]
        return AggregateStatistic(counts, int(array.size))

    def estimate_bloom_counts(self, statistic: AggregateStatistic) -> tuple[FloatArray, FloatArray]:
        """Unbiased counts of true Bloom bits per cohort and their variances, shape (m, k).

        t_ij = (c_ij - p** N_j) / (q** - p**), which is the paper's
        (c_ij - (p + f q/2 - f p/2) N_j) / ((1 - f)(q - p)) (docs/math/rappor.md). For a fixed
        population, Var[c_ij] = n1 q**(1-q**) + (N_j - n1) p**(1-p**) with n1 the number of the
        cohort's clients whose Bloom bit i is set; the variance returned plugs in t_ij clipped
        to [0, N_j] for n1.
        """
        counts = np.asarray(statistic.counts)
        if counts.shape != (self.m, self.k + 1):
            raise ValueError(
                f"statistic must have shape ({self.m}, {self.k + 1}); got {counts.shape}"
            )
        p2, q2 = (float(v) for v in self.report_probabilities)
        sizes = counts[:, :1].astype(np.float64)
        bits = counts[:, 1:].astype(np.float64)
        estimates = (bits - p2 * sizes) / (q2 - p2)
        ones = np.clip(estimates, 0.0, sizes)
        variances = (ones * q2 * (1 - q2) + (sizes - ones) * p2 * (1 - p2)) / (q2 - p2) ** 2
        return estimates, variances


def _check_secret(secret: Any) -> bytes:
    if not isinstance(secret, (bytes, bytearray)):
        raise ValueError(f"secret must be bytes; got {type(secret).__name__}")
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(
            f"secret must have at least {MIN_SECRET_BYTES} bytes (use os.urandom(32)); "
            f"got {len(secret)}"
        )
    return bytes(secret)


def _encoder_id_bytes(encoder_id: Any) -> bytes:
    if isinstance(encoder_id, str):
        return encoder_id.encode("utf-8")
    if isinstance(encoder_id, (bytes, bytearray)):
        return bytes(encoder_id)
    raise ValueError(f"encoder_id must be a string or bytes; got {type(encoder_id).__name__}")
