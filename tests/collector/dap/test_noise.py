"""Noise with real processes: each aggregator adds discrete Laplace noise of scale
sensitivity/epsilon; the collected result minus the truth follows the sum of two independent
draws (chi-square goodness of fit at a stated 0.1 % false-failure rate), and the standard error
``ldp-analyze collect`` states is that distribution's."""

from __future__ import annotations

import json
import math
import os
import time
from fractions import Fraction

import numpy as np
import pytest
import requests
from scipy import stats

from analysis.accounting import Zcdp
from client_sdk.dap.messages import CollectionJobReq, Interval, Query
from client_sdk.dap.upload import prepare_report
from client_sdk.sampling import DiscreteGaussian, DiscreteLaplace
from collector.dap.task import b64encode
from tests.collector.dap.conftest import COLLECTOR_TOKEN, TIME_PRECISION, DapPair

LENGTH = 100
NOISY = ({"type": "histogram", "length": LENGTH, "chunk_length": 10}, 10, "laplace:1")
ALPHA = 1e-3  # the test's false-failure rate (the noise comes from the OS CSPRNG: no seed)


def two_laplace_pmf(scale: Fraction, support: int) -> np.ndarray:
    """P[X + Y = k] for k in [-support, support], X and Y independent discrete Laplace."""
    one = DiscreteLaplace(scale).pmf(np.arange(-support, support + 1))
    return np.convolve(one, one)[support : 3 * support + 1]


@pytest.mark.parametrize("dap_pair", [NOISY], indirect=True)
def test_noise_follows_two_discrete_laplaces(dap_pair: DapPair) -> None:
    unit = int(time.time()) // TIME_PRECISION
    task = dap_pair.device_task()
    truth = np.zeros((2, LENGTH), dtype=np.int64)
    reports = []
    for batch, hours_ago in enumerate((0, 5)):  # two disjoint batches: 200 noisy coordinates
        for i in range(30):
            bucket = (7 * i + batch) % LENGTH
            truth[batch, bucket] += 1
            reports.append(prepare_report(task, bucket, now=(unit - hours_ago) * TIME_PRECISION))
    assert dap_pair.upload(reports).status == ()
    assert dap_pair.drive()["aggregated"] == 60
    residuals = []
    for batch, interval in enumerate((f"{unit},1", f"{unit - 5},1")):
        done = dap_pair.collect(interval)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["report_count"] == 30 and result["epsilon"] == 1.0
        # The task's collections so far, as the Leader lists them, compose: k epsilon.
        assert result["privacy"]["collections"] == batch + 1
        assert result["privacy"]["cumulative"]["epsilon"] == batch + 1.0
        residuals += list(np.asarray(result["estimate"]) - truth[batch])
    # Stated standard error: sqrt(2 Var[DL(2)]) for Histogram (sensitivity 2) at epsilon 1.
    scale = Fraction(2)
    assert result["std_errors"] == [math.sqrt(2 * DiscreteLaplace(scale).variance())] * LENGTH
    assert any(r != 0 for r in residuals)  # there is noise at all
    # Chi-square goodness of fit over bins |k| <= 5 each, and the two tails.
    pmf = two_laplace_pmf(scale, 200)
    centre = 200
    edges = list(range(-5, 6))
    expected = (
        [pmf[: centre - 5].sum()] + [pmf[centre + k] for k in edges] + [pmf[centre + 6 :].sum()]
    )
    r = np.asarray(residuals)
    observed = [np.sum(r < -5)] + [np.sum(r == k) for k in edges] + [np.sum(r > 5)]
    expected_counts = np.asarray(expected) * len(r)
    assert expected_counts.min() >= 5  # the chi-square approximation's usual condition
    _, p_value = stats.chisquare(observed, expected_counts * (len(r) / expected_counts.sum()))
    assert p_value > ALPHA, (observed, expected_counts.round(1).tolist())


@pytest.mark.parametrize("own_dap_pair", [({"type": "count"}, 5, "laplace:1")], indirect=True)
def test_a_collection_is_noised_once_across_polls_and_a_leader_crash(own_dap_pair: DapPair) -> None:
    """Fresh noise per poll would let a Collector average it away: every poll of a job, before
    and after a SIGKILL of the Leader, returns the same sealed bytes."""
    dap_pair = own_dap_pair  # it kills a server: servers of its own
    dap_pair.upload_measurements([True] * 6)
    dap_pair.drive()
    unit = int(time.time()) // TIME_PRECISION
    req = CollectionJobReq(Query.time_interval(Interval(unit - 1, 3)))
    url = (
        f"{dap_pair.leader_dap}/tasks/{dap_pair.spec.task_id_text}/collection_jobs/"
        f"{b64encode(os.urandom(16))}"
    )
    headers = {"Authorization": f"Bearer {COLLECTOR_TOKEN}"}
    media = {**headers, "Content-Type": req.MEDIA_TYPE}
    assert requests.put(url, data=req.encode(), headers=media, timeout=30).status_code == 201
    first = requests.get(url, headers=headers, timeout=60)
    assert first.status_code == 200
    assert requests.post(url, headers=headers, timeout=60).content == first.content
    dap_pair.leader.kill()
    dap_pair.leader.start()
    assert requests.get(url, headers=headers, timeout=60).content == first.content


GAUSSIAN = ({"type": "sum", "max_measurement": 10}, 5, "gaussian:1/2")


@pytest.mark.parametrize("dap_pair", [GAUSSIAN], indirect=True)
def test_gaussian_task_end_to_end(dap_pair: DapPair) -> None:
    """The discrete Gaussian through real processes: each aggregator's sigma^2 = Delta_2^2 /
    (2 rho) = 100; the stated standard error, rho, (epsilon, delta) per collection and
    composed over the task's two collections (2 rho), and the residuals within 6 standard
    errors (false-failure rate below 1e-8 for this nearly normal sum)."""
    unit = int(time.time()) // TIME_PRECISION
    task = dap_pair.device_task()
    values = {unit: [0, 10, 3, 7, 10, 1], unit - 5: [5, 5, 5, 9, 0, 2]}
    reports = [
        prepare_report(task, v, now=u * TIME_PRECISION) for u, vs in values.items() for v in vs
    ]
    assert dap_pair.upload(reports).status == ()
    assert dap_pair.drive()["aggregated"] == 12
    noise = DiscreteGaussian.at_least(100)
    assert noise.sigma2 == 100
    for k, (u, vs) in enumerate(values.items(), start=1):
        done = dap_pair.collect(f"{u},1")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        std_error = math.sqrt(2 * noise.variance())
        assert result["std_errors"] == [std_error]
        assert abs(result["estimate"] - sum(vs)) <= 6 * std_error
        assert (result["rho"], result["delta"]) == (0.5, 1e-6)
        assert result["epsilon"] == Zcdp(0.5).epsilon_at(1e-6)
        assert result["privacy"]["collections"] == k
        assert result["privacy"]["cumulative"] == Zcdp(0.5 * k).summary(1e-6)
