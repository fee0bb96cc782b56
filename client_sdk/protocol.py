"""The upload protocol shared by the SDK and the collector (docs/architecture.md).

One definition of what both sides must agree on: the format of a report id, the canonical
content of a campaign and its ``config_id``, and the RFC 9457 problem ``type`` URIs the SDK
reacts to. Report ids and idempotent uploads follow the IETF DAP upload rules
(draft-ietf-ppm-dap, section 4.4: a client-chosen random 128-bit report id; a replayed report is
not counted twice; per-report errors; problem details for request-level errors).

Imports nothing from ``collector`` or ``analysis``; the collector imports this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from client_sdk.config import config_id

__all__ = [
    "DEFAULT_MIN_BATCH_SIZE",
    "PROBLEM_TYPES",
    "REPORT_ID_PATTERN",
    "campaign_config_id",
    "campaign_content",
    "is_report_id",
    "problem_type",
]

DEFAULT_MIN_BATCH_SIZE = 100
"""Fewest reports an estimate of a campaign may be computed from, unless the campaign says."""

REPORT_ID_PATTERN = re.compile(r"[0-9a-f]{32}")
"""A report id: 128 random bits as 32 lowercase hex characters (``secrets.token_hex(16)``)."""

_PROBLEM_PREFIX = "urn:ldp-telemetry:problem:"

PROBLEM_TYPES: dict[str, str] = {
    slug: _PROBLEM_PREFIX + slug
    for slug in (
        "malformed-request",  # 400: not JSON, wrong types, missing or unknown fields
        "unauthorized",  # 401: missing or wrong admin token
        "not-found",  # 404: unknown campaign or route
        "method-not-allowed",  # 405
        "campaign-conflict",  # 409: a different body for an existing campaign name
        "stale-config",  # 409: the upload's config_id is not the campaign's
        "request-timeout",  # 408: the body stopped arriving (a slow or stalled client)
        "payload-too-large",  # 413: body above MAX_CONTENT_LENGTH or batch above the cap
        "unsupported-media-type",  # 415: not application/json
        "unprocessable",  # 422: e.g. no estimator for this mechanism, batch below minimum
        "rate-limited",  # 429 (with Retry-After): uploads above LDP_RATE_LIMIT
        "overloaded",  # 503 (with Retry-After): the database is busy beyond its timeout
        "database-unavailable",  # 503 (with Retry-After): deleted, replaced or read-only database
        "internal-error",  # 500: a bug; no known bad input reaches it
        "shuffled-campaign",  # 409: a direct upload to a campaign that only takes shuffled batches
        "not-shuffled",  # 409: a shuffler batch or upload for a campaign without "shuffle"
        "campaign-closed",  # 410: the campaign was closed to new reports (estimates remain)
        "campaign-expired",  # 410: the campaign is past its "expires" day (estimates remain)
        "campaign-not-empty",  # 409: deleting a campaign with reports without with_reports=1
        "secure-aggregation-campaign",  # 409: reports or an estimate of a DAP campaign
        "forwarder-down",  # 503 (shuffler /readyz): its forwarder exited and is being restarted
        "untrusted-campaign",  # 502 (shuffler): the collector's document fails its config_id
    )
}
"""Stable RFC 9457 ``type`` URIs, by short name."""


def problem_type(slug: str) -> str:
    """The ``type`` URI of a problem (``KeyError`` for an unknown slug, a programming error)."""
    return PROBLEM_TYPES[slug]


def is_report_id(value: Any) -> bool:
    """True for a string of exactly 32 lowercase hex characters."""
    return isinstance(value, str) and REPORT_ID_PATTERN.fullmatch(value) is not None


def campaign_content(
    *,
    mechanism: Mapping[str, Any],
    domain: Sequence[str] | None,
    policy: Mapping[str, Any] | None,
    min_batch_size: int,
    shuffle: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything that changes how a campaign's reports are produced or read.

    The ``config_id`` hashes this (not the campaign's name or creation time), so the SDK can
    recompute it from a fetched campaign and refuse one that does not match. ``shuffle`` (a
    shuffled campaign's central target) is part of it only when present, so the ids of other
    campaigns are unchanged.
    """
    content = {
        "mechanism": dict(mechanism),
        "domain": None if domain is None else list(domain),
        "policy": None if policy is None else dict(policy),
        "min_batch_size": int(min_batch_size),
    }
    if shuffle is not None:
        content["shuffle"] = dict(shuffle)
    return content


def campaign_config_id(
    *,
    mechanism: Mapping[str, Any],
    domain: Sequence[str] | None,
    policy: Mapping[str, Any] | None,
    min_batch_size: int,
    shuffle: Mapping[str, Any] | None = None,
) -> str:
    """``client_sdk.config.config_id`` of :func:`campaign_content`."""
    return config_id(
        campaign_content(
            mechanism=mechanism,
            domain=domain,
            policy=policy,
            min_batch_size=min_batch_size,
            shuffle=shuffle,
        )
    )
