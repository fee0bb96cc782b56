"""Estimates of Fourier-marginal campaigns (``fourier``; docs/math/marginals.md).

Cormode, Kulkarni & Srivastava, "Marginal release under local differential privacy", SIGMOD 2018.

:class:`FourierEstimate` (``estimate_kind`` ``"fourier"``), the public estimate object:

- ``coefficients``: the unbiased Fourier coefficients theta_hat (order <= the config's ``order``);
- ``raw_marginal(*names)``: the unbiased cells of the marginal on those attributes (up to
  ``order`` of them), shaped (2,) * k with axes in the order asked, and their exact standard
  errors (``Fourier.cell_variance`` at the cells projected onto the simplex);
- ``marginal(*names)``: the same cells post-processed: the marginals of ``order`` attributes made
  consistent (non-negative, summing to one, agreeing on shared attributes; the procedure of
  ``analysis.kinds.multi.estimate.consistent_tables``) and summed down, with the exact
  standard errors of the unbiased cells and bias-corrected percentile intervals of a seeded
  parametric bootstrap (reports drawn over the coefficients, ones per coefficient binomial at the
  estimated coefficient, the whole pipeline re-run). Raw cells from shared coefficients already
  agree on shared attributes and sum to one; only non-negativity needs the post-processing.
"""

from __future__ import annotations

import dataclasses
import itertools
from functools import cached_property
from typing import Any

import numpy as np

from analysis.kinds._common.marginals import CONSISTENCY_ROUNDS, MarginalEstimate, project_onto
from analysis.postprocess.bootstrap import DEFAULT_REPLICATES
from analysis.streaming import ReportSource, aggregate, json_safe
from analysis.text_tables import cell_table
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.fourier import Fourier
from client_sdk.mechanisms.multi import Marginal
from client_sdk.mechanisms.simplex import project_simplex

MAX_CONSISTENT_CELLS = 1 << 14
"""Above this many cells over all top-order tables each marginal is Norm-Sub'ed alone (still
non-negative and summing to one; agreement across tables then holds only before it)."""


def _norm_sub_rows(tables: FloatArray) -> FloatArray:
    flat = tables.reshape(-1, tables.shape[-1])
    return project_simplex(flat)[0].reshape(tables.shape)


def consistent_equal_tables(
    tables: FloatArray, sets: list[tuple[int, ...]], d: int, rounds: int = CONSISTENCY_ROUNDS
) -> FloatArray:
    """The consistency of ``analysis.kinds.multi.estimate.consistent_tables`` for binary tables
    of one size, all at once: ``tables`` (R, N, 2^o) over the attribute sets ``sets`` (cells
    row-major). With equal cell counts C the weights 1/C are equal: each shared 1-way sum moves to
    the tables' mean."""
    order = len(sets[0])
    cells = np.arange(1 << order)
    bit = np.array([(cells >> (order - 1 - p)) & 1 for p in range(order)], dtype=np.float64)
    half = float(1 << (order - 1))
    out = _norm_sub_rows(tables)
    holders = []
    for a in range(d):
        members = [i for i, s in enumerate(sets) if a in s]
        if len(members) > 1:
            holders.append((np.array(members), bit[[sets[i].index(a) for i in members]]))
    for _ in range(rounds):
        for rows, ones in holders:
            part = out[:, rows]  # (R, H, C)
            total = part.sum(axis=2)
            s1 = np.einsum("rhc,hc->rh", part, ones)
            s0 = total - s1
            t1 = s1.mean(axis=1, keepdims=True)
            t0 = s0.mean(axis=1, keepdims=True)
            out[:, rows] = (
                part
                + ((t1 - s1) / half)[..., None] * ones
                + ((t0 - s0) / half)[..., None] * (1 - ones)
            )
        out = _norm_sub_rows(out)
    return out


@dataclasses.dataclass(frozen=True)
class FourierEstimate(MarginalEstimate):
    """Marginals of a ``fourier`` campaign: ``marginal(a, b)``, ``raw_marginal(a, b)``."""

    oracle: Fourier = dataclasses.field(repr=False)

    @cached_property
    def coefficients(self) -> FloatArray:
        return self.oracle.estimate_coefficients(self.statistic)

    def _indices(self, names: tuple[str, ...]) -> tuple[int, ...]:
        """The attributes' indices, at most ``order`` of them."""
        indices = super()._indices(names)
        if len(names) > self.oracle.order:
            raise ValueError(
                f"marginals of at most order = {self.oracle.order} attributes; got "
                f"{', '.join(names)}"
            )
        return indices

    def _cells(self, attributes: tuple[int, ...], theta: FloatArray) -> FloatArray:
        """Cells of the marginal on ``attributes`` from coefficient rows theta (R, T)."""
        w, indices = self.oracle.marginal_matrix(attributes)
        k = len(attributes)
        cells = 1.0 / (1 << k) + theta[:, indices] @ w.T
        return cells.reshape((theta.shape[0],) + (2,) * k)

    def raw_marginal(self, *names: str) -> Marginal:
        """Unbiased cells with their exact standard errors."""
        attributes = self._indices(names)
        cells = self._cells(attributes, self.coefficients[None])[0]
        plug = project_simplex(cells.ravel())[0].reshape(cells.shape)
        variance = self.oracle.cell_variance(self.statistic.n, len(attributes), plug)
        return Marginal(",".join(names), cells, np.sqrt(np.maximum(variance, 0.0)))

    @cached_property
    def _top_sets(self) -> list[tuple[int, ...]]:
        m = self.oracle
        return list(itertools.combinations(range(m.d), m.order))

    def _consistent(self, theta: FloatArray) -> list[FloatArray] | None:
        """The top-order tables of coefficient rows theta, made consistent (None: too many)."""
        order = self.oracle.order
        if len(self._top_sets) << order > MAX_CONSISTENT_CELLS:
            return None
        raw = np.stack([self._cells(s, theta) for s in self._top_sets], axis=1)
        tables = consistent_equal_tables(
            raw.reshape(theta.shape[0], len(self._top_sets), -1), self._top_sets, self.oracle.d
        )
        shape = (theta.shape[0],) + (2,) * order
        return [tables[:, i].reshape(shape) for i in range(len(self._top_sets))]

    def _processed(
        self, attributes: tuple[int, ...], theta: FloatArray, tables: list[FloatArray] | None
    ) -> FloatArray:
        """The post-processed marginal of each coefficient row (R, (2,) * k)."""
        if tables is None:
            raw = self._cells(attributes, theta)
            flat = raw.reshape(raw.shape[0], -1)
            return project_simplex(flat)[0].reshape(raw.shape)
        holder = next(i for i, s in enumerate(self._top_sets) if set(attributes) <= set(s))
        return project_onto(tables[holder], self._top_sets[holder], attributes)

    @cached_property
    def _tables(self) -> list[FloatArray] | None:
        return self._consistent(self.coefficients[None])

    @cached_property
    def _replicate_theta(self) -> FloatArray:
        m = self.oracle
        rng = np.random.default_rng(self.seed)
        t, n = m.coefficients, self.statistic.n
        totals = rng.multinomial(n, np.full(t, 1.0 / t), size=self.replicates)
        theta = np.clip(self.coefficients, -1.0, 1.0)
        ones = rng.binomial(totals, (1.0 - theta / m.scale) / 2.0)
        return t * m.scale * (totals - 2 * ones) / n

    @cached_property
    def _replicate_tables(self) -> list[FloatArray] | None:
        return self._consistent(self._replicate_theta)

    def marginal(self, *names: str) -> Marginal:
        """Post-processed cells (non-negative, summing to one, consistent across tables), the
        exact standard errors of the unbiased cells and bootstrap intervals."""
        attributes = self._indices(names)
        frequencies = self._processed(attributes, self.coefficients[None], self._tables)[0]
        exact = self.raw_marginal(*names).std_errors
        replicas = (
            self._processed(attributes, self._replicate_theta, self._replicate_tables)
            if self.replicates >= 2
            else np.empty((0, *frequencies.shape))
        )
        low, high = self._intervals(replicas, frequencies)
        return Marginal(",".join(names), frequencies, exact, low, high, "consistent")

    def to_dict(self) -> dict[str, Any]:
        m = self.oracle
        pairs = list(itertools.combinations(m.names, min(2, m.order)))
        tables = [self._table(names) for names in pairs]
        return json_safe(
            {
                "n": self.n,
                "mechanism": self.mechanism,
                "confidence": self.confidence,
                "coefficients": [
                    {"attributes": [m.names[a] for a in s], "value": float(v)}
                    for s, v in zip(m.masks, self.coefficients, strict=True)
                ],
                "tables": tables,
                "intervals": self._intervals_note(),
            }
        )

    def format_table(self) -> str:
        m = self.oracle
        lines = [f"n = {self.n}; Fourier marginals of order {m.order} over {m.d} attributes"]
        for table in self.to_dict()["tables"]:
            lines.append(f"{', '.join(table['attributes'])}:")
            lines.append(cell_table(table))
        return "\n".join(lines)


def estimate_fourier(
    mechanism: Fourier,
    reports: ReportSource | AggregateStatistic,
    *,
    confidence: float = 0.95,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
) -> FourierEstimate:
    """The marginals of a ``fourier`` campaign (:class:`FourierEstimate`)."""
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    if replicates < 0 or replicates == 1:
        raise ValueError(f"replicates must be 0 or at least 2; got {replicates!r}")
    return FourierEstimate(
        statistic.n, confidence, mechanism.to_config(), statistic, mechanism, replicates, seed
    )
