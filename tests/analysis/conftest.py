"""Shared helpers of the analysis tests: a collector database filled with seeded reports."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from client_sdk.mechanisms import mechanism_from_config
from collector.storage import Storage


def store_campaign(db: Path, document: dict[str, Any], values: Any, seed: int = 0) -> None:
    """Create the campaign ``document`` in ``db`` and store its reports of ``values``, perturbed
    with numpy's generator seeded by ``seed`` (no reports for no values)."""
    mechanism = mechanism_from_config(document["mechanism"])
    with Storage(db) as storage:
        storage.create_campaign(document)
        if len(values):
            payloads = mechanism.to_wire(mechanism.perturb(values, rng=np.random.default_rng(seed)))
            storage.insert_reports(
                document["name"], [(secrets.token_hex(16), json.dumps(p)) for p in payloads]
            )
