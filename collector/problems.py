"""RFC 9457 problem details: every error the collector answers is ``application/problem+json``
with a stable ``type`` URI (``client_sdk.protocol.PROBLEM_TYPES``), a ``title``, the ``status``
and a ``detail`` that names the field and the value.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, json
from werkzeug.exceptions import HTTPException

from client_sdk.protocol import problem_type
from collector.dbguard import DatabaseReplaced
from collector.storage import CampaignNotFound, SecureAggregationCampaign, StorageBusy

logger = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_TITLES = {
    "malformed-request": "Malformed request",
    "unauthorized": "Unauthorized",
    "not-found": "Not found",
    "method-not-allowed": "Method not allowed",
    "campaign-conflict": "Campaign already exists with other content",
    "stale-config": "Stale campaign configuration",
    "request-timeout": "Request timeout",
    "payload-too-large": "Payload too large",
    "unsupported-media-type": "Unsupported media type",
    "unprocessable": "Unprocessable request",
    "overloaded": "Service overloaded",
    "database-unavailable": "Database unavailable",
    "rate-limited": "Too many reports",
    "internal-error": "Internal server error",
    "shuffled-campaign": "Campaign takes shuffled batches only",
    "not-shuffled": "Campaign is not shuffled",
    "forwarder-down": "Shuffler forwarder down",
    "untrusted-campaign": "Campaign document does not verify",
    "campaign-closed": "Campaign closed",
    "campaign-expired": "Campaign expired",
    "campaign-not-empty": "Campaign still has reports",
    "secure-aggregation-campaign": "Campaign is aggregated by a DAP pair",
}

_SLUG_BY_STATUS = {
    400: "malformed-request",
    401: "unauthorized",
    404: "not-found",
    405: "method-not-allowed",
    408: "request-timeout",
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "unprocessable",
    429: "rate-limited",
    503: "overloaded",
}


class Problem(Exception):
    """Raise from a view to answer with a problem document."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.headers = dict(headers or {})
        self.extensions = extensions


def problem_response(
    status: int,
    slug: str | None,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> Response:
    """A problem document; ``slug=None`` is RFC 9457's ``about:blank`` (the status says it all)."""
    body: dict[str, Any] = {
        "type": problem_type(slug) if slug else "about:blank",
        "title": _TITLES.get(slug or "", "Error"),
        "status": status,
        "detail": detail,
        **extensions,
    }
    response = Response(json.dumps(body), status=status, mimetype=PROBLEM_MEDIA_TYPE)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def register_error_handlers(app: Flask) -> None:
    """Every error becomes a problem document, unexpected ones included (logged, then 500)."""

    @app.errorhandler(Problem)
    def _problem(error: Problem) -> Response:
        return problem_response(
            error.status, error.slug, error.detail, headers=error.headers, **error.extensions
        )

    @app.errorhandler(CampaignNotFound)
    def _not_found(error: CampaignNotFound) -> Response:
        return problem_response(404, "not-found", str(error))

    @app.errorhandler(SecureAggregationCampaign)
    def _secure_aggregation(error: SecureAggregationCampaign) -> Response:
        return problem_response(
            409,
            "secure-aggregation-campaign",
            str(error),
            leader=error.leader,
            task_id=error.task_id,
        )

    @app.errorhandler(StorageBusy)
    def _busy(error: StorageBusy) -> Response:
        retry_after = str(app.config["RETRY_AFTER"])
        return problem_response(
            503,
            "overloaded",
            f"the database is busy; retry after {retry_after} s",
            headers={"Retry-After": retry_after},
        )

    @app.errorhandler(DatabaseReplaced)
    def _replaced(error: DatabaseReplaced) -> Response:
        logger.error("refusing requests: %s; restart the collector on the right file", error)
        return problem_response(
            503,
            "database-unavailable",
            "the collector's database file was deleted or replaced; nothing is acknowledged "
            "until an operator restarts it",
            headers={"Retry-After": str(app.config["RETRY_AFTER"])},
        )

    @app.errorhandler(HTTPException)
    def _http(error: HTTPException) -> Response:
        status = error.code or 500
        headers = {}
        if status == 405 and error.valid_methods:  # type: ignore[attr-defined]
            headers["Allow"] = ", ".join(error.valid_methods)  # type: ignore[attr-defined]
        detail = error.description or error.name
        extensions = {}
        if status == 413:  # the limit, as the chunked path says it: a sender cuts to fit
            limit = app.config["MAX_CONTENT_LENGTH"]
            detail = f"request body larger than {limit} bytes (MAX_CONTENT_LENGTH)"
            extensions["max_content_length"] = limit
        return problem_response(
            status, _SLUG_BY_STATUS.get(status), detail, headers=headers, **extensions
        )

    @app.errorhandler(sqlite3.OperationalError)
    def _database(error: sqlite3.OperationalError) -> Response:
        logger.exception("database error")
        retry_after = str(app.config["RETRY_AFTER"])
        return problem_response(
            503, "overloaded", "the database is unavailable", headers={"Retry-After": retry_after}
        )

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        logger.exception("unhandled error")
        return problem_response(500, "internal-error", "an internal error occurred")
