"""Prime fields and polynomials of draft-irtf-cfrg-vdaf-20 (sections "Finite Fields" and
"Polynomial Representation").

A field vector is a ``list[int]`` of canonical residues in ``[0, MODULUS)``; the field classes
carry only class methods, so no Python object wraps an element. The polynomials of the FLP live
in the Lagrange basis over the ``n``-th roots of unity (the draft, after [Faz25]).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from client_sdk.vdaf.errors import DecodeError

__all__ = [
    "Field",
    "Field64",
    "Field128",
    "next_power_of_2",
]


def next_power_of_2(n: int) -> int:
    """The smallest power of two that is at least ``n`` (``n >= 1``)."""
    if n < 1:
        raise ValueError(f"next_power_of_2 needs n >= 1, got {n}")
    return 1 << (n - 1).bit_length()


def _log2_exact(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"length must be a power of two, got {n}")
    return n.bit_length() - 1


class Field:
    """An NTT-friendly prime field; subclasses set the draft's parameters (its table "fields")."""

    MODULUS: ClassVar[int]
    ENCODED_SIZE: ClassVar[int]
    GEN_ORDER: ClassVar[int]
    _GEN_EXP: ClassVar[int]  # the generator is 7 ** _GEN_EXP

    @classmethod
    def gen(cls) -> int:
        return _gen(cls)

    @classmethod
    def inv(cls, x: int) -> int:
        if x % cls.MODULUS == 0:
            raise ZeroDivisionError("inverse of zero")
        return pow(x, cls.MODULUS - 2, cls.MODULUS)

    @classmethod
    def zeros(cls, length: int) -> list[int]:
        return [0] * length

    @classmethod
    def nth_root(cls, n: int) -> int:
        """The principal ``n``-th root of unity, ``gen() ** (GEN_ORDER // n)``."""
        _log2_exact(n)
        if n > cls.GEN_ORDER:
            raise ValueError(f"no {n}-th root of unity in {cls.__name__}")
        return pow(cls.gen(), cls.GEN_ORDER // n, cls.MODULUS)

    @classmethod
    def nth_root_powers(cls, n: int) -> list[int]:
        return list(_root_powers(cls, n))

    # -- encoding ---------------------------------------------------------------------------

    @classmethod
    def encode_vec(cls, vec: Sequence[int]) -> bytes:
        size = cls.ENCODED_SIZE
        return b"".join(x.to_bytes(size, "little") for x in vec)

    @classmethod
    def decode_vec(cls, encoded: bytes, name: str = "field vector") -> list[int]:
        """Parse little-endian elements; refuse a ragged length or a value ``>= MODULUS``."""
        size = cls.ENCODED_SIZE
        if len(encoded) % size:
            raise DecodeError(
                f"{name}: {len(encoded)} bytes is not a multiple of the {size}-byte "
                f"{cls.__name__} element"
            )
        vec = [
            int.from_bytes(encoded[i : i + size], "little") for i in range(0, len(encoded), size)
        ]
        for i, x in enumerate(vec):
            if x >= cls.MODULUS:
                raise DecodeError(
                    f"{name}[{i}]: {x} is not below the {cls.__name__} modulus {cls.MODULUS}"
                )
        return vec

    # -- vectors and polynomials ----------------------------------------------------------

    @classmethod
    def vec_add(cls, left: Sequence[int], right: Sequence[int]) -> list[int]:
        if len(left) != len(right):
            raise ValueError(f"mismatched vector sizes: {len(left)} and {len(right)}")
        p = cls.MODULUS
        return [(a + b) % p for a, b in zip(left, right, strict=True)]

    @classmethod
    def vec_sub(cls, left: Sequence[int], right: Sequence[int]) -> list[int]:
        if len(left) != len(right):
            raise ValueError(f"mismatched vector sizes: {len(left)} and {len(right)}")
        p = cls.MODULUS
        return [(a - b) % p for a, b in zip(left, right, strict=True)]

    @classmethod
    def poly_eval(cls, coeffs: Sequence[int], x: int) -> int:
        """Horner evaluation of a polynomial in the monomial basis."""
        p = cls.MODULUS
        acc = 0
        for c in reversed(coeffs):
            acc = (acc * x + c) % p
        return acc

    @classmethod
    def ntt(cls, coeffs: Sequence[int], n: int, set_s: bool = False) -> list[int]:
        """``v[i] = poly(W_n ** i)``, or ``poly(s * W_n ** i)`` with ``s = W_2n`` if ``set_s``."""
        p = cls.MODULUS
        if len(coeffs) > n:
            raise ValueError(f"{len(coeffs)} coefficients do not fit an NTT of size {n}")
        a = list(coeffs) + [0] * (n - len(coeffs))
        if set_s:
            s = cls.nth_root(2 * n)
            sk = 1
            for k in range(n):
                a[k] = a[k] * sk % p
                sk = sk * s % p
        return _ntt_in_place(cls, a, cls.nth_root_powers(n))

    @classmethod
    def inv_ntt(cls, values: Sequence[int], n: int) -> list[int]:
        """The coefficients of the polynomial of degree < n with ``values[i] = poly(W_n ** i)``."""
        p = cls.MODULUS
        if len(values) != n:
            raise ValueError(f"inverse NTT of size {n} needs {n} values, got {len(values)}")
        roots = cls.nth_root_powers(n)
        inv_roots = [roots[0], *roots[:0:-1]]  # W_n ** -i
        out = _ntt_in_place(cls, list(values), inv_roots)
        n_inv = cls.inv(n)
        return [x * n_inv % p for x in out]


def _ntt_in_place(field: type[Field], a: list[int], roots: list[int]) -> list[int]:
    """Radix-2 decimation in time: bit-reverse, then butterflies with the given root table."""
    p = field.MODULUS
    n = len(a)
    j = 0
    for i in range(1, n):
        bit = n >> 1
        while j & bit:
            j ^= bit
            bit >>= 1
        j |= bit
        if i < j:
            a[i], a[j] = a[j], a[i]
    length = 2
    while length <= n:
        half = length >> 1
        stride = n // length
        tw = roots[::stride][:half]
        for start in range(0, n, length):
            for k in range(half):
                u = a[start + k]
                v = a[start + k + half] * tw[k] % p
                a[start + k] = (u + v) % p
                a[start + k + half] = (u - v) % p
        length <<= 1
    return a


def _gen(field: type[Field]) -> int:
    return _power(7, field._GEN_EXP, field.MODULUS)


@functools.cache
def _power(base: int, exp: int, mod: int) -> int:
    return pow(base, exp, mod)


def _root_powers(field: type[Field], n: int) -> tuple[int, ...]:
    return _powers_of(field.nth_root(n), n, field.MODULUS)


@functools.cache
def _powers_of(w: int, n: int, mod: int) -> tuple[int, ...]:
    out = [1] * n
    for i in range(1, n):
        out[i] = out[i - 1] * w % mod
    return tuple(out)


class Field64(Field):
    """``p = 2**32 * 4294967295 + 1`` (2**64 - 2**32 + 1), elements encoded in 8 bytes."""

    MODULUS = 2**32 * 4294967295 + 1
    ENCODED_SIZE = 8
    GEN_ORDER = 2**32
    _GEN_EXP = 4294967295


class Field128(Field):
    """``p = 2**66 * 4611686018427387897 + 1``, elements encoded in 16 bytes."""

    MODULUS = 2**66 * 4611686018427387897 + 1
    ENCODED_SIZE = 16
    GEN_ORDER = 2**66
    _GEN_EXP = 4611686018427387897


class Lagrange:
    """Polynomials given by their values at the ``n``-th roots of unity (the draft's class)."""

    def __init__(self, field: type[Field]) -> None:
        self.field = field

    def poly_mul(self, p: Sequence[int], q: Sequence[int]) -> list[int]:
        """The ``2n`` values of ``p * q`` at the ``2n``-th roots of unity."""
        if len(p) != len(q):
            raise ValueError(f"poly_mul of lengths {len(p)} and {len(q)}")
        mod = self.field.MODULUS
        return [
            a * b % mod
            for a, b in zip(self.double_evaluations(p), self.double_evaluations(q), strict=True)
        ]

    def double_evaluations(self, p: Sequence[int]) -> list[int]:
        """From ``n`` values at the ``n``-th roots to ``2n`` values at the ``2n``-th roots."""
        n = len(p)
        _log2_exact(n)
        odd = self.field.ntt(self.field.inv_ntt(p, n), n, True)
        out = [0] * (2 * n)
        out[0::2] = p
        out[1::2] = odd
        return out

    def basis_at(self, n: int, x: int) -> list[int]:
        """``L_i(x)`` for the ``n`` Lagrange basis polynomials over the ``n``-th roots.

        ``L_i(x) = W**i / n * prod_{j != i} (x - W**j)`` (the derivative of ``x**n - 1`` at
        ``W**i`` is ``n * W**-i``); prefix and suffix products avoid any inversion but ``1/n``.
        """
        mod = self.field.MODULUS
        nodes = _root_powers(self.field, n)
        diffs = [(x - w) % mod for w in nodes]
        prefix = [1] * (n + 1)
        for i in range(n):
            prefix[i + 1] = prefix[i] * diffs[i] % mod
        n_inv = self.field.inv(n)
        out = [0] * n
        suffix = 1
        for i in range(n - 1, -1, -1):
            out[i] = prefix[i] * suffix % mod * nodes[i] % mod * n_inv % mod
            suffix = suffix * diffs[i] % mod
        return out

    def poly_eval_batched(self, polys: Sequence[Sequence[int]], x: int) -> list[int]:
        """Each polynomial (all of one power-of-two length) evaluated at ``x``."""
        n = len(polys[0])
        basis = self.basis_at(n, x)
        mod = self.field.MODULUS
        return [sum(a * b for a, b in zip(poly, basis, strict=True)) % mod for poly in polys]

    def poly_eval(self, p: Sequence[int], x: int) -> int:
        return self.poly_eval_batched([p], x)[0]

    def extend_values_to_power_of_2(self, p: Sequence[int], n: int) -> list[int]:
        """The ``n`` values at the ``n``-th roots of the polynomial of degree ``< len(p)``
        whose values at the first ``len(p)`` roots are ``p``.

        The top ``n - len(p)`` monomial coefficients vanish, and coefficient ``d`` is
        ``1/n * sum_i v_i W**(-i d)``: a small linear system in the missing values.
        """
        _log2_exact(n)
        m = len(p)
        if m > n:
            raise ValueError(f"{m} values do not fit {n} points")
        if m == n:
            return list(p)
        mod = self.field.MODULUS
        nodes = _root_powers(self.field, n)
        missing = list(range(m, n))
        # Row d: sum_{i missing} v_i W^(-i d) = -sum_{i < m} p_i W^(-i d).
        rows = []
        for d in range(m, n):
            coeffs = [nodes[(-i * d) % n] for i in missing]
            rhs = -sum(p[i] * nodes[(-i * d) % n] for i in range(m)) % mod
            rows.append([*coeffs, rhs])
        solution = _solve(rows, mod)
        return list(p) + solution


def _solve(rows: list[list[int]], mod: int) -> list[int]:
    """Gauss-Jordan elimination over GF(mod) of a square system given as augmented rows."""
    k = len(rows)
    for col in range(k):
        pivot = next(r for r in range(col, k) if rows[r][col] % mod)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        inv = pow(rows[col][col], mod - 2, mod)
        rows[col] = [v * inv % mod for v in rows[col]]
        for r in range(k):
            if r != col and rows[r][col]:
                f = rows[r][col]
                rows[r] = [(a - f * b) % mod for a, b in zip(rows[r], rows[col], strict=True)]
    return [row[k] for row in rows]
