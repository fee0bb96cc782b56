"""What the shuffler trusts of a campaign document the collector serves, and what it never does.

The collector is the party the shuffle protects against, so its document is checked as a device
checks it (``client_sdk.client.Campaign.from_document``: the ``config_id`` recomputed from the
content, the content a valid campaign), and the batch size the shuffler forwards is never below
the floor its own operator set, whatever ``shuffle.min_batch`` the document says
(docs/shuffler.md, "What the floor guarantees").
"""

from __future__ import annotations

from typing import Any, NamedTuple

from client_sdk.client import Campaign

__all__ = ["DEFAULT_MIN_BATCH_FLOOR", "ShufflePlan", "shuffle_plan"]

DEFAULT_MIN_BATCH_FLOOR = 100
"""The smallest batch a shuffler forwards unless its operator says otherwise (``ldp-shuffler
serve --min-batch-floor``). At (central epsilon 1, delta 1e-6) 100 shuffled reports amplify a
local epsilon of about 1.3; a document may ask for more, never for less."""


class ShufflePlan(NamedTuple):
    """A verified shuffled campaign: its ``config_id``, the ``min_batch`` it declares, and the
    size below which the shuffler forwards nothing: ``max(floor, min_batch)``."""

    config_id: str
    declared_min_batch: int
    min_batch: int


def shuffle_plan(document: Any, name: str, floor: int) -> ShufflePlan | None:
    """The plan of campaign ``name`` from the collector's ``document``; ``None`` when the
    campaign is not shuffled. ``ValueError`` (a ``CampaignVerificationError``) when the document
    does not verify: its ``config_id`` is not the hash of its content, or the content is not a
    valid campaign named ``name``."""
    campaign = Campaign.from_document(document, name=name)
    shuffle = campaign.document.get("shuffle")
    if not isinstance(shuffle, dict):
        return None
    declared = int(shuffle["min_batch"])  # checked by the verification (at least 2)
    return ShufflePlan(campaign.config_id, declared, max(floor, declared))
