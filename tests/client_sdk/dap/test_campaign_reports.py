"""``conformance/dap_campaign_reports.json``: what ``TelemetryClient.record`` makes of values
recorded to the secure-aggregation campaigns of ``conformance/dap_campaigns.json``, with fixed
randomness, so that a port makes the same bytes (docs/dap.md, "The device"): ``local``'s words
from ``HmacWordSource(words_key)``, and each report's id, Prio3 ``rand`` and both HPKE ephemeral
keys. Each case holds its campaign document, the values, the measurements sharded (after
``local``), how many were clipped, and each queued payload (the encoded ``Report``, unpadded
base64url). The committed file must be what :func:`cases` builds (``python -m
tests.client_sdk.dap.test_campaign_reports`` rewrites it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from client_sdk.dap import upload
from client_sdk.dap.campaign import DapCampaign, b64encode
from client_sdk.dap.hpke import seal_base
from client_sdk.dap.messages import REPORT_ID_SIZE
from client_sdk.dap.upload import prepare_report
from client_sdk.randomness import HmacWordSource
from tests.client_sdk.dap.test_campaign_conformance import cases as campaign_cases

FILE = Path(__file__).parents[3] / "conformance" / "dap_campaign_reports.json"
NOW = 1_764_800_000
"""The recording time of every case (POSIX seconds)."""
RECORDED: list[tuple[str, list[Any]]] = [
    ("theme", ["dark", "light", "system", "dark", "dark", "light"]),  # histogram, local grr
    ("opted-in", [True, False, 1]),  # count
    ("minutes", [30, 2000, -5, 1440]),  # sum, two clipped
    ("theme-oue", ["dark", "system", "light", "dark"]),  # multihotcountvec, local oue
]
"""Campaign (a valid document of dap_campaigns.json) -> the values recorded."""


def _derived(label: str, size: int) -> bytes:
    """Fixed test bytes: SHA-256 in counter mode over a label (no randomness in the file)."""
    out = b""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:size]


def record_reports(document: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """``client._record_dap`` step by step with fixed randomness (module docstring)."""
    campaign = DapCampaign.from_document(document, name=document["name"])
    label = f"reports/{campaign.name}"
    words_key = _derived(f"{label}/words_key", 32)
    measurements, clipped = campaign.measurements(values)
    if campaign.local is not None:
        randomized = campaign.local.perturb(np.asarray(measurements), rng=HmacWordSource(words_key))
        sharded = [campaign.prio3_measurement(v) for v in np.asarray(randomized)]
    else:
        sharded = [
            campaign.prio3_measurement(m) if campaign.vdaf_type == "count" else m
            for m in measurements
        ]
    reports = []
    for i, measurement in enumerate(sharded):
        fixed = {
            "report_id": _derived(f"{label}/{i}/report_id", REPORT_ID_SIZE),
            "rand": _derived(f"{label}/{i}/rand", campaign.task.vdaf.RAND_SIZE),
            "leader_ephemeral_ikm": _derived(f"{label}/{i}/leader_eph", 32),
            "helper_ephemeral_ikm": _derived(f"{label}/{i}/helper_eph", 32),
        }
        queue = [fixed["leader_ephemeral_ikm"], fixed["helper_ephemeral_ikm"]]

        def fixed_seal(*args: Any, queue: list[bytes] = queue, **kwargs: Any) -> Any:
            return seal_base(*args, ephemeral_ikm=queue.pop(0), **kwargs)

        with mock.patch.object(upload, "seal_base", fixed_seal):
            report = prepare_report(
                campaign.task,
                measurement,
                now=NOW,
                report_id=fixed["report_id"],
                rand=fixed["rand"],
            )
        assert not queue, "prepare_report sealed an unexpected number of shares"
        reports.append(
            {**{k: v.hex() for k, v in fixed.items()}, "payload": b64encode(report.encode())}
        )
    return {
        "document": document,
        "values": values,
        "words_key": words_key.hex(),
        "now": NOW,
        "measurements": [m if isinstance(m, (bool, list)) else int(m) for m in sharded],
        "clipped": clipped,
        "reports": reports,
    }


def cases() -> dict[str, Any]:
    documents = {
        case["document"]["name"]: case["document"]
        for case in campaign_cases()["documents"]
        if case["valid"]
    }
    return {
        "protocol": 1,
        "about": "docs/dap.md, 'The device': the reports record makes of values with fixed "
        "randomness (payload: the outbox's unpadded base64url of the encoded Report)",
        "cases": [record_reports(documents[name], values) for name, values in RECORDED],
    }


def test_the_committed_file_is_what_the_cases_build() -> None:
    assert json.loads(FILE.read_text(encoding="utf-8")) == json.loads(json.dumps(cases()))


def test_local_randomization_is_exercised() -> None:
    """The histogram case's grr changes at least one index (so a port that skips ``local``, or
    draws its words differently, cannot match), and every report decodes under its own id."""
    data = json.loads(FILE.read_text(encoding="utf-8"))
    theme = data["cases"][0]
    labels = theme["document"]["domain"]
    assert theme["measurements"] != [labels.index(v) for v in theme["values"]]
    for case in data["cases"]:
        assert len(case["reports"]) == len(case["values"])
    oue = data["cases"][3]
    labels = oue["document"]["domain"]
    one_hot = [[i == labels.index(v) for i in range(len(labels))] for v in oue["values"]]
    assert all(len(m) == len(labels) for m in oue["measurements"])
    assert oue["measurements"] != one_hot


if __name__ == "__main__":
    FILE.write_text(json.dumps(cases(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
