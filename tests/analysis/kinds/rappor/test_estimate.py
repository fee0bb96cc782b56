"""RAPPOR decoding of simulated populations, Google's file formats, and the CLI."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
import scipy.optimize

from analysis import cli, estimate
from analysis.kinds.rappor.estimate import (
    RapporFormatError,
    decode,
    nonnegative_lasso,
    read_candidates,
    read_counts,
    read_params,
    read_reports,
    write_candidates,
    write_counts,
    write_params,
    write_reports,
)
from client_sdk.mechanisms.grr import GRR
from client_sdk.mechanisms.rappor import RAPPOR
from tests import stats

NORMAL_NOISE = {"f": 0.5, "p": 0.25, "q": 0.75}  # Chrome's NORMAL_NOISE (docs/math/rappor.md)


def zipf_population(n: int, present: int, exponent: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed population: value i (i < present) held by about n / (i+1)^s / H clients."""
    weights = 1.0 / np.arange(1, present + 1) ** exponent
    counts = np.floor(weights / weights.sum() * n).astype(np.int64)
    counts[0] += n - counts.sum()
    return np.repeat(np.arange(present), counts), counts / n


# ---- decoding simulated populations -------------------------------------------------------------


def test_decodes_a_zipf_population_within_its_intervals() -> None:
    """50,000 clients, 32 cohorts, k = 64, h = 2, NORMAL_NOISE; 40 candidates of which 10 are held
    (Zipf). Every held string's estimate is within 5.5 standard errors of its true frequency;
    every held string whose expected z exceeds the Bonferroni threshold by 3 is significant; of
    the 30 absent candidates, the expected number found significant is at most
    alpha * 30/40 = 0.0375 under Bonferroni, so more than one is a failure."""
    mech = RAPPOR(k=64, h=2, m=32, **NORMAL_NOISE)
    candidates = [f"https://site-{i}.example/" for i in range(40)]
    index, truth_present = zipf_population(50_000, 10)
    truth = np.zeros(40)
    truth[:10] = truth_present
    reports = mech.simulate_clients([candidates[i] for i in index], rng=np.random.default_rng(2024))
    est = decode(mech, reports, candidates)
    assert est.n == 50_000
    stats.assert_within_z(est.frequencies[:10], truth[:10], est.std_errors[:10], what="held")
    strong = truth[:10] / est.std_errors[:10] > est.critical_z + 3
    assert strong.sum() >= 8
    assert est.significant[:10][strong].all()
    assert est.significant[10:].sum() <= 1
    assert est.critical_z == pytest.approx(NormalDist().inv_cdf(1 - 0.05 / 40))
    # Not selected means reported as 0, never significant.
    assert np.all(est.frequencies[~est.selected] == 0)
    assert not est.significant[~est.selected].any()
    assert 0.9 < est.explained_fraction < 1.1
    held_by_significant = float(truth[est.significant].sum())
    assert abs(est.reported_fraction - held_by_significant) < 0.1
    np.testing.assert_allclose(est.counts, est.frequencies * 50_000)


def test_standard_errors_and_false_positives_are_calibrated() -> None:
    """100 independent collections from one population of 20,000 clients (k = 32, m = 16, 8 held
    strings, 16 absent candidates), decoded at alpha = 0.5 to make false positives countable.

    - Held strings: the mean of z = (f_hat - f)/SE is within 5.5/sqrt(100) of 0 for each, and the
      pooled mean of z^2 within 5.5 sqrt(2/800) of 1 (standard errors neither too small nor too
      large; the LASSO's selected absent candidates bias held ones down by ~0.1-0.3 SE).
    - Absent candidates: each is significant with probability about alpha/S = 0.5/24 when the
      standard errors are right, so about E = 100 * 16 * 0.5/24 = 33 false positives in all; the
      count must be within E +- 5.5 sqrt(E) (with standard errors 30% too small, E would be ~100).
    """
    mech = RAPPOR(k=32, h=2, m=16, **NORMAL_NOISE)
    candidates = [f"v{i}" for i in range(24)]
    index, truth = zipf_population(20_000, 8)
    values = [candidates[i] for i in index]
    rng = np.random.default_rng(77)
    repetitions = 100
    z = np.empty((repetitions, 8))
    false_positives = 0
    for r in range(repetitions):
        est = decode(mech, mech.simulate_clients(values, rng=rng), candidates, alpha=0.5)
        assert est.selected[:8].all(), f"run {r}: a held string was not selected"
        z[r] = (est.frequencies[:8] - truth) / est.std_errors[:8]
        false_positives += int(est.significant[8:].sum())
    stats.assert_within_z(z.mean(axis=0), 0.0, 1 / math.sqrt(repetitions), what="mean z")
    pooled = float((z**2).mean())
    assert abs(pooled - 1) <= 5.5 * math.sqrt(2 / z.size), f"mean z^2 = {pooled:.3f}"
    expected = repetitions * 16 * 0.5 / 24
    assert abs(false_positives - expected) <= 5.5 * math.sqrt(expected), false_positives


def test_strings_outside_the_candidates_leave_unexplained_mass() -> None:
    """40% of clients hold strings that are not candidates: the candidates explain about 60% of
    the Bloom-bit mass (checked loosely, 0.45..0.75), and the output says they cannot be found."""
    mech = RAPPOR(k=64, h=2, m=32, **NORMAL_NOISE)
    rng = np.random.default_rng(5)
    known = [f"k{i}" for i in range(5)]
    values = [known[i % 5] for i in range(30_000)] + [f"unknown-{i % 50}" for i in range(20_000)]
    est = decode(mech, mech.simulate_clients(values, rng=rng), [*known, "absent"])
    assert 0.45 < est.explained_fraction < 0.75
    assert 0.45 < est.reported_fraction < 0.75
    summary = est.to_dict()
    assert "cannot be found" in summary["note"]
    assert f"{est.explained_fraction:.1%}" in summary["note"]
    assert summary["explained_fraction"] == pytest.approx(est.explained_fraction)
    assert summary["reported_fraction"] == pytest.approx(est.reported_fraction)


def test_decoding_from_a_statistic_or_chunks_is_the_same() -> None:
    mech = RAPPOR(k=16, h=2, m=4, **NORMAL_NOISE)
    reports = mech.simulate_clients(["a"] * 3000 + ["b"] * 1000, rng=np.random.default_rng(1))
    whole = decode(mech, reports, ["a", "b", "c"])
    chunked = decode(mech, [reports[:1000], reports[1000:]], ["a", "b", "c"])
    from_stat = decode(mech, mech.aggregate(reports), ["a", "b", "c"])
    for other in (chunked, from_stat):
        np.testing.assert_array_equal(other.frequencies, whole.frequencies)
        np.testing.assert_array_equal(other.std_errors, whole.std_errors)


def test_analysis_estimate_decodes_a_string_mechanism_against_its_candidates() -> None:
    """``analysis.estimate`` dispatches on value_kind: RAPPOR records strings, so it is decoded
    against ``candidates`` (exactly ``decode``), and refused without them."""
    mech = RAPPOR(k=16, h=2, m=4, **NORMAL_NOISE)
    reports = mech.simulate_clients(["a"] * 3000 + ["b"] * 1000, rng=np.random.default_rng(1))
    via_estimate = estimate(mech, reports, candidates=["a", "b", "c"])
    direct = decode(mech, reports, ["a", "b", "c"])
    np.testing.assert_array_equal(via_estimate.frequencies, direct.frequencies)
    np.testing.assert_array_equal(via_estimate.std_errors, direct.std_errors)
    nothing: tuple[list[str] | None, ...] = (None, [])
    for missing in nothing:
        with pytest.raises(ValueError, match="candidate list"):
            estimate(mech, reports, candidates=missing)
    with pytest.raises(TypeError, match="record strings"):
        decode(GRR(1.0, 4), reports, ["a"])  # type: ignore[arg-type]


def test_decode_validates_its_inputs() -> None:
    mech = RAPPOR(k=16, h=2, m=4, **NORMAL_NOISE)
    reports = mech.simulate_clients(["a"] * 100, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="empty"):
        decode(mech, reports, [])
    with pytest.raises(ValueError, match="repeats"):
        decode(mech, reports, ["a", "b", "a"])
    with pytest.raises(ValueError, match="zero reports"):
        decode(mech, mech.empty_statistic(), ["a"])
    with pytest.raises(ValueError, match="alpha"):
        decode(mech, reports, ["a"], alpha=1.5)
    # With one bit and one cohort every string has the same Bloom filter.
    tiny = RAPPOR(k=1, h=1, m=1, **NORMAL_NOISE)
    with pytest.raises(ValueError, match="same Bloom filter"):
        decode(tiny, tiny.simulate_clients(["a"], rng=np.random.default_rng(0)), ["a", "b"])


def test_nonnegative_lasso_solves_its_problem() -> None:
    """Penalty 0 is non-negative least squares (scipy's NNLS); with a penalty the KKT conditions
    hold: gradient = penalty on the support, <= penalty off it."""
    rng = np.random.default_rng(3)
    x = rng.random((60, 12))
    y = x @ np.where(np.arange(12) < 4, 1.0, 0.0) + rng.normal(0, 0.3, 60)
    gram, score = x.T @ x, x.T @ y
    expected, _ = scipy.optimize.nnls(x, y)
    np.testing.assert_allclose(nonnegative_lasso(gram, score, np.zeros(12)), expected, atol=1e-6)
    penalty = np.full(12, 2.0)
    beta = nonnegative_lasso(gram, score, penalty)
    gradient = score - gram @ beta
    support = beta > 0
    np.testing.assert_allclose(gradient[support], penalty[support], atol=1e-5)
    assert np.all(gradient[~support] <= penalty[~support] + 1e-5)
    assert support.sum() < 12


# ---- Google's file formats ---------------------------------------------------------------------


def test_params_round_trip_and_googles_example(tmp_path: Path) -> None:
    mech = RAPPOR(k=128, h=2, m=64, f=0.3, p=0.25, q=0.75)
    path = tmp_path / "params.csv"
    write_params(path, mech)
    assert path.read_text() == "k,h,m,p,q,f\n128,2,64,0.25,0.75,0.3\n"
    assert read_params(path) == mech
    # rappor_test.py testFromCsv.
    google = read_params(io.StringIO("k,h,m,p,q,f\n32,2,64,0.5,0.75,0.6\n"))
    assert (google.k, google.h, google.m, google.p, google.q, google.f) == (
        32,
        2,
        64,
        0.5,
        0.75,
        0.6,
    )


def test_reports_round_trip(tmp_path: Path) -> None:
    mech = RAPPOR(k=20, h=2, m=8, **NORMAL_NOISE)
    reports = mech.simulate_clients(
        [f"s{i % 7}" for i in range(5000)], rng=np.random.default_rng(6)
    )
    path = tmp_path / "reports.csv"
    write_reports(path, mech, reports)
    lines = path.read_text().splitlines()
    assert lines[0] == "client,cohort,rappor"
    assert lines[1] == f"0,{reports['cohort'][0]},{mech.to_wire(reports[:1])[0]['bits']}"
    chunks = list(read_reports(path, mech, chunk_rows=1500))
    assert [len(c) for c in chunks] == [1500, 1500, 1500, 500]
    np.testing.assert_array_equal(np.concatenate(chunks), reports)


def test_reads_the_simulators_five_column_reports() -> None:
    """rappor_sim.py writes client,cohort,bloom,prr,irr: the irr column is the report."""
    mech = RAPPOR(k=4, h=1, m=2, **NORMAL_NOISE)
    text = "client,cohort,bloom,prr,irr\nc1,1,0001,0011,0110\nc2,0,1000,1000,1111\n"
    (reports,) = read_reports(io.StringIO(text), mech)
    assert mech.to_wire(reports) == [{"cohort": 1, "bits": "0110"}, {"cohort": 0, "bits": "1111"}]


def test_candidates_and_counts_round_trip(tmp_path: Path) -> None:
    candidates = ["https://a.example/", "naïve ☃", "x,y"]
    path = tmp_path / "candidates.txt"
    write_candidates(path, candidates)
    assert read_candidates(path) == candidates
    assert read_candidates(io.StringIO("  a \n\nb\r\n")) == ["a", "b"]
    mech = RAPPOR(k=16, h=2, m=2, **NORMAL_NOISE)
    reports = mech.reports_from_strings([1, 1], ["0000111100001111", "0000000000111100"])
    counts_path = tmp_path / "counts.csv"
    write_counts(counts_path, mech.aggregate(reports))
    # sum_bits_test.py's expected output (with \n line ends).
    assert counts_path.read_text() == (
        "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n2,1,1,2,2,1,1,0,0,1,1,1,1,0,0,0,0\n"
    )
    assert read_counts(counts_path, mech) == mech.aggregate(reports)


PARAMS_OK = "k,h,m,p,q,f\n8,2,4,0.25,0.75,0.5\n"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("", None, "empty file"),
        ("k,h,m,p,q\n8,2,4,0.25,0.75\n", 1, "header must be k,h,m,p,q,f"),
        ("k,h,m,p,q,f\n", 1, "expected one row of parameters"),
        (PARAMS_OK + "extra\n", 3, "exactly one row"),
        ("k,h,m,p,q,f\n8,2,4,0.25,0.75\n", 2, "expected 6 values"),
        ("k,h,m,p,q,f\n8,two,4,0.25,0.75,0.5\n", 2, "h must be an integer"),
        ("k,h,m,p,q,f\n8,2,4,0.25,high,0.5\n", 2, "q must be a number"),
        ("k,h,m,p,q,f\n8,2,4,0.75,0.25,0.5\n", 2, "q must be greater than p"),
        ("k,h,m,p,q,f\n300,2,4,0.25,0.75,0.5\n", 2, "k must be"),
    ],
)
def test_malformed_params_name_file_and_line(text: str, line: int | None, problem: str) -> None:
    source = io.StringIO(text)
    source.name = "P.csv"
    with pytest.raises(RapporFormatError, match=problem) as caught:
        read_params(source)
    assert caught.value.line == line
    assert str(caught.value).startswith("P.csv" + (f", line {line}" if line else ""))


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("", None, "empty file"),
        ("client,rappor\n1,00000000\n", 1, "header must have columns cohort and rappor"),
        ("client,cohort,rappor\n5,1,00001111,extra\n", 2, "expected 3 fields"),
        ("client,cohort,rappor\n1,1,00001111\n2,x,00001111\n", 3, "cohort must be an integer"),
        ("client,cohort,rappor\n1,-1,00001111\n", 2, "cohort must be an integer"),
        ("client,cohort,rappor\n1,1,00001111\n2,4,00001111\n", 3, r"cohort must be in \[0, 4\)"),
        ("client,cohort,rappor\n1,1,0000111\n", 2, "exactly 8 characters"),
        ("client,cohort,rappor\n1,1,00001112\n", 2, "only '0' and '1'"),
        ("client,cohort,rappor\n1,1,0000111é\n", 2, "only '0' and '1'"),
        ('client,cohort,rappor\n1,1,"0000\n', 2, "exactly 8 characters"),
    ],
)
def test_malformed_reports_name_file_and_line(text: str, line: int | None, problem: str) -> None:
    mech = RAPPOR(k=8, h=2, m=4, **NORMAL_NOISE)
    source = io.StringIO(text)
    source.name = "R.csv"
    with pytest.raises(RapporFormatError, match=problem) as caught:
        for _ in read_reports(source, mech):
            pass
    assert caught.value.line == line
    assert str(caught.value).startswith("R.csv")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1,1,0\n", "expected m=2 cohort rows"),
        ("1,1\n1,1,0\n", "expected k\\+1=3 counts"),
        ("1,1,0\n1,2,0\n", "exceeds"),
        ("1,1,0\n1,x,0\n", "integers"),
        ("1,1,0\n1,1,0\n1,1,0\n", "more than m=2"),
    ],
)
def test_malformed_counts(text: str, problem: str) -> None:
    mech = RAPPOR(k=2, h=1, m=2, **NORMAL_NOISE)
    with pytest.raises(RapporFormatError, match=problem):
        read_counts(io.StringIO(text), mech)


def test_malformed_candidates() -> None:
    with pytest.raises(RapporFormatError, match="line 3: candidate 'a' repeats line 1"):
        read_candidates(io.StringIO("a\nb\na\n"))
    with pytest.raises(RapporFormatError, match="no candidates"):
        read_candidates(io.StringIO("\n \n"))


# ---- the CLI -----------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    mech = RAPPOR(k=32, h=2, m=16, **NORMAL_NOISE)
    rng = np.random.default_rng(12)
    values = ["alpha"] * 6000 + ["beta"] * 3000 + ["gamma"] * 1000
    paths = {
        "params": tmp_path / "params.csv",
        "reports": tmp_path / "reports.csv",
        "candidates": tmp_path / "candidates.txt",
        "counts": tmp_path / "counts.csv",
    }
    reports = mech.simulate_clients(values, rng=rng)
    write_params(paths["params"], mech)
    write_reports(paths["reports"], mech, reports)
    write_candidates(paths["candidates"], ["alpha", "beta", "gamma", "delta"])
    write_counts(paths["counts"], mech.aggregate(reports))
    return paths


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_has_the_estimate_shape(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["rappor-decode", "--params", str(files["params"]), "--candidates"]
    code, out, err = run_cli([*args, str(files["candidates"]), "--reports", str(files["reports"]),
                              "--format", "json"], capsys)  # fmt: skip
    assert code == 0 and not err
    result = json.loads(out)
    assert result["n"] == 10_000
    assert result["mechanism"] == {"mechanism": "rappor", "k": 32, "h": 2, "m": 16, **NORMAL_NOISE}
    items = {item["value"]: item for item in result["items"]}
    assert list(items) == ["alpha", "beta", "gamma", "delta"]
    for item in items.values():
        assert {"value", "frequency", "std_error", "significant"} <= set(item)
    for value, share in (("alpha", 0.6), ("beta", 0.3), ("gamma", 0.1)):
        assert items[value]["significant"]
        assert abs(items[value]["frequency"] - share) <= 5.5 * items[value]["std_error"]
    assert not items["delta"]["significant"]
    assert "cannot be found" in result["note"]
    # --counts gives the same answer as --reports.
    code, out_counts, _ = run_cli([*args, str(files["candidates"]), "--counts",
                                   str(files["counts"])], capsys)  # fmt: skip
    assert code == 0 and json.loads(out_counts)["items"] == result["items"]


def test_cli_table(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        ["rappor-decode", "--params", str(files["params"]), "--reports", str(files["reports"]),
         "--candidates", str(files["candidates"]), "--format", "table"], capsys,
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    columns = ["value", "frequency", "std_error", "ci_low", "ci_high", "significant"]
    assert lines[0].split() == columns  # the interval columns of every estimate table
    assert lines[1].split()[0] == "alpha" and lines[1].split()[-1] == "yes"
    assert lines[4].split()[0] == "delta" and lines[4].split()[-1] == "no"
    assert "cannot be found" in out


def test_cli_reports_malformed_files_in_one_line(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    text = files["reports"].read_text().splitlines()
    text[4] = "3,2,0101"
    files["reports"].write_text("\n".join(text) + "\n")
    code, out, err = run_cli(
        ["rappor-decode", "--params", str(files["params"]), "--reports", str(files["reports"]),
         "--candidates", str(files["candidates"])], capsys,
    )  # fmt: skip
    assert code == 2 and not out
    assert err.count("\n") == 1
    assert f"{files['reports']}, line 5: bits must have exactly 32 characters; got 4" in err


def test_to_dict_is_json_safe() -> None:
    mech = RAPPOR(k=8, h=1, m=2, **NORMAL_NOISE)
    est = decode(mech, mech.simulate_clients(["a"] * 500, rng=np.random.default_rng(0)), ["a", "b"])
    payload: dict[str, Any] = est.to_dict()
    json.dumps(payload, allow_nan=False)
    assert payload["detected"] == int(est.significant.sum())
