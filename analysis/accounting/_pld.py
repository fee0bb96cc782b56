"""Discrete privacy loss distributions (PLDs): the exact arithmetic behind the accounts.

For a pair of output distributions (P, Q) the privacy loss of an output o is L(o) = ln P(o)/Q(o),
and the hockey-stick curve is delta(eps) = E_{o~P}[(1 - e^{eps - L})_+] + P[L = +inf]
(docs/math/accounting.md; Meiser & Mohammadi, CCS 2018; Sommer, Meiser, Mohammadi, PoPETs 2019).
A :class:`DiscretePLD` stores the distribution of L under P as finitely many atoms (loss, mass)
plus the mass at +inf; the Q-side is implied (Q-mass e^{-l} w at each atom, the rest of Q at
L = -inf). Composing two independent mechanisms convolves their PLDs.

Everything here is exact up to floating-point rounding, except where a PLD carries a positive
``rounding``: it comes from a pessimistic discretisation onto a grid (connecting the dots as in
Google's dp_accounting, or rounding the Gaussian's losses up), so its delta(eps) is an upper
bound on the true one and at most the true one at eps - ``rounding``: the true epsilon(delta)
is at least the stored one minus ``rounding``.
Masses below ``NEGLIGIBLE`` at the tails are moved to +inf (pessimistic; invisible at any delta
above 1e-140), and so is the error bound of an FFT convolution when one is needed (``slack``,
computed in extended precision so that it stays orders of magnitude below any useful delta:
see ``_fft_convolve``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Iterator
from fractions import Fraction
from functools import cached_property

import numpy as np
import numpy.typing as npt
from scipy import fft, optimize, special

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NEGLIGIBLE = 1e-150
"""Tail masses below this are moved to loss +inf (keeps products away from subnormals)."""

MAX_SPAN = 1 << 20
"""Largest lattice span (number of grid points) kept; wider PLDs are coarsened pessimistically.
:func:`coarse` lowers it for a block of code."""

_SPAN: contextvars.ContextVar[int] = contextvars.ContextVar("pld_span", default=MAX_SPAN)


@contextlib.contextmanager
def coarse(span: int) -> Iterator[None]:
    """PLDs built and composed inside the block use lattices of at most ``span`` points (instead
    of MAX_SPAN), exact merges of proportionally fewer atom pairs, and step grids
    sqrt(MAX_SPAN / span) times wider.

    Every discretisation stays pessimistic (rounding up, connecting the dots), so a coarse
    account still dominates the true pair: its delta is an upper bound, only a looser one.
    ``calibrate`` uses it while far from the target.
    """
    if not 16 <= span <= MAX_SPAN:
        raise ValueError(f"span must be in [16, {MAX_SPAN}]; got {span!r}")
    token = _SPAN.set(span)
    try:
        yield
    finally:
        _SPAN.reset(token)


def _max_span() -> int:
    return _SPAN.get()


def _step_points() -> float:
    """Points of a step's default grid (16000 at full precision, fewer inside :func:`coarse`)."""
    return 16000 / math.sqrt(MAX_SPAN / _SPAN.get())


MAX_PAIRS = 1 << 21
"""Largest number of atom pairs merged exactly when two PLDs share no lattice."""

MAX_ATOMS = 1 << 17
"""Largest number of distinct losses kept by such an exact merge."""

_DENSE_WORK = 1.2e8
"""Dense lattice convolution (np.convolve) up to this many multiply-adds."""

_SPARSE_WORK = 6e7
"""Sparse lattice convolution (atom pairs summed with bincount) up to this many pairs; beyond
both limits the FFT is used, with an error allowance."""

_LATTICE_TOLERANCE = 1e-12


@dataclasses.dataclass(frozen=True, eq=False)
class DiscretePLD:
    """The privacy loss distribution of one ordered pair (P, Q) with finitely many finite losses.

    ``losses`` are sorted and distinct, ``masses`` are their P-probabilities (all > 0),
    ``inf_mass`` is P[L = +inf] (outputs Q never produces). When ``indices`` is set the losses are
    exactly ``step * indices`` (a lattice, which composes by exact convolution).
    """

    losses: FloatArray
    masses: FloatArray
    inf_mass: float = 0.0
    step: float | None = None
    indices: IntArray | None = None
    rounding: float = 0.0
    slack: float = 0.0
    """Mass added to +inf as an allowance for FFT round-off (0 when none was used)."""

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def identity(cls) -> DiscretePLD:
        """The PLD of a mechanism that reveals nothing (L = 0 surely)."""
        return cls(np.zeros(1), np.ones(1), 0.0, 1.0, np.zeros(1, dtype=np.int64))

    @classmethod
    def from_atoms(
        cls,
        losses: npt.ArrayLike,
        masses: npt.ArrayLike,
        inf_mass: float = 0.0,
        *,
        rounding: float = 0.0,
        slack: float = 0.0,
    ) -> DiscretePLD:
        """Merge atoms with equal loss, drop empty ones and detect a lattice."""
        loss = np.asarray(losses, dtype=np.float64).ravel()
        mass = np.asarray(masses, dtype=np.float64).ravel()
        keep = mass > 0
        loss, mass = loss[keep], mass[keep]
        if loss.size == 0:
            loss, mass = np.zeros(1), np.zeros(1)
        unique, inverse = np.unique(loss, return_inverse=True)
        merged = _bincount(inverse.ravel(), weights=mass, minlength=unique.size)
        step, indices = _detect_lattice(unique)
        if step is None or indices is None:
            return cls(unique, merged, float(inf_mass), None, None, rounding, slack)
        # Losses that differ by float noise land on the same lattice point: merge them.
        lattice, inverse = np.unique(indices, return_inverse=True)
        merged = _bincount(inverse.ravel(), weights=merged, minlength=lattice.size)
        return cls(
            step * lattice.astype(np.float64),
            merged,
            float(inf_mass),
            step,
            lattice,
            rounding,
            slack,
        )

    @classmethod
    def worst_case(cls, epsilon: float, delta: float = 0.0) -> DiscretePLD:
        """The PLD of the worst (epsilon, delta)-DP pair (Kairouz, Oh, Viswanath 2015, Thm 2.4):
        P-masses delta at +inf, (1-delta) e^eps/(1+e^eps) at +eps, (1-delta)/(1+e^eps) at -eps.
        Every (epsilon, delta)-DP mechanism is a post-processing of it."""
        if epsilon == 0:
            return cls.from_atoms([0.0], [1 - delta], delta)
        keep = 1 - delta
        high = keep / (1 + math.exp(-epsilon))
        low = keep / (1 + math.exp(epsilon))
        return cls.from_atoms([-epsilon, epsilon], [low, high], delta)

    def with_failure(self, probability: float) -> DiscretePLD:
        """The mixture that is this pair with probability 1 - ``probability`` and reveals
        everything otherwise: masses scaled by 1 - p, p added at +inf."""
        keep = 1.0 - probability
        return dataclasses.replace(
            self, masses=self.masses * keep, inf_mass=self.inf_mass * keep + probability
        )

    def mixture(self, other: DiscretePLD, weight: float) -> DiscretePLD:
        """The PLD of this pair with probability 1 - ``weight`` and ``other`` with ``weight``,
        the coin shown to the observer (the pairs on disjoint outputs). Hiding the coin is a
        post-processing, so this dominates any pair that is such a mixture with a hidden coin
        (joint convexity of the hockey-stick divergence)."""
        keep = 1.0 - weight
        return DiscretePLD.from_atoms(
            np.concatenate([self.losses, other.losses]),
            np.concatenate([self.masses * keep, other.masses * weight]),
            self.inf_mass * keep + other.inf_mass * weight,
            rounding=max(self.rounding, other.rounding),
            slack=max(self.slack, other.slack),
        ).trimmed()

    @classmethod
    def from_distributions(cls, p: npt.ArrayLike, q: npt.ArrayLike) -> DiscretePLD:
        """The PLD of P against Q, two probability vectors over the same outputs."""
        p_arr = np.asarray(p, dtype=np.float64).ravel()
        q_arr = np.asarray(q, dtype=np.float64).ravel()
        both = (p_arr > 0) & (q_arr > 0)
        with np.errstate(divide="ignore"):
            losses = np.log(p_arr[both]) - np.log(q_arr[both])
        inf_mass = float(np.sum(p_arr[(p_arr > 0) & (q_arr <= 0)]))
        return cls.from_atoms(losses, p_arr[both], inf_mass)

    # ---- derived quantities ----------------------------------------------------------------

    @property
    def size(self) -> int:
        return int(self.losses.size)

    @property
    def is_identity(self) -> bool:
        return self.size == 1 and self.losses[0] == 0.0 and self.inf_mass == 0.0

    @cached_property
    def _log_masses(self) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.log(self.masses)

    @cached_property
    def q_mass_finite(self) -> float:
        """Q[L finite] = sum of e^{-l} w over the atoms (the rest of Q sits at L = -inf)."""
        return float(min(1.0, np.exp(special.logsumexp(self._log_masses - self.losses))))

    @cached_property
    def _curve(self) -> tuple[FloatArray, FloatArray]:
        """(D, E) with D_j = delta(l_j) and E_j = sum_{i >= j} w_i e^{l_j - l_i}.

        On [l_{j-1}, l_j], delta(eps) = D_j + E_j (1 - e^{eps - l_j}); D follows from the
        recurrence D_{j-1} = D_j + E_j (1 - e^{l_{j-1} - l_j}), a sum of non-negative terms, so
        tiny deltas keep their relative precision.
        """
        log_tail = np.logaddexp.accumulate((self._log_masses - self.losses)[::-1])[::-1]
        e = np.exp(self.losses + log_tail)
        steps = e[1:] * -np.expm1(self.losses[:-1] - self.losses[1:])
        d = np.empty_like(e)
        d[-1] = self.inf_mass
        d[:-1] = self.inf_mass + np.cumsum(steps[::-1])[::-1]
        return d, e

    def delta(self, epsilon: npt.ArrayLike) -> FloatArray:
        """delta(eps) = E_P[(1 - e^{eps - L})_+] + P[L = +inf], vectorized over eps (any real)."""
        eps = np.asarray(epsilon, dtype=np.float64)
        d, e = self._curve
        j = np.searchsorted(self.losses, eps, side="left")
        inside = j < self.size
        jj = np.minimum(j, self.size - 1)
        with np.errstate(over="ignore", invalid="ignore"):
            value = d[jj] + e[jj] * -np.expm1(eps - self.losses[jj])
        return np.where(inside, value, self.inf_mass)

    def epsilon(self, delta: float) -> float:
        """The smallest eps >= 0 with delta(eps) <= ``delta`` (exact inverse on each segment)."""
        d, e = self._curve
        if delta >= float(self.delta(0.0)):
            return 0.0
        if delta < self.inf_mass:
            return math.inf
        # D is non-increasing in j: find the first breakpoint where delta(l_j) <= target.
        # (For j = 0 the formula also holds left of the smallest loss.)
        j = int(np.searchsorted(-d, -delta, side="left"))
        eps = float(self.losses[j] + np.log1p(-(delta - d[j]) / e[j])) if e[j] > 0 else math.inf
        return max(0.0, min(eps, float(self.losses[j])))

    @property
    def max_loss(self) -> float:
        """The largest loss (+inf if P[L = +inf] > 0): the pure epsilon of this pair."""
        return math.inf if self.inf_mass > 0 else float(self.losses[-1])

    def renyi(self, orders: FloatArray) -> FloatArray:
        """Renyi divergences D_alpha(P||Q) = ln E_P[e^{(alpha-1)L}] / (alpha - 1) (Mironov 2017)."""
        if self.inf_mass > 0:
            return np.full(orders.shape, math.inf)
        a = orders[:, None] - 1.0
        log_moment = special.logsumexp(self._log_masses[None, :] + a * self.losses[None, :], axis=1)
        return np.maximum(log_moment, 0.0) / (orders - 1.0)

    # ---- transformations -------------------------------------------------------------------

    def trimmed(self) -> DiscretePLD:
        """Move the negligible tail masses (< NEGLIGIBLE) to +inf (pessimistic)."""
        big = np.flatnonzero(self.masses >= NEGLIGIBLE)
        if big.size == self.size:
            return self
        lo, hi = (int(big[0]), int(big[-1]) + 1) if big.size else (0, 1)
        moved = float(np.sum(self.masses[:lo]) + np.sum(self.masses[hi:]))
        sl = slice(lo, hi)
        return dataclasses.replace(
            self,
            losses=self.losses[sl],
            masses=self.masses[sl],
            inf_mass=self.inf_mass + moved,
            indices=None if self.indices is None else self.indices[sl],
        )

    def on_lattice(self, step: float, factor: int) -> DiscretePLD:
        """The same (lattice) PLD expressed on a step ``factor`` times finer: exact."""
        assert self.indices is not None
        indices = self.indices * factor
        return dataclasses.replace(
            self, losses=step * indices.astype(np.float64), step=step, indices=indices
        )

    def regridded(self, step: float) -> DiscretePLD:
        """This PLD on the grid ``step * Z``, by connecting the dots (pessimistic, second order).

        An atom (l, w) with (i-1) h < l <= i h is split between the grid points around it:
        w e^d expm1(h - d) / expm1(h) at i h and w expm1(d) / expm1(h) at (i-1) h, d = i h - l.
        The split keeps its P-mass w and its Q-mass w e^{-l}, and the grid PLD's delta curve is
        the chord of the atom's, w (1 - e^{eps - l})_+, between grid points: that curve is
        convex in e^eps, so the chord lies above it (Doroshenko, Ghazi, Kamath, Kumar,
        Manurangsi, PoPETs 2022, "Connect the dots"). The result is therefore a dominating pair
        (delta can only grow), and it is at most the original shifted up by h
        (delta'(eps) <= delta(eps - h)): ``rounding`` grows by h. Unlike rounding every loss up,
        the error at a given eps comes only from the atoms of one grid cell, so it does not
        accumulate to first order over a composition.
        """
        idx = np.ceil(self.losses / step).astype(np.int64)
        idx += (idx.astype(np.float64) * step < self.losses).astype(np.int64)
        gap = np.clip(idx.astype(np.float64) * step - self.losses, 0.0, step)
        return self._split_onto(step, idx, gap)

    def _split_onto(self, step: float, idx: IntArray, gap: FloatArray) -> DiscretePLD:
        """Connect the dots: each atom to ``idx`` and ``idx - 1`` on ``step * Z``, where
        ``gap = step * idx - loss`` is in [0, step) (see :meth:`regridded`)."""
        scale = math.expm1(step)
        below = self.masses * np.expm1(gap) / scale
        above = self.masses * np.exp(gap) * np.expm1(step - gap) / scale
        where = np.concatenate([idx, idx - 1])
        weights = np.concatenate([above, below])
        keep = weights > 0
        merged_idx, inverse = np.unique(where[keep], return_inverse=True)
        masses = _bincount(inverse.ravel(), weights=weights[keep], minlength=merged_idx.size)
        return dataclasses.replace(
            self,
            losses=step * merged_idx.astype(np.float64),
            masses=masses,
            step=step,
            indices=merged_idx,
            rounding=self.rounding + step,
        )

    def _coarsened(self) -> DiscretePLD:
        """Coarsen a lattice PLD by an integer factor until its span fits in MAX_SPAN (by
        connecting the dots onto the coarser lattice, see :meth:`regridded`)."""
        assert self.step is not None and self.indices is not None
        span = int(self.indices[-1] - self.indices[0]) + 1
        limit = _max_span()
        if span <= limit:
            return self
        factor = -(-span // limit)
        coarse = -(-self.indices // factor)  # ceil
        gap = (coarse * factor - self.indices).astype(np.float64) * self.step
        return self._split_onto(self.step * factor, coarse, gap)

    def compose(self, other: DiscretePLD) -> DiscretePLD:
        """The PLD of the product pair (P1 x P2, Q1 x Q2): the convolution of the two PLDs.

        Exact (up to float rounding) when both sit on commensurate lattices, or when all atom
        pairs can be merged (at most MAX_PAIRS pairs giving at most MAX_ATOMS distinct losses).
        Otherwise one grid of about MAX_SPAN/2 points over the combined range is chosen (a
        divisor of the wider PLD's lattice step, so that one stays exact) and the other PLD's
        losses are split onto it (connect the dots, :meth:`regridded`); ``rounding`` grows by
        the grid step.
        Cost: dense convolution O(span_1 span_2), sparse O(size_1 size_2), or FFT beyond
        both ``_DENSE_WORK`` and ``_SPARSE_WORK`` (its error bound is added to +inf and to
        ``slack``).
        """
        if self.is_identity:
            return other
        if other.is_identity:
            return self
        inf_mass = 1.0 - (1.0 - self.inf_mass) * (1.0 - other.inf_mass)
        common = _common_lattice(self, other)
        if common is not None:
            step, factor_a, factor_b = common
            return _lattice_convolve(
                self.on_lattice(step, factor_a), other.on_lattice(step, factor_b), inf_mass
            )
        if self.size * other.size <= MAX_PAIRS * _max_span() // MAX_SPAN:
            losses = (self.losses[:, None] + other.losses[None, :]).ravel()
            masses = (self.masses[:, None] * other.masses[None, :]).ravel()
            merged = DiscretePLD.from_atoms(
                losses,
                masses,
                inf_mass,
                rounding=self.rounding + other.rounding,
                slack=self.slack + other.slack,
            )
            if merged.size <= MAX_ATOMS:
                return merged.trimmed()
        wide, narrow = sorted((self, other), key=lambda p: p.losses[-1] - p.losses[0])[::-1]
        width = float((wide.losses[-1] - wide.losses[0]) + (narrow.losses[-1] - narrow.losses[0]))
        finest = max(width / (_max_span() // 2), 1e-12)
        if wide.step is not None and wide.step >= finest:
            factor = int(wide.step // finest)
            grid = wide.step / factor
            return wide.on_lattice(grid, factor).compose(narrow.regridded(grid))
        return wide.regridded(finest).compose(narrow.regridded(finest))

    def power(self, count: int) -> DiscretePLD:
        """The ``count``-fold self-composition, by repeated squaring (about 2 log2 count steps).

        Once a squaring would be an FFT convolution, the remaining power is taken in one FFT
        instead (:func:`_fft_power`: one transform, a pointwise power, one inverse), on the
        lattice that squaring would have used; the result is the same PLD up to a larger (still
        counted) round-off allowance, for two transforms where the squarings needed about
        3 log2 count. When its window does not fit in the lattice span, squaring goes on.
        """
        result = DiscretePLD.identity()
        base = self
        n = count
        while n:
            if n > 1:
                lattice = base._fft_square_lattice()
                powered = None if lattice is None else _fft_power(lattice, n)
                if powered is not None:
                    return result.compose(powered)
            if n & 1:
                result = result.compose(base)
            n >>= 1
            if n:
                base = base.compose(base)
        return result

    def _fft_square_lattice(self) -> DiscretePLD | None:
        """This PLD on the lattice ``self.compose(self)`` would convolve it on, when that
        convolution would be an FFT; None when it would be exact (dense, sparse or merged)."""
        lattice: DiscretePLD = self
        if self.step is None or self.indices is None:
            if self.size * self.size <= MAX_PAIRS * _max_span() // MAX_SPAN:
                return None  # an exact merge of atom pairs may do
            width = 2 * float(self.losses[-1] - self.losses[0])
            lattice = self.regridded(max(width / (_max_span() // 2), 1e-12))
        elif _common_lattice(self, self) is None:
            return None
        assert lattice.indices is not None
        span = int(lattice.indices[-1] - lattice.indices[0]) + 1
        if span * span <= _DENSE_WORK or lattice.size * lattice.size <= _SPARSE_WORK:
            return None
        return lattice


def gaussian_pld(mu: float, *, grid: float | None = None, tail: float = 1e-18) -> DiscretePLD:
    """A pessimistic discretization of the Gaussian PLD, L ~ N(mu^2/2, mu^2) under P.

    The mass of ((i-1) h, i h] goes to i h (rounded up), the mass below the lower truncation point
    goes to it, and the mass above the upper one (at most ``tail``) to +inf, as in dp_accounting's
    pessimistic estimate. ``rounding`` is the grid width h (default: about 16000 points over
    the +-z range, at most 1e-3).
    """
    if mu <= 0:
        return DiscretePLD.identity()
    z = float(-special.ndtri(tail))
    points = _step_points()
    h = grid if grid is not None else min(16 / points, 2 * z * mu / points)
    mean = mu * mu / 2
    lo = math.floor((mean - z * mu) / h)
    hi = math.ceil((mean + z * mu) / h)
    idx = np.arange(lo, hi + 1, dtype=np.int64)
    edges = (idx.astype(np.float64) * h - mean) / mu
    # Mass of ((i-1)h, ih]; differences of the lower CDF below the mean and of the upper tail
    # above it, so small masses keep their relative precision. The first atom takes everything
    # below its edge.
    lower = np.concatenate([[-np.inf], edges[:-1]])
    masses = np.where(
        lower >= 0,
        special.ndtr(-lower) - special.ndtr(-edges),
        special.ndtr(edges) - special.ndtr(lower),
    )
    inf_mass = float(special.ndtr(-edges[-1]))
    pld = DiscretePLD(idx.astype(np.float64) * h, masses, inf_mass, h, idx, h)
    keep = masses > 0
    if not np.all(keep):
        pld = DiscretePLD(pld.losses[keep], masses[keep], inf_mass, h, idx[keep], h)
    return pld.trimmed()


def replace_subsampled_gaussian_pld(
    shift: float, q: float, *, grid: float | None = None, tail: float = 1e-18
) -> DiscretePLD:
    """A pessimistic discretization of the Poisson-subsampled Gaussian under substitution.

    The pair P = q N(-s, 1) + (1-q) N(0, 1), Q = q N(s, 1) + (1-q) N(0, 1) with s = ``shift``
    (dp_accounting's ``from_gaussian_mechanism`` with ``REPLACE_ONE`` and ``sampling_prob``;
    Zhu, Dong, Wang, AISTATS 2022). The loss
    L(x) = ln(q e^{-s x - s^2/2} + 1 - q) - ln(q e^{s x - s^2/2} + 1 - q) decreases in x, so
    the P-mass of {(i-1) h < L <= i h} is that of an interval of x between two inverses of L,
    and it goes to i h (rounded up, as :func:`gaussian_pld`). P-mass below -s - z goes to +inf
    (at most ``tail``), above z to the grid point at or above L(z). The pair is symmetric
    (x -> -x swaps P and Q), so one PLD serves both directions.
    """
    if not (shift > 0 and 0 < q <= 1):
        raise ValueError(f"need shift > 0 and q in (0, 1]; got shift={shift!r}, q={q!r}")
    z = float(-special.ndtri(tail))
    log_q = math.log(q)
    log_keep = math.log1p(-q) if q < 1 else -math.inf
    half = shift * shift / 2

    def loss(x: FloatArray) -> FloatArray:
        return np.asarray(
            np.logaddexp(log_q - shift * x - half, log_keep)
            - np.logaddexp(log_q + shift * x - half, log_keep),
            dtype=np.float64,
        )

    x_lo, x_hi = -shift - z, z
    top, bottom = (float(v) for v in loss(np.array([x_lo, x_hi])))
    points = _step_points()
    h = grid if grid is not None else min(16 / points, (top - bottom) / points)
    i_min, i_max = math.ceil(bottom / h), max(math.ceil(top / h), math.ceil(bottom / h))
    idx = np.arange(i_min, i_max + 1, dtype=np.int64)
    # Edges: b_i = L^{-1}(i h) for i_min <= i < i_max (by bisection; L decreases), then x_lo.
    targets = idx[:-1].astype(np.float64) * h
    left = np.full(targets.shape, x_lo)
    right = np.full(targets.shape, x_hi)
    for _ in range(100):
        mid = 0.5 * (left + right)
        above = loss(mid) > targets
        left = np.where(above, mid, left)
        right = np.where(above, right, mid)
    # Atom i takes x in [b_i, b_{i-1}); b_{i_min - 1} = +inf and b_{i_max} = x_lo.
    upper = np.concatenate([[np.inf], right])
    lower = np.concatenate([right, [x_lo]])

    def between(a: FloatArray, b: FloatArray) -> FloatArray:
        return np.asarray(
            np.where(
                a >= 0, special.ndtr(-a) - special.ndtr(-b), special.ndtr(b) - special.ndtr(a)
            ),
            dtype=np.float64,
        )

    masses = q * between(lower + shift, upper + shift) + (1 - q) * between(lower, upper)
    masses = np.maximum(masses, 0.0)
    inf_mass = q * float(special.ndtr(x_lo + shift)) + (1 - q) * float(special.ndtr(x_lo))
    keep = masses > 0
    pld = DiscretePLD(idx[keep].astype(np.float64) * h, masses[keep], inf_mass, h, idx[keep], h)
    return pld.trimmed()


def subsampled_pair(
    remove: DiscretePLD, add: DiscretePLD, q: float
) -> tuple[DiscretePLD, DiscretePLD]:
    """Poisson subsampling at rate ``q`` under add/remove (Zhu, Dong, Wang, AISTATS 2022).

    With (P, Q) the remove pair, the subsampled remove pair is (qP + (1-q)Q, Q) and with (P', Q')
    the add pair, the subsampled add pair is (P', (1-q)P' + qQ'). Each atom maps exactly:
    remove: l -> ln(1 + q(e^l - 1)) with mass w(q + (1-q)e^{-l}), +inf keeps q w_inf, and Q's
    mass at -inf becomes an atom at ln(1-q); add: l -> -ln(1 + q(e^{-l} - 1)) with mass w, and
    +inf becomes the atom -ln(1-q) with mass w_inf.
    """
    log_q = math.log(q)
    log_keep = math.log1p(-q) if q < 1 else -math.inf
    # Remove direction: ln(q e^l + 1 - q), mass q w + (1-q) w e^{-l} (the Q-mass is at most 1).
    new_losses = np.logaddexp(log_q + remove.losses, log_keep)
    new_masses = q * remove.masses + (1 - q) * np.exp(remove._log_masses - remove.losses)
    q_at_minus_inf = max(0.0, 1.0 - remove.q_mass_finite)
    losses_r = [new_losses]
    masses_r = [new_masses]
    if q_at_minus_inf > 0 and q < 1:
        losses_r.append(np.array([log_keep]))
        masses_r.append(np.array([(1 - q) * q_at_minus_inf]))
    sub_remove = DiscretePLD.from_atoms(
        np.concatenate(losses_r),
        np.concatenate(masses_r),
        q * remove.inf_mass,
        rounding=remove.rounding,
        slack=remove.slack,
    )
    # Add direction: -ln(q e^{-l} + 1 - q), mass w.
    add_losses = -np.logaddexp(log_q - add.losses, log_keep)
    losses_a = [add_losses]
    masses_a = [add.masses]
    inf_a = 0.0
    if add.inf_mass > 0:
        if q < 1:
            losses_a.append(np.array([-log_keep]))
            masses_a.append(np.array([add.inf_mass]))
        else:
            inf_a = add.inf_mass
    sub_add = DiscretePLD.from_atoms(
        np.concatenate(losses_a),
        np.concatenate(masses_a),
        inf_a,
        rounding=add.rounding,
        slack=add.slack,
    )
    return sub_remove, sub_add


# ---- lattices ------------------------------------------------------------------------------


def _bincount(inverse: IntArray, weights: FloatArray, minlength: int) -> FloatArray:
    return np.asarray(np.bincount(inverse, weights=weights, minlength=minlength), np.float64)


def _detect_lattice(losses: FloatArray) -> tuple[float | None, IntArray | None]:
    """If every loss is an integer multiple of one step (to 1e-12), return (step, indices).

    Only float noise is absorbed: the snapped losses move by at most 1e-12 relative.
    """
    # Losses within float noise of 0 (relative to the largest) count as 0.
    scale = float(np.max(np.abs(losses))) if losses.size else 0.0
    nonzero = np.abs(losses[np.abs(losses) > _LATTICE_TOLERANCE * scale])
    if nonzero.size == 0:
        return 1.0, np.zeros(losses.size, dtype=np.int64)
    base = float(nonzero.min())
    for divisor in range(1, 13):
        step = base / divisor
        ratio = losses / step
        nearest = np.round(ratio)
        if np.max(np.abs(nearest)) > 1e7:
            break
        if np.all(np.abs(ratio - nearest) <= _LATTICE_TOLERANCE * np.maximum(1.0, np.abs(ratio))):
            return step, nearest.astype(np.int64)
    return None, None


def _common_lattice(a: DiscretePLD, b: DiscretePLD) -> tuple[float, int, int] | None:
    """(step, factor_a, factor_b): a common step for two lattice PLDs whose steps have a small
    rational ratio, with a.step = factor_a * step and b.step = factor_b * step."""
    if a.step is None or b.step is None or a.indices is None or b.indices is None:
        return None
    ratio = b.step / a.step
    frac = Fraction(ratio).limit_denominator(16)
    if frac.numerator == 0 or frac.numerator > 16:
        return None
    if abs(ratio - float(frac)) > _LATTICE_TOLERANCE * ratio:
        return None
    span = (int(a.indices[-1] - a.indices[0]) * frac.denominator) + (
        int(b.indices[-1] - b.indices[0]) * frac.numerator
    )
    if span > 2 * _max_span():
        return None
    return a.step / frac.denominator, frac.denominator, frac.numerator


def _dense(indices: IntArray, masses: FloatArray) -> FloatArray:
    dense = np.zeros(int(indices[-1] - indices[0]) + 1)
    dense[indices - indices[0]] = masses
    return dense


FFT_ERROR = 32.0
"""The constant c of the FFT convolution's normwise error bound c u log2(n) (see
:func:`_fft_convolve`), about four times the one derived there."""


_FFT_FLOOR = 1 / 64
"""Entries below this fraction of the l2 error bound at the ends of an FFT result are dropped
(their mass goes into the allowance): low enough that true tail mass is mostly kept, high enough
that round-off noise does not widen the support."""


def _fft_convolve(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float]:
    """The convolution of two non-negative vectors of total mass <= 1 by FFT, and a bound on
    the l1 distance of the result from the exact convolution.

    The transforms run in extended precision (``numpy.longdouble``, unit round-off u = 2^-64
    on x86-64; plain double where the platform has no wider type), so the bound is about two
    thousand times smaller than in double. Each transform of length n has a normwise relative
    error of at most about 5 u log2(n) (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed. 2002, Thm 24.2). With |FFT(a)|_inf <= |a|_1 and
    |FFT(a)|_2 = sqrt(n) |a|_2, the two forward transforms, the pointwise product and the
    inverse transform give |c_hat - c|_2 <= (2 eps_F + 3u)(|a|_1 |b|_2 + |a|_2 |b|_1) + O(u^2),
    eps_F = 5 u log2(n); ``FFT_ERROR`` u log2(n) (|a|_1 |b|_2 + |a|_2 |b|_1) covers it with a
    factor of about four. Then |c_hat - c|_1 <= sqrt(N) |c_hat - c|_2 over the N output entries.
    Clipping a negative entry to 0 cannot move it further from c >= 0; the entries beyond the
    first and last one above ``_FFT_FLOOR`` times the l2 bound (round-off noise at the ends of
    the support) are zeroed and their sum is added to the bound, whatever the floor. Rounding
    the result to double is relative, as everywhere else in this module.

    The caller moves the bound's mass to +inf: the true PLD is at most c_hat plus an error
    measure of that total mass, and moving mass up to +inf only increases delta, now and after
    any further composition or subsampling. (The earlier allowance, n times a per-entry bound
    in double, reached 1e-6 in a few thousand compositions and made epsilon infinite.)
    """
    wide = np.longdouble if np.finfo(np.longdouble).eps < np.finfo(np.float64).eps else np.float64
    n = fft.next_fast_len(a.size + b.size - 1, real=True)
    size = a.size + b.size - 1
    fa = fft.rfft(a.astype(wide), n)
    fb = fft.rfft(b.astype(wide), n)
    dense = np.asarray(fft.irfft(fa * fb, n)[:size], dtype=np.float64)
    u = float(np.finfo(wide).eps)
    l2 = (
        FFT_ERROR
        * u
        * max(1.0, math.log2(n))
        * float(a.sum() * np.linalg.norm(b) + np.linalg.norm(a) * b.sum())
    )
    above = np.flatnonzero(dense > l2 * _FFT_FLOOR)
    lo, hi = (int(above[0]), int(above[-1]) + 1) if above.size else (0, 0)
    outside = np.concatenate([dense[:lo], dense[hi:]])
    dropped = float(np.sum(outside[outside > 0]))
    dense[:lo] = 0.0
    dense[hi:] = 0.0
    np.maximum(dense, 0.0, out=dense)
    return dense, math.sqrt(size) * l2 + dropped


_POWER_TAIL = 1e-6
"""Finite mass left outside an FFT power's window on each side (moved to +inf), relative to the
round-off allowance of the shortest transform that could hold it: invisible beside the
allowance, and it keeps the window near the width repeated squaring would reach (a window
down to ``NEGLIGIBLE`` is four times wider on the calibration example)."""


_POWER_MAX_ALLOWANCE = 1e-9
"""Largest round-off allowance an FFT power may add (beyond it, repeated squaring, whose
allowance grows with log2 count rather than count): 7e-11 for 1000 rounds on a lattice of 2^20
points in extended precision, but 1e-7 where the platform has no type wider than double."""


def _chernoff_window(a: DiscretePLD, count: int, log_tail: float) -> tuple[int, int]:
    """Lattice indices [lo, hi] outside which the ``count``-fold convolution of ``a``'s finite
    part has at most e^``log_tail`` mass on each side.

    Chernoff: for any t > 0 the measure of {S >= hi} is at most (sum_i w_i e^{t i})^count
    e^{-t hi}, and of {S <= lo} at most (sum_i w_i e^{-t i})^count e^{t lo}; both hold for a
    sub-probability (the mass at +inf left out). Any t gives a valid bound; t is the
    minimizer found by a bounded scalar search over eight decades.
    """
    assert a.indices is not None
    first = int(a.indices[0])
    offsets = (a.indices - first).astype(np.float64)
    span = max(float(offsets[-1]), 1.0)
    log_w = a._log_masses

    def upper(log_t: float, sign: float) -> float:
        # sign * S <= (count K(sign t) - log_tail) / t with mass beyond it <= e^log_tail.
        t = math.exp(log_t) / span
        exponent = log_w + sign * t * offsets
        top = float(np.max(exponent))
        log_mgf = top + math.log(float(np.sum(np.exp(exponent - top))))
        return (count * log_mgf - log_tail) / t

    ends = []
    for sign in (1.0, -1.0):
        best = optimize.minimize_scalar(
            upper,
            bounds=(math.log(1e-4), math.log(1e4)),
            args=(sign,),
            method="bounded",
            options={"xatol": 1e-3},
        )
        bound = float(upper(float(best.x), sign))
        ends.append(bound if sign > 0 else -bound)
    hi = count * first + math.ceil(ends[0]) + 1
    lo = count * first + math.floor(ends[1]) - 1
    return max(lo, count * first), min(hi, count * int(a.indices[-1]))


def _power_error(n: int, count: int) -> tuple[float, float]:
    """The l2 and l1 bounds on the round-off of a ``count``-th power by FFT of length ``n``
    (see :func:`_fft_power`)."""
    wide = np.longdouble if np.finfo(np.longdouble).eps < np.finfo(np.float64).eps else np.float64
    eps_f = FFT_ERROR * float(np.finfo(wide).eps) * max(1.0, math.log2(n))
    l2 = math.exp(count * eps_f * math.sqrt(n)) * (count + 1) * eps_f  # exp(...) >= M^count
    return l2, math.sqrt(n) * l2


def _fft_power(a: DiscretePLD, count: int) -> DiscretePLD | None:
    """The ``count``-fold self-convolution of a lattice PLD in one FFT, or None when its
    window would exceed the lattice span or its round-off allowance ``_POWER_MAX_ALLOWANCE``.

    The window [lo, lo + N) holds all of the result's finite mass but at most ``tail`` on each
    side (:func:`_chernoff_window`; ``tail`` is ``_POWER_TAIL`` times the round-off bound
    below). The transform of length N computes the convolution modulo N:
    every entry of the window gets its true mass plus mass folded in from outside the window
    (at most 2 ``tail`` in all), and that outside mass is also added to +inf, so the
    result dominates the true PLD (mass only moves up, or is added).

    Round-off, as in :func:`_fft_convolve` (u the unit round-off of extended precision,
    eps_F = 5 u log2 N the transforms' normwise error): the forward transform is off by at
    most eps_F sqrt(N) |a|_2 in l2, each of its entries is at most M = 1 + eps_F sqrt(N) in
    modulus, so the power (whose derivative is count z^(count-1)) is off by at most
    count M^(count-1) eps_F sqrt(N) |a|_2, repeated squaring adds a relative 2 count u per
    entry and the inverse transform eps_F M^count; dividing by sqrt(N) for the inverse,
    |c_hat - c|_2 <= M^count (count + 1)(eps_F + 2u), covered by
    M^count (count + 1) ``FFT_ERROR`` u log2 N. The l1 bound, the floor at the ends and the
    clipping are those of :func:`_fft_convolve`; the bound's mass goes to +inf and ``slack``.
    """
    assert a.indices is not None and a.step is not None
    first, last = int(a.indices[0]), int(a.indices[-1])
    tail = _POWER_TAIL * _power_error(fft.next_fast_len(last - first + 1, real=True), count)[1]
    lo, hi = _chernoff_window(a, count, math.log(tail))
    if hi < lo:
        return None  # all of the finite mass is within the tails: nothing to gain here
    n = fft.next_fast_len(hi - lo + 1, real=True)
    if n > _max_span() or _power_error(n, count)[1] > _POWER_MAX_ALLOWANCE:
        return None
    wide = np.longdouble if np.finfo(np.longdouble).eps < np.finfo(np.float64).eps else np.float64
    folded = _bincount(
        ((a.indices - first) % n).astype(np.int64), weights=a.masses, minlength=n
    ).astype(wide)
    spectrum = fft.rfft(folded, n)
    powered = np.ones_like(spectrum)
    k = count
    while k:
        if k & 1:
            powered *= spectrum
        k >>= 1
        if k:
            spectrum = spectrum * spectrum
    circular = np.asarray(fft.irfft(powered, n), dtype=np.float64)
    # Entry p of the circular result holds the true indices count * first + p (mod n).
    dense = np.roll(circular, -((lo - count * first) % n))
    l2, bound = _power_error(n, count)
    above = np.flatnonzero(dense > l2 * _FFT_FLOOR)
    start, stop = (int(above[0]), int(above[-1]) + 1) if above.size else (0, 0)
    outside = np.concatenate([dense[:start], dense[stop:]])
    dropped = float(np.sum(outside[outside > 0]))
    dense = np.maximum(dense[start:stop], 0.0)
    allowance = bound + dropped + 2 * tail
    survive = count * math.log1p(-a.inf_mass) if a.inf_mass < 1.0 else -math.inf
    inf_mass = min(1.0, -math.expm1(survive) + allowance)
    nonzero = np.flatnonzero(dense > 0)
    indices = (nonzero + lo + start).astype(np.int64)
    pld = DiscretePLD(
        a.step * indices.astype(np.float64),
        dense[nonzero],
        inf_mass,
        a.step,
        indices,
        count * a.rounding,
        count * a.slack + allowance,
    )
    return pld.trimmed()._coarsened()


def _lattice_convolve(a: DiscretePLD, b: DiscretePLD, inf_mass: float) -> DiscretePLD:
    """Convolve two PLDs on the same lattice: dense, sparse (pairs + bincount) or FFT."""
    assert a.indices is not None and b.indices is not None and a.step is not None
    start = int(a.indices[0] + b.indices[0])
    span = int(a.indices[-1] - a.indices[0]) + int(b.indices[-1] - b.indices[0]) + 1
    slack = a.slack + b.slack
    dense_work = (int(a.indices[-1] - a.indices[0]) + 1) * (int(b.indices[-1] - b.indices[0]) + 1)
    if dense_work <= _DENSE_WORK:
        dense = np.convolve(_dense(a.indices, a.masses), _dense(b.indices, b.masses))
    elif a.size * b.size <= _SPARSE_WORK:
        dense = np.zeros(span)
        offsets = b.indices - b.indices[0]
        chunk = max(1, int(4e6 // b.size))
        for lo in range(0, a.size, chunk):
            rows = a.indices[lo : lo + chunk] - a.indices[0]
            where = (rows[:, None] + offsets[None, :]).ravel()
            weights = (a.masses[lo : lo + chunk, None] * b.masses[None, :]).ravel()
            dense += np.bincount(where, weights=weights, minlength=span)
    else:
        dense, allowance = _fft_convolve(_dense(a.indices, a.masses), _dense(b.indices, b.masses))
        inf_mass = min(1.0, inf_mass + allowance)
        slack += allowance
    nonzero = np.flatnonzero(dense > 0)
    indices = (nonzero + start).astype(np.int64)
    pld = DiscretePLD(
        a.step * indices.astype(np.float64),
        dense[nonzero],
        inf_mass,
        a.step,
        indices,
        a.rounding + b.rounding,
        slack,
    )
    return pld.trimmed()._coarsened()
