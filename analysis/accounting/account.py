"""Composable privacy accounts: a mechanism's privacy is an object; ``*`` and ``+`` compose.

>>> from analysis.accounting import gaussian, randomized_response
>>> step = gaussian(sigma=5.0)                 # one Gaussian report, sensitivity 1
>>> round((step * 1000).epsilon_at(1e-6), 3)    # exact: Gaussian-DP with mu = sqrt(1000)/5
49.319
>>> rr = randomized_response(1.0, k=2)        # binary randomized response at epsilon 1
>>> round((rr * 10 + step * 10).epsilon_at(1e-6), 3)
12.467

Every account answers ``epsilon_at(delta)``, ``delta_at(epsilon)``, ``advantage()`` (the best
distinguishing attacker's true-positive minus false-positive rate, = delta at epsilon 0 = the
total variation of the worst pair) and ``beta_at(alpha)`` (that attacker's least type II error at
type I error alpha: the trade-off function of f-DP, Dong, Roth, Su, JRSS-B 2022).

How it is computed (docs/math/accounting.md; the step constructors are in
:mod:`analysis.accounting.steps`, the envelope of several PLDs in :mod:`analysis.accounting.hull`):

- An account is a multiset of *steps* (one report of one mechanism) with counts. Evaluation is
  lazy and cached; the composition is reduced to one Gaussian part and one discrete part.
- Gaussian steps compose exactly in Gaussian DP: mu = sqrt(sum count_i mu_i^2).
- Steps whose privacy loss takes finitely many values (randomized response and every frequency
  oracle with an enumerable channel; pure and approximate DP worst cases) carry their exact
  discrete privacy loss distribution (PLD); counts self-compose it by repeated squaring on its
  lattice, and different steps convolve on a common lattice (exact) or, when their losses share
  none and the support would explode, on a common grid by a pessimistic "connect the dots"
  discretisation (its loss overestimate is bounded by ``loss_rounding``; an FFT convolution's
  round-off allowance is reported as ``delta_slack``). See ``_pld.py`` for costs.
- A Gaussian part and a discrete part compose *exactly* too: the composed curve is
  delta(eps) = P[L=inf] + sum_j w_j delta_G(eps - l_j), the Gaussian hockey-stick curve
  evaluated at every discrete loss l_j (a finite sum; no discretisation of the Gaussian).
- Poisson subsampling (``subsample``) follows the add/remove pair of Zhu, Dong, Wang (AISTATS
  2022) and keeps the two directions apart; the composed delta is the larger of the two.

The neighbouring relation of local DP is "the device's value(s) change". Steps built here are
symmetric (the worst case over ordered pairs of inputs, so both orderings are covered), and their
composition is sound even when different reports see different pairs of values (Zhu, Dong, Wang:
dominating pairs compose). Only ``subsample`` introduces a direction (presence of the device).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import optimize

from analysis.accounting import bounds as _bounds
from analysis.accounting._gaussian import (
    gaussian_beta,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_hockey_stick,
)
from analysis.accounting._pld import DiscretePLD, gaussian_pld, subsampled_pair
from analysis.accounting._validation import (
    check_alpha,
    check_count,
    check_delta,
    check_epsilon,
    check_rate,
)

FloatArray = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True, eq=False)
class Step:
    """The privacy of one report: a Gaussian part (mu) and a discrete PLD per direction.

    ``remove`` is the PLD of the pair (P, Q); ``add`` that of the other direction, ``None`` when
    the step is symmetric (its trade-off function is its own inverse, so one PLD serves both).
    ``claim`` is the (epsilon, delta) the step is known to satisfy, for the classical bounds.
    """

    label: str
    mu: float = 0.0
    remove: DiscretePLD = dataclasses.field(default_factory=DiscretePLD.identity)
    add: DiscretePLD | None = None
    claim: tuple[float, float] | None = None


@dataclasses.dataclass(frozen=True)
class _Evaluated:
    mu: float
    remove: DiscretePLD
    add: DiscretePLD | None


class PrivacyAccount:
    """An immutable multiset of steps with counts; ``a + b`` and ``a * n`` compose.

    Build one with the constructors of :mod:`analysis.accounting.steps` (``gaussian``,
    ``randomized_response``, ``pure_dp``, ``from_distributions``...) or from a mechanism with
    :func:`analysis.accounting.mechanism_privacy` / :func:`analysis.accounting.device_privacy`.
    """

    def __init__(self, terms: Iterable[tuple[Step, int]]) -> None:
        merged: dict[int, tuple[Step, int]] = {}
        for step, count in terms:
            if not isinstance(step, Step):
                raise ValueError(f"terms must hold Step objects; got {type(step).__name__}")
            count = check_count(count)
            key = id(step)
            merged[key] = (step, merged[key][1] + count if key in merged else count)
        if not merged:
            raise ValueError("an account needs at least one step")
        self.terms: tuple[tuple[Step, int], ...] = tuple(merged.values())

    # ---- composition -----------------------------------------------------------------------

    def __add__(self, other: object) -> PrivacyAccount:
        if not isinstance(other, PrivacyAccount):
            return NotImplemented
        return PrivacyAccount(self.terms + other.terms)

    def __radd__(self, other: object) -> PrivacyAccount:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self  # so that sum(accounts) works
        return NotImplemented

    def __mul__(self, count: object) -> PrivacyAccount:
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            return NotImplemented
        n = check_count(count, "count")
        return PrivacyAccount((step, c * n) for step, c in self.terms)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        parts = " + ".join(f"{step.label} x{count}" for step, count in self.terms)
        return f"PrivacyAccount({parts})"

    @property
    def reports(self) -> int:
        """The number of steps (reports) composed."""
        return sum(count for _, count in self.terms)

    # ---- evaluation ------------------------------------------------------------------------

    @cached_property
    def _evaluated(self) -> _Evaluated:
        mu_squared = math.fsum(step.mu**2 * count for step, count in self.terms)
        symmetric = all(step.add is None for step, _ in self.terms)
        remove = DiscretePLD.identity()
        add = DiscretePLD.identity()
        for step, count in self.terms:
            remove = remove.compose(step.remove.power(count))
            if not symmetric:
                step_add = step.remove if step.add is None else step.add
                add = add.compose(step_add.power(count))
        return _Evaluated(math.sqrt(mu_squared), remove, None if symmetric else add)

    def _directions(self) -> list[DiscretePLD]:
        ev = self._evaluated
        return [ev.remove] if ev.add is None else [ev.remove, ev.add]

    @property
    def mu(self) -> float:
        """The Gaussian-DP parameter of the Gaussian part (0 if there is none)."""
        return self._evaluated.mu

    @property
    def is_gaussian(self) -> bool:
        """True when the account is Gaussian DP alone (mu > 0, no discrete part)."""
        return self.mu > 0 and all(pld.is_identity for pld in self._directions())

    @property
    def loss_rounding(self) -> float:
        """Upper bound on the loss overestimate from pessimistic rounding (0 when exact)."""
        return max(pld.rounding for pld in self._directions())

    @property
    def delta_slack(self) -> float:
        """Mass added to delta as an allowance for FFT round-off (0 when exact)."""
        return max(pld.slack for pld in self._directions())

    @property
    def exact(self) -> bool:
        """True when neither rounding nor FFT allowance was needed (exact up to float rounding
        and the tail masses below 1e-150 moved to +inf)."""
        return self.loss_rounding == 0.0 and self.delta_slack == 0.0

    def _delta_curve(self, eps: FloatArray) -> FloatArray:
        """delta(eps) for an array of eps (any real), the larger over the two directions."""
        mu = self._evaluated.mu
        worst = np.zeros(eps.shape)
        for pld in self._directions():
            if mu == 0:
                value = pld.delta(eps)
            elif pld.is_identity:
                value = gaussian_hockey_stick(mu, eps)
            else:
                value = pld.inf_mass + np.sum(
                    pld.masses[None, :]
                    * gaussian_hockey_stick(mu, eps.reshape(-1, 1) - pld.losses[None, :]),
                    axis=1,
                ).reshape(eps.shape)
            worst = np.maximum(worst, value)
        return np.minimum(worst, 1.0)

    def delta_at(self, epsilon: float) -> float:
        """The smallest delta such that the composition is (epsilon, delta)-DP."""
        eps = check_epsilon(epsilon, allow_zero=True, allow_inf=True)
        ev = self._evaluated
        if math.isinf(eps):
            return 0.0 if ev.mu > 0 else max(p.inf_mass for p in self._directions())
        if ev.add is None and ev.remove.is_identity:
            return gaussian_delta(ev.mu, eps) if ev.mu > 0 else 0.0
        return float(self._delta_curve(np.array([eps]))[0])

    def epsilon_at(self, delta: float) -> float:
        """The smallest epsilon >= 0 such that the composition is (epsilon, delta)-DP."""
        delta = check_delta(delta)
        ev = self._evaluated
        if ev.mu == 0:
            return max(pld.epsilon(delta) for pld in self._directions())
        if ev.add is None and ev.remove.is_identity:
            return gaussian_epsilon(ev.mu, delta)
        if delta >= self.delta_at(0.0):
            return 0.0
        if delta <= 0:
            return math.inf
        floor = max(p.inf_mass for p in self._directions())
        if delta <= floor:
            return math.inf
        target = math.log(delta)

        def gap(eps: float) -> float:
            value = float(self._delta_curve(np.array([eps]))[0])
            return (math.log(value) if value > 0 else -math.inf) - target

        hi = 1.0
        while gap(hi) > 0:
            hi *= 2
        return float(optimize.brentq(gap, 0.0, hi, xtol=1e-13, rtol=1e-15, maxiter=500))

    def advantage(self) -> float:
        """The best attacker's TPR - FPR: delta at epsilon 0, the worst total variation."""
        return self.delta_at(0.0)

    def beta_at(self, alpha: float) -> float:
        """The least type II error of a test with type I error ``alpha`` (f-DP trade-off).

        f(alpha) = sup_{eps >= 0} max(0, 1 - delta(eps) - e^eps alpha,
        e^{-eps}(1 - delta(eps) - alpha)) (Dong, Roth, Su 2022, Prop. 2.12 and its symmetric
        form). Gaussian: Phi(Phi^-1(1-alpha) - mu) exactly. Discrete: exact, the supremum sits at
        a loss value, at 0 or where the two directions cross. Mixed: a bounded maximisation
        (a lower bound on f to 1e-10, i.e. never in the attacker's disfavour).
        """
        return float(self.tradeoff(np.array([check_alpha(alpha)]))[0])

    def tradeoff(self, alphas: npt.ArrayLike) -> FloatArray:
        """``beta_at`` over an array of type I errors in [0, 1]."""
        a = np.asarray(alphas, dtype=np.float64)
        if np.any(~((a >= 0) & (a <= 1))):
            raise ValueError(f"alphas must be in [0, 1]; got {a[~((a >= 0) & (a <= 1))][0]!r}")
        ev = self._evaluated
        if ev.add is None and ev.remove.is_identity:
            return gaussian_beta(ev.mu, a) if ev.mu > 0 else 1 - a
        if ev.mu == 0:
            candidates = _tradeoff_candidates(self._directions())
            out = np.empty(a.shape)
            flat_a = a.ravel()
            flat = out.reshape(-1)
            deltas = self._delta_curve(candidates)
            for start in range(0, flat_a.size, 256):
                chunk = flat_a[start : start + 256]
                flat[start : start + 256] = _tradeoff_from_curve(candidates, deltas, chunk)
            return out
        return np.array([self._mixed_beta(float(x)) for x in a.ravel()]).reshape(a.shape)

    def _mixed_beta(self, alpha: float) -> float:
        top = max(float(p.losses[-1]) for p in self._directions())
        mu = self._evaluated.mu
        hi = max(1.0, top + mu * mu / 2 + mu * 40 + 1)

        def curve(eps: float) -> float:
            return float(self._delta_curve(np.array([eps]))[0])

        def first(eps: float) -> float:
            return -(1 - curve(eps) - math.exp(eps) * alpha)

        def second(eps: float) -> float:
            return -math.exp(-eps) * (1 - curve(eps) - alpha)

        best = 1 - curve(0.0) - alpha
        for family in (first, second):
            res = optimize.minimize_scalar(
                family, bounds=(0.0, hi), method="bounded", options={"xatol": 1e-10}
            )
            best = max(best, -float(res.fun))
        return min(1.0 - alpha, max(0.0, best))

    # ---- bounds and reports ----------------------------------------------------------------

    def claims(self) -> list[tuple[float, float, int]] | None:
        """Per-step (epsilon, delta, count) claims, or None if a step has none."""
        out = []
        for step, count in self.terms:
            if step.claim is None:
                return None
            out.append((step.claim[0], step.claim[1], count))
        return out

    def rdp_epsilon(self, delta: float, orders: npt.ArrayLike | None = None) -> float:
        """Epsilon from Renyi DP: per-direction sum of the steps' exact Renyi curves, converted
        with :func:`analysis.accounting.bounds.rdp_to_epsilon` (an upper bound)."""
        delta = check_delta(delta)
        a = _bounds.DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=np.float64)
        if np.any(a <= 1):
            raise ValueError("orders must be > 1")
        worst = 0.0
        for direction in ("remove", "add"):
            rdp = np.zeros(a.shape)
            for step, count in self.terms:
                pld = step.remove if direction == "remove" or step.add is None else step.add
                rdp = rdp + count * (a * step.mu**2 / 2 + pld.renyi(a))
            worst = max(worst, _bounds.rdp_to_epsilon(a, rdp, delta))
        return worst

    def bounds(self, delta: float) -> dict[str, float | None]:
        """Epsilon at ``delta`` by every applicable method (None where one does not apply).

        ``exact`` (this account), ``basic``, ``advanced`` (DRV 2010), ``kov`` (Kairouz, Oh,
        Viswanath 2015; homogeneous steps only) and ``rdp``.
        """
        delta = check_delta(delta)
        out: dict[str, float | None] = {"exact": self.epsilon_at(delta)}
        claims = self.claims()
        if claims is None:
            out.update(basic=None, advanced=None, kov=None)
        else:
            eps_sum, delta_sum = _bounds.basic_composition(claims)
            out["basic"] = eps_sum if delta >= delta_sum else math.inf
            out["advanced"] = _bounds.advanced_composition_epsilon(claims, delta)
            homogeneous = len({(e, d) for e, d, _ in claims}) == 1
            out["kov"] = (
                _bounds.kov_epsilon(claims[0][0], claims[0][1], self.reports, delta)
                if homogeneous
                else None
            )
        out["rdp"] = self.rdp_epsilon(delta)
        return out

    def summary(self, delta: float) -> dict[str, Any]:
        """JSON-safe figures for reports (infinite values become None)."""
        delta = check_delta(delta)
        components = []
        for step, count in self.terms:
            single = PrivacyAccount([(step, 1)])
            components.append(
                {
                    "step": step.label,
                    "reports": count,
                    "epsilon_per_report": _finite(single.epsilon_at(delta)),
                    "claim": None if step.claim is None else list(step.claim),
                }
            )
        return {
            "delta": delta,
            "reports": self.reports,
            "epsilon": _finite(self.epsilon_at(delta)),
            "advantage": self.advantage(),
            "exact": self.exact,
            "loss_rounding": self.loss_rounding,
            "delta_slack": self.delta_slack,
            "bounds": {k: _finite(v) for k, v in self.bounds(delta).items()},
            "components": components,
        }

    # ---- group privacy ---------------------------------------------------------------------

    def group(self, k: int) -> PrivacyAccount:
        """This account for datasets that differ in ``k`` records (or a device whose ``k``
        values change), step by step.

        A Gaussian step, mu-GDP, is k mu-GDP for groups of k, and no better: the group of k
        shifts the Gaussian's mean k times as far (Dong, Roth, Su, JRSS-B 2022, group privacy
        of Gaussian DP), so its group account is exact. A pure step (epsilon-DP, no
        infinite-loss mass in either direction) is k epsilon-DP (Dwork and Roth 2014, Thm 2.2)
        and is accounted as the worst k epsilon-DP report; this is sound, and tight for a single
        binary randomized response. The steps' group bounds compose, since each dominates its
        step on the group-neighbouring pair. Any other step (an (epsilon, delta) claim, a
        subsampled Gaussian, a step whose loss can be infinite) is
        refused with a ValueError: no sound group bound for it is implemented here.
        """
        k = check_count(k, "k")
        if k == 1:
            return self
        terms = []
        for step, count in self.terms:
            directions = [step.remove] if step.add is None else [step.remove, step.add]
            if step.mu > 0 and all(pld.is_identity for pld in directions):
                label = f"group(k={k}, {step.label})"
                terms.append((Step(label, mu=k * step.mu), count))
                continue
            if step.mu == 0 and all(pld.inf_mass == 0 for pld in directions):
                epsilon = k * max(max(abs(float(p.losses[0])), p.max_loss) for p in directions)
                pld = DiscretePLD.worst_case(epsilon)
                label = f"group(k={k}, {step.label})"
                terms.append((Step(label, 0.0, pld, None, (epsilon, 0.0)), count))
                continue
            raise ValueError(
                f"group privacy is implemented for pure-DP and Gaussian-DP steps only; "
                f"{step.label} is neither (an (epsilon, delta) claim, a subsampled Gaussian or a "
                f"step with an infinite privacy loss), so no sound group bound is available"
            )
        return PrivacyAccount(terms)

    # ---- subsampling -----------------------------------------------------------------------

    def subsample(self, q: float) -> PrivacyAccount:
        """This whole account run on a Poisson sample at rate ``q``, as one new step.

        Amplification by subsampling under add/remove (Li, Qardaji, Su 2012; Balle, Barthe,
        Gaboardi 2018; exact PLD pair of Zhu, Dong, Wang 2022). For a single (eps, delta) step it
        gives (ln(1 + q(e^eps - 1)), q delta). Compose per report: ``step.subsample(q) * T``.

        LDP caveat (docs/math/accounting.md): this amplifies only against an observer who does not
        learn who was sampled. A collector that sees which device sent a report gets no
        amplification for those who reported; use it for downstream releases or behind an
        anonymising shuffler. A Gaussian part is first discretised pessimistically.
        """
        q = check_rate(q)
        ev = self._evaluated
        remove = ev.remove
        add = ev.remove if ev.add is None else ev.add
        if ev.mu > 0:
            g = gaussian_pld(ev.mu)
            remove, add = remove.compose(g), add.compose(g)
        sub_remove, sub_add = subsampled_pair(remove, add, q)
        claims = self.claims()
        claim = None
        if claims is not None:
            eps_sum, delta_sum = _bounds.basic_composition(claims)
            claim = (math.log1p(q * math.expm1(eps_sum)), q * delta_sum)
        label = f"subsampled(q={q:g}, {self!r})"
        return PrivacyAccount([(Step(label, 0.0, sub_remove, sub_add, claim), 1)])


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _tradeoff_candidates(plds: Sequence[DiscretePLD]) -> FloatArray:
    """Where the f-DP supremum over eps can sit: 0, every loss >= 0, and crossings of the
    directions' delta curves (both are linear in e^eps between merged breakpoints)."""
    points = np.unique(np.concatenate([[0.0]] + [p.losses[p.losses > 0] for p in plds]))
    if len(plds) < 2:
        return points
    d0 = plds[0].delta(points)
    d1 = plds[1].delta(points)
    g = d0 - d1
    cross = np.flatnonzero(g[:-1] * g[1:] < 0)
    if cross.size:
        s = g[cross] / (g[cross] - g[cross + 1])
        gap = points[cross + 1] - points[cross]
        extra = points[cross] + np.log1p(s * np.expm1(gap))
        points = np.unique(np.concatenate([points, extra]))
    return points


def _tradeoff_from_curve(eps: FloatArray, deltas: FloatArray, alphas: FloatArray) -> FloatArray:
    """max over the candidate eps of both families of supporting lines, clipped at 0."""
    e = eps[:, None]
    d = deltas[:, None]
    a = alphas[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        first = 1 - d - np.exp(e) * a
        first = np.where(np.isnan(first), -np.inf, first)
        second = np.exp(-e) * (1 - d - a)
    best = np.maximum(first.max(axis=0), second.max(axis=0))
    return np.clip(best, 0.0, 1.0 - alphas)
