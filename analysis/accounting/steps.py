"""Step constructors: the account of one report of a known mechanism.

>>> round((gaussian(sigma=5.0) * 1000).epsilon_at(1e-6), 3)   # mu = sqrt(1000)/5, exact
49.319
>>> round(randomized_response(1.0, k=2).epsilon_at(0.0), 6)
1.0

Each constructor returns a :class:`~analysis.accounting.account.PrivacyAccount` of one step;
``*`` and ``+`` compose them. Steps are symmetric (the worst case over ordered pairs of inputs),
as the local-DP neighbouring relation "the device's value changes" requires.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt
from scipy import stats

from analysis.accounting._pld import DiscretePLD, replace_subsampled_gaussian_pld
from analysis.accounting._validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_positive,
    check_rate,
)
from analysis.accounting.account import PrivacyAccount, Step
from analysis.accounting.hull import envelope

FloatArray = npt.NDArray[np.float64]


def gaussian_dp(mu: float, *, label: str | None = None) -> PrivacyAccount:
    """One Gaussian report with mu = sensitivity / sigma (mu-GDP, Dong, Roth, Su 2022)."""
    mu = check_positive(mu, "mu")
    return PrivacyAccount([(Step(label or f"gaussian(mu={mu:.6g})", mu=mu), 1)])


def gaussian(
    noise_multiplier: float | None = None,
    *,
    sigma: float | None = None,
    sensitivity: float | None = None,
    claim: tuple[float, float] | None = None,
) -> PrivacyAccount:
    """One Gaussian report: mu-GDP with mu = 1 / noise_multiplier = sensitivity / sigma.

    ``gaussian(1.1)`` is dp_accounting's ``GaussianDpEvent(1.1)``: noise of standard deviation
    1.1 times the L2 sensitivity. ``gaussian(sigma=s, sensitivity=d)`` gives the noise N(x, s^2)
    in the value's units and the sensitivity (default 1); in local DP the sensitivity is the
    diameter of the input set (docs/math/numeric.md). ``claim`` is the (epsilon, delta) the
    mechanism states, for the classical bounds.
    """
    if (noise_multiplier is None) == (sigma is None):
        raise ValueError(
            "gaussian takes noise_multiplier or sigma (with sensitivity), exactly one; "
            f"got noise_multiplier={noise_multiplier!r}, sigma={sigma!r}"
        )
    if noise_multiplier is not None:
        if sensitivity is not None:
            raise ValueError(
                "sensitivity goes with sigma; noise_multiplier is already relative to it; "
                f"got sensitivity={sensitivity!r}"
            )
        multiplier = check_positive(noise_multiplier, "noise_multiplier")
        label = f"gaussian(noise_multiplier={multiplier:.6g})"
        return PrivacyAccount([(Step(label, mu=1.0 / multiplier, claim=claim), 1)])
    sigma = check_positive(sigma, "sigma")
    sensitivity = check_positive(1.0 if sensitivity is None else sensitivity, "sensitivity")
    mu = sensitivity / sigma
    label = f"gaussian(sigma={sigma:.6g}, sensitivity={sensitivity:.6g})"
    return PrivacyAccount([(Step(label, mu=mu, claim=claim), 1)])


def pure_dp(epsilon: float) -> PrivacyAccount:
    """The worst case of any epsilon-DP report: binary randomized response.

    Its losses are +-eps with P-masses e^eps/(1+e^eps) and 1/(1+e^eps); every epsilon-DP
    mechanism is a post-processing of it (Kairouz, Oh, Viswanath 2015), so this is a sound and,
    for randomized response, tight account.
    """
    return approximate_dp(epsilon, 0.0)


def approximate_dp(epsilon: float, delta: float) -> PrivacyAccount:
    """The worst case of any (epsilon, delta)-DP report (Kairouz, Oh, Viswanath 2015, Thm 2.4).

    P-masses: delta at +inf, (1-delta) e^eps/(1+e^eps) at +eps, (1-delta)/(1+e^eps) at -eps.
    Its T-fold composition is exactly KOV's optimal composition.
    """
    epsilon = check_epsilon(epsilon, allow_zero=True)
    delta = check_delta(delta)
    pld = DiscretePLD.worst_case(epsilon, delta)
    label = f"dp(eps={epsilon:.6g})" if delta == 0 else f"dp(eps={epsilon:.6g}, delta={delta:.3g})"
    return PrivacyAccount([(Step(label, 0.0, pld, None, (epsilon, delta)), 1)])


def from_distributions(
    p: npt.ArrayLike, q: npt.ArrayLike, *, label: str = "pair"
) -> PrivacyAccount:
    """One report whose neighbouring inputs give the output distributions ``p`` and ``q``.

    Symmetrised: the step covers both orderings (p, q) and (q, p), as a local-DP neighbouring
    relation requires.
    """
    p_arr = _probability_vector(p, "p")
    q_arr = _probability_vector(q, "q")
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q must have the same length; got {p_arr.size} and {q_arr.size}")
    plds = [
        DiscretePLD.from_distributions(p_arr, q_arr),
        DiscretePLD.from_distributions(q_arr, p_arr),
    ]
    return _symmetric_step(envelope(plds), label)


def randomized_response(epsilon: float, k: int = 2) -> PrivacyAccount:
    """One k-ary randomized response report (GRR), from the SDK's implemented probabilities.

    Between inputs x and x' the loss is +ln(p/q) (mass p), 0 (mass (k-2)q) or -ln(p/q) (mass q).
    """
    from client_sdk.mechanisms.grr import GRR  # the one definition of p and q

    mechanism = GRR(epsilon=epsilon, k=k)
    return randomized_response_from(mechanism.p_star, mechanism.q_star, mechanism.k)


def randomized_response_from(p: float, q: float, k: int) -> PrivacyAccount:
    """GRR over ``k`` values keeping the input with probability ``p``, any other with ``q``."""
    p = check_positive(p, "p")
    q = check_positive(q, "q")
    k = check_count(k, "k")
    if k < 2 or abs(p + (k - 1) * q - 1) > 1e-9:
        raise ValueError(f"p + (k-1) q must be 1 with k >= 2; got p={p!r}, q={q!r}, k={k!r}")
    loss = math.log(p) - math.log(q)
    pld = DiscretePLD.from_atoms([-loss, 0.0, loss], [q, (k - 2) * q, p])
    label = f"grr(eps={loss:.6g}, k={k})"
    return PrivacyAccount([(Step(label, 0.0, pld, None, (abs(loss), 0.0)), 1)])


def unary_encoding_from(p: float, q: float) -> PrivacyAccount:
    """One unary-encoding report (SUE / OUE, Wang et al. 2017) with bit probabilities p and q.

    Bit v is 1 with probability p when the input is v, q otherwise; the bits are independent.
    Inputs x and x' differ on exactly two bits, so the worst (and every) pair's PLD is that of
    Bern(p) against Bern(q) composed with Bern(q) against Bern(p); it is symmetric.
    """
    p = check_positive(p, "p")
    q = check_positive(q, "q")
    if not q < p < 1:
        raise ValueError(f"unary encoding needs 0 < q < p < 1; got p={p!r}, q={q!r}")
    own = DiscretePLD.from_distributions([1 - p, p], [1 - q, q])
    other = DiscretePLD.from_distributions([1 - q, q], [1 - p, p])
    pld = own.compose(other)
    label = f"ue(p={p:.6g}, q={q:.6g})"
    return PrivacyAccount([(Step(label, 0.0, pld, None, (pld.max_loss, 0.0)), 1)])


def _probability_vector(value: npt.ArrayLike, field: str) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64).ravel()
    if arr.size == 0 or np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{field} must be non-negative finite probabilities; got {value!r}")
    total = float(arr.sum())
    if abs(total - 1) > 1e-9:
        raise ValueError(f"{field} must sum to 1; got a sum of {total!r}")
    return arr


def _symmetric_step(pld: DiscretePLD, label: str) -> PrivacyAccount:
    claim = (pld.max_loss, 0.0) if pld.inf_mass == 0 else None
    return PrivacyAccount([(Step(label, 0.0, pld, None, claim), 1)])


def poisson(
    step: PrivacyAccount,
    sample_rate: float,
    *,
    truncated_batch_size: int | None = None,
    dataset_size: int | None = None,
) -> PrivacyAccount:
    """``step`` run on a Poisson sample: every record is in the batch with ``sample_rate``.

    As dp_accounting's ``PoissonSampledDpEvent(sample_rate, event)``; this is
    ``step.subsample(sample_rate)`` (add/remove neighbours, Zhu, Dong, Wang, AISTATS 2022).
    Compose per batch: ``poisson(gaussian(1.1), 0.01) * 1000``.

    Truncated Poisson (``truncated_batch_size`` B and ``dataset_size`` n, as dp_accounting's
    ``TruncatedSubsampledGaussianDpEvent``, arXiv 2508.15089): a batch of more than B records
    is cut down to a random B. Conditioned on the other n - 1 records' sample S, nothing is
    truncated, with or without the record, when |S| <= B - 1: the plain subsampled pair. With
    probability p = P[Bin(n - 1, q) >= B] the batch is capped both ways, and then it is a
    subsample of a subsample: the record is in the capped batch with probability
    q' = P[Bin(n, q) >= B + 1] B / (n p), and when it is, it displaced one of the others, so
    the two batches differ by a substitution (twice the sensitivity). The step is the mixture of
    the two pairs with weights 1 - p and p (joint convexity of the hockey-stick divergence);
    for a Gaussian step (mu) the capped pair is the substitution-subsampled Gaussian at q' with
    shift 2 mu, as dp_accounting computes it. For any other step no substitution analysis is
    implemented, and the capped case counts as revealing everything (sound, loose when p is
    not negligible).
    """
    if not isinstance(step, PrivacyAccount):
        raise ValueError(f"step must be a PrivacyAccount; got {type(step).__name__}")
    if (truncated_batch_size is None) != (dataset_size is None):
        raise ValueError(
            "truncated Poisson sampling needs both truncated_batch_size and dataset_size; "
            f"got truncated_batch_size={truncated_batch_size!r}, dataset_size={dataset_size!r}"
        )
    sampled = step.subsample(check_rate(sample_rate, "sample_rate"))
    if truncated_batch_size is None or dataset_size is None:
        return sampled
    batch = check_count(truncated_batch_size, "truncated_batch_size")
    size = check_count(dataset_size, "dataset_size")
    overflow = float(stats.binom.sf(batch - 1, size - 1, sample_rate))
    if overflow == 0.0:
        return sampled
    ((inner, _),) = sampled.terms
    label = f"truncated(B={batch}, n={size}, overflow={overflow:.3g}, {inner.label})"
    claim = None
    if inner.claim is not None:
        claim = (inner.claim[0], inner.claim[1] * (1 - overflow) + overflow)
    if step.is_gaussian:
        within = float(stats.binom.sf(batch, size, sample_rate)) * batch / (overflow * size)
        capped = (
            replace_subsampled_gaussian_pld(2 * step.mu, min(1.0, within))
            if within > 0
            else DiscretePLD.identity()  # the record is (numerically) never in a capped batch
        )
        remove = inner.remove.mixture(capped, overflow)
        add = None if inner.add is None else inner.add.mixture(capped, overflow)
        return PrivacyAccount([(Step(label, 0.0, remove, add, claim), 1)])
    remove = inner.remove.with_failure(overflow)
    add = None if inner.add is None else inner.add.with_failure(overflow)
    return PrivacyAccount([(Step(label, 0.0, remove, add, claim), 1)])


def parallel_poisson(
    step: PrivacyAccount,
    sample_rate: float,
    *,
    num_workers: int,
    truncated_batch_size: int | None = None,
    dataset_size: int | None = None,
) -> PrivacyAccount:
    """One round of ``step`` on ``num_workers`` disjoint shards, each Poisson-sampled.

    The dataset of ``dataset_size`` records is split once into ``num_workers`` disjoint shards
    (sizes as equal as possible, so floor(n / W) or ceil(n / W)). Every round each worker draws
    a Poisson sample of its own shard at ``sample_rate`` (capped at ``truncated_batch_size``
    per worker when given, as :func:`poisson`), runs ``step`` on it and releases its output;
    the workers' samples and noise are independent. Compose per round:
    ``parallel_poisson(gaussian(1.1), 0.01, num_workers=8) * 1000``.

    A record sits in exactly one shard, and the other workers' outputs have the same
    distribution with or without it, so they add nothing to its privacy loss (parallel
    composition, McSherry, SIGMOD 2009): one round costs the record what one Poisson-sampled
    ``step`` on its own shard costs, whatever ``num_workers`` is. Summing the workers' outputs
    (one noise for the whole round, run by ``step``) is a post-processing of a Poisson sample of
    the whole dataset at the same rate, so the same account holds. Untruncated, the account is
    :func:`poisson` at ``sample_rate``; truncated, it is :func:`poisson` truncated on a shard
    of the record's size, and when the shard sizes differ, the envelope of the two (a pair that
    dominates both, whichever shard the record is in).
    """
    workers = check_count(num_workers, "num_workers")
    if truncated_batch_size is None or dataset_size is None:
        if (truncated_batch_size is None) != (dataset_size is None):
            poisson(
                step,
                sample_rate,
                truncated_batch_size=truncated_batch_size,
                dataset_size=dataset_size,
            )  # raises the error naming both fields
        account = poisson(step, sample_rate)
        return _relabel(account, f"parallel(W={workers}, {account.terms[0][0].label})")
    size = check_count(dataset_size, "dataset_size")
    if workers > size:
        raise ValueError(
            f"num_workers must be at most dataset_size (every shard holds a record); got "
            f"num_workers={workers!r}, dataset_size={size!r}"
        )
    sizes = sorted({size // workers, -(-size // workers)} - {0})
    shards = [
        poisson(step, sample_rate, truncated_batch_size=truncated_batch_size, dataset_size=m)
        for m in sizes
    ]
    if len(shards) == 1:
        ((inner, _),) = shards[0].terms
        return _relabel(shards[0], f"parallel(W={workers}, {inner.label})")
    steps = [account.terms[0][0] for account in shards]
    remove = _dominating([s.remove for s in steps])
    add = None
    if any(s.add is not None for s in steps):
        add = _dominating([s.remove if s.add is None else s.add for s in steps])
    label = f"parallel(W={workers}, shards {sizes[0]} and {sizes[1]}, {steps[-1].label})"
    claims = [s.claim for s in steps]
    claim = None
    if all(c is not None for c in claims):
        claim = (max(c[0] for c in claims if c), max(c[1] for c in claims if c))
    return PrivacyAccount([(Step(label, 0.0, remove, add, claim), 1)])


def _dominating(plds: list[DiscretePLD]) -> DiscretePLD:
    """The envelope of ``plds``, keeping the largest rounding and slack they carry."""
    hull = envelope(plds)
    return dataclasses.replace(
        hull,
        rounding=max(p.rounding for p in plds),
        slack=max(p.slack for p in plds),
    )


def _relabel(account: PrivacyAccount, label: str) -> PrivacyAccount:
    ((inner, count),) = account.terms
    return PrivacyAccount([(dataclasses.replace(inner, label=label), count)])
