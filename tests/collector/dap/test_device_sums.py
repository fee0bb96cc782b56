"""Sum and SumVec campaigns through the real ``TelemetryClient`` to a real DAP pair (the
histogram and count campaigns are in ``test_device.py``): values clipped on the device to
``[0, max_measurement]``, sharded, sealed, uploaded, aggregated and collected.

Noise: each Aggregator adds discrete Laplace noise of scale t = sensitivity/40 (``laplace:40``):
t = 5/40 for the Sum, 6/40 for the SumVec (length 3 times max_measurement 2). A draw is at least
2 in magnitude with probability 2 e^(-2/t) / (1 + e^(-1/t)) < 3.3e-6 (t = 0.15), and the two draws
of a coordinate are both nonzero with probability (1 - tanh(1/(2t)))^2 < 6.5e-6; so every
collected coordinate is asserted within 1 of the truth (failure below 6e-5 for the four
coordinates), and the ``report_count`` is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from client_sdk import TelemetryClient
from tests.collector.dap.conftest import DapPair
from tests.collector.dap.test_device import campaign_document, trusting

SUM = {"type": "sum", "max_measurement": 5}
SUMVEC = {"type": "sumvec", "length": 3, "max_measurement": 2, "chunk_length": 2}


def _record_and_collect(pair: DapPair, tmp_path: Path, values: list[Any]) -> dict[str, Any]:
    document = campaign_document(pair, "load")
    for device in range(3):
        with TelemetryClient(
            pair.leader.url,
            state_dir=tmp_path / f"device-{device}",
            campaigns=[document],
            policy=trusting(pair),
        ) as client:
            mine = values[device::3]
            client.record_many("load", mine)
            assert client.flush() == len(mine)
            assert client.status()["last_error"] is None
    assert pair.drive()["aggregated"] == len(values)
    done = pair.collect()
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["report_count"] == len(values)
    return result


@pytest.mark.parametrize("dap_pair", [(SUM, 10, "laplace:40")], indirect=True)
def test_sum_devices_through_the_sdk(dap_pair: DapPair, tmp_path: Path) -> None:
    values = [i % 4 for i in range(11)] + [9]  # 9 is clipped to max_measurement 5 on the device
    result = _record_and_collect(dap_pair, tmp_path, values)
    truth = sum(min(v, 5) for v in values)
    assert abs(result["estimate"] - truth) <= 1, (result["estimate"], truth)


@pytest.mark.parametrize("dap_pair", [(SUMVEC, 10, "laplace:40")], indirect=True)
def test_sumvec_devices_through_the_sdk(dap_pair: DapPair, tmp_path: Path) -> None:
    values = [[i % 3, (i + 1) % 3, 2] for i in range(12)]
    result = _record_and_collect(dap_pair, tmp_path, values)
    truth = [sum(v[j] for v in values) for j in range(3)]
    assert len(result["estimate"]) == 3
    for got, want in zip(result["estimate"], truth, strict=True):
        assert abs(got - want) <= 1, (result["estimate"], truth)
