"""Estimates of multi-attribute campaigns: SPL, SMP, RS+FD and CALM's marginal tables
(docs/math/richer-data.md, docs/math/marginals.md).

Without ``marginals``, each attribute's 1-way marginal comes from the mechanism's unbiased
estimator with its exact fixed-population variance (``Multi.estimate``, ``Multi.variance``), at
the plug-in frequencies clipped to [0, 1].

With ``marginals`` (Zhang, Wang, Li, He & Chen, "CALM: consistent adaptive local marginal for
marginal release under local differential privacy", CCS 2018), devices are partitioned over the
tables and each table is estimated like an SMP attribute (unbiased, exact variance); the tables
are then made consistent (:func:`consistent_tables`): Norm-Sub of each table, then for every
attribute the 1-way sums T_i of its holders (over C_i cells per value each) are replaced by the
anchor T*, the simplex projection of the holders' raw sums combined with inverse-variance
weights (:class:`OneWay`), adding (T* - T_i)/C_i to each of table i's cells, alternating a few
times and ending with Norm-Sub. A marginal no table holds is reconstructed by maximum entropy
(:func:`max_entropy`): the distribution over its attributes with the largest entropy whose
projections agree with every table's projection onto the shared attributes (iterative
proportional fitting).

The public estimate object, :class:`MultiEstimate` (``estimate_kind`` ``"multi"``):

- ``marginal(*names)`` -> :class:`~client_sdk.mechanisms.multi.Marginal` with
  ``.frequencies`` and ``.std_errors`` (numpy arrays shaped by the attributes' k, axes in the
  order asked), ``.ci_low``/``.ci_high`` and ``.method``;
- ``raw_marginal(*names)``: the unbiased cells of a collected table (or a sum of one) with their
  exact standard errors, before any post-processing;
- ``tables`` (the consistent tables, in config order), ``to_dict()``, ``format_table()``.

Standard errors: an unbiased cell, and a post-processed cell of a collected table, carry the exact
standard error of the unbiased cell (``method`` ``unbiased`` / ``consistent``); a 1-way marginal
carries the exact standard error of the combination of every table holding its attribute
(``raw_marginal``) and of its simplex projection (``marginal``); a reconstructed cell carries
the bootstrap standard deviation (``max-entropy``). Post-processed cells have
bias-corrected percentile intervals from a seeded parametric bootstrap (as in
docs/math/postprocessing.md): devices drawn over the tables, each table's cells from its
consistent estimate, each oracle's support counts from their exact law (GRR: exact; OUE:
independent bits; OLH: binomial, exact in each margin), then the whole pipeline re-run.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.marginals import CONSISTENCY_ROUNDS, MarginalEstimate, project_onto
from analysis.postprocess.bootstrap import DEFAULT_REPLICATES
from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from analysis.text_tables import INTERVAL_COLUMNS, aligned, cell_table, interval_cells
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.multi import Marginal, Multi
from client_sdk.mechanisms.simplex import project_simplex

MAX_ENTROPY_ITERATIONS = 1000
MAX_ENTROPY_TOLERANCE = 1e-10
MAX_RECONSTRUCTED_CELLS = 1 << 16
MAX_SCOPE_CELLS = 4096
"""A reconstruction brings in neighbouring tables' attributes while the fit has at most this many
cells (its bootstrap holds one such table per replicate)."""


def _norm_sub(batch: FloatArray) -> FloatArray:
    """Norm-Sub (projection onto the simplex) of each table of a batch (R, *shape)."""
    flat = batch.reshape(batch.shape[0], -1)
    return project_simplex(flat)[0].reshape(batch.shape)


_PAD = -1e300
"""Below any cell: a padded cell is never in the simplex projection's support, so a padded row
projects exactly as the row alone (the same sort prefix, sums and shift)."""


def _norm_sub_all(tables: list[FloatArray]) -> list[FloatArray]:
    """:func:`_norm_sub` of every batch. One replicate (the estimate itself): all tables padded
    into one array and projected in one call (the per-call overhead of 15 small projections was
    most of the cost); many replicates: table by table (padding would multiply the sort work)."""
    if tables[0].shape[0] != 1:
        return [_norm_sub(t) for t in tables]
    sizes = [t.size for t in tables]
    padded = np.full((len(tables), max(sizes)), _PAD)
    for row, (table, size) in enumerate(zip(tables, sizes, strict=True)):
        padded[row, :size] = table.reshape(-1)
    projected = project_simplex(padded)[0]
    return [
        projected[row, :size].reshape(t.shape)
        for row, (t, size) in enumerate(zip(tables, sizes, strict=True))
    ]


Weights = dict[int, FloatArray]
"""Per attribute, its holders' weights, shaped (holders in table order, values): the 1-way sums
move to their weighted mean, value by value."""


def _holder_weights(
    attribute: int, per_value: Sequence[int], k: int, weights: Weights | None
) -> FloatArray:
    """The (holders, k) weights of one attribute: the given ones, else 1/C_i (each holder's cells
    per value: inverse variances when all cells have equal variance)."""
    if weights is not None and attribute in weights:
        given = np.asarray(weights[attribute], dtype=np.float64)
        if given.shape != (len(per_value), k):
            raise ValueError(
                f"weights of attribute {attribute} must have shape {(len(per_value), k)}; "
                f"got {given.shape}"
            )
        return given
    return np.repeat(1.0 / np.asarray(per_value, dtype=np.float64)[:, None], k, axis=1)


Anchors = dict[int, FloatArray]
"""Per attribute, fixed targets for its holders' 1-way sums: (R, k) for a batch, (k,) for one
set of tables."""


def _adjusted(axes: Sequence[tuple[int, ...]], anchors: Anchors | None) -> list[int]:
    """The attributes whose 1-way sums the rounds adjust: shared and anchored ones."""
    fixed = anchors or {}
    return sorted({a for ax in axes for a in ax if a in fixed or sum(a in o for o in axes) > 1})


def simplex_anchors(
    batches: Sequence[FloatArray], axes: Sequence[tuple[int, ...]], weights: Weights
) -> Anchors:
    """Per attribute in ``weights``, the simplex projection of its holders' 1-way sums of the
    (raw) ``batches`` (R, *table each) combined with the weights, (R, k): the anchors of
    :func:`consistent_batches` (docs/math/marginals.md)."""
    out = {}
    for attribute, held in weights.items():
        sums = []
        for table, ax in zip(batches, axes, strict=True):
            if attribute in ax:
                position = 1 + ax.index(attribute)
                sums.append(table.sum(axis=tuple(d for d in range(1, table.ndim) if d != position)))
        mean = sum(w * t for w, t in zip(held, sums, strict=True)) / held.sum(axis=0)
        out[attribute] = project_simplex(mean)[0]
    return out


def consistent_batches(
    batches: Sequence[FloatArray],
    axes: Sequence[tuple[int, ...]],
    rounds: int,
    weights: Weights | None = None,
    anchors: Anchors | None = None,
) -> list[FloatArray]:
    """:func:`consistent_tables` on R tables at once: ``batches[i]`` has shape (R, *table i),
    ``anchors[a]`` (R, k)."""
    out = _norm_sub_all([np.asarray(t, dtype=np.float64) for t in batches])
    shared = _adjusted(axes, anchors)
    # per adjusted attribute, each holder's (table, axes summed over, broadcast shape, cells per
    # value): fixed over the rounds
    plans = []
    for attribute in shared:
        plan = []
        for i, ax in enumerate(axes):
            if attribute not in ax:
                continue
            position = 1 + ax.index(attribute)
            others = tuple(d for d in range(1, out[i].ndim) if d != position)
            shape = [out[i].shape[0]] + [1] * (out[i].ndim - 1)
            shape[position] = out[i].shape[position]
            plan.append((i, others, shape, out[i][0].size // out[i].shape[position]))
        first = plan[0][0]
        k = out[first].shape[1 + axes[first].index(attribute)]
        held = _holder_weights(attribute, [c for *_, c in plan], k, weights)
        plans.append((plan, held, None if anchors is None else anchors.get(attribute)))
    for _ in range(rounds):
        for plan, held, anchor in plans:
            sums = [out[i].sum(axis=others) for i, others, _, _ in plan]
            target = (
                sum(w * t for w, t in zip(held, sums, strict=True)) / held.sum(axis=0)
                if anchor is None
                else anchor
            )
            for (i, _, broadcast, c), total in zip(plan, sums, strict=True):
                out[i] = out[i] + ((target - total) / c).reshape(broadcast)
        out = _norm_sub_all(out)
    return out


def consistent_tables(
    tables: list[FloatArray],
    axes: list[tuple[int, ...]],
    rounds: int = CONSISTENCY_ROUNDS,
    weights: Weights | None = None,
    anchors: Anchors | None = None,
) -> list[FloatArray]:
    """Norm-Sub and mutual consistency of marginal tables (``axes``: each table's attributes;
    ``weights``: see :data:`Weights`, by default 1/C_i).

    Each round moves every shared attribute's 1-way sums to their weighted mean and Norm-Subs
    every table (CALM). ``anchors`` (see :func:`simplex_anchors`): an attribute's fixed target
    (shared or not) instead, so that Norm-Sub's clipping of small cells does not drift into the
    1-way marginals (alternating projections onto the simplex and onto the anchored sums).

    The steps of :func:`consistent_batches` on one set of tables, held as the rows of one
    padded array (``_PAD`` past each table's cells) so that each Norm-Sub is one projection and
    each attribute's 1-way sums are one ``bincount`` over its holders' cells (the sums of the
    same cells; only their order of addition differs)."""
    arrays = [np.asarray(t, dtype=np.float64) for t in tables]
    sizes = [t.size for t in arrays]
    width = max(sizes)
    padded = np.full((len(arrays), width), _PAD)
    for row, (table, size) in enumerate(zip(arrays, sizes, strict=True)):
        padded[row, :size] = table.reshape(-1)
    shared = _adjusted(axes, anchors)
    plans = []  # per adjusted attribute: its holders' cells (flat), their (holder, value) rows
    for attribute in shared:
        holders = [i for i, ax in enumerate(axes) if attribute in ax]
        cells, rows, per_value = [], [], []
        for h, i in enumerate(holders):
            shape = arrays[i].shape
            position = axes[i].index(attribute)
            value = np.indices(shape)[position].reshape(-1)
            cells.append(i * width + np.arange(sizes[i]))
            rows.append(h * shape[position] + value)
            per_value.append(sizes[i] // shape[position])
        k = arrays[holders[0]].shape[axes[holders[0]].index(attribute)]
        held = _holder_weights(attribute, per_value, k, weights)
        anchor = None if anchors is None else anchors.get(attribute)
        plans.append(
            (np.concatenate(cells), np.concatenate(rows), held, np.array(per_value, float), anchor)
        )
    pad = np.arange(width)[None, :] >= np.array(sizes)[:, None]
    flat = project_simplex(padded)[0].reshape(-1)
    for _ in range(rounds):
        for where, index, held, count, anchor in plans:
            sums = np.bincount(index, weights=flat[where], minlength=held.size)
            sums = sums.reshape(held.shape)
            target = (held * sums).sum(axis=0) / held.sum(axis=0) if anchor is None else anchor
            delta = (target - sums) / count[:, None]
            flat[where] += delta.reshape(-1)[index]
        padded = flat.reshape(len(arrays), width)
        padded[pad] = _PAD  # projected pad cells are 0: below every cell again
        flat = project_simplex(padded)[0].reshape(-1)
    out = flat.reshape(len(arrays), width)
    return [
        out[row, :size].reshape(t.shape)
        for row, (t, size) in enumerate(zip(arrays, sizes, strict=True))
    ]


def max_entropy(
    target: tuple[int, ...],
    ks: Sequence[int],
    batches: Sequence[FloatArray],
    axes: Sequence[tuple[int, ...]],
) -> FloatArray:
    """The maximum-entropy distribution over ``target`` given the tables (R at once).

    Constraints: every table's projection onto its attributes shared with ``target`` (those
    implied by a larger shared set dropped, equal sets averaged). Iterative proportional fitting
    from the uniform table converges to the I-projection of the uniform distribution, i.e. the
    maximum-entropy distribution, when the constraints are consistent (Csiszar, Ann. Probab.
    1975); the consistent tables agree on shared attributes, so they are up to rounding.
    """
    shape = tuple(ks[a] for a in target)
    if int(np.prod(shape)) > MAX_RECONSTRUCTED_CELLS:
        raise ValueError(
            f"a marginal of {int(np.prod(shape))} cells is too large to reconstruct "
            f"(at most {MAX_RECONSTRUCTED_CELLS})"
        )
    replicates = batches[0].shape[0]
    grouped: dict[tuple[int, ...], list[FloatArray]] = {}
    for table, ax in zip(batches, axes, strict=True):
        keep = tuple(a for a in target if a in ax)
        if keep:
            grouped.setdefault(keep, []).append(project_onto(table, ax, keep))
    sets = [s for s in grouped if not any(set(s) < set(o) for o in grouped)]
    constraints = [(s, np.mean(grouped[s], axis=0)) for s in sets]
    covered = {a for s in sets for a in s}
    if covered != set(target):
        raise ValueError("every attribute of a reconstructed marginal must be in some table")
    fit = np.full((replicates, *shape), 1.0 / int(np.prod(shape)))
    for _ in range(MAX_ENTROPY_ITERATIONS):
        previous = fit
        for keep, wanted in constraints:
            current = project_onto(fit, target, keep)
            ratio = np.divide(wanted, current, out=np.zeros_like(wanted), where=current > 0)
            positions = [1 + target.index(a) for a in keep]
            # broadcast the ratio (R, *keep in target order) back over the other axes
            expand = [replicates] + [1] * len(target)
            for a in keep:
                expand[1 + target.index(a)] = ks[a]
            order = sorted(range(len(keep)), key=lambda i: positions[i])
            fit = fit * np.transpose(ratio, [0, *(1 + i for i in order)]).reshape(expand)
        if np.max(np.abs(fit - previous)) < MAX_ENTROPY_TOLERANCE:
            break
    return fit


@dataclasses.dataclass(frozen=True)
class OneWay:
    """An attribute's 1-way marginal from every table holding it (docs/math/marginals.md)."""

    holders: tuple[int, ...]
    """The tables holding the attribute, in config order."""
    weights: FloatArray
    """(holders, k): 1 / (D_i + f/n), the inverse-variance weights of the combination."""
    frequencies: FloatArray
    """The weighted combination of the holders' unbiased 1-way sums (unbiased)."""
    covariance: FloatArray
    """(k, k): its exact covariance at the plug-in frequencies."""

    @property
    def variance(self) -> FloatArray:
        return np.maximum(np.diag(self.covariance), 0.0)

    def simplex_variance(self, projected: FloatArray) -> FloatArray:
        """The variance of the combination projected onto the simplex (``projected``): on the
        cells it keeps positive the projection is x - (sum_A x - 1)/|A|, linear, with variance
        diag(P C P), P = I - 11^T/|A|; a cell it sets to 0 keeps the combination's variance."""
        active = np.asarray(projected) > 0
        variance = self.variance.copy()
        size = int(active.sum())
        if size:
            c = self.covariance[np.ix_(active, active)]
            row = c.sum(axis=1)
            kept = np.diag(c) - 2 * row / size + c.sum() / size**2
            variance[active] = np.maximum(kept, 0.0)
        return variance


@functools.cache
def _pairs(k: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The pairs v < w of k values, as two index arrays."""
    v, w = np.triu_indices(k, 1)
    return v, w


def _combine(
    m: Multi,
    n: int,
    holders: tuple[int, ...],
    sums: Sequence[FloatArray],
    values: Sequence[npt.NDArray[np.intp]],
    f: FloatArray,
) -> OneWay:
    """The inverse-variance combination of the holders' 1-way sums ``sums`` (``values``: each
    holder's value of the attribute per cell, flat) with its covariance at the plug-in ``f``
    (:attr:`MultiEstimate._one_way`)."""
    k = f.size
    v, w = _pairs(k)
    covariances = []
    for j, value in zip(holders, values, strict=True):
        single = value[None, :] == np.arange(k)[:, None]  # (k, cells)
        # the sum variance depends on the cells only through f_S (every oracle), so f_v
        # spread evenly over the cells of value v gives it at the plug-in f_v
        cells = f[value] / (value.size // k)
        both = m.sum_variance(n, j, np.concatenate([single, single[v] | single[w]]), cells)
        own, pair = both[:k], both[k:]
        cov = np.diag(own)
        cov[v, w] = cov[w, v] = (pair - own[v] - own[w]) / 2
        covariances.append(cov)
    inverse = 1.0 / (np.array([np.diag(c) for c in covariances]) + f / n)
    share = inverse / inverse.sum(axis=0)
    combined = sum(np.outer(s_i, s_i) * c for s_i, c in zip(share, covariances, strict=True))
    combined -= np.diag(f * (1 - (share**2).sum(axis=0))) / n
    return OneWay(holders, inverse, (share * np.asarray(sums)).sum(axis=0), combined)


@dataclasses.dataclass(frozen=True)
class MultiEstimate(MarginalEstimate):
    """Marginals of a multi-attribute campaign; ``marginal(name)`` / ``marginal(a, b[, c])``."""

    oracle: Multi = dataclasses.field(repr=False)

    @cached_property
    def _raw_tables(self) -> list[FloatArray]:
        m = self.oracle
        return [
            m.estimate(self.statistic, j).reshape([m.ks[a] for a in unit])
            for j, unit in enumerate(m.units)
        ]

    @cached_property
    def _plug_tables(self) -> list[FloatArray]:
        """Each raw table projected onto the simplex, flat (the plug-in frequencies of its
        exact standard errors), all in one padded projection."""
        return [t.reshape(-1) for t in _norm_sub_all([t[None] for t in self._raw_tables])]

    @cached_property
    def _one_way(self) -> dict[int, OneWay]:
        """Each attribute's 1-way marginal combined over the tables holding it.

        Table i's 1-way sums T_i(v) are unbiased with exact variance D_i(v) and, within the
        table, covariance (Var(T_i(v) + T_i(w)) - D_i(v) - D_i(w)) / 2 (``Multi.sum_variance``
        of disjoint cell sets; 0 for OUE's independent bits). A device reports one table, so
        for tables i != j, Cov(T_i(v), T_j(w)) = -[v = w] f_v / n: a device adds
        [A = i] u Y_i / n to T_i, the product of its two terms is 0, leaving -E[.] E[.]; over
        the devices, -sum (x_v / n)(x_w / n), and a device has one value. Per value the
        holders' covariance diag(D + f/n) - (f/n) 11^T has generalised least squares weights
        proportional to 1 / (D_i + f/n) (Sherman-Morrison). With the normalised weights w_i,
        Cov = sum_i W_i C_i W_i - diag(f (1 - sum_i w_i^2)) / n, whose diagonal is
        1 / sum_i 1/(D_i + f/n) - f/n. Plug-in f: the mean of the holders' Norm-Sub'ed sums."""
        m, n = self.oracle, self.statistic.n
        out = {}
        for a in range(m.d):
            holders = tuple(j for j, unit in enumerate(m.units) if a in unit)
            if not holders:
                continue
            sums, plugs, values = [], [], []
            for j in holders:
                raw = self._raw_tables[j]
                position = m.units[j].index(a)
                others = tuple(d for d in range(raw.ndim) if d != position)
                sums.append(raw.sum(axis=others))
                plugs.append(self._plug_tables[j].reshape(raw.shape).sum(axis=others))
                stride = int(np.prod(raw.shape[position + 1 :]))  # row-major: a's value
                values.append(np.arange(raw.size) // stride % m.ks[a])
            out[a] = _combine(m, n, holders, sums, values, np.mean(plugs, axis=0))
        return out

    @cached_property
    def _weights(self) -> Weights:
        """Each attribute's combination weights (:attr:`_one_way`): the anchors' and, for an
        attribute without one, the consistency step's."""
        return {a: one.weights for a, one in self._one_way.items()}

    @cached_property
    def _anchors(self) -> Anchors:
        """Each attribute's 1-way marginal: its combination projected onto the simplex (the
        consistent tables' anchors)."""
        raw = [t[None] for t in self._raw_tables]
        return {a: t[0] for a, t in simplex_anchors(raw, self.oracle.units, self._weights).items()}

    @cached_property
    def tables(self) -> list[FloatArray]:
        """The consistent tables (``marginals`` campaigns)."""
        units = list(self.oracle.units)
        return consistent_tables(
            self._raw_tables, units, weights=self._weights, anchors=self._anchors
        )

    @property
    def _replicate_tables(self) -> list[FloatArray]:
        """The consistent tables of each bootstrap replicate, (R, *table) each."""
        return self._replicates[0]

    @cached_property
    def _replicates(self) -> tuple[list[FloatArray], Anchors]:
        """Each bootstrap replicate's consistent tables, (R, *table) each, and its 1-way
        marginals (the anchors, with the estimate's weights), (R, k) each."""
        m = self.oracle
        rng = np.random.default_rng(self.seed)
        n, u, reps = self.statistic.n, m.u, self.replicates
        groups = rng.multinomial(n, np.full(u, 1.0 / u), size=reps)  # devices per table
        raw = []
        for j, (unit, table) in enumerate(zip(m.units, self.tables, strict=True)):
            oracle = m.oracles[j]
            g = np.clip(table.ravel(), 0.0, None)
            cells = rng.multinomial(groups[:, j], g / g.sum())  # (R, size)
            p, q = m.pq(j)
            support = oracle.bootstrap_support(cells, groups[:, j, None], p, q, rng)
            estimate = u * (support - groups[:, j, None] * q) / (n * (p - q))
            raw.append(estimate.reshape((reps, *[m.ks[a] for a in unit])))
        anchors = simplex_anchors(raw, m.units, self._weights)
        tables = consistent_batches(raw, list(m.units), CONSISTENCY_ROUNDS, self._weights, anchors)
        return tables, anchors

    def _holding_table(self, wanted: tuple[int, ...]) -> int | None:
        """The smallest table holding every attribute of ``wanted`` (None: reconstruct)."""
        m = self.oracle
        holders = [j for j, unit in enumerate(m.units) if set(wanted) <= set(unit)]
        return min(holders, key=lambda j: m.sizes[j]) if holders else None

    def _reconstruction_scope(self, wanted: tuple[int, ...]) -> tuple[int, ...]:
        """The attributes the maximum-entropy fit runs over: ``wanted`` and, while the domain
        stays within ``MAX_SCOPE_CELLS``, the attributes of the tables that touch them (so that
        (a, b) from tables (a, c) and (c, b) goes through c instead of assuming independence)."""
        m = self.oracle
        scope = list(wanted)
        for unit in sorted(m.units, key=lambda u: -sum(a in wanted for a in u)):
            if not any(a in wanted for a in unit):
                continue
            extra = [a for a in unit if a not in scope]
            if np.prod([m.ks[a] for a in scope + extra]) <= MAX_SCOPE_CELLS:
                scope += extra
        return tuple(scope)

    def raw_marginal(self, *names: str) -> Marginal:
        """The unbiased cells of a collected table holding ``names`` (summed over its other
        attributes), axes in the order asked, with their exact standard errors; one attribute:
        the inverse-variance combination of every table holding it (:attr:`_one_way`)."""
        m = self.oracle
        wanted = self._indices(names)
        if m.marginals is None:
            if len(names) != 1:
                raise ValueError(
                    "marginals of several attributes need the config's 'marginals' (protocol "
                    f"'smp'); got {', '.join(names)}"
                )
            return m.marginal(self.statistic, names[0])
        if len(wanted) == 1 and wanted[0] in self._one_way:
            one = self._one_way[wanted[0]]
            return Marginal(names[0], one.frequencies.copy(), np.sqrt(one.variance))
        table = self._holding_table(wanted)
        if table is None:
            raise ValueError(
                f"no table of the config's marginals covers {', '.join(names)}; the tables are "
                + "; ".join(",".join(t) for t in m.marginals)
            )
        unit, raw = m.units[table], self._raw_tables[table]
        plug = self._plug_tables[table]
        kept = tuple(m.ks[a] for a in wanted)
        order = [unit.index(a) for a in wanted]
        order += [d for d in range(raw.ndim) if d not in order]
        frequencies = project_onto(raw[None], unit, wanted)[0]
        if len(wanted) == len(unit):  # every cell alone: the cells' own exact variance
            variance = m.variance(self.statistic.n, table, plug).reshape(raw.shape)
            return Marginal(
                ",".join(names), frequencies, np.sqrt(np.maximum(variance, 0.0)).transpose(order)
            )
        cells = np.arange(raw.size).reshape(raw.shape)
        grouped = np.transpose(cells, order).reshape(int(np.prod(kept)), -1)
        masks = np.zeros((grouped.shape[0], raw.size), dtype=bool)
        masks[np.arange(grouped.shape[0])[:, None], grouped] = True
        variance = m.sum_variance(self.statistic.n, table, masks, plug)
        return Marginal(
            ",".join(names), frequencies, np.sqrt(np.maximum(variance, 0.0)).reshape(kept)
        )

    def marginal(self, *names: str) -> Marginal:
        """The marginal of one attribute or (with ``marginals``) of 2 or 3 attributes: one
        attribute held by tables, the projected combination of all of them (the anchor, with
        its exact standard errors); several, the consistent table holding them; else
        reconstructed by maximum entropy."""
        m = self.oracle
        wanted = self._indices(names)
        if m.marginals is None:
            return self.raw_marginal(*names)
        table = self._holding_table(wanted)
        if table is not None and len(wanted) == 1:  # the projected combination (the anchor)
            frequencies = self._anchors[wanted[0]].copy()
            replicas = (
                self._replicates[1][wanted[0]]
                if self.replicates >= 2
                else np.empty((0, *frequencies.shape))
            )
            low, high = self._intervals(replicas, frequencies)
            variance = self._one_way[wanted[0]].simplex_variance(frequencies)
            return Marginal(names[0], frequencies, np.sqrt(variance), low, high, "consistent")
        if table is not None:
            unit = m.units[table]
            frequencies = project_onto(self.tables[table][None], unit, wanted)[0]
            replicas = (
                project_onto(self._replicate_tables[table], unit, wanted)
                if self.replicates >= 2
                else np.empty((0, *frequencies.shape))
            )
            low, high = self._intervals(replicas, frequencies)
            exact = self.raw_marginal(*names).std_errors
            return Marginal(",".join(names), frequencies, exact, low, high, "consistent")
        if len(wanted) > 3:
            raise ValueError(f"marginals of at most 3 attributes; got {', '.join(names)}")
        units = list(m.units)
        scope = self._reconstruction_scope(wanted)
        try:
            fit = max_entropy(scope, m.ks, [t[None] for t in self.tables], units)
            frequencies = project_onto(fit, scope, wanted)[0]
        except ValueError as error:
            raise ValueError(
                f"no table of the config's marginals covers {', '.join(names)} and it cannot be "
                f"reconstructed: {error}; the tables are "
                + "; ".join(",".join(t) for t in m.marginals)
            ) from None
        if self.replicates >= 2:
            fits = max_entropy(scope, m.ks, self._replicate_tables, units)
            replicas = project_onto(fits, scope, wanted)
            std_errors = replicas.std(axis=0, ddof=1)
        else:
            replicas = np.empty((0, *frequencies.shape))
            std_errors = np.full(frequencies.shape, np.nan)
        low, high = self._intervals(replicas, frequencies)
        return Marginal(",".join(names), frequencies, std_errors, low, high, "max-entropy")

    def pairs(self) -> list[tuple[str, str]]:
        """Every pair of attributes that lies in a table or can be reconstructed."""
        m = self.oracle
        if m.marginals is None:
            return []
        covered = {a for unit in m.units for a in unit}
        return [
            (m.names[a], m.names[b])
            for a, b in itertools.combinations(range(m.d), 2)
            if a in covered and b in covered
        ]

    def to_dict(self) -> dict[str, Any]:
        z = z_value(self.confidence)
        out = []
        for name in self.oracle.names:
            try:
                m = self.marginal(name)
            except ValueError:
                continue  # an attribute in no table
            lows = m.ci_low if m.ci_low is not None else m.frequencies - z * m.std_errors
            highs = m.ci_high if m.ci_high is not None else m.frequencies + z * m.std_errors
            out.append(
                {
                    "attribute": name,
                    "method": m.method,
                    "items": [
                        {
                            "value": i,
                            "frequency": float(f),
                            "std_error": float(se),
                            "ci_low": float(lo),
                            "ci_high": float(hi),
                        }
                        for i, (f, se, lo, hi) in enumerate(
                            zip(m.frequencies, m.std_errors, lows, highs, strict=True)
                        )
                    ],
                }
            )
        document: dict[str, Any] = {
            "n": self.n,
            "mechanism": self.mechanism,
            "confidence": self.confidence,
            "marginals": out,
        }
        if self.oracle.marginals is not None:
            document["tables"] = [self._table(tuple(table)) for table in self.oracle.marginals]
            document["intervals"] = self._intervals_note()
        return json_safe(document)

    def format_table(self) -> str:
        document = self.to_dict()
        lines = [f"n = {self.n}; protocol {self.oracle.protocol}"]
        for entry in document["marginals"]:
            lines.append(f"{entry['attribute']}:")
            rows = [[item["value"], *interval_cells(item)] for item in entry["items"]]
            lines.append(aligned(["value", *INTERVAL_COLUMNS], rows, indent="  "))
        for table in document.get("tables", []):
            lines.append(f"table {', '.join(table['attributes'])}:")
            lines.append(cell_table(table))
        return "\n".join(lines)


def estimate_multi(
    mechanism: Multi,
    reports: ReportSource | AggregateStatistic,
    *,
    confidence: float = 0.95,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
) -> MultiEstimate:
    """The marginals of a ``multi`` campaign (:class:`MultiEstimate`); ``replicates`` and
    ``seed`` set the bootstrap of the post-processed cells (drawn on first use)."""
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    if replicates < 0 or replicates == 1:
        raise ValueError(f"replicates must be 0 or at least 2; got {replicates!r}")
    return MultiEstimate(
        statistic.n, confidence, mechanism.to_config(), statistic, mechanism, replicates, seed
    )
