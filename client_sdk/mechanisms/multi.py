"""Several categorical attributes in one report: SPL, SMP and RS+FD (docs/math/richer-data.md).

Wang et al., "Locally differentially private protocols for frequency estimation", USENIX Security
2017 (the oracles); Arcolezi, Couchot, Al Bouna & Xiao, "Random sampling plus fake data:
multidimensional frequency estimates with local differential privacy", CIKM 2021 (RS+FD).

A value is a tuple of d attribute indices (``perturb`` takes an int array of shape (n, d), in the
configured order). Privacy is stated for *whole tuples*: any two tuples are neighbours.

* ``spl``: every attribute through the better of GRR and OUE at epsilon/d (basic composition).
* ``smp``: the device draws one attribute j uniformly (from ``rng``, never from the values) and
  sends (j, oracle_j(x_j)) at the full epsilon; j is public and independent of the tuple, so the
  report is epsilon-LDP.
* ``rsfd``: the device draws j uniformly and hidden, sends GRR at epsilon' for x_j and a uniform
  fake value for every other attribute. As published (epsilon' = ln(d(e^eps - 1) + 1)) the ratio
  between tuples that differ in every attribute reaches e^epsilon', above e^eps. Here epsilon' is
  calibrated so that the exact worst ratio, sum_j k_j p_j / sum_j k_j q_j over the implemented GRR
  probabilities, is at most e^eps (``channel_matrices`` enumerates every pair of tuples). Since
  p_j = e^epsilon' q_j, that ratio is e^epsilon' whatever the k_j: the calibration lands on
  epsilon' = epsilon (up to the samplers' rounding), i.e. no amplification from the sampling under
  this definition.

Estimates: SPL is the oracles' own estimator; SMP and RS+FD are unbiased with
p*, q* as in docs/math/richer-data.md, each with its exact fixed-population variance.

Marginal tables (``"marginals"``, protocol ``smp``; Zhang, Wang, Li, He & Chen, "CALM", CCS
2018; docs/math/marginals.md): the units a device samples are tables, each reported with the
oracle of least exact variance for its size (``table_oracle``); ``{"cover": 2}`` chooses the
tables (``choose_tables``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import (
    decode_bits,
    encode_bits,
    is_plain_int,
    widest_int,
    wire_length,
)
from client_sdk.mechanisms.attributes import MAX_K, Attributes
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.local_hashing import OLH
from client_sdk.mechanisms.local_hashing import REPORT_DTYPE as LH_REPORT_DTYPE
from client_sdk.mechanisms.memoization import DeviceKeyed, KeyedSource, check_keyed_source
from client_sdk.mechanisms.unary import OUE, transposed_column_counts
from client_sdk.randomness import RandomSource, uniform_below, uniform_below_32

PROTOCOLS = ("spl", "smp", "rsfd")
MAX_TABLES = 2016
"""At most this many marginal tables (every pair of 64 attributes)."""
MAX_ENUMERATED = 1 << 12
"""``channel_matrices`` enumerates at most this many tuples (inputs and outputs)."""
_CHUNK_ROWS = 1 << 14
"""Devices (reports) per chunk when SMP records are grouped by unit or put back: 16384 records
of up to a few dozen bytes stay in a core's L2 cache, where moving whole records is cheap (a
gather or scatter over the whole array misses the cache on every record)."""


_ORACLE_CLASSES: dict[str, type[FrequencyOracle]] = {"grr": GRR, "oue": OUE, "olh": OLH}
"""The table oracles by config name, imported directly (the registry's lazy loading would make
an import circle: it names this module)."""


def _oracle(name: str, epsilon: float, k: int) -> FrequencyOracle:
    cls: Any = _ORACLE_CLASSES[name]
    oracle = cls(epsilon, k)
    assert isinstance(oracle, FrequencyOracle)
    return oracle


def best_oracle(epsilon: float, k: int) -> FrequencyOracle:
    """GRR or OUE over k items at epsilon, whichever has the smaller total variance."""
    return min((_oracle(n, epsilon, k) for n in ("grr", "oue")), key=lambda o: o.total_variance())


TABLE_ORACLES = ("grr", "oue", "olh")


def table_oracle(epsilon: float, cells: int) -> FrequencyOracle:
    """The oracle of a marginal table (CALM): GRR, OUE or OLH over its cells, the smallest exact
    total variance (ties in that order). OLH's integer g and its f term make it the best by up
    to a few percent at some (eps, cells), e.g. eps = 2 and 4 cells."""
    candidates = (_oracle(n, epsilon, cells) for n in TABLE_ORACLES)
    return min(candidates, key=lambda o: o.total_variance())


COST_TOLERANCE = 0.005
"""``cheap_table_oracle`` takes the cheapest oracle whose exact total variance is within this
fraction of the smallest (0.5% in variance: at most 0.25% in standard error)."""


def cheap_table_oracle(epsilon: float, cells: int, tolerance: float = COST_TOLERANCE) -> str:
    """The oracle ``{"cover": 2}`` gives a table: the first of GRR, OUE, OLH (the order of their
    cost to run: GRR one randomized response, OUE c bits, OLH a 64-bit seed and c hash
    evaluations a report at the collector) whose exact total variance is at most (1 +
    tolerance) times the least (docs/math/marginals.md)."""
    variances = [_oracle(n, epsilon, cells).total_variance() for n in TABLE_ORACLES]
    least = min(variances)
    return next(
        n for n, v in zip(TABLE_ORACLES, variances, strict=True) if v <= least * (1 + tolerance)
    )


def _worst_rsfd_ratio(epsilon_prime: float, ks: Sequence[int]) -> float:
    """max over tuples and outputs of P[y|x]/P[y|x'] for RS+FD-GRR at epsilon' (implemented)."""
    grrs = [_oracle("grr", epsilon_prime, k) for k in ks]
    high = sum(k * g.p_star for k, g in zip(ks, grrs, strict=True))
    low = sum(k * g.q_star for k, g in zip(ks, grrs, strict=True))
    return high / low


def calibrate_rsfd(epsilon: float, ks: Sequence[int]) -> float:
    """The largest epsilon' (to 1e-12 relative) whose whole-tuple ratio is at most e^epsilon."""
    target = math.exp(epsilon)
    low, high = epsilon / 2, math.log(len(ks) * math.expm1(epsilon) + 1) + 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if _worst_rsfd_ratio(mid, ks) <= target:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return low


def cover_pairs(ks: Sequence[int], size: int) -> list[tuple[int, ...]]:
    """A greedy set of ``size``-attribute tables covering every pair of attributes.

    Deterministic: the first uncovered pair (in order) starts a table, which then takes, one at a
    time, the attribute covering most uncovered pairs with it (ties: the smaller product of k, then
    the lower index) while the table stays within ``MAX_K`` cells.
    """
    d = len(ks)
    uncovered = set(itertools.combinations(range(d), 2))
    tables: list[tuple[int, ...]] = []
    while uncovered:
        a, b = min(uncovered)
        table = [a, b]
        while len(table) < size:
            cells = math.prod(ks[j] for j in table)
            gains = [
                (-sum((min(c, t), max(c, t)) in uncovered for t in table), ks[c], c)
                for c in range(d)
                if c not in table and cells * ks[c] <= MAX_K
            ]
            if not gains:
                break
            table.append(min(gains)[2])
        table.sort()
        tables.append(tuple(table))
        uncovered -= set(itertools.combinations(table, 2))
    return tables


def pair_cell_variance(
    epsilon: float, ks: Sequence[int], tables: Sequence[tuple[int, ...]]
) -> float:
    """Mean exact variance (times n) of a 2-way cell over every pair of attributes, each from the
    table holding it with the smallest variance, at uniform frequencies: the noise term by which
    ``choose_tables`` compares designs (docs/math/marginals.md)."""
    m = len(tables)
    total, cells = 0.0, 0
    for a, b in itertools.combinations(range(len(ks)), 2):
        best = math.inf
        for table in tables:
            if a not in table or b not in table:
                continue
            size = math.prod(ks[j] for j in table)
            oracle = table_oracle(epsilon, size)
            summed = size // (ks[a] * ks[b])
            f_cell, f_s = 1.0 / size, 1.0 / (ks[a] * ks[b])
            p, q = oracle.p_star, oracle.q_star
            if oracle.name != "grr":  # independent supports (OLH: up to the hash family)
                noise = summed * (f_cell * p * (1 - p) + (1 - f_cell) * q * (1 - q))
            else:
                p1, p0 = p + (summed - 1) * q, summed * q
                noise = f_s * p1 * (1 - p1) + (1 - f_s) * p0 * (1 - p0)
            best = min(best, m * noise / (p - q) ** 2 + (m - 1) * f_s)
        total += best * ks[a] * ks[b]
        cells += ks[a] * ks[b]
    return total / cells


def choose_tables(
    epsilon: float, ks: Sequence[int], size: int | None = None
) -> list[tuple[int, ...]]:
    """CALM's choice of the marginal tables (Zhang et al., CCS 2018) for every 2-way marginal.

    Each candidate design is a greedy cover of every pair by tables of ``size`` attributes
    (``cover_pairs``), so no 2-way marginal needs reconstruction and the noise/reconstruction
    trade-off reduces to the noise: bigger tables mean fewer groups of devices (m) but cells
    summed per 2-way cell. Without ``size``, the size in 2..min(d, 8) with the smallest
    ``pair_cell_variance`` (exact at uniform frequencies) wins; ties go to the smaller size.
    """
    sizes = [size] if size is not None else list(range(2, min(len(ks), 8) + 1))
    designs = [cover_pairs(ks, s) for s in sizes]
    scores = [pair_cell_variance(epsilon, ks, design) for design in designs]
    return designs[int(np.argmin(scores))]


@dataclasses.dataclass(frozen=True)
class Marginal:
    """A marginal: frequencies and standard errors, shaped by its attributes' k (axes in order)."""

    name: str
    frequencies: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray | None = None
    """Interval bounds where the cells are post-processed (bootstrap; else None)."""
    ci_high: FloatArray | None = None
    method: str = "unbiased"
    """How the cells were obtained: ``unbiased`` (exact standard errors), ``consistent`` (tables
    made consistent), ``max-entropy`` (reconstructed), both with bootstrap intervals."""


@dataclasses.dataclass(frozen=True, eq=True)
class Multi(DeviceKeyed, Mechanism):
    """Config: ``{"mechanism": "multi", "epsilon", "protocol": "spl"|"smp"|"rsfd",
    "attributes": [{"name": "os", "k": 4, "labels": [...]}, ...]}`` (``labels`` optional: the
    labels a device records for the attribute; without them it records indices)."""

    name: ClassVar[str] = "multi"
    value_kind: ClassVar[Literal["category", "number", "string", "record"]] = "record"
    estimate_kind: ClassVar[str] = "multi"
    uses_device_choices: ClassVar[bool] = True
    """SMP's and RS+FD's sampled unit: one per device and campaign from the client's keyed
    source (``permanent``), from ``rng`` per report in simulation; never from the values."""

    epsilon: float
    protocol: str
    attributes: Any
    marginals: Any = None
    table_oracles: Any = None
    """Each table's oracle (``"grr"``, ``"oue"`` or ``"olh"``), in the order of ``marginals``.
    Absent with an explicit list of tables: ``table_oracle`` (least exact variance), the meaning
    of every config written before the field; with ``{"cover": 2}``: ``cheap_table_oracle``,
    written out by ``to_config``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"protocol must be one of {', '.join(PROTOCOLS)}; got {self.protocol!r}"
            )
        parsed = Attributes.parse(self.attributes)
        names = list(parsed.names)
        object.__setattr__(self, "attributes", parsed)
        chosen = isinstance(self.marginals, Mapping)
        if self.marginals is not None:
            object.__setattr__(self, "marginals", self._check_marginals(self.marginals, names))
        if self.table_oracles is not None:
            object.__setattr__(self, "table_oracles", self._check_table_oracles())
        elif chosen:
            picked = tuple(cheap_table_oracle(self.epsilon, c) for c in self.sizes)
            object.__setattr__(self, "table_oracles", picked)

    def _check_table_oracles(self) -> tuple[str, ...]:
        given = self.table_oracles
        if self.marginals is None:
            raise ValueError(f"table_oracles needs marginals; got table_oracles {given!r}")
        tables = len(self.marginals)
        if not isinstance(given, (list, tuple)) or len(given) != tables:
            raise ValueError(
                f"table_oracles must list one oracle per table ({tables}); got {given!r}"
            )
        for index, name in enumerate(given):
            if name not in TABLE_ORACLES:
                raise ValueError(
                    f"table_oracles[{index}] must be one of {', '.join(TABLE_ORACLES)}; "
                    f"got {name!r}"
                )
        return tuple(given)

    def _check_marginals(self, marginals: Any, names: list[str]) -> tuple[tuple[str, ...], ...]:
        if self.protocol != "smp":
            raise ValueError(
                "marginals are estimated by partitioning devices over the tables (protocol "
                f"'smp'); got marginals with protocol {self.protocol!r}"
            )
        if isinstance(marginals, Mapping):
            return self._chosen_marginals(marginals, names)
        if not isinstance(marginals, (list, tuple)) or not 1 <= len(marginals) <= MAX_TABLES:
            raise ValueError(
                'marginals must be a list of attribute lists or {"cover": 2, "size": ...}; '
                f"got {marginals!r}"
            )
        tables: list[tuple[str, ...]] = []
        for index, table in enumerate(marginals):
            if (
                not isinstance(table, (list, tuple))
                or not 2 <= len(table) <= 8
                or len(set(map(str, table))) != len(table)
            ):
                raise ValueError(
                    f"marginals[{index}] must list 2 to 8 distinct attributes; got {table!r}"
                )
            for name in table:
                if name not in names:
                    raise ValueError(
                        f"marginals[{index}]: attribute must be one of {', '.join(names)}; "
                        f"got {name!r}"
                    )
            size = math.prod(k for n, k, _ in self.attributes if n in table)
            if size > MAX_K:
                raise ValueError(f"marginals[{index}] has {size} cells, more than {MAX_K}")
            tables.append(tuple(table))
        if len(set(tables)) != len(tables):
            raise ValueError(f"marginals must be distinct; got {marginals!r}")
        return tuple(tables)

    def _chosen_marginals(
        self, spec: Mapping[str, Any], names: list[str]
    ) -> tuple[tuple[str, ...], ...]:
        """``{"cover": 2}`` (optionally ``"size": l``): CALM's choice of the tables."""
        unknown = sorted(set(map(str, spec)) - {"cover", "size"})
        if unknown or "cover" not in spec:
            raise ValueError(
                'marginals as a mapping must be {"cover": 2} and optionally "size"; got '
                f"keys {sorted(map(str, spec))}"
            )
        if spec["cover"] != 2 or isinstance(spec["cover"], bool):
            raise ValueError(f"marginals.cover must be 2 (every pair); got {spec['cover']!r}")
        if len(names) < 2:
            raise ValueError(f"marginals.cover needs at least 2 attributes; got {len(names)}")
        size = spec.get("size")
        if size is not None:
            size = check_int(size, "marginals.size", minimum=2, maximum=min(len(names), 8))
        ks = self.attributes.ks
        tables = choose_tables(self.epsilon, ks, size)
        return tuple(tuple(names[a] for a in table) for table in tables)

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "protocol": self.protocol,
            "attributes": self.attributes.to_config(),
        }
        if self.marginals is not None:
            config["marginals"] = [list(table) for table in self.marginals]
        if self.table_oracles is not None:
            config["table_oracles"] = list(self.table_oracles)
        return config

    def encode_records(self, records: Sequence[Any]) -> npt.NDArray[np.int64]:
        """Records (mappings attribute -> label) as (n, d) tuples (``Attributes.encode``)."""
        return self.attributes.encode(records)

    # ---- structure ---------------------------------------------------------------------------

    @cached_property
    def names(self) -> tuple[str, ...]:
        return self.attributes.names

    @cached_property
    def ks(self) -> tuple[int, ...]:
        return self.attributes.ks

    @property
    def d(self) -> int:
        return len(self.attributes)

    @cached_property
    def units(self) -> tuple[tuple[int, ...], ...]:
        """What a report covers: one attribute each, or (with ``marginals``) one table each, as
        attribute indices."""
        if self.marginals is None:
            return tuple((j,) for j in range(self.d))
        return tuple(tuple(self.names.index(n) for n in table) for table in self.marginals)

    @property
    def u(self) -> int:
        return len(self.units)

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """Cells of each unit (k_j for an attribute, the product for a table)."""
        return tuple(math.prod(self.ks[j] for j in unit) for unit in self.units)

    def unit_values(self, x: npt.NDArray[np.int64], unit: int) -> npt.NDArray[np.int64]:
        """The mixed-radix cell of each tuple in a unit (row-major over its attributes)."""
        out = np.zeros(x.shape[0], dtype=np.int64)
        for j in self.units[unit]:
            out = out * self.ks[j] + x[:, j]
        return out

    @property
    def k(self) -> int:
        """Cells over all units (the statistic's support counts)."""
        return sum(self.sizes)

    @cached_property
    def epsilon_prime(self) -> float:
        """RS+FD's calibrated GRR epsilon (``calibrate_rsfd``); unused by SPL and SMP."""
        return calibrate_rsfd(self.epsilon, self.ks)

    @cached_property
    def oracles(self) -> tuple[FrequencyOracle, ...]:
        """The oracle of each attribute: at eps/d (SPL), eps (SMP) or GRR at eps' (RS+FD)."""
        if self.protocol == "spl":
            return tuple(best_oracle(self.epsilon / self.d, k) for k in self.ks)
        if self.table_oracles is not None:
            return tuple(
                _oracle(name, self.epsilon, size)
                for name, size in zip(self.table_oracles, self.sizes, strict=True)
            )
        if self.protocol == "smp" and self.marginals is not None:
            return tuple(table_oracle(self.epsilon, size) for size in self.sizes)
        if self.protocol == "smp":
            return tuple(best_oracle(self.epsilon, size) for size in self.sizes)
        return tuple(_oracle("grr", self.epsilon_prime, k) for k in self.ks)

    @cached_property
    def offsets(self) -> npt.NDArray[np.int64]:
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    @cached_property
    def _bytes(self) -> int:
        return max([1] + [(o.k + 7) // 8 for o in self.oracles if o.name == "oue"])

    @cached_property
    def report_dtype(self) -> np.dtype[Any]:
        """One slot per unit (SPL, RS+FD), or the sampled unit's only (SMP)."""
        d = 1 if self.protocol == "smp" else self.u
        fields: list[Any] = [
            ("attribute", np.int64),
            ("values", np.int64, (d,)),
            ("bits", np.uint8, (d, self._bytes)),
        ]
        if any(o.name == "olh" for o in self.oracles):  # tables only, hence SMP: one seed
            fields.append(("seed", np.uint64))
        return np.dtype(fields)

    def check_tuples(self, values: Any) -> npt.NDArray[np.int64]:
        array = np.asarray(values)
        if array.ndim != 2 or array.shape[1] != self.d:
            raise ValueError(f"values must have shape (n, {self.d}); got shape {array.shape}")
        if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
            raise ValueError(f"values must be integers; got dtype {array.dtype}")
        array = np.ascontiguousarray(array, dtype=np.int64)
        # one comparison: a negative value viewed as unsigned is at least 2**63; over rows of
        # `rep` tuples against the limits repeated (numpy's loops are slow over rows of d)
        unsigned, limits = array.view(np.uint64), np.array(self.ks, dtype=np.uint64)
        rep = max(1, 256 // self.d)
        whole = array.shape[0] - array.shape[0] % rep
        if (unsigned[:whole].reshape(-1, rep * self.d) >= np.tile(limits, rep)).any() or (
            unsigned[whole:] >= limits
        ).any():
            outside = unsigned >= limits
            row, j = (int(v) for v in np.argwhere(outside)[0])
            name, k, _ = self.attributes[j]
            raise ValueError(f"values[{row}, {j}] ({name}) must be in [0, {k})")
        return array

    # ---- device side -------------------------------------------------------------------------

    def _order(self, units: npt.ArrayLike) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """Rows sorted by unit (one stable radix sort of the small unit numbers) and where each
        unit's rows start: unit j's rows are ``order[bounds[j]:bounds[j + 1]]``."""
        u = np.asarray(units).astype(np.int16)
        order = np.argsort(u, kind="stable")
        return order, np.searchsorted(u[order], np.arange(self.u + 1, dtype=np.int16))

    def _groups(self, units: npt.ArrayLike) -> list[npt.NDArray[np.intp]]:
        """The row indices of each unit."""
        order, bounds = self._order(units)
        return [order[bounds[j] : bounds[j + 1]] for j in range(self.u)]

    @staticmethod
    def _sample(oracle: FrequencyOracle, cells: Any, rng: RandomSource | None) -> Reports:
        """A unit's oracle reports from the oracle's compact sampler (GRR, OLH, OUE: the same
        distribution as its ``perturb`` from fewer random bits; a unit's reports are never
        memoized, so they need not follow ``perturb``'s stream)."""
        compact = getattr(oracle, "perturb_compact", None)
        if compact is not None:
            return compact(cells, rng=rng)
        return oracle.perturb(cells, rng=rng)

    def _slot(self, j: int) -> int:
        """Where unit j's payload sits in a report."""
        return 0 if self.protocol == "smp" else j

    def _empty_reports(self, n: int) -> Reports:
        reports = np.zeros(n, dtype=self.report_dtype)
        reports["attribute"] = -1
        return reports

    def _put(self, reports: Reports, rows: Any, j: int, out: Reports) -> None:
        if self.oracles[j].name == "olh":
            reports["seed"][rows] = out["seed"]
            reports["values"][rows, self._slot(j)] = out["y"]
        elif self.oracles[j].name == "oue":
            bits = np.zeros((len(out), self._bytes), dtype=np.uint8)
            bits[:, : out.shape[1]] = out
            reports["bits"][rows, self._slot(j)] = bits
        else:
            reports["values"][rows, self._slot(j)] = out

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        x = self.check_tuples(values)
        n = x.shape[0]
        if self.protocol == "spl":
            reports = self._empty_reports(n)
            for j, oracle in enumerate(self.oracles):
                self._put(reports, slice(None), j, self._sample(oracle, x[:, j], rng))
            return reports
        if permanent is not None:
            keys = check_keyed_source(permanent, self.name)
            device_unit = int(uniform_below(keys.source("multi:unit", 0), self.u, 1)[0])
            sampled = np.full(n, device_unit, dtype=np.int64)
        else:
            sampled = uniform_below_32(rng, self.u, n)  # exactly uniform, from 16-bit lanes
        if self.protocol == "smp":
            return self._perturb_smp(x, sampled, rng)
        reports = self._empty_reports(n)
        groups = self._groups(sampled)
        for j, oracle in enumerate(self.oracles):
            rows = groups[j]
            if rows.size:
                self._put(reports, rows, j, self._sample(oracle, self.unit_values(x[rows], j), rng))
            if self.protocol == "rsfd":
                fake = np.flatnonzero(sampled != j)
                reports["values"][fake, j] = uniform_below_32(rng, self.ks[j], fake.size)
        return reports  # RS+FD's sampled attribute stays hidden (never stored)

    def _perturb_smp(
        self, x: npt.NDArray[np.int64], sampled: npt.NDArray[np.int64], rng: RandomSource | None
    ) -> Reports:
        """SMP's reports: each device's unit (public) and that unit's oracle report. The devices
        are sorted by unit once and each unit's oracle reports all its devices in one call (in
        device order); then, chunk by chunk of devices, each unit's reports of the chunk's
        devices are copied to a small buffer of records (grouped by unit) and the chunk's records
        are gathered from it in device order: every move of whole records stays in the cache."""
        n = x.shape[0]
        order, bounds = self._order(sampled)
        # the tuples as bytes where every k fits (checked values): the per-unit gathers then
        # read an array 8 times smaller, mostly from the cache (about half their time)
        flat = (x.astype(np.uint8) if max(self.ks) <= 256 else x).reshape(-1)
        outs: list[Any] = []
        for j, oracle in enumerate(self.oracles):
            low, high = int(bounds[j]), int(bounds[j + 1])
            if low == high:
                outs.append(None)
                continue
            starts = order[low:high] * self.d  # each device's row in the flat tuples
            cells = np.take(flat, starts + self.units[j][0]).astype(np.int64)
            for a in self.units[j][1:]:
                cells = cells * self.ks[a] + np.take(flat, starts + a)
            outs.append(self._sample(oracle, cells, rng))
        reports = np.empty(n, dtype=self.report_dtype)
        record = np.dtype((np.void, reports.dtype.itemsize))
        whole = reports.view(record)
        edges = np.append(np.arange(0, n, _CHUNK_ROWS), n)
        # cuts[j, c]: where chunk c's devices start among unit j's (ascending) devices
        cuts = np.stack(
            [np.searchsorted(order[bounds[j] : bounds[j + 1]], edges) for j in range(self.u)]
        )
        buffer = np.empty(int(np.diff(edges).max(initial=0)), dtype=self.report_dtype)
        raw, records = buffer.view(np.uint8), buffer.view(record)
        position = np.empty(buffer.size, dtype=np.intp)
        units = np.arange(self.u)
        for c in range(edges.size - 1):
            s, e = int(edges[c]), int(edges[c + 1])
            raw.fill(0)
            sizes = cuts[:, c + 1] - cuts[:, c]
            buffer["attribute"][: e - s] = np.repeat(units, sizes)
            p = 0
            for j, oracle in enumerate(self.oracles):
                c0, c1 = int(cuts[j, c]), int(cuts[j, c + 1])
                if c0 == c1:
                    continue
                segment, out = buffer[p : p + c1 - c0], outs[j][c0:c1]
                if oracle.name == "oue":
                    segment["bits"][:, 0, : out.shape[1]] = out
                elif oracle.name == "olh":
                    segment["seed"], segment["values"][:, 0] = out["seed"], out["y"]
                else:
                    segment["values"][:, 0] = out
                p += c1 - c0
            held = np.concatenate(  # the device of each buffer record
                [order[bounds[j] + cuts[j, c] : bounds[j] + cuts[j, c + 1]] for j in units]
            )
            position[held - s] = np.arange(e - s)
            np.take(records, position[: e - s], out=whole[s:e])  # a gather: faster than a scatter
        return reports

    # ---- wire --------------------------------------------------------------------------------

    def _payload(self, row: Any, j: int) -> Any:
        oracle = self.oracles[j]
        if oracle.name == "oue":
            return encode_bits(row["bits"][self._slot(j)][None, : (oracle.k + 7) // 8])[0]
        if oracle.name == "olh":
            return oracle.to_wire(self._hashed(row["seed"], row["values"][self._slot(j)]))[0]
        return int(row["values"][self._slot(j)])

    @staticmethod
    def _hashed(seeds: Any, ys: Any) -> Reports:
        """OLH's own reports (seed, y) from a table's slots."""
        out = np.empty(np.size(seeds), dtype=LH_REPORT_DTYPE)
        out["seed"], out["y"] = np.ravel(seeds), np.ravel(ys)
        return out

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        reports = [o.largest_wire_payload() for o in self.oracles]
        if self.protocol == "smp":
            return [widest_int(0, self.u), max(reports, key=wire_length)]
        return reports

    def to_wire(self, reports: Reports) -> list[Any]:
        """SPL, RS+FD: a list of d payloads; SMP: [attribute, payload]. A payload is an integer
        (GRR) or a base64 bit vector (OUE)."""
        out: list[Any] = []
        for row in reports:
            if self.protocol == "smp":
                j = int(row["attribute"])
                out.append([j, self._payload(row, j)])
            else:
                out.append([self._payload(row, j) for j in range(self.d)])
        return out

    def _unit_name(self, j: int) -> str:
        return ",".join(self.names[a] for a in self.units[j])

    def _parse_one(self, value: Any, j: int, row: Any) -> str | None:
        oracle = self.oracles[j]
        if oracle.name == "oue":
            packed, bad = decode_bits([value], oracle.k)
            if bad:
                return f"{self._unit_name(j)}: {bad[0].reason}"
            row["bits"][self._slot(j)][: packed.shape[1]] = packed[0]
            return None
        if oracle.name == "olh":
            hashed, bad = oracle.parse_wire([value])
            if bad:
                return f"{self._unit_name(j)}: {bad[0].reason}"
            row["seed"], row["values"][self._slot(j)] = hashed["seed"][0], hashed["y"][0]
            return None
        if not is_plain_int(value) or not 0 <= int(value) < oracle.k:
            return f"{self._unit_name(j)}: report must be an integer in [0, {oracle.k})"
        row["values"][self._slot(j)] = int(value)
        return None

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        good: list[Any] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            row = np.zeros((), dtype=self.report_dtype)
            row["attribute"] = -1
            problem: str | None
            if self.protocol == "smp":
                if not isinstance(payload, (list, tuple)) or len(payload) != 2:
                    problem = "payload must be [attribute, report]"
                elif not is_plain_int(payload[0]) or not 0 <= int(payload[0]) < self.u:
                    problem = f"attribute must be an integer in [0, {self.u}); got {payload[0]!r}"
                else:
                    row["attribute"] = int(payload[0])
                    problem = self._parse_one(payload[1], int(payload[0]), row)
            elif not isinstance(payload, (list, tuple)) or len(payload) != self.d:
                problem = f"payload must be a list of {self.d} reports"
            else:
                problem = next(
                    (p for j in range(self.d) if (p := self._parse_one(payload[j], j, row))), None
                )
            if problem:
                errors.append(WireFormatError(index, problem))
            else:
                good.append(row)
        reports = np.array(good, dtype=self.report_dtype).reshape(len(good))
        return reports, errors

    # ---- server side -------------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(self.k + self.u, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Support counts of every attribute's items, then how many reports carry each one."""
        if self.protocol == "smp":
            return self._aggregate_smp(reports)
        counts = np.zeros(self.k + self.u, dtype=np.int64)
        for j, oracle in enumerate(self.oracles):
            if oracle.name == "oue":
                chunk = reports["bits"][:, self._slot(j), : (oracle.k + 7) // 8]
            else:
                chunk = reports["values"][:, self._slot(j)]
            counts[self.k + j] = len(chunk)
            if len(chunk):
                counts[self.offsets[j] : self.offsets[j + 1]] = oracle.support_counts(chunk)
        return AggregateStatistic(counts, len(reports))

    def _aggregate_smp(self, reports: Reports) -> AggregateStatistic:
        """SMP: how many reports each unit has, then the units' payloads grouped by unit chunk
        by chunk of reports (a cache-local sort and gather of whole records; OUE's bytes
        transposed for its popcount column counts) and counted by each unit's oracle."""
        counts = np.zeros(self.k + self.u, dtype=np.int64)
        n = len(reports)
        if n == 0:
            return AggregateStatistic(counts, 0)
        reports = np.ascontiguousarray(reports)
        units = reports["attribute"].astype(np.intp)
        low, high = int(units.min()), int(units.max())
        if low < 0 or high >= self.u:
            raise ValueError(
                f"reports' attribute must be a unit in [0, {self.u}); got "
                f"{low if low < 0 else high}"
            )
        per_unit = np.bincount(units, minlength=self.u)
        counts[self.k :] = per_unit
        kinds = [oracle.name for oracle in self.oracles]
        present = [j for j in range(self.u) if per_unit[j]]
        payloads: dict[int, Any] = {}
        for j in present:
            if kinds[j] == "oue":  # byte c of row r at [c, r]; rows padded to a multiple of 8
                padded = -(-int(per_unit[j]) // 8) * 8
                payloads[j] = np.zeros(((self.oracles[j].k + 7) // 8, padded), dtype=np.uint8)
            elif kinds[j] == "olh":
                payloads[j] = np.empty(int(per_unit[j]), dtype=LH_REPORT_DTYPE)
            else:
                payloads[j] = np.empty(int(per_unit[j]), dtype=np.int64)
        filled = dict.fromkeys(present, 0)
        record = np.dtype((np.void, reports.dtype.itemsize))
        whole = reports.view(record)
        small = units.astype(np.int16)
        copied = np.empty(min(n, _CHUNK_ROWS), dtype=record)
        for start in range(0, n, _CHUNK_ROWS):
            chunk = small[start : start + _CHUNK_ROWS]
            order = np.argsort(chunk, kind="stable")
            bounds = np.concatenate([[0], np.cumsum(np.bincount(chunk, minlength=self.u))])
            # a sequential copy first: the gather then reads the cache, not memory
            source = copied[: chunk.size]
            source[...] = whole[start : start + chunk.size]
            grouped = np.take(source, order).view(reports.dtype)
            for j in present:
                c0, c1 = int(bounds[j]), int(bounds[j + 1])
                if c0 == c1:
                    continue
                block, at = grouped[c0:c1], filled[j]
                if kinds[j] == "oue":
                    nbytes = payloads[j].shape[0]
                    payloads[j][:, at : at + c1 - c0] = block["bits"][:, 0, :nbytes].T
                elif kinds[j] == "grr":
                    payloads[j][at : at + c1 - c0] = block["values"][:, 0]
                else:
                    payloads[j]["seed"][at : at + c1 - c0] = block["seed"]
                    payloads[j]["y"][at : at + c1 - c0] = block["values"][:, 0]
                filled[j] = at + c1 - c0
        for j in present:
            oracle = self.oracles[j]
            if kinds[j] == "oue":
                support = transposed_column_counts(payloads[j], oracle.k)
            elif kinds[j] == "grr":
                values = payloads[j]
                if values.min() < 0 or values.max() >= oracle.k:
                    raise ValueError(
                        f"{self._unit_name(j)}: a report's value must be in [0, {oracle.k})"
                    )
                support = np.bincount(values, minlength=oracle.k)
            else:
                support = oracle.support_counts(payloads[j])
            counts[self.offsets[j] : self.offsets[j + 1]] = support
        return AggregateStatistic(counts, n)

    def pq(self, j: int) -> tuple[float, float]:
        """(p*, q*) of attribute j's support indicator for the protocol's estimator."""
        oracle = self.oracles[j]
        p, q = oracle.p_star, oracle.q_star
        if self.protocol == "rsfd":
            d, k = self.d, self.ks[j]
            return p / d + (d - 1) / (d * k), q / d + (d - 1) / (d * k)
        return p, q

    def estimate(self, statistic: AggregateStatistic, j: int) -> FloatArray:
        """Unbiased frequencies of attribute j."""
        if statistic.n <= 0:
            raise ValueError("cannot estimate from zero reports")
        counts = np.asarray(statistic.counts, dtype=np.float64)
        support = counts[self.offsets[j] : self.offsets[j + 1]]
        p, q = self.pq(j)
        n = statistic.n
        if self.protocol == "smp":  # scaled by d/n, not 1/n_j: exactly unbiased
            return np.asarray(self.u * (support - counts[self.k + j] * q) / (n * (p - q)))
        return np.asarray((support / n - q) / (p - q))

    def variance(self, n: int, j: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var of attribute j's estimates for a fixed population with these frequencies."""
        f = np.asarray(frequencies, dtype=np.float64)
        p, q = self.pq(j)
        noise = (q * (1 - q) + f * (p * (1 - p) - q * (1 - q))) / (n * (p - q) ** 2)
        if self.protocol == "smp":
            return np.asarray(self.u * noise + (self.u - 1) * f / n)
        return np.asarray(noise)

    def sum_variance(
        self, n: int, j: int, masks: npt.ArrayLike, frequencies: npt.ArrayLike
    ) -> FloatArray:
        """Exact Var of sum_{v in S} f_v over unit j's estimates for each row S of ``masks``
        (boolean, (rows, cells)), for a fixed population with these cell frequencies (SMP: the
        assignment adds (u - 1) f_S / n, as for one cell)."""
        s_mask = np.atleast_2d(np.asarray(masks, dtype=bool))
        f = np.asarray(frequencies, dtype=np.float64)
        p, q = self.pq(j)
        f_s = s_mask @ f
        # OUE: independent bits; OLH: supports taken as independent (an approximation: the
        # hash family's dependence between three items is left out; cells are exact)
        if self.oracles[j].name in ("oue", "olh") and self.protocol != "rsfd":
            per_cell = f * p * (1 - p) + (1 - f) * q * (1 - q)
            noise = (s_mask @ per_cell) / (n * (p - q) ** 2)
        else:  # one reported cell: Bernoulli P1 for holders in S, P0 for the others
            size = s_mask.sum(axis=1)
            p1, p0 = p + (size - 1) * q, size * q
            noise = (f_s * p1 * (1 - p1) + (1 - f_s) * p0 * (1 - p0)) / (n * (p - q) ** 2)
        if self.protocol == "smp":
            return np.asarray(self.u * noise + (self.u - 1) * f_s / n)
        return np.asarray(noise)

    # ---- privacy -----------------------------------------------------------------------------

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def channel_matrices(self) -> Iterator[FloatArray]:
        """The whole-tuple channel: one (tuples, outputs) matrix (SMP: outputs (j, y_j))."""
        tuples = list(itertools.product(*[range(k) for k in self.ks]))
        if len(tuples) > MAX_ENUMERATED:
            raise ValueError(f"{len(tuples)} tuples are too many to enumerate")
        per = [self._unit_channel(o) for o in self.oracles]  # (k_j, outputs_j)
        if self.protocol == "smp":
            yield np.array(
                [
                    np.concatenate(
                        [
                            per[j][self.unit_values(np.array([x]), j)[0]] / self.u
                            for j in range(self.u)
                        ]
                    )
                    for x in tuples
                ]
            )
            return
        sizes = [m.shape[1] for m in per]
        if math.prod(sizes) > MAX_ENUMERATED:
            raise ValueError(f"{math.prod(sizes)} outputs are too many to enumerate")
        rows = []
        for x in tuples:
            if self.protocol == "spl":
                row = per[0][x[0]]
                for j in range(1, self.d):
                    row = np.outer(row, per[j][x[j]]).ravel()
            else:
                row = np.zeros(math.prod(sizes))
                for j in range(self.d):
                    factors = [
                        per[i][x[i]] if i == j else np.full(self.ks[i], 1.0 / self.ks[i])
                        for i in range(self.d)
                    ]
                    term = factors[0]
                    for factor in factors[1:]:
                        term = np.outer(term, factor).ravel()
                    row += term / self.d
            rows.append(row)
        yield np.array(rows)

    @staticmethod
    def _unit_channel(oracle: FrequencyOracle) -> FloatArray:
        """One oracle's channel; OLH's per public seed side by side (each seed equally likely
        among its check seeds: the ratios given a seed are what matters)."""
        matrices = list(oracle.channel_matrices())
        return np.concatenate(matrices, axis=1) / len(matrices)

    def implemented_epsilon(self) -> float:
        """max over outputs and tuple pairs of the log ratio (``channel_matrices``)."""
        (matrix,) = list(self.channel_matrices())
        high, low = matrix.max(axis=0), matrix.min(axis=0)
        if np.any((low <= 0) & (high > 0)):
            return math.inf
        keep = low > 0
        return float(np.max(np.log(high[keep]) - np.log(low[keep])))

    def marginal(self, statistic: AggregateStatistic, name: str) -> Marginal:
        if name not in self.names:
            raise ValueError(f"attribute must be one of {', '.join(self.names)}; got {name!r}")
        j = self.names.index(name)
        f = self.estimate(statistic, j)
        plug = np.clip(f, 0.0, 1.0)
        return Marginal(name, f, np.sqrt(np.maximum(self.variance(statistic.n, j, plug), 0.0)))
