"""The fully linear proof of draft-irtf-cfrg-vdaf-20 (section "FLP Specification", after
[BBCGGI19] section 4.2), its gadgets (appendix "FLP Gadgets") and the validity circuits of the
five registered Prio3 variants.

Field vectors are ``list[int]``; a wire polynomial holds its values at the ``p``-th roots of
unity (value 0 is the wire seed, value ``k`` the ``k``-th call's input), a gadget polynomial its
values at the ``next_power_of_2(DEGREE * (p - 1) + 1)``-th roots, of which the proof carries
the first ``DEGREE * (p - 1) + 1``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

import numpy as np

from client_sdk.vdaf.errors import MeasurementError
from client_sdk.vdaf.field import Field, Lagrange, next_power_of_2

__all__ = [
    "Count",
    "FlpBBCGGI19",
    "Histogram",
    "Mul",
    "MultihotCountVec",
    "ParallelSum",
    "PolyEval",
    "Sum",
    "SumVec",
    "Valid",
    "gadget_poly_len",
    "wire_poly_len",
]

M = TypeVar("M")
R = TypeVar("R")


def wire_poly_len(gadget_calls: int) -> int:
    """Values in each wire polynomial: the seed plus one per call, rounded up to a power of 2."""
    return next_power_of_2(1 + gadget_calls)


def gadget_poly_len(degree: int, wire_len: int) -> int:
    """Values that determine a gadget polynomial of degree ``degree * (wire_len - 1)``."""
    return degree * (wire_len - 1) + 1


class GadgetCall(Protocol):
    """What a circuit calls: a gadget, or the prover's and verifier's recording shims."""

    def eval(self, field: type[Field], inp: Sequence[int]) -> int: ...


class Gadget(GadgetCall, Protocol):
    ARITY: int
    DEGREE: int

    def eval_poly(self, field: type[Field], inp_poly: Sequence[Sequence[int]]) -> list[int]: ...


class Mul:
    """``Mul(x, y) = x * y``."""

    ARITY = 2
    DEGREE = 2

    def eval(self, field: type[Field], inp: Sequence[int]) -> int:
        return inp[0] * inp[1] % field.MODULUS

    def eval_poly(self, field: type[Field], inp_poly: Sequence[Sequence[int]]) -> list[int]:
        return Lagrange(field).poly_mul(inp_poly[0], inp_poly[1])


class PolyEval:
    """``PolyEval(x) = q(x)`` for a fixed polynomial ``q`` (coefficients, constant first)."""

    ARITY = 1

    def __init__(self, coeffs: Sequence[int], num_calls: int) -> None:
        coeffs = list(coeffs)
        while coeffs and coeffs[-1] == 0:
            coeffs.pop()
        if not coeffs:
            raise ValueError("PolyEval: invalid polynomial: zero length")
        self.coeffs = coeffs
        self.DEGREE = len(coeffs) - 1
        self.n = next_power_of_2(gadget_poly_len(self.DEGREE, wire_poly_len(num_calls)))

    def eval(self, field: type[Field], inp: Sequence[int]) -> int:
        return field.poly_eval([c % field.MODULUS for c in self.coeffs], inp[0])

    def eval_poly(self, field: type[Field], inp_poly: Sequence[Sequence[int]]) -> list[int]:
        size = len(inp_poly[0])
        mono = field.inv_ntt(inp_poly[0], size)
        values = field.ntt(mono, self.n)
        q = [c % field.MODULUS for c in self.coeffs]
        return [field.poly_eval(q, x) for x in values]


class ParallelSum:
    """``count`` copies of a subcircuit on consecutive inputs, summed."""

    def __init__(self, subcircuit: Gadget, count: int) -> None:
        self.subcircuit = subcircuit
        self.count = count
        self.ARITY = subcircuit.ARITY * count
        self.DEGREE = subcircuit.DEGREE

    def eval(self, field: type[Field], inp: Sequence[int]) -> int:
        a = self.subcircuit.ARITY
        total = 0
        for i in range(self.count):
            total += self.subcircuit.eval(field, inp[i * a : (i + 1) * a])
        return total % field.MODULUS

    def eval_poly(self, field: type[Field], inp_poly: Sequence[Sequence[int]]) -> list[int]:
        a = self.subcircuit.ARITY
        out_len = next_power_of_2(gadget_poly_len(self.DEGREE, len(inp_poly[0])))
        acc = [0] * out_len
        for i in range(self.count):
            part = self.subcircuit.eval_poly(field, inp_poly[i * a : (i + 1) * a])
            acc = [x + y for x, y in zip(acc, part, strict=True)]
        mod = field.MODULUS
        return [x % mod for x in acc]


class _RecordingGadget:
    """The draft's ProveGadget/QueryGadget shims: record each call's inputs as wire values."""

    def __init__(self, g: Gadget, calls: int, wire_seeds: Sequence[int]) -> None:
        self.inner = g
        self.ARITY = g.ARITY
        self.DEGREE = g.DEGREE
        p = wire_poly_len(calls)
        self.wires = [[s] + [0] * (p - 1) for s in wire_seeds]
        self.k = 0

    def record(self, inp: Sequence[int]) -> None:
        self.k += 1
        for j, x in enumerate(inp):
            self.wires[j][self.k] = x


class _ProveGadget(_RecordingGadget):
    def eval(self, field: type[Field], inp: Sequence[int]) -> int:
        self.record(inp)
        return self.inner.eval(field, inp)


class _QueryGadget(_RecordingGadget):
    """Answers call ``k`` with the gadget polynomial's value at ``alpha**k``."""

    def __init__(
        self,
        field: type[Field],
        g: Gadget,
        calls: int,
        wire_seeds: Sequence[int],
        gadget_poly: Sequence[int],
    ) -> None:
        super().__init__(g, calls, wire_seeds)
        p = wire_poly_len(calls)
        size = next_power_of_2(gadget_poly_len(g.DEGREE, p))
        self.poly = Lagrange(field).extend_values_to_power_of_2(gadget_poly, size)
        self.step = size // p

    def eval(self, field: type[Field], inp: Sequence[int]) -> int:
        self.record(inp)
        return self.poly[self.k * self.step]


class Valid(Generic[M, R]):
    """A validity circuit (the draft's ``Valid``): gadgets, lengths, encode/truncate/decode."""

    field: type[Field]
    GADGETS: list[Gadget]
    GADGET_CALLS: list[int]
    MEAS_LEN: int
    JOINT_RAND_LEN: int
    EVAL_OUTPUT_LEN: int
    OUTPUT_LEN: int

    def encode(self, measurement: M) -> list[int]:
        raise NotImplementedError

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall] | None = None,
    ) -> list[int]:
        raise NotImplementedError

    def truncate(self, meas: Sequence[int]) -> list[int]:
        raise NotImplementedError

    def decode(self, output: Sequence[int], num_measurements: int) -> R:
        raise NotImplementedError

    def prove_rand_len(self) -> int:
        return sum(g.ARITY for g in self.GADGETS)

    def query_rand_len(self) -> int:
        n = len(self.GADGETS)
        return n + self.EVAL_OUTPUT_LEN if self.EVAL_OUTPUT_LEN > 1 else n

    def proof_len(self) -> int:
        return sum(
            g.ARITY + gadget_poly_len(g.DEGREE, wire_poly_len(calls))
            for g, calls in zip(self.GADGETS, self.GADGET_CALLS, strict=True)
        )

    def verifier_len(self) -> int:
        return 1 + sum(g.ARITY + 1 for g in self.GADGETS)


class FlpBBCGGI19(Generic[M, R]):
    """prove / query / decide of the draft for one validity circuit."""

    def __init__(self, valid: Valid[M, R]) -> None:
        self.valid = valid
        self.field = valid.field
        self.PROVE_RAND_LEN = valid.prove_rand_len()
        self.QUERY_RAND_LEN = valid.query_rand_len()
        self.JOINT_RAND_LEN = valid.JOINT_RAND_LEN
        self.MEAS_LEN = valid.MEAS_LEN
        self.OUTPUT_LEN = valid.OUTPUT_LEN
        self.PROOF_LEN = valid.proof_len()
        self.VERIFIER_LEN = valid.verifier_len()

    def encode(self, measurement: M) -> list[int]:
        return self.valid.encode(measurement)

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return self.valid.truncate(meas)

    def decode(self, output: Sequence[int], num_measurements: int) -> R:
        return self.valid.decode(output, num_measurements)

    def prove(
        self, meas: Sequence[int], prove_rand: Sequence[int], joint_rand: Sequence[int]
    ) -> list[int]:
        """The wire seeds and the gadget polynomial of each gadget, on the recorded wires."""
        gadgets: list[_ProveGadget] = []
        offset = 0
        for g, calls in zip(self.valid.GADGETS, self.valid.GADGET_CALLS, strict=True):
            gadgets.append(_ProveGadget(g, calls, prove_rand[offset : offset + g.ARITY]))
            offset += g.ARITY
        self.valid.eval(meas, joint_rand, 1, gadgets)
        proof: list[int] = []
        for pg, calls in zip(gadgets, self.valid.GADGET_CALLS, strict=True):
            p = wire_poly_len(calls)
            proof += [w[0] for w in pg.wires]
            gadget_poly = pg.inner.eval_poly(self.field, pg.wires)
            proof += gadget_poly[: gadget_poly_len(pg.DEGREE, p)]
        return proof

    def query(
        self,
        meas: Sequence[int],
        proof: Sequence[int],
        query_rand: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
    ) -> list[int]:
        """A share of the verifier: the reduced circuit output, then per gadget the wire
        polynomials and the gadget polynomial evaluated at the random point ``t``."""
        field = self.field
        mod = field.MODULUS
        gadgets: list[_QueryGadget] = []
        offset = 0
        for g, calls in zip(self.valid.GADGETS, self.valid.GADGET_CALLS, strict=True):
            p = wire_poly_len(calls)
            seeds = proof[offset : offset + g.ARITY]
            offset += g.ARITY
            g_len = gadget_poly_len(g.DEGREE, p)
            gadgets.append(_QueryGadget(field, g, calls, seeds, proof[offset : offset + g_len]))
            offset += g_len
        out = self.valid.eval(meas, joint_rand, num_shares, gadgets)
        rand = list(query_rand)
        if self.valid.EVAL_OUTPUT_LEN > 1:
            coeffs = rand[: self.valid.EVAL_OUTPUT_LEN]
            rand = rand[self.valid.EVAL_OUTPUT_LEN :]
            v = sum(r * o for r, o in zip(coeffs, out, strict=True)) % mod
        else:
            v = out[0]
        lag = Lagrange(field)
        verifier = [v]
        for qg, t in zip(gadgets, rand, strict=True):
            p = len(qg.wires[0])
            if pow(t, p, mod) == 1:
                raise ValueError("test point is a root of unity")
            verifier += lag.poly_eval_batched(qg.wires, t)
            verifier.append(lag.poly_eval(qg.poly, t))
        return verifier

    def failed_check(self, verifier: Sequence[int]) -> str | None:
        """The check the verifier message fails, or None if it accepts."""
        if verifier[0] != 0:
            return "the validity circuit's output is not zero"
        offset = 1
        for i, g in enumerate(self.valid.GADGETS):
            wires = verifier[offset : offset + g.ARITY]
            offset += g.ARITY
            if g.eval(self.field, wires) != verifier[offset]:
                return f"gadget {i}'s polynomial is not consistent with its wires"
            offset += 1
        return None

    def decide(self, verifier: Sequence[int]) -> bool:
        return self.failed_check(verifier) is None


# -- circuits -----------------------------------------------------------------------------


def encode_range_checked_int(field: type[Field], value: int, max_measurement: int) -> list[int]:
    """Bits of ``value`` with the last weight ``max_measurement - (2**(bits-1) - 1)`` (the
    draft's ``encode_range_checked_int``): only values in ``[0, max_measurement]`` encode."""
    bits = max_measurement.bit_length()
    rest_all_ones = 2 ** (bits - 1) - 1
    last_weight = max_measurement - rest_all_ones
    if value <= rest_all_ones:
        rest, last = value, 0
    else:
        rest, last = value - last_weight, 1
    return [(rest >> i) & 1 for i in range(bits - 1)] + [last]


def decode_range_checked_int(
    field: type[Field], encoded: Sequence[int], max_measurement: int
) -> int:
    """The linear inverse of ``encode_range_checked_int`` (works on shares)."""
    bits = max_measurement.bit_length()
    last_weight = max_measurement - (2 ** (bits - 1) - 1)
    total = sum((1 << i) * b for i, b in enumerate(encoded[: bits - 1]))
    total += last_weight * encoded[bits - 1]
    return total % field.MODULUS


def _range_check(
    field: type[Field],
    meas: Sequence[int],
    joint_rand: Sequence[int],
    num_shares: int,
    chunk_length: int,
    calls: int,
    gadget: GadgetCall,
) -> int:
    """``sum_i ParallelSum(Mul)(r_i * m, m - 1/s, r_i**2 * m', m' - 1/s, ...)`` over chunks:
    zero when every element is 0 or 1 (the shared range check of SumVec, Histogram and
    MultihotCountVec; the padding past ``len(meas)`` is 0)."""
    mod = field.MODULUS
    shares_inv = field.inv(num_shares)
    total = 0
    n = len(meas)
    for i in range(calls):
        r = joint_rand[i]
        r_power = r
        inputs = [0] * (2 * chunk_length)
        for j in range(chunk_length):
            index = i * chunk_length + j
            m = meas[index] if index < n else 0
            inputs[2 * j] = r_power * m % mod
            inputs[2 * j + 1] = (m - shares_inv) % mod
            r_power = r_power * r % mod
        total += gadget.eval(field, inputs)
    return total % mod


def _check_int(name: str, value: object, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]`` (numpy integers accepted, bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise MeasurementError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    if not low <= int(value) <= high:
        raise MeasurementError(f"{name} must be in [{low}, {high}], got {value}")
    return int(value)


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


class Count(Valid[int, int]):
    """``C(x) = x * x - x``: zero iff the count is 0 or 1."""

    MEAS_LEN = 1
    JOINT_RAND_LEN = 0
    OUTPUT_LEN = 1
    EVAL_OUTPUT_LEN = 1

    def __init__(self, field: type[Field]) -> None:
        self.field = field
        self.GADGETS = [Mul()]
        self.GADGET_CALLS = [1]

    def encode(self, measurement: int) -> list[int]:
        value = int(measurement) if isinstance(measurement, bool) else measurement
        return [_check_int("Prio3Count measurement", value, 0, 1)]

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall] | None = None,
    ) -> list[int]:
        g = (gadgets or self.GADGETS)[0]
        return [(g.eval(self.field, [meas[0], meas[0]]) - meas[0]) % self.field.MODULUS]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas)

    def decode(self, output: Sequence[int], num_measurements: int) -> int:
        return output[0]


class Sum(Valid[int, int]):
    """Each bit of the range-checked encoding through ``PolyEval(x**2 - x)``."""

    JOINT_RAND_LEN = 0
    OUTPUT_LEN = 1

    def __init__(self, field: type[Field], max_measurement: int) -> None:
        _check_positive("max_measurement", max_measurement)
        if max_measurement >= field.MODULUS:
            raise ValueError(f"max_measurement {max_measurement} does not fit {field.__name__}")
        self.field = field
        self.max_measurement = max_measurement
        self.bits = max_measurement.bit_length()
        self.GADGETS = [PolyEval([0, -1, 1], self.bits)]
        self.GADGET_CALLS = [self.bits]
        self.MEAS_LEN = self.bits
        self.EVAL_OUTPUT_LEN = self.bits

    def encode(self, measurement: int) -> list[int]:
        value = _check_int("Prio3Sum measurement", measurement, 0, self.max_measurement)
        return encode_range_checked_int(self.field, value, self.max_measurement)

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall] | None = None,
    ) -> list[int]:
        g = (gadgets or self.GADGETS)[0]
        return [g.eval(self.field, [b]) for b in meas]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return [decode_range_checked_int(self.field, meas, self.max_measurement)]

    def decode(self, output: Sequence[int], num_measurements: int) -> int:
        return output[0]


class _ChunkedRangeCheck:
    """Shared constructor checks of the ``ParallelSum(Mul(), chunk_length)`` circuits."""

    @staticmethod
    def gadget(length: int, chunk_length: int) -> tuple[list[Gadget], list[int]]:
        _check_positive("chunk_length", chunk_length)
        return [ParallelSum(Mul(), chunk_length)], [(length + chunk_length - 1) // chunk_length]


class SumVec(Valid[list[int], list[int]]):
    """``length`` integers in ``[0, max_measurement]``, each range-checked bit by bit."""

    EVAL_OUTPUT_LEN = 1

    def __init__(
        self, field: type[Field], length: int, max_measurement: int, chunk_length: int
    ) -> None:
        _check_positive("length", length)
        _check_positive("max_measurement", max_measurement)
        self.field = field
        self.length = length
        self.max_measurement = max_measurement
        self.bits = max_measurement.bit_length()
        self.chunk_length = chunk_length
        self.GADGETS, self.GADGET_CALLS = _ChunkedRangeCheck.gadget(
            length * self.bits, chunk_length
        )
        self.MEAS_LEN = length * self.bits
        self.OUTPUT_LEN = length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: list[int]) -> list[int]:
        if not isinstance(measurement, (list, tuple)) or len(measurement) != self.length:
            raise MeasurementError(
                f"Prio3SumVec measurement must be a list of {self.length} ints, got "
                f"{measurement!r:.80}"
            )
        out: list[int] = []
        for i, v in enumerate(measurement):
            value = _check_int(f"Prio3SumVec measurement[{i}]", v, 0, self.max_measurement)
            out += encode_range_checked_int(self.field, value, self.max_measurement)
        return out

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall] | None = None,
    ) -> list[int]:
        g = (gadgets or self.GADGETS)[0]
        return [
            _range_check(
                self.field, meas, joint_rand, num_shares, self.chunk_length, self.GADGET_CALLS[0], g
            )
        ]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        b = self.bits
        return [
            decode_range_checked_int(self.field, meas[i * b : (i + 1) * b], self.max_measurement)
            for i in range(self.length)
        ]

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)


class Histogram(Valid[int, list[int]]):
    """A one-hot vector: every entry 0 or 1 (range check) and the entries sum to 1."""

    EVAL_OUTPUT_LEN = 2

    def __init__(self, field: type[Field], length: int, chunk_length: int) -> None:
        _check_positive("length", length)
        self.field = field
        self.length = length
        self.chunk_length = chunk_length
        self.GADGETS, self.GADGET_CALLS = _ChunkedRangeCheck.gadget(length, chunk_length)
        self.MEAS_LEN = length
        self.OUTPUT_LEN = length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: int) -> list[int]:
        index = _check_int("Prio3Histogram measurement", measurement, 0, self.length - 1)
        out = [0] * self.length
        out[index] = 1
        return out

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall] | None = None,
    ) -> list[int]:
        g = (gadgets or self.GADGETS)[0]
        mod = self.field.MODULUS
        range_check = _range_check(
            self.field, meas, joint_rand, num_shares, self.chunk_length, self.GADGET_CALLS[0], g
        )
        sum_check = (sum(meas) - self.field.inv(num_shares)) % mod
        return [range_check, sum_check]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas)

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)


class MultihotCountVec(Valid[list[bool], list[int]]):
    """A 0/1 vector with at most ``max_weight`` ones: the entries and the bits of the claimed
    weight are range-checked, and the claimed weight must equal the sum of the entries."""

    EVAL_OUTPUT_LEN = 2

    def __init__(self, field: type[Field], length: int, max_weight: int, chunk_length: int) -> None:
        _check_positive("length", length)
        _check_positive("max_weight", max_weight)
        if max_weight > length:
            raise ValueError(f"max_weight {max_weight} exceeds length {length}")
        if length >= field.MODULUS:
            raise ValueError(f"length {length} is too large for {field.__name__}")
        self.field = field
        self.length = length
        self.max_weight = max_weight
        self.bits_for_weight = max_weight.bit_length()
        self.chunk_length = chunk_length
        self.GADGETS, self.GADGET_CALLS = _ChunkedRangeCheck.gadget(
            length + self.bits_for_weight, chunk_length
        )
        self.MEAS_LEN = length + self.bits_for_weight
        self.OUTPUT_LEN = length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]

    def encode(self, measurement: list[bool]) -> list[int]:
        if not isinstance(measurement, (list, tuple)) or len(measurement) != self.length:
            raise MeasurementError(
                f"Prio3MultihotCountVec measurement must be a list of {self.length} bools"
            )
        counts = []
        for i, x in enumerate(measurement):
            if not isinstance(x, bool) and x not in (0, 1):
                raise MeasurementError(
                    f"Prio3MultihotCountVec measurement[{i}] must be a bool, got {x!r}"
                )
            counts.append(int(x))
        weight = sum(counts)
        if weight > self.max_weight:
            raise MeasurementError(
                f"Prio3MultihotCountVec measurement has weight {weight}, above max_weight "
                f"{self.max_weight}"
            )
        return counts + encode_range_checked_int(self.field, weight, self.max_weight)

    def eval(
        self,
        meas: Sequence[int],
        joint_rand: Sequence[int],
        num_shares: int,
        gadgets: Sequence[GadgetCall] | None = None,
    ) -> list[int]:
        g = (gadgets or self.GADGETS)[0]
        mod = self.field.MODULUS
        range_check = _range_check(
            self.field, meas, joint_rand, num_shares, self.chunk_length, self.GADGET_CALLS[0], g
        )
        weight = sum(meas[: self.length])
        reported = decode_range_checked_int(self.field, meas[self.length :], self.max_weight)
        return [range_check, (weight - reported) % mod]

    def truncate(self, meas: Sequence[int]) -> list[int]:
        return list(meas[: self.length])

    def decode(self, output: Sequence[int], num_measurements: int) -> list[int]:
        return list(output)
