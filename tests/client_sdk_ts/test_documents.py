"""Campaign documents served by a real collector verify in the TypeScript SDK: its canonical JSON
(Python's float repr: ``1.0``, ``1e-06``) recomputes every served ``config_id``, and an altered
document is refused naming the field."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import requests

from collector.process import CollectorProcess
from tests.client_sdk_ts.conftest import DIST, require_node

DOCUMENTS: list[dict[str, Any]] = [
    {
        "name": "doc-grr",
        "mechanism": {"mechanism": "grr", "epsilon": 1, "k": 3},
        "domain": ["a", "b", "ç"],
        "policy": {"epsilon_per_report": 1.5, "reports_per_period": 4, "period_seconds": 86400},
    },
    {
        "name": "doc-gaussian",
        "mechanism": {
            "mechanism": "gaussian",
            "epsilon": 0.7,
            "delta": 1e-6,
            "lower": -1,
            "upper": 1,
        },
    },
    {
        "name": "doc-cms",
        "mechanism": {"mechanism": "cms", "epsilon": 4, "m": 64, "hashes": 4, "max_length": 16},
        "min_batch_size": 1000,
    },
    {
        "name": "doc-duchi",
        "mechanism": {"mechanism": "duchi", "epsilon": 2.5e-3, "lower": 0, "upper": 1e17},
    },
]

SCRIPT = """
import { readFileSync } from "node:fs";
const sdk = await import(process.argv[1]);
const out = [];
for (const text of JSON.parse(readFileSync(0, "utf8"))) {
  try { out.push(sdk.parseCampaignDocument(text).configId); }
  catch (error) { out.push("error: " + error.message); }
}
console.log(JSON.stringify(out));
"""


def verify_in_node(texts: list[str]) -> list[str]:
    result = subprocess.run(
        [require_node(), "--input-type=module", "-e", SCRIPT, str(DIST / "src" / "index.js")],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


def test_served_documents_verify_and_altered_ones_are_refused(
    ts_build: object, collector: CollectorProcess
) -> None:
    texts, ids = [], []
    for document in DOCUMENTS:
        served = collector.create_campaign(document)
        response = requests.get(f"{collector.url}/v1/campaigns/{document['name']}", timeout=30)
        assert response.status_code == 200
        texts.append(response.text)
        ids.append(served["config_id"])
    assert verify_in_node(texts) == ids
    # The served text keeps floats as Python wrote them; an edit of one number is caught.
    altered = texts[1].replace("1e-06", "1e-05")
    assert altered != texts[1]
    wrong_protocol = (
        texts[0].replace('"protocol":1', '"protocol":2').replace('"protocol": 1', '"protocol": 2')
    )
    (edited, protocol) = verify_in_node([altered, wrong_protocol])
    assert edited.startswith("error: campaign doc-gaussian: config_id does not match"), edited
    assert protocol.startswith("error: protocol must be 1"), protocol
