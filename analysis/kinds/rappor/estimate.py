"""RAPPOR decoding over a candidate list, and Google's RAPPOR file formats.

Erlingsson, Pihur, Korolova, CCS 2014, section 4 (docs/math/rappor.md): per-cohort bit counts are
debiased into estimated Bloom-bit counts t_ij (``RAPPOR.estimate_bloom_counts``); a design matrix
has one row per (cohort, bit) and one column per candidate string, 1 where the candidate's Bloom
filter in that cohort sets that bit (built with the client's own Bloom function,
``RAPPOR.bloom_table``); a non-negative LASSO selects candidates; least squares on the selected
columns gives the estimates and their standard errors; a candidate is reported (``significant``)
only when its one-sided z statistic passes the Bonferroni threshold over all candidates.

The model, row r = (cohort j, bit i) with N_j reports in cohort j:
``y_r = t_ij / N_j = sum_c X[r, c] f_c + e_r``, where f_c is the fraction of clients holding c.
Rows are weighted by N_j (weights that do not depend on the data). For a fixed population the
errors are independent across rows with the variance of ``estimate_bloom_counts`` / N_j^2, and a
second, small term comes from the random assignment of clients to cohorts (a cohort's mix of
values differs from the population's); both enter the standard errors (see ``_variances``).

Strings that are not candidates cannot be found: their bits show up only as Bloom-bit mass the
candidates do not explain (``explained_fraction``). Finding them needs a separate discovery step
(n-gram RAPPOR, PEM/TreeHist).

File formats (as ``google/rappor``): parameters ``k,h,m,p,q,f`` with one data row; reports
``client,cohort,rappor`` (the bits as a k-character string, bit k-1 first; the simulator's
``client,cohort,bloom,prr,irr`` is read too, using ``irr``); candidates one per line; counts
(``sum_bits.py`` output) one headerless row per cohort: reports, then the count of bit 0..k-1.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from statistics import NormalDist
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.sparse

from analysis.streaming import ReportSource, aggregate, z_value
from analysis.text_tables import INTERVAL_COLUMNS, aligned, interval_cells
from client_sdk.mechanisms.base import AggregateStatistic, Reports, WireFormatError
from client_sdk.mechanisms.rappor import RAPPOR

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
TextSource = str | os.PathLike[str] | IO[str]

PARAMS_HEADER = ["k", "h", "m", "p", "q", "f"]
REPORT_COLUMNS = ("rappor", "irr")
"""Names of the bits column in a reports CSV, in order of preference."""

NOTE = (
    "RAPPOR estimates only the candidate strings it is given: strings outside the candidate "
    "list cannot be found. Their reports show up only as Bloom-bit mass the candidates do not "
    "explain. Here the selected candidates explain {explained} of the estimated Bloom-bit mass "
    "and the significant ones {reported}; the rest comes from strings outside the list, "
    "candidates too rare to detect, and noise."
)


class RapporFormatError(ValueError):
    """A malformed RAPPOR file; the message names the file, the line and the problem."""

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.line = line
        self.problem = problem


# ---- file formats -------------------------------------------------------------------------------


@contextlib.contextmanager
def _open_text(source: TextSource, mode: str) -> Iterator[tuple[IO[str], str]]:
    """A text stream and its name, for a path (opened here, UTF-8) or an open stream."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, mode, encoding="utf-8", newline="") as stream:
            yield stream, os.fspath(source)
    else:
        yield source, str(getattr(source, "name", "<stream>"))


def _csv_rows(stream: IO[str], name: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank CSV row; decoding errors name the line."""
    reader = csv.reader(stream)
    try:
        for row in reader:
            if row and any(cell.strip() for cell in row):
                yield reader.line_num, row
    except (csv.Error, UnicodeDecodeError) as error:
        raise RapporFormatError(name, reader.line_num + 1, f"not valid CSV ({error})") from None


def read_params(source: TextSource) -> RAPPOR:
    """The RAPPOR parameters of a ``k,h,m,p,q,f`` CSV file (one header row, one data row)."""
    with _open_text(source, "r") as (stream, name):
        rows = list(_csv_rows(stream, name))
    if not rows:
        raise RapporFormatError(name, None, "empty file; expected the header k,h,m,p,q,f")
    line, header = rows[0]
    if [cell.strip() for cell in header] != PARAMS_HEADER:
        raise RapporFormatError(name, line, f"header must be k,h,m,p,q,f; got {','.join(header)}")
    if len(rows) != 2:
        problem = (
            "expected one row of parameters after the header"
            if len(rows) < 2
            else "expected exactly one row of parameters; found more"
        )
        raise RapporFormatError(name, rows[-1][0] if len(rows) > 2 else line, problem)
    line, values = rows[1]
    if len(values) != len(PARAMS_HEADER):
        raise RapporFormatError(name, line, f"expected 6 values; got {len(values)}")
    parsed: dict[str, Any] = {}
    for field, cell in zip(PARAMS_HEADER, values, strict=True):
        text = cell.strip()
        try:
            parsed[field] = int(text) if field in ("k", "h", "m") else float(text)
        except ValueError:
            kind = "an integer" if field in ("k", "h", "m") else "a number"
            raise RapporFormatError(name, line, f"{field} must be {kind}; got {text!r}") from None
    try:
        return RAPPOR(**parsed)
    except ValueError as error:
        raise RapporFormatError(name, line, str(error)) from None


def write_params(target: TextSource, mechanism: RAPPOR) -> None:
    """Write the ``k,h,m,p,q,f`` CSV of a mechanism (``read_params`` reads it back equal)."""
    with _open_text(target, "w") as (stream, _):
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(PARAMS_HEADER)
        writer.writerow([repr(getattr(mechanism, field)) for field in PARAMS_HEADER])


def read_candidates(source: TextSource) -> list[str]:
    """Candidate strings, one per line (surrounding whitespace stripped, as Google's
    ``hash_candidates.py``; blank lines skipped; a repeated candidate is an error)."""
    with _open_text(source, "r") as (stream, name):
        candidates: list[str] = []
        first_line: dict[str, int] = {}
        try:
            for line, text in enumerate(stream, start=1):
                value = text.strip()
                if not value:
                    continue
                if value in first_line:
                    raise RapporFormatError(
                        name, line, f"candidate {value!r} repeats line {first_line[value]}"
                    )
                first_line[value] = line
                candidates.append(value)
        except UnicodeDecodeError as error:
            raise RapporFormatError(name, None, f"not UTF-8 text ({error})") from None
    if not candidates:
        raise RapporFormatError(name, None, "no candidates (expected one string per line)")
    return candidates


def write_candidates(target: TextSource, candidates: Iterable[str]) -> None:
    """One candidate per line."""
    with _open_text(target, "w") as (stream, _):
        for value in candidates:
            if value != value.strip() or not value or "\n" in value or "\r" in value:
                raise ValueError(f"candidate {value!r} cannot be written one per line")
            stream.write(value + "\n")


def read_reports(
    source: TextSource, mechanism: RAPPOR, *, chunk_rows: int = 1 << 16
) -> Iterator[Reports]:
    """Report arrays, chunk by chunk, from a ``client,cohort,rappor`` CSV (streamed).

    The header must name a ``cohort`` column and a ``rappor`` (or ``irr``) column; other columns
    (``client``, the simulator's ``bloom`` and ``prr``) are ignored. Every row must have as many
    fields as the header, a cohort in [0, m) and exactly k characters '0'/'1'.
    """
    with _open_text(source, "r") as (stream, name):
        rows = _csv_rows(stream, name)
        first = next(rows, None)
        if first is None:
            raise RapporFormatError(
                name, None, "empty file; expected the header client,cohort,rappor"
            )
        line, header = first
        columns = [cell.strip() for cell in header]
        bits_name = next((c for c in REPORT_COLUMNS if c in columns), None)
        if "cohort" not in columns or bits_name is None:
            raise RapporFormatError(
                name, line, f"header must have columns cohort and rappor; got {','.join(header)}"
            )
        cohort_at, bits_at, width = columns.index("cohort"), columns.index(bits_name), len(columns)
        lines: list[int] = []
        cohorts: list[int] = []
        strings: list[str] = []
        for line, row in rows:
            if len(row) != width:
                raise RapporFormatError(
                    name, line, f"expected {width} fields ({','.join(columns)}); got {len(row)}"
                )
            text = row[cohort_at].strip()
            if not (text.isascii() and text.isdigit()):
                raise RapporFormatError(
                    name, line, f"cohort must be an integer in [0, {mechanism.m}); got {text!r}"
                )
            lines.append(line)
            cohorts.append(int(text))
            strings.append(row[bits_at].strip())
            if len(strings) >= chunk_rows:
                yield _chunk(mechanism, name, lines, cohorts, strings)
                lines, cohorts, strings = [], [], []
        if strings:
            yield _chunk(mechanism, name, lines, cohorts, strings)


def _chunk(
    mechanism: RAPPOR, name: str, lines: list[int], cohorts: list[int], strings: list[str]
) -> Reports:
    try:
        return mechanism.reports_from_strings(np.asarray(cohorts, dtype=np.int64), strings)
    except WireFormatError as error:
        raise RapporFormatError(name, lines[error.index], error.reason) from None


def write_reports(
    target: TextSource,
    mechanism: RAPPOR,
    reports: Reports,
    *,
    clients: Sequence[str] | None = None,
) -> None:
    """Write reports as ``client,cohort,rappor``; clients default to the row numbers.

    Reports carry no client identity, so the ``client`` column holds whatever ``clients``
    gives (Google's tools ignore it when summing).
    """
    array = np.asarray(reports)
    if clients is not None and len(clients) != array.size:
        raise ValueError(f"got {len(clients)} clients for {array.size} reports")
    names = clients if clients is not None else [str(i) for i in range(array.size)]
    with _open_text(target, "w") as (stream, _):
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(["client", "cohort", "rappor"])
        writer.writerows(
            zip(names, array["cohort"].tolist(), mechanism.bit_strings(array), strict=True)
        )


def read_counts(source: TextSource, mechanism: RAPPOR) -> AggregateStatistic:
    """The statistic of a Google counts CSV: m headerless rows of ``N_j, c_0j, ..., c_(k-1)j``."""
    counts = np.zeros((mechanism.m, mechanism.k + 1), dtype=np.int64)
    with _open_text(source, "r") as (stream, name):
        seen = 0
        for line, row in _csv_rows(stream, name):
            if seen == mechanism.m:
                raise RapporFormatError(name, line, f"more than m={mechanism.m} cohort rows")
            if len(row) != mechanism.k + 1:
                raise RapporFormatError(
                    name, line, f"expected k+1={mechanism.k + 1} counts; got {len(row)}"
                )
            cells = [cell.strip() for cell in row]
            bad = next((c for c in cells if not (c.isascii() and c.isdigit())), None)
            if bad is not None:
                raise RapporFormatError(name, line, f"counts must be integers >= 0; got {bad!r}")
            values = np.asarray([int(c) for c in cells], dtype=np.int64)
            if values[1:].max(initial=0) > values[0]:
                raise RapporFormatError(
                    name, line, f"a bit count exceeds the cohort's {values[0]} reports"
                )
            counts[seen] = values
            seen += 1
    if seen != mechanism.m:
        raise RapporFormatError(name, None, f"expected m={mechanism.m} cohort rows; got {seen}")
    return AggregateStatistic(counts, int(counts[:, 0].sum()))


def write_counts(target: TextSource, statistic: AggregateStatistic) -> None:
    """Write a statistic as Google's counts CSV (``sum_bits.py`` output)."""
    with _open_text(target, "w") as (stream, _):
        csv.writer(stream, lineterminator="\n").writerows(np.asarray(statistic.counts).tolist())


# ---- decoding -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RapporEstimate:
    """Frequencies of the candidate strings, with their error and the significance decision.

    ``frequencies`` are least-squares estimates for the candidates the LASSO selected and 0 for
    the others; ``std_errors`` are exact fixed-population standard errors with estimates plugged
    in (for an unselected candidate: the standard error its coefficient would have if added to
    the selected model). ``significant`` marks the candidates whose one-sided z statistic exceeds
    ``critical_z``, the Bonferroni threshold at ``alpha`` over all candidates; RAPPOR reports
    only those. ``explained_fraction`` is the share of the estimated Bloom-bit mass (the sum
    of the debiased bit counts) that the fitted selected candidates account for, and
    ``reported_fraction`` the share the significant ones account for. Both are point estimates;
    the first also absorbs some mass of strings outside the list through the candidates that
    share their bits.
    """

    candidates: tuple[str, ...]
    frequencies: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    selected: BoolArray
    significant: BoolArray
    n: int
    confidence: float
    alpha: float
    critical_z: float
    explained_fraction: float
    reported_fraction: float
    lasso_penalty: float
    mechanism: dict[str, Any]
    statistic: AggregateStatistic

    @property
    def counts(self) -> FloatArray:
        """Estimated numbers of clients, n * frequency."""
        return self.frequencies * self.n

    def format_table(self) -> str:
        """The plain-text table of ``ldp-analyze estimate --format table``."""
        return format_table(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, in the shape of ``ldp-analyze estimate`` plus the RAPPOR fields."""
        return {
            "n": self.n,
            "mechanism": self.mechanism,
            "items": [
                {
                    "value": value,
                    "frequency": float(self.frequencies[i]),
                    "std_error": _finite_or_none(self.std_errors[i]),
                    "ci_low": _finite_or_none(self.ci_low[i]),
                    "ci_high": _finite_or_none(self.ci_high[i]),
                    "significant": bool(self.significant[i]),
                    "selected": bool(self.selected[i]),
                }
                for i, value in enumerate(self.candidates)
            ],
            "confidence": self.confidence,
            "decoder": "non-negative LASSO selection, least squares on the selected candidates",
            "correction": "bonferroni",
            "alpha": self.alpha,
            "critical_z": self.critical_z,
            "lasso_penalty": self.lasso_penalty,
            "detected": int(self.significant.sum()),
            "explained_fraction": _finite_or_none(self.explained_fraction),
            "reported_fraction": _finite_or_none(self.reported_fraction),
            "note": NOTE.format(
                explained=_percent(self.explained_fraction),
                reported=_percent(self.reported_fraction),
            ),
        }


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _percent(value: float) -> str:
    return f"{value:.1%}" if math.isfinite(value) else "nothing (no Bloom-bit mass was estimated)"


def design_matrix(
    mechanism: RAPPOR, candidates: Sequence[str], cohorts: npt.NDArray[np.int64] | None = None
) -> scipy.sparse.csc_matrix:
    """X[(j, i), c] = 1 when candidate c sets bit i in cohort j; rows cohort-major.

    ``cohorts`` restricts the rows to those cohorts (in that order). The Bloom filters come
    from ``mechanism.bloom_table``: the client's own hashing, never re-implemented here.
    """
    table = mechanism.bloom_table(candidates)  # (S, m, k)
    if cohorts is not None:
        table = table[:, cohorts, :]
    flat = table.reshape(len(candidates), -1)
    columns, rows = np.nonzero(flat)
    return scipy.sparse.csc_matrix(
        (np.ones(rows.size), (rows, columns)), shape=(flat.shape[1], flat.shape[0])
    )


def nonnegative_lasso(
    gram: FloatArray,
    correlation: FloatArray,
    penalty: FloatArray,
    *,
    tolerance: float = 1e-9,
    max_sweeps: int = 100_000,
) -> FloatArray:
    """argmin over beta >= 0 of 1/2 beta'G beta - b'beta + penalty'beta (non-negative LASSO).

    The weighted least-squares LASSO 1/2 sum_r w_r (y_r - X_r beta)^2 + sum_c penalty_c beta_c
    with G = X'WX and b = X'Wy. Cyclic coordinate descent (Friedman, Hastie, Tibshirani, J. Stat.
    Softw. 2010) with the update beta_c <- max(0, beta_c + (b - G beta - penalty)_c / G_cc),
    alternating full sweeps with sweeps over the non-zero coordinates. Stops when a full sweep
    moves no gradient component by more than ``tolerance`` times max(|b|, penalty).
    """
    size = correlation.size
    beta = np.zeros(size)
    fitted = np.zeros(size)  # G @ beta, kept up to date
    diagonal = np.diag(gram).copy()
    bound = tolerance * max(
        float(np.abs(correlation).max(initial=0.0)), float(penalty.max(initial=0.0))
    )
    usable = np.flatnonzero(diagonal > 0)
    sweeps = 0
    while sweeps < max_sweeps:
        sweeps += 1
        if _sweep(gram, correlation, penalty, diagonal, beta, fitted, usable) <= bound:
            return beta
        active = np.flatnonzero(beta > 0)
        while sweeps < max_sweeps:  # converge on the current support before a full sweep
            sweeps += 1
            if _sweep(gram, correlation, penalty, diagonal, beta, fitted, active) <= bound:
                break
    raise RuntimeError(f"non-negative LASSO did not converge in {max_sweeps} sweeps")


def _sweep(
    gram: FloatArray,
    correlation: FloatArray,
    penalty: FloatArray,
    diagonal: FloatArray,
    beta: FloatArray,
    fitted: FloatArray,
    coordinates: npt.NDArray[np.intp],
) -> float:
    """One pass of coordinate updates; returns the largest change of a gradient component."""
    worst = 0.0
    for c in coordinates.tolist():
        new = max(0.0, beta[c] + (correlation[c] - fitted[c] - penalty[c]) / diagonal[c])
        delta = new - beta[c]
        if delta != 0.0:
            beta[c] = new
            fitted += delta * gram[:, c]
            worst = max(worst, abs(delta) * diagonal[c])
    return worst


def decode(
    mechanism: RAPPOR,
    reports: ReportSource,
    candidates: Sequence[str],
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    lasso_penalty: float = 2.0,
) -> RapporEstimate:
    """Estimate the frequencies of ``candidates`` from RAPPOR reports (or their statistic).

    ``alpha``: family-wise error rate of the Bonferroni-corrected one-sided tests (a candidate
    absent from the population is reported with probability at most about alpha/S, S the
    number of candidates). ``lasso_penalty``: the LASSO's penalty on each candidate, in units of
    the noise standard deviation of that candidate's score X_c'Wy; it only pre-selects (the
    tests decide), so it is kept low.
    """
    if getattr(mechanism, "value_kind", None) != "string":
        raise TypeError(
            f"mechanism must record strings (value_kind 'string', RAPPOR); got "
            f"{type(mechanism).__name__}"
        )
    names = _check_candidates(candidates)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    if not (math.isfinite(lasso_penalty) and lasso_penalty >= 0):
        raise ValueError(f"lasso_penalty must be a finite number >= 0; got {lasso_penalty!r}")
    z_confidence = z_value(confidence)
    statistic = aggregate(mechanism, reports)
    if statistic.n <= 0:
        raise ValueError("cannot decode zero reports")

    sizes_all = statistic.counts[:, 0].astype(np.float64)
    kept = np.flatnonzero(sizes_all > 0)  # cohorts without reports carry no rows
    t, t_var = mechanism.estimate_bloom_counts(statistic)
    sizes = sizes_all[kept]
    y = (t[kept] / sizes[:, None]).ravel()
    y_var = (t_var[kept] / sizes[:, None] ** 2).ravel()
    weights = np.repeat(sizes, mechanism.k)
    x = design_matrix(mechanism, names, kept)
    _check_identifiable(x, names)

    weighted = scipy.sparse.diags(weights) @ x
    gram = np.asarray((x.T @ weighted).todense())
    score = weighted.T @ y
    score_sd = np.sqrt(np.asarray(weighted.multiply(weighted).T @ y_var)).ravel()
    beta_lasso = nonnegative_lasso(gram, score, lasso_penalty * score_sd)

    selected = beta_lasso > 0
    chosen = np.flatnonzero(selected)
    frequencies = np.zeros(len(names))
    variances = np.full(len(names), np.nan)
    explained = reported = 0.0
    inverse_gram = np.zeros((0, 0))
    if chosen.size:
        inverse_gram = scipy.linalg.inv(gram[np.ix_(chosen, chosen)])
        beta = inverse_gram @ score[chosen]
        frequencies[chosen] = beta
        variances[chosen] = _variances(
            x[:, chosen], weighted[:, chosen], inverse_gram, beta, y_var, sizes, mechanism.k
        )
        explained = float(weights @ (x[:, chosen] @ beta))
    others = np.flatnonzero(~selected)
    if others.size:
        variances[others] = _added_column_variances(
            x, weights, gram, chosen, others, y_var, inverse_gram if chosen.size else None
        )
    total = float(weights @ y)
    std_errors = np.sqrt(np.maximum(variances, 0.0))
    critical = NormalDist().inv_cdf(1 - alpha / len(names))
    with np.errstate(divide="ignore", invalid="ignore"):
        z_scores = frequencies / std_errors
    significant = selected & (z_scores > critical)
    if significant.any():
        reported = float(weights @ (x[:, significant] @ frequencies[significant]))
    return RapporEstimate(
        candidates=tuple(names),
        frequencies=frequencies,
        std_errors=std_errors,
        ci_low=frequencies - z_confidence * std_errors,
        ci_high=frequencies + z_confidence * std_errors,
        selected=selected,
        significant=significant,
        n=statistic.n,
        confidence=confidence,
        alpha=alpha,
        critical_z=critical,
        explained_fraction=explained / total if total > 0 else math.nan,
        reported_fraction=reported / total if total > 0 else math.nan,
        lasso_penalty=lasso_penalty,
        mechanism=mechanism.to_config(),
        statistic=statistic,
    )


def _check_candidates(candidates: Sequence[str]) -> list[str]:
    if isinstance(candidates, str) or not isinstance(candidates, Sequence):
        raise ValueError("candidates must be a list of strings")
    names = list(candidates)
    if not names:
        raise ValueError("candidates must not be empty")
    seen: dict[str, int] = {}
    for index, value in enumerate(names):
        if not isinstance(value, str):
            raise ValueError(f"candidates[{index}] must be a string; got {type(value).__name__}")
        if value in seen:
            raise ValueError(f"candidates[{index}] repeats candidates[{seen[value]}]: {value!r}")
        seen[value] = index
    return names


def _check_identifiable(x: scipy.sparse.csc_matrix, names: list[str]) -> None:
    """Refuse two candidates whose Bloom filters agree in every cohort (no data separates them)."""
    first: dict[bytes, int] = {}
    for c in range(x.shape[1]):
        key = x.indices[x.indptr[c] : x.indptr[c + 1]].tobytes()
        if key in first:
            raise ValueError(
                f"candidates {names[first[key]]!r} and {names[c]!r} have the same Bloom filter in "
                "every cohort; no number of reports can tell them apart"
            )
        first[key] = c


def _variances(
    x: scipy.sparse.csc_matrix,
    weighted: scipy.sparse.csc_matrix,
    inverse_gram: FloatArray,
    beta: FloatArray,
    y_var: FloatArray,
    sizes: FloatArray,
    k: int,
) -> FloatArray:
    """Var[beta_c] of weighted least squares beta = A y, A = (X'WX)^-1 X'W (selected columns).

    Noise: sum_r A[c, r]^2 Var[y_r] (rows are independent given the population and the cohorts).
    Cohort composition: with n_v clients holding v, the cohort counts n_vj of a random split
    into cohorts of sizes N_j have the multivariate hypergeometric covariance
    Cov[n_vj, n_v'j'] = (n_v d_vv' - n_v n_v'/N)(N_j d_jj' - N_j N_j'/N)/(N-1); the estimate
    moves by sum_j A_j X_j (n_.j - N_j f) / N_j, whose variance, with Z_j = A_j X_j / N_j and
    sum_j N_j Z_j = I, is [sum_j N_j diag(Z_j P Z_j') - diag(P)/N]/(N-1), P = diag(n) - nn'/N.
    n is plugged in from the estimates (selected candidates only).
    """
    a = inverse_gram @ np.asarray(weighted.T.todense())  # (s, R)
    noise = (a**2) @ y_var
    total = float(sizes.sum())
    if total < 2:
        return noise
    held = total * np.clip(beta, 0.0, None)
    dense_x = np.asarray(x.todense())
    composition = np.zeros(beta.size)
    for j, size in enumerate(sizes):
        rows = slice(j * k, (j + 1) * k)
        z = a[:, rows] @ dense_x[rows] / size  # (s, s)
        composition += size * ((z**2) @ held - (z @ held) ** 2 / total)
    composition -= (held - held**2 / total) / total
    return noise + np.maximum(composition, 0.0) / (total - 1)


def _added_column_variances(
    x: scipy.sparse.csc_matrix,
    weights: FloatArray,
    gram: FloatArray,
    chosen: npt.NDArray[np.intp],
    others: npt.NDArray[np.intp],
    y_var: FloatArray,
    inverse_gram: FloatArray | None,
) -> FloatArray:
    """Noise variance of each unselected candidate's coefficient were it added to the model.

    Adding column c to the selected set A, its coefficient is e'W y / (x_c'W e) with
    e = x_c - X_A (X_A'WX_A)^-1 X_A'W x_c (x_c made orthogonal to the selected columns).
    """
    schur = np.empty(others.size)
    numerator = np.empty(others.size)
    selected = np.asarray(x[:, chosen].todense()) if inverse_gram is not None else None
    for start in range(0, others.size, 256):  # memory O(rows * 256)
        block = others[start : start + 256]
        residual = np.asarray(x[:, block].todense())
        if selected is not None and inverse_gram is not None:
            residual -= selected @ (inverse_gram @ gram[np.ix_(chosen, block)])
        weighted = weights[:, None] * residual
        schur[start : start + block.size] = (weighted * residual).sum(axis=0)
        numerator[start : start + block.size] = (weighted**2 * y_var[:, None]).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(schur > 1e-12 * gram[others, others], numerator / schur**2, np.inf)


def decode_files(
    params: TextSource,
    candidates: TextSource,
    *,
    reports: TextSource | None = None,
    counts: TextSource | None = None,
    alpha: float = 0.05,
    confidence: float = 0.95,
) -> RapporEstimate:
    """``decode`` from Google's files: parameters, candidates, and reports or counts."""
    if (reports is None) == (counts is None):
        raise ValueError("give exactly one of reports and counts")
    mechanism = read_params(params)
    names = read_candidates(candidates)
    if reports is not None:
        statistic = aggregate(mechanism, read_reports(reports, mechanism))
    else:
        assert counts is not None
        statistic = read_counts(counts, mechanism)
    return decode(mechanism, statistic, names, alpha=alpha, confidence=confidence)


def format_table(estimate: RapporEstimate) -> str:
    """A plain-text table of every candidate, then the summary and the note."""
    out = io.StringIO()
    summary = estimate.to_dict()
    rows = [
        [item["value"], *interval_cells(item), item["significant"]] for item in summary["items"]
    ]
    out.write(aligned(["value", *INTERVAL_COLUMNS, "significant"], rows) + "\n")
    out.write(
        f"\nn = {estimate.n}; {summary['detected']} of {len(estimate.candidates)} candidates "
        f"significant (Bonferroni, alpha = {estimate.alpha}, z > {estimate.critical_z:.3f})\n"
    )
    out.write(summary["note"] + "\n")
    return out.getvalue()
