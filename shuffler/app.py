"""The shuffler's Flask app: devices' sealed uploads in, health and metrics out.

``POST /v1/campaigns/<name>/reports`` takes the body a device sends the collector, with each
payload a sealed envelope (``client_sdk.sealing``): ``{"config_id", "reports": [{"id",
"payload": envelope}]}``. The campaign must be shuffled and the config current (both read from
the collector's campaign document, cached briefly); each report's shape is checked (the
envelope's content cannot be: it is sealed to the collector), the good ones committed, then
acknowledged ``{"accepted", "duplicate", "rejected"}``. A shuffler that requires credentials
(``shuffler.credentials``) answers 401 without a valid one, and ``"deferred"``: the indices of
the reports past the credential's quota, not stored, for the device to send again later. Errors
are problem+json (the collector's handlers, ``collector.problems``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import requests
from flask import Blueprint, Flask, Response, current_app, request

from client_sdk.protocol import is_report_id
from client_sdk.sealing import check_envelope, check_envelopes
from collector import metrics as _metrics
from collector.cors import DeviceRoute, install_cors
from collector.dbguard import space_probe
from collector.problems import Problem, register_error_handlers
from collector.web import read_json
from shuffler.credentials import DEFAULT_QUOTA, CredentialVerifier, InvalidCredential
from shuffler.storage import DEFAULT_MAX_PENDING, PendingFull, ShufflerStorage
from shuffler.trust import DEFAULT_MIN_BATCH_FLOOR, ShufflePlan, shuffle_plan

__all__ = ["create_app"]

bp = Blueprint("shuffler", __name__)
CAMPAIGN_TTL = 30.0
_local = threading.local()
# The route devices call (``client_sdk.client``): what ``--cors-origin`` opens to web pages.
DEVICE_ROUTES = {"shuffler.upload": DeviceRoute("POST", ("Content-Type", "Authorization"))}


def create_app(config: Mapping[str, Any]) -> Flask:
    """The app. ``config``: ``DB``, ``COLLECTOR`` (base URL); optional ``MAX_BATCH`` (10000),
    ``MAX_CONTENT_LENGTH`` (16 MiB), ``RETRY_AFTER`` (1), ``MIN_BATCH_FLOOR``
    (``shuffler.trust.DEFAULT_MIN_BATCH_FLOOR``), ``VERIFIER`` (a
    ``shuffler.credentials.CredentialVerifier``: uploads then need a device credential;
    ``None``, the default, takes uploads from anyone) and ``QUOTA`` (reports one credential may
    have waiting per campaign, ``shuffler.credentials.DEFAULT_QUOTA``), ``MAX_PENDING`` (reports
    waiting per campaign, ``shuffler.storage.DEFAULT_MAX_PENDING``), ``CORS_ORIGINS`` (web
    origins whose pages may upload, ``collector.cors``; none by default)."""
    app = Flask(__name__, static_folder=None)
    app.config.update(
        {
            "MAX_BATCH": 10_000,
            "MAX_CONTENT_LENGTH": 16 * 1024 * 1024,
            "RETRY_AFTER": 1,
            "MIN_BATCH_FLOOR": DEFAULT_MIN_BATCH_FLOOR,
            "VERIFIER": None,
            "QUOTA": DEFAULT_QUOTA,
            "MAX_PENDING": DEFAULT_MAX_PENDING,
        }
    )
    app.config.update(config)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    ShufflerStorage(app.config["DB"]).close()  # creates the schema once, before any request
    app.extensions["ldp_campaigns"] = {}
    register_error_handlers(app)
    app.register_blueprint(bp)
    _metrics.instrument(app, "shuffler")
    install_cors(app, app.config.get("CORS_ORIGINS", ()), DEVICE_ROUTES)
    return app


def _storage() -> ShufflerStorage:
    storage = getattr(_local, "storage", None)
    if storage is None or getattr(_local, "db", None) != current_app.config["DB"]:
        storage = ShufflerStorage(current_app.config["DB"])
        _local.storage, _local.db = storage, current_app.config["DB"]
    return storage


def campaign_plan(name: str) -> ShufflePlan | None:
    """The verified plan of campaign ``name`` from the collector's document (cached
    ``CAMPAIGN_TTL`` s; ``shuffler.trust``), ``None`` if it is not shuffled; 404 if unknown, 503
    if the collector does not answer, 502 ``untrusted-campaign`` if its document does not verify
    (its ``config_id`` is not the hash of its content)."""
    cache: dict[str, tuple[float, ShufflePlan | None]] = current_app.extensions["ldp_campaigns"]
    hit = cache.get(name)
    if hit is not None and time.monotonic() - hit[0] < CAMPAIGN_TTL:
        return hit[1]
    url = f"{current_app.config['COLLECTOR'].rstrip('/')}/v1/campaigns/{quote(name, safe='')}"
    try:
        response = requests.get(url, timeout=10)
    except requests.RequestException:
        raise Problem(
            503,
            "overloaded",
            "the collector does not answer; retry later",
            headers={"Retry-After": "5"},
        ) from None
    if response.status_code == 404:
        raise Problem(404, "not-found", f"no campaign named {name!r}")
    if response.status_code != 200:
        raise Problem(503, "overloaded", "the collector refused the campaign lookup")
    try:
        plan = shuffle_plan(response.json(), name, current_app.config["MIN_BATCH_FLOOR"])
    except ValueError as error:
        raise Problem(
            502,
            "untrusted-campaign",
            f"the collector served a campaign document the shuffler does not trust: {error}",
        ) from None
    cache[name] = (time.monotonic(), plan)
    return plan


def _credential() -> bytes | None:
    """The id of the upload's credential (``Authorization: Bearer <token>``) when the shuffler
    requires one (``VERIFIER``); 401 if it is missing or does not verify."""
    verifier: CredentialVerifier | None = current_app.config["VERIFIER"]
    if verifier is None:
        return None
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    try:
        if scheme.lower() != "bearer" or not token:
            raise InvalidCredential("send the device's credential as Authorization: Bearer")
        return verifier.verify(token.strip())
    except InvalidCredential as error:
        raise Problem(
            401,
            "unauthorized",
            f"this shuffler takes uploads from credentialed devices only: {error}",
            headers={"WWW-Authenticate": 'Bearer realm="ldp-shuffler"'},
        ) from None


@bp.post("/v1/campaigns/<name>/reports")
def upload(name: str) -> dict[str, Any]:
    credential = _credential()
    body = read_json()
    if not isinstance(body, dict) or set(body) != {"config_id", "reports"}:
        raise Problem(400, "malformed-request", "the body has exactly config_id and reports")
    config_id, reports = body["config_id"], body["reports"]
    if not isinstance(config_id, str) or not isinstance(reports, list):
        raise Problem(400, "malformed-request", "config_id must be a string, reports a list")
    cap = current_app.config["MAX_BATCH"]
    if len(reports) > cap:
        raise Problem(413, "payload-too-large", f"a batch holds at most {cap} reports")
    plan = campaign_plan(name)
    if plan is None:
        raise Problem(409, "not-shuffled", f"campaign {name!r} is not shuffled")
    if config_id != plan.config_id:
        raise Problem(
            409,
            "stale-config",
            "config_id is not the campaign's current config; refetch it",
            config_id=plan.config_id,
        )
    good, rejected = _checked(reports)
    max_pending = current_app.config["MAX_PENDING"]
    deferred: list[int] = []
    try:
        if credential is None:
            accepted, duplicate = (
                _storage().accept(name, config_id, good, max_pending=max_pending)
                if good
                else (0, 0)
            )
        else:
            accepted, duplicate, deferred = _storage().accept_held(
                name,
                config_id,
                good,
                credential=credential,
                quota=current_app.config["QUOTA"],
                max_pending=max_pending,
            )
    except PendingFull as full:  # refused before anything is committed or acknowledged
        raise Problem(
            503,
            "overloaded",
            str(full),
            headers={"Retry-After": str(current_app.config["RETRY_AFTER"])},
            pending=full.pending,
            max_pending=full.cap,
        ) from None
    if credential is None:
        return {"accepted": accepted, "duplicate": duplicate, "rejected": rejected}
    if deferred:  # indices into the upload, not into the good reports
        refused = {r["index"] for r in rejected}
        positions = [i for i in range(len(reports)) if i not in refused]
        deferred = [positions[i] for i in deferred]
    return {
        "accepted": accepted,
        "duplicate": duplicate,
        "rejected": rejected,
        "deferred": deferred,
    }


def _checked(reports: list[Any]) -> tuple[list[tuple[str, str, str]], list[dict[str, Any]]]:
    """``(id, key id, sealed)`` of the good reports, and the rejections by index."""
    good = _all_good(reports)
    if good is not None:
        return good, []
    good, rejected = [], []
    for index, entry in enumerate(reports):
        reason = None
        if not isinstance(entry, dict) or set(entry) != {"id", "payload"}:
            reason = ("malformed_report", "a report has 'id' and 'payload' only")
        elif not is_report_id(entry["id"]):
            reason = ("invalid_id", "id must be 32 lowercase hex characters")
        else:
            try:
                key_id, sealed = check_envelope(entry["payload"])
            except ValueError as error:
                reason = ("invalid_envelope", str(error))
        if reason is not None:
            rejected.append({"index": index, "code": reason[0], "reason": reason[1]})
        else:
            good.append((entry["id"], key_id, sealed))
    return good, rejected


def _all_good(reports: list[Any]) -> list[tuple[str, str, str]] | None:
    """``(id, key id, sealed)`` of every report when all of them pass the upload's checks, in
    a few C-level passes (ids joined by newlines must be exactly that many 32-hex lines; the
    envelopes by ``client_sdk.sealing.check_envelopes``); ``None`` sends the upload through the
    check of each report, which names the bad ones."""
    if not all(type(r) is dict and r.keys() == _REPORT_FIELDS for r in reports):
        return None
    ids = [r["id"] for r in reports]
    try:
        lines = "\n".join(ids) + "\n"
    except TypeError:
        return None
    if len(lines) != 33 * len(ids) or _REPORT_ID_LINES.fullmatch(lines) is None:
        return None
    envelopes = check_envelopes([r["payload"] for r in reports])
    if envelopes is None:
        return None
    return [(i, key_id, sealed) for i, (key_id, sealed) in zip(ids, envelopes, strict=True)]


_REPORT_FIELDS = frozenset({"id", "payload"})
_REPORT_ID_LINES = re.compile(r"(?:[0-9a-f]{32}\n)*")


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> dict[str, Any]:
    """Ready: the database takes a committed write and its disk new space
    (``collector.dbguard.space_probe``), and the forwarder ``serve`` watches is running (503
    ``forwarder-down`` while it is being restarted; uploads are still taken and wait)."""
    try:
        _storage().write_probe()
        space_probe(current_app.config["DB"])
        state = _storage().forwarder_state()
    except Exception as error:
        raise Problem(
            503, "database-unavailable", f"the database is unavailable: {error}"
        ) from None
    if state is not None and state.down_since is not None:
        raise Problem(
            503,
            "forwarder-down",
            f"the forwarder {state.last_exit} {max(0.0, time.time() - state.down_since):.0f} s "
            f"ago and is being restarted (restarts so far: {state.restarts}); uploads are kept "
            "and forwarded once it is back",
            headers={"Retry-After": "5"},
            restarts=state.restarts,
        )
    return {"status": "ready"}


@bp.get("/metrics")
def metrics() -> Response:
    """Requests by route and status with their latency over every worker
    (``collector.metrics``), reports waiting per campaign (below ``min_batch`` they are never
    forwarded) and how long the oldest of them has waited, reports in batches formed but not yet
    acknowledged, the forwarder's restarts and whether it runs (under ``serve``), and the
    database's size (Prometheus text)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    storage = _storage()

    def work() -> list[Any]:
        pending = GaugeMetricFamily(
            "ldp_shuffler_pending_reports",
            "Sealed reports waiting for a batch.",
            labels=["campaign"],
        )
        for campaign, count in sorted(storage.pending_counts().items()):
            pending.add_metric([campaign], count)
        oldest = GaugeMetricFamily(
            "ldp_shuffler_oldest_pending_seconds",
            "Seconds since the oldest waiting report of the campaign arrived.",
            labels=["campaign"],
        )
        now = time.time()
        for campaign, since in sorted(storage.waiting_since().items()):
            oldest.add_metric([campaign], max(0.0, now - since))
        in_flight = GaugeMetricFamily(
            "ldp_shuffler_in_flight_reports",
            "Reports in batches not yet acknowledged.",
            value=storage.in_flight(),
        )
        expired = CounterMetricFamily(
            "ldp_shuffler_expired_reports",
            "Reports dropped for waiting longer than --max-age for a batch.",
            labels=["campaign"],
        )
        for campaign, count in sorted(storage.expired_counts().items()):
            expired.add_metric([campaign], count)
        families: list[Any] = [pending, oldest, in_flight, expired]
        state = storage.forwarder_state()
        if state is not None:
            families.append(
                CounterMetricFamily(
                    "ldp_shuffler_forwarder_restarts",
                    "Restarts of the forwarder since serve started.",
                    value=state.restarts,
                )
            )
            families.append(
                GaugeMetricFamily(
                    "ldp_shuffler_forwarder_up",
                    "1 while the forwarder runs, 0 while it is being restarted.",
                    value=int(state.down_since is None),
                )
            )
        return families

    text = _metrics.exposition(
        _metrics.Families(work),
        _metrics.Families(lambda: [_metrics.database_size(current_app.config["DB"], "shuffler")]),
    )
    return Response(text, content_type=_metrics.PROMETHEUS_MEDIA_TYPE)
