"""The ``/v1`` HTTP API (docs/collector.md): campaigns, report uploads, admin estimate and
export. Views parse and validate, then call ``collector.storage``."""

from __future__ import annotations

import json
import json.scanner
import logging
import math
import sqlite3
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

from flask import Blueprint, Response, current_app, request, url_for

from client_sdk.protocol import is_report_id, problem_type
from collector.cors import DeviceRoute
from collector.dbguard import DatabaseReplaced
from collector.estimates import BatchTooSmall, UnsupportedEstimate, aggregate_campaign, summarize
from collector.export import check_day
from collector.ingest import MisdirectedEnvelope, Rejection, open_report, validate_batch
from collector.keys import EnvelopeOpener, active_key, ensure_key
from collector.lifecycle import default_policy_warnings
from collector.problems import Problem
from collector.ratelimit import RATE_BUCKET_HEADER
from collector.storage import (
    AnyStoredCampaign,
    CampaignConflict,
    CampaignNotEmpty,
    StorageBusy,
    StoredCampaign,
)
from collector.web import (
    ensure_same_database,
    get_storage,
    query_int,
    read_json,
    require_admin,
    require_shuffler,
    storage_opener,
    today,
    write_turn,
)

bp = Blueprint("api", __name__, url_prefix="/v1")
logger = logging.getLogger(__name__)

NDJSON_MEDIA_TYPE = "application/x-ndjson"
NEXT_CURSOR_HEADER = "Ldp-Next-Cursor"
_UPLOAD_FIELDS = {"config_id", "reports"}

DEVICE_ROUTES = {
    "api.get_campaign": DeviceRoute("GET"),
    "api.upload_reports": DeviceRoute("POST", ("Content-Type",)),
}
"""The routes the SDK calls (``client_sdk.client``): what ``--cors-origin`` opens to web pages."""


def export_error_line(error: Exception) -> str:
    """The last line of an export that failed mid-way: ``{"error": <problem document>}``."""
    busy = isinstance(error, (StorageBusy, sqlite3.OperationalError, DatabaseReplaced))
    status, slug = (503, "database-unavailable") if busy else (500, "internal-error")
    problem = {
        "type": problem_type(slug),
        "title": "Export interrupted",
        "status": status,
        "detail": "the export failed before its last row; fetch this page again "
        "(rows already received are valid)",
    }
    return json.dumps({"error": problem}, separators=(",", ":")) + "\n"


def _served(campaign: AnyStoredCampaign) -> dict[str, Any]:
    """The campaign document with its ``status`` (``collector.storage.CAMPAIGN_STATUSES``); a
    shuffled one carries the public key devices seal to. A secure-aggregation one is the
    document ``DapCampaign.from_document`` verifies on the device (docs/dap.md)."""
    document = {**campaign.document(), "status": campaign.status(today())}
    if isinstance(campaign, StoredCampaign) and campaign.shuffle is not None:
        key = active_key(get_storage())
        if key is not None:
            document["public_key"] = {"key_id": key[0], "key": key[1]}
    return document


@bp.get("/campaigns")
def list_campaigns() -> dict[str, Any]:
    return {"campaigns": [_served(c) for c in get_storage().list_all_campaigns()]}


@bp.post("/campaigns")
@require_admin
def create_campaign() -> tuple[dict[str, Any], int, dict[str, str]]:
    """201 with the new campaign; 200 for the same body again; 409 for a different one."""
    body = read_json()
    try:
        campaign, created = get_storage().create_campaign(
            body, max_body=current_app.config["MAX_CONTENT_LENGTH"]
        )
    except CampaignConflict as error:
        raise Problem(409, "campaign-conflict", str(error)) from None
    except ValueError as error:
        raise Problem(400, "malformed-request", str(error)) from None
    if isinstance(campaign, StoredCampaign) and campaign.shuffle is not None:
        with write_turn():
            ensure_key(get_storage())
    location = url_for("api.get_campaign", name=campaign.name)
    body = _served(campaign)
    warnings = default_policy_warnings(campaign) if isinstance(campaign, StoredCampaign) else []
    if warnings:  # only then: the usual answer stays the served document
        body["warnings"] = warnings
    return body, 201 if created else 200, {"Location": location}


@bp.get("/campaigns/<name>")
def get_campaign(name: str) -> dict[str, Any]:
    return _served(get_storage().get_any_campaign(name))


@bp.delete("/campaigns/<name>")
@require_admin
def delete_campaign(name: str) -> dict[str, Any]:
    """Delete a campaign: 409 ``campaign-not-empty`` while it has reports, unless
    ``?with_reports=1``; answers ``{"deleted", "reports"}`` (how many reports went with it)."""
    flag = request.args.get("with_reports", "0")
    if flag not in ("0", "1"):
        raise Problem(400, "malformed-request", f"with_reports must be 0 or 1; got {flag[:40]!r}")
    storage = get_storage()
    try:
        with write_turn():
            removed = storage.delete_campaign(name, with_reports=flag == "1")
    except CampaignNotEmpty as error:
        raise Problem(409, "campaign-not-empty", str(error), reports=error.reports) from None
    ensure_same_database()
    return {"deleted": name, "reports": removed}


@bp.post("/campaigns/<name>/reports")
def upload_reports(name: str) -> dict[str, Any]:
    """Store a batch; answer ``{"accepted", "duplicate", "rejected": [{"index", "reason"}]}``.

    Request-level errors (400/404/409/413/415) store nothing; report-level errors reject only
    that report. One transaction per upload; a report id already stored is a duplicate.
    """
    body = read_json()
    if not isinstance(body, dict):
        raise Problem(400, "malformed-request", "the body must be a JSON object")
    unknown = sorted(set(body) - _UPLOAD_FIELDS)
    if unknown:
        raise Problem(400, "malformed-request", f"unknown field(s): {', '.join(unknown)[:200]}")
    config_id = body.get("config_id")
    reports = body.get("reports")
    if not isinstance(config_id, str):
        raise Problem(400, "malformed-request", "config_id must be a string")
    if not isinstance(reports, list):
        raise Problem(400, "malformed-request", "reports must be a list")
    cap = current_app.config["MAX_BATCH"]
    if len(reports) > cap:
        raise Problem(
            413,
            "payload-too-large",
            f"a batch holds at most {cap} reports (LDP_MAX_BATCH); got {len(reports)}",
            max_batch=cap,
        )
    storage = get_storage()
    campaign = storage.get_campaign(name)
    _refuse_if_closed(campaign)
    if campaign.shuffle is not None:
        raise Problem(
            409,
            "shuffled-campaign",
            f"campaign {name!r} is shuffled: devices upload sealed reports to the shuffler, "
            "never to the collector directly",
        )
    if config_id != campaign.config_id:
        raise Problem(
            409,
            "stale-config",
            f"config_id {config_id[:40]!r} is not campaign {name!r}'s current config; "
            "refetch the campaign",
            config_id=campaign.config_id,
        )
    batch = validate_batch(campaign.mechanism, reports)
    # Charged after validation: junk, unknown campaigns and stale configs cost no tokens, so a
    # flood of them cannot starve honest uploads (collector.ratelimit).
    limiter = current_app.extensions.get("ldp_rate_limit")
    if limiter is not None and batch.rows:
        wait = limiter.take(len(batch.rows), request.headers.get(RATE_BUCKET_HEADER))
        if wait > 0:
            raise Problem(
                429,
                "rate-limited",
                f"the collector admits {limiter.rate:g} reports per second; retry later",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
    accepted = duplicate = 0
    if batch.rows or batch.rejections:
        with write_turn():
            result = storage.insert_reports(campaign, batch.rows, rejected=batch.rejected_by_code())
        accepted, duplicate = result.accepted, result.duplicate
        ensure_same_database()  # committed to a file that is gone is not acknowledged: 503
    return {
        "accepted": accepted,
        "duplicate": duplicate,
        "rejected": [r.to_json() for r in batch.rejections],
    }


_BATCH_REQUIRED = frozenset({"batch_id", "config_id", "reports"})


def _batch_credentials(value: Any, size: int) -> tuple[int, int] | None:
    """A batch's ``credentials: {"per_credential", "uncredentialed"}`` (``shuffler.credentials``)
    as ``(per_credential, uncredentialed)``; 400 naming the field and the value otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"per_credential", "uncredentialed"}:
        raise Problem(
            400, "malformed-request", "credentials has exactly per_credential and uncredentialed"
        )
    per, without = value["per_credential"], value["uncredentialed"]
    if type(per) is not int or per < 1:
        raise Problem(
            400, "malformed-request", f"credentials.per_credential must be >= 1; got {per!r}"
        )
    if type(without) is not int or not 0 <= without <= size:
        raise Problem(
            400,
            "malformed-request",
            f"credentials.uncredentialed must be in [0, {size}]; got {without!r}",
        )
    return per, without


@bp.post("/campaigns/<name>/batches")
@require_shuffler
def upload_batch(name: str) -> dict[str, Any]:
    """A shuffler's batch ``{"batch_id", "config_id", "reports": [{"id", "payload": envelope}]}``:
    each envelope is opened and validated on its own (a bad one is rejected by its index), the
    valid ones stored with the batch size in one transaction; a batch id seen before answers
    what was stored then (``"replayed": true``) and stores nothing.

    A batch too large for one request comes in parts: ``"part": {"start", "total"}`` says these
    are its reports ``start`` to ``start + len(reports)`` of ``total``; ``total`` (not the
    part's length) must reach ``shuffle.min_batch``, each part is stored once, and the batch
    is recorded once with the size of all its parts (``Storage.insert_batch``)."""
    body = read_json()
    if not isinstance(body, dict) or not (
        _BATCH_REQUIRED <= set(body) <= _BATCH_REQUIRED | {"credentials", "part"}
    ):
        raise Problem(
            400,
            "malformed-request",
            "a batch has batch_id, config_id and reports (and credentials from a shuffler that "
            "meters them, part when in parts)",
        )
    batch_id, config_id, reports = body["batch_id"], body["config_id"], body["reports"]
    if not is_report_id(batch_id):
        raise Problem(400, "malformed-request", "batch_id must be 32 lowercase hex characters")
    if not isinstance(reports, list) or not isinstance(config_id, str):
        raise Problem(400, "malformed-request", "reports must be a list, config_id a string")
    cap = current_app.config["MAX_BATCH"]
    if len(reports) > cap:
        raise Problem(
            413, "payload-too-large", f"a batch holds at most {cap} reports", max_batch=cap
        )
    storage = get_storage()
    campaign = storage.get_campaign(name)
    _refuse_if_closed(campaign)
    if campaign.shuffle is None:
        raise Problem(409, "not-shuffled", f"campaign {name!r} does not take shuffled batches")
    if config_id != campaign.config_id:
        raise Problem(
            409, "stale-config", "config_id is not the campaign's", config_id=campaign.config_id
        )
    min_batch = int(campaign.shuffle["min_batch"])
    part = _batch_part(body.get("part"), len(reports))
    total = len(reports) if part is None else part[2]
    credentials = _batch_credentials(body.get("credentials"), total)
    if total < min_batch:
        raise Problem(
            422,
            "unprocessable",
            f"a shuffled batch of campaign {name!r} holds at least shuffle.min_batch = "
            f"{min_batch} reports; got {total} (smaller batches are not amplified enough)",
            min_batch=min_batch,
        )
    shaped = [i for i, e in enumerate(reports) if isinstance(e, dict) and e.keys() == _ENVELOPED]
    sealed_errors = [
        Rejection(i, "invalid_envelope", "a report is an object with 'id' and 'payload'")
        for i in sorted(set(range(len(reports))) - set(shaped))
    ]
    plaintexts, reasons = EnvelopeOpener(storage.private_keys()).open_all(
        [reports[i]["payload"] for i in shaped]
    )
    opened: list[Any] = [None] * len(reports)
    texts: list[str | None] = [None] * len(reports)
    nonces: list[str] = [""] * len(reports)
    for position, (index, plaintext) in enumerate(zip(shaped, plaintexts, strict=True)):
        try:
            if plaintext is None:
                raise ValueError(reasons[position])
            sealed = open_report(plaintext, campaign=name, config_id=campaign.config_id)
            opened[index] = {"id": reports[index]["id"], "payload": sealed.payload}
            texts[index], nonces[index] = sealed.text, sealed.nonce
        except MisdirectedEnvelope as error:
            sealed_errors.append(Rejection(index, "misdirected_envelope", str(error)[:300]))
        except (ValueError, RecursionError) as error:  # JSON, UTF-8, nesting of the plaintext
            sealed_errors.append(Rejection(index, "invalid_envelope", str(error)[:300]))
    positions = [i for i, entry in enumerate(opened) if entry is not None]
    known = [texts[i] for i in positions]
    batch = validate_batch(
        campaign.mechanism,
        [opened[i] for i in positions],
        texts=None if None in known else cast("list[str]", known),
        nonces=[nonces[i] for i in positions],
    )
    rejections = sorted(
        sealed_errors + [Rejection(positions[r.index], r.code, r.reason) for r in batch.rejections],
        key=lambda r: r.index,
    )
    rejected = Counter(r.code for r in rejections)
    # By fresh id (the batch's order is random anyway), the index is written page by page;
    # a stable sort, so the first of two copies of an id (or of a nonce) is the one stored.
    assert batch.nonces is not None
    order = sorted(range(len(batch.rows)), key=lambda i: batch.rows[i][0])
    try:
        with write_turn():
            result, answered, replayed = storage.insert_batch(
                campaign,
                batch_id,
                [batch.rows[i] for i in order],
                size=len(batch.rows),
                rejections=[r.to_json() for r in rejections],
                rejected=rejected,
                nonces=[batch.nonces[i] for i in order],
                credentials=credentials,
                part=part,
            )
    except ValueError as error:  # parts that disagree on their batch: nothing stored
        raise Problem(422, "unprocessable", str(error)) from None
    ensure_same_database()
    return {
        "batch_id": batch_id,
        "accepted": result.accepted,
        "duplicate": result.duplicate,
        "rejected": answered,
        "replayed": replayed,
    }


_ENVELOPED = frozenset({"id", "payload"})


def _batch_part(part: Any, count: int) -> tuple[int, int, int] | None:
    """``(start, count, total)`` of a batch's part (``None``: the whole batch); 400 naming the
    field and the value unless ``0 <= start``, ``1 <= count`` and ``start + count <= total``."""
    if part is None:
        return None
    if not isinstance(part, dict) or set(part) != {"start", "total"}:
        raise Problem(400, "malformed-request", "part has exactly start and total")
    start, total = part["start"], part["total"]
    for field, value in (("start", start), ("total", total)):
        if type(value) is not int or value < 0:
            raise Problem(
                400, "malformed-request", f"part.{field} must be an integer >= 0; got {value!r}"
            )
    if count < 1 or start + count > total:
        raise Problem(
            400,
            "malformed-request",
            f"part.start {start} + {count} reports is beyond part.total {total}",
        )
    return start, count, total


@bp.get("/campaigns/<name>/estimate")
@require_admin
def estimate(name: str) -> dict[str, Any]:
    """The debiased estimate (``?confidence=0.95``; ``?since=&until=``: the reports of those UTC
    days, ``YYYY-MM-DD``, inclusive); 422 below ``min_batch_size``."""
    confidence_text = request.args.get("confidence", "0.95")
    try:
        confidence = float(confidence_text)
        if not 0 < confidence < 1:
            raise ValueError
    except ValueError:
        raise Problem(
            400, "malformed-request", f"confidence must be in (0, 1); got {confidence_text[:40]!r}"
        ) from None
    try:
        since = check_day(request.args.get("since"), "since")
        until = check_day(request.args.get("until"), "until")
        if since is not None and until is not None and since > until:
            raise ValueError(f"since {since} is after until {until}")
    except ValueError as error:
        raise Problem(400, "malformed-request", str(error)[:200]) from None
    storage = get_storage()
    campaign = storage.get_campaign(name)
    statistic = aggregate_campaign(storage, campaign, since=since, until=until)
    try:
        document = summarize(campaign, statistic, confidence=confidence)
        if since is not None or until is not None:
            document.update(since=since, until=until)
        return document
    except (BatchTooSmall, UnsupportedEstimate) as error:
        raise Problem(422, "unprocessable", str(error), n=statistic.n) from None


@bp.get("/campaigns/<name>/reports")
@require_admin
def export_reports(name: str) -> Response:
    """Stored reports as NDJSON, one ``{"id", "payload"}`` per line, in storage order.

    Paged by an opaque cursor: ``?after=<cursor>&limit=<n>`` (default: from the start, 10000).
    The ``Ldp-Next-Cursor`` header is where the next page starts (pass it as ``after``); when
    more reports existed as the page was cut, a ``Link: <...>; rel="next"`` header is present
    too. Without it, the export is complete up to that cursor; later uploads appear after it.
    """
    after = query_int("after", 0, minimum=0, maximum=(1 << 63) - 1)
    limit = query_int("limit", 10_000, minimum=1, maximum=current_app.config["MAX_EXPORT_LIMIT"])
    storage = get_storage()
    storage.get_campaign(name)  # a secure-aggregation campaign has no reports here: 409
    page = storage.export_page(name, after=after, limit=limit)
    opener = storage_opener()

    def lines() -> Iterator[str]:
        # Its own connection: the stream outlives the request's storage handle. The status
        # line is sent before the first row is read, so a failure mid-way cannot change it:
        # the stream then ends with one {"error": <problem>} line instead of just stopping,
        # and a reader can tell a cut export from a complete one.
        try:
            with opener() as storage:
                for chunk in storage.export_rows(page):
                    # Payloads are stored as compact JSON text already: no re-encoding.
                    yield "".join(
                        f'{{"id":"{report_id}","payload":{payload}}}\n'
                        for report_id, payload in chunk
                    )
        except Exception as error:
            logger.exception("export of campaign %r failed mid-stream", name)
            yield export_error_line(error)

    response = Response(lines(), mimetype=NDJSON_MEDIA_TYPE)
    response.headers[NEXT_CURSOR_HEADER] = str(page.cursor)
    if page.has_more:
        next_url = url_for("api.export_reports", name=name, after=page.cursor, limit=limit)
        response.headers["Link"] = f'<{next_url}>; rel="next"'
    return response


def _refuse_if_closed(campaign: StoredCampaign) -> None:
    """410 ``campaign-closed`` for a campaign closed to new reports, 410 ``campaign-expired``
    for one past its ``expires`` day (UTC; ``LDP_TODAY`` in drills); its estimates remain."""
    name, closed = campaign.name, campaign.closed_at
    expires = campaign.expires
    if expires is not None and today() > expires:
        raise Problem(
            410,
            "campaign-expired",
            f"campaign {name!r} expired after {expires.isoformat()} and takes no more reports; "
            "its estimates stay available",
            expires=expires.isoformat(),
        )
    if closed is not None:
        raise Problem(
            410,
            "campaign-closed",
            f"campaign {name!r} was closed on {closed} and takes no more reports; its estimates "
            "stay available",
        )
