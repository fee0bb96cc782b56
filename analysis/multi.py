"""Estimates of multi-attribute campaigns (SPL, SMP, RS+FD, CALM-style tables;
docs/math/richer-data.md).

Without ``marginals``, each attribute's 1-way marginal comes from the mechanism's unbiased
estimator with its exact fixed-population variance (``Multi.estimate``, ``Multi.variance``), at
the plug-in frequencies clipped to [0, 1].

With ``marginals`` (Zhang, Wang, Li, He & Chen, "CALM: consistent adaptive local marginal for
marginal release under local differential privacy", CCS 2018), devices are partitioned over the
tables and each table is estimated like an SMP attribute; the tables are then made consistent:
Norm-Sub (projection onto the simplex) of each table, then for every attribute shared by several
tables the 1-way sums T_i (over C_i cells each) are replaced by T* = sum(T_i/C_i)/sum(1/C_i),
adding (T* - T_i)/C_i to each of table i's cells, alternating a few times and ending with Norm-Sub.
The tables' standard errors are the exact ones of the raw (unbiased, pre-consistency) cells and
1-way sums: post-processing only averages and clips, so they are conservative up to the clipping.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any

import numpy as np

from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.multi import Marginal, Multi
from client_sdk.mechanisms.simplex import project_simplex

CONSISTENCY_ROUNDS = 10


def consistent_tables(
    tables: list[FloatArray], axes: list[tuple[int, ...]], rounds: int = CONSISTENCY_ROUNDS
) -> list[FloatArray]:
    """Norm-Sub and mutual consistency of marginal tables (``axes``: each table's attributes)."""
    out = [project_simplex(t.ravel())[0].reshape(t.shape) for t in tables]
    shared = sorted({a for ax in axes for a in ax if sum(a in other for other in axes) > 1})
    for _ in range(rounds):
        for attribute in shared:
            holders = [i for i, ax in enumerate(axes) if attribute in ax]
            sums, cells = [], []
            for i in holders:
                position = axes[i].index(attribute)
                others = tuple(d for d in range(out[i].ndim) if d != position)
                sums.append(out[i].sum(axis=others))
                cells.append(out[i].size // out[i].shape[position])
            weights = np.array([1.0 / c for c in cells])
            target = sum(w * t for w, t in zip(weights, sums, strict=True)) / weights.sum()
            for i, total, c in zip(holders, sums, cells, strict=True):
                position = axes[i].index(attribute)
                shape = [1] * out[i].ndim
                shape[position] = -1
                out[i] = out[i] + ((target - total) / c).reshape(shape)
        out = [project_simplex(t.ravel())[0].reshape(t.shape) for t in out]
    return out


@dataclasses.dataclass(frozen=True)
class MultiEstimate:
    """Marginals of a multi-attribute campaign; ``marginal(name)`` / ``marginal(a, b)``."""

    n: int
    confidence: float
    mechanism: dict[str, Any]
    statistic: AggregateStatistic
    oracle: Multi = dataclasses.field(repr=False)

    @cached_property
    def _raw_tables(self) -> list[FloatArray]:
        m = self.oracle
        return [
            m.estimate(self.statistic, j).reshape([m.ks[a] for a in unit])
            for j, unit in enumerate(m.units)
        ]

    @cached_property
    def tables(self) -> list[FloatArray]:
        """The consistent tables (``marginals`` campaigns)."""
        return consistent_tables(self._raw_tables, list(self.oracle.units))

    def _names_to_indices(self, names: tuple[str, ...]) -> tuple[int, ...]:
        m = self.oracle
        for name in names:
            if name not in m.names:
                raise ValueError(f"attribute must be one of {', '.join(m.names)}; got {name!r}")
        return tuple(m.names.index(n) for n in names)

    def marginal(self, *names: str) -> Marginal:
        """The marginal of one attribute, or (with ``marginals``) of one of the tables."""
        m = self.oracle
        wanted = self._names_to_indices(names)
        if m.marginals is None:
            if len(names) != 1:
                raise ValueError(
                    f"marginals of several attributes need the config's 'marginals' (protocol "
                    f"'smp'); got {names!r}"
                )
            return m.marginal(self.statistic, names[0])
        table = next((j for j, unit in enumerate(m.units) if set(wanted) <= set(unit)), None)
        if table is None or (len(wanted) > 1 and set(wanted) != set(m.units[table])):
            raise ValueError(
                f"no table of the config's marginals covers {', '.join(names)}; the tables are "
                + "; ".join(",".join(t) for t in m.marginals)
            )
        unit = m.units[table]
        consistent, raw = self.tables[table], self._raw_tables[table]
        plug = project_simplex(raw.ravel())[0].reshape(raw.shape)
        n = self.statistic.n
        if len(wanted) == len(unit):
            order = [unit.index(a) for a in wanted]
            se = np.sqrt(np.maximum(m.variance(n, table, plug.ravel()), 0.0)).reshape(raw.shape)
            return Marginal(
                ",".join(names),
                np.transpose(consistent, order),
                np.transpose(se, order),
            )
        position = unit.index(wanted[0])
        others = tuple(d for d in range(raw.ndim) if d != position)
        cells = np.arange(raw.size).reshape(raw.shape)
        masks = np.array(
            [
                np.isin(np.arange(raw.size), np.take(cells, v, axis=position))
                for v in range(raw.shape[position])
            ]
        )
        variance = m.sum_variance(n, table, masks, plug.ravel())
        return Marginal(names[0], consistent.sum(axis=others), np.sqrt(np.maximum(variance, 0.0)))

    def to_dict(self) -> dict[str, Any]:
        z = z_value(self.confidence)
        out = []
        for name in self.oracle.names:
            try:
                m = self.marginal(name)
            except ValueError:
                continue  # an attribute in no table
            out.append(
                {
                    "attribute": name,
                    "items": [
                        {
                            "value": i,
                            "frequency": float(f),
                            "std_error": float(se),
                            "ci_low": float(f - z * se),
                            "ci_high": float(f + z * se),
                        }
                        for i, (f, se) in enumerate(zip(m.frequencies, m.std_errors, strict=True))
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
            document["tables"] = [
                {
                    "attributes": list(table),
                    "frequencies": self.marginal(*table).frequencies,
                    "std_errors": self.marginal(*table).std_errors,
                }
                for table in self.oracle.marginals
            ]
        return json_safe(document)

    def format_table(self) -> str:
        lines = [f"n = {self.n}; protocol {self.oracle.protocol}"]
        for entry in self.to_dict()["marginals"]:
            lines.append(f"{entry['attribute']}:")
            for item in entry["items"]:
                lines.append(
                    f"  {item['value']:>6} {item['frequency']:>10.4f} {item['std_error']:>10.4f}"
                )
        return "\n".join(lines)


def estimate_multi(
    mechanism: Multi, reports: ReportSource | AggregateStatistic, *, confidence: float = 0.95
) -> MultiEstimate:
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot estimate from zero reports")
    return MultiEstimate(statistic.n, confidence, mechanism.to_config(), statistic, mechanism)
