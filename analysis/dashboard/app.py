"""The dashboard's pages and JSON endpoints (a Flask blueprint; :func:`create_app` builds it).

Pages: ``/login`` (form), ``/logout`` (POST), ``/`` (the overview: every campaign's n, reports
per day with a sparkline, status and estimate status), ``/campaigns/<name>`` (the estimate, its
per-day ``trend`` for frequency and mean campaigns, reports per day, the gap, the privacy
account).
Every page is a server-rendered shell; ``static/dashboard.js`` fills it from
``/api/campaigns`` and ``/api/campaigns/<name>`` and polls them every ``POLL_SECONDS``.
Everything but ``/login``, ``/healthz`` and ``/static`` needs a signed-in session
(:mod:`analysis.dashboard.auth`). Responses are ``no-store`` and carry a strict
Content-Security-Policy: scripts and styles only from this origin, no inline script.

One vocabulary (docs/collector.md, "Status words"): a campaign's ``status`` is whether it takes
reports (``open``, ``closed``, ``expired``: ``collector.storage.CAMPAIGN_STATUSES``, as
``ldp-collector campaign list`` and the collector's HTTP API say it); its ``estimate_status`` is
whether an estimate is shown (:data:`ESTIMATE_STATUSES`).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
from collections.abc import Sequence
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from analysis.dashboard import auth
from analysis.dashboard.data import CampaignState
from analysis.dashboard.sources import Backend, open_backend
from analysis.estimation import json_safe
from analysis.gap import utility_gap
from analysis.views.answer import campaign_unit
from analysis.views.dashboard import trend_chart, with_unit
from client_sdk.mechanisms.base import FrequencyOracle
from client_sdk.mechanisms.memoization import is_memoized
from collector.storage import SecureAggregationCampaign, StoredDapCampaign

__all__ = ["ESTIMATE_STATUSES", "create_app"]

POLL_SECONDS = 2.0
SPARKLINE_DAYS = 30
"""The overview's sparkline of reports per day covers the campaign's last this many days."""
ESTIMATE_STATUSES = ("released", "withheld")
"""``released``: n has reached ``min_batch_size`` and the estimate is shown; ``withheld``:
below it only n is (no per-day counts either)."""
PUBLIC_ENDPOINTS = {"dashboard.login", "dashboard.healthz", "static"}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

bp = Blueprint("dashboard", __name__)


def create_app(
    db: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    admin_token: str,
    *,
    parquet: Sequence[str | os.PathLike[str]] = (),
    confidence: float = 0.95,
    poll_seconds: float = POLL_SECONDS,
) -> Flask:
    """The dashboard app over the collector database ``db`` (opened read-only, per request),
    or over several sources: ``db`` a list of databases and ``parquet`` export directories,
    merged with each report id once (:mod:`analysis.dashboard.sources`).

    ``admin_token`` is what signs an admin in. Raises ``FileNotFoundError`` when a database
    does not exist and ``ValueError`` for an empty token or a confidence outside (0, 1).
    """
    if not admin_token:
        raise ValueError("the admin token must not be empty")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    dbs = [db] if isinstance(db, (str, os.PathLike)) else list(db)
    backend = open_backend(dbs, parquet, confidence=confidence)  # fails now on a bad source
    app = Flask(__name__)
    app.config.update(
        DB=os.fspath(dbs[0]) if dbs else None,
        POLL_SECONDS=poll_seconds,
        MAX_CONTENT_LENGTH=16 * 1024,
        # Flask's own session is unused (sessions are server-side); a random key per process.
        SECRET_KEY=secrets.token_bytes(32),
    )
    app.extensions["ldp_dashboard"] = {
        "token": admin_token,
        "sessions": auth.SessionStore(),
        "throttle": auth.LoginThrottle(),
        "backend": backend,
        "cache": getattr(backend, "cache", None),
    }
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.register_blueprint(bp)
    app.after_request(_headers)
    app.register_error_handler(HTTPException, _http_error)
    return app


def _ext() -> dict[str, Any]:
    return current_app.extensions["ldp_dashboard"]


def _backend() -> Backend:
    return _ext()["backend"]


def _headers(response: Response) -> Response:
    # Pages and data are never stored; the static files (no secrets) are cached for a while.
    static = request.endpoint == "static"
    response.headers["Cache-Control"] = "private, max-age=3600" if static else "no-store"
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    return response


def _problem(status: int, kind: str, detail: str) -> Response:
    response = jsonify(
        {"type": f"about:blank#{kind}", "title": kind, "status": status, "detail": detail}
    )
    response.status_code = status
    response.mimetype = "application/problem+json"
    return response


def _http_error(error: HTTPException) -> Response | tuple[str, int]:
    status = error.code or 500
    if request.path.startswith("/api/"):
        return _problem(
            status, (error.name or "error").lower().replace(" ", "-"), str(error.description)
        )
    return render_template("error.html", status=status, message=error.description), status


@bp.before_app_request
def _require_session() -> BaseResponse | None:
    session = _ext()["sessions"].get(request.cookies.get(auth.SESSION_COOKIE))
    g.session = session
    if session is not None or request.endpoint in PUBLIC_ENDPOINTS:
        return None
    if request.path.startswith("/api/"):
        return _problem(401, "unauthorized", "sign in first")
    return redirect(url_for("dashboard.login"), code=303)


# ---- sign-in ------------------------------------------------------------------------------------


@bp.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@bp.route("/login", methods=["GET", "POST"])
def login() -> BaseResponse:
    if request.method == "GET" and g.session is not None:
        return redirect(url_for("dashboard.campaigns"), code=303)
    error = None
    status = 200
    if request.method == "POST":
        admin_token = _ext()["token"]
        address = auth.client_key(request.remote_addr)
        browser = auth.trusted_browser(
            request.cookies.get(auth.TRUSTED_BROWSER_COOKIE), admin_token
        )
        # Both comparisons always run, before the throttle is asked: the same work on every path.
        expected_csrf = request.cookies.get(auth.LOGIN_CSRF_COOKIE, "")
        csrf_ok = auth.tokens_equal(request.form.get("csrf", ""), expected_csrf)
        token_ok = auth.tokens_equal(request.form.get("token", ""), admin_token)
        throttle: auth.LoginThrottle = _ext()["throttle"]
        if throttle.blocked(address, browser):
            error, status = "Too many failed sign-ins; wait a minute.", 429
        elif not expected_csrf or not csrf_ok:
            error, status = "The form expired; sign in again.", 400
        elif token_ok:
            session_id, _ = _ext()["sessions"].create()
            response = redirect(url_for("dashboard.campaigns"), code=303)
            auth.set_cookie(
                response, request, auth.SESSION_COOKIE, session_id, auth.SESSION_MAX_SECONDS
            )
            if browser is None:
                auth.set_cookie(
                    response,
                    request,
                    auth.TRUSTED_BROWSER_COOKIE,
                    auth.new_trusted_browser(admin_token),
                    auth.TRUSTED_BROWSER_SECONDS,
                )
            response.delete_cookie(auth.LOGIN_CSRF_COOKIE, path="/")
            return response
        else:
            throttle.failed(address, browser)
            error, status = "Wrong admin token.", 401
    csrf = secrets.token_urlsafe(32)
    response = Response(render_template("login.html", login_csrf=csrf, error=error), status=status)
    auth.set_cookie(response, request, auth.LOGIN_CSRF_COOKIE, csrf, auth.LOGIN_FORM_SECONDS)
    if status == 429:
        response.headers["Retry-After"] = str(int(auth.THROTTLE_SECONDS))
    return response


@bp.post("/logout")
def logout() -> BaseResponse:
    if not auth.tokens_equal(request.form.get("csrf", ""), g.session.csrf):
        return _problem(400, "bad-csrf-token", "the sign-out form's CSRF token does not match")
    _ext()["sessions"].delete(request.cookies.get(auth.SESSION_COOKIE))
    response = redirect(url_for("dashboard.login"), code=303)
    response.delete_cookie(auth.SESSION_COOKIE, path="/", httponly=True, samesite="Strict")
    return response


# ---- pages --------------------------------------------------------------------------------------


@bp.get("/")
def campaigns() -> str:
    return render_template(
        "campaigns.html",
        csrf=g.session.csrf,
        api=url_for("dashboard.api_campaigns"),
        poll_ms=int(1000 * current_app.config["POLL_SECONDS"]),
    )


@bp.get("/campaigns/<name>")
def campaign(name: str) -> str:
    try:
        _backend().stored(name)
    except SecureAggregationCampaign as error:  # listed, but no estimate here
        abort(409, description=str(error))
    except LookupError:
        abort(404, description=f"No campaign named {name!r}.")
    except ValueError as error:  # sources that disagree: the page shows why
        abort(409, description=str(error))
    return render_template(
        "campaign.html",
        csrf=g.session.csrf,
        name=name,
        api=url_for("dashboard.api_campaign", name=name),
        poll_ms=int(1000 * current_app.config["POLL_SECONDS"]),
    )


# ---- JSON ---------------------------------------------------------------------------------------


@bp.get("/api/campaigns")
def api_campaigns() -> dict[str, Any]:
    states = _backend().campaigns()
    campaigns = [_summary(state) for state in states]
    campaigns += [_dap_summary(c) for c in _backend().secure_aggregation()]
    campaigns.sort(key=lambda c: str(c["name"]))
    return {"campaigns": campaigns, "sources": _backend().labels()}


@bp.get("/api/campaigns/<name>")
def api_campaign(name: str) -> Response | dict[str, Any]:
    if "since" in request.args or "until" in request.args:
        return _api_window(name)
    try:
        state = _backend().campaign(name)
    except SecureAggregationCampaign as error:
        return _problem(409, "secure-aggregation-campaign", str(error))
    except LookupError as error:
        return _problem(404, "campaign-not-found", str(error))
    except ValueError as error:
        return _problem(422, "no-estimate", str(error))
    document = _summary(state)
    document["privacy"] = privacy_account(state)
    if not state.released:
        return document
    assert state.document is not None
    document["estimate"] = state.document
    document["display"] = state.display
    document["refreshing"] = state.refreshing  # a newer estimate is being made
    document["series"] = {
        "days": sorted(state.days),
        "reports": [state.days[d] for d in sorted(state.days)],
    }
    document["gap"] = central_gap(state)
    if state.trend is not None:
        chart = trend_chart(state.trend, state.document)
        document["trend"] = with_unit(chart, campaign_unit(state.campaign.metadata))
    return document


def _api_window(name: str) -> Response | dict[str, Any]:
    """``?since=&until=`` (UTC days, inclusive): the estimate over those days only, computed on
    request (the live cache holds the whole campaign). Below ``min_batch_size``: n only."""
    from analysis.loading import check_window

    try:
        since, until = check_window(request.args.get("since"), request.args.get("until"))
    except ValueError as error:
        return _problem(400, "bad-window", str(error).replace("--", ""))
    try:
        campaign, n, estimated = _backend().window(name, since, until)
    except LookupError as error:
        return _problem(404, "campaign-not-found", str(error))
    except ValueError as error:
        return _problem(422, "no-estimate", str(error))
    document: dict[str, Any] = {
        "name": name,
        "since": since,
        "until": until,
        "n": n,
        "min_batch_size": campaign.min_batch_size,
        "estimate_status": _estimate_status(estimated is not None),
    }
    if estimated is not None:
        document["estimate"], document["display"] = estimated
    return document


def _summary(state: CampaignState) -> dict[str, Any]:
    """What the campaign list shows; below ``min_batch_size`` only n, no per-day counts."""
    campaign = state.campaign
    config = campaign.config
    days = sorted(state.days)
    summary: dict[str, Any] = {
        "name": campaign.name,
        "url": url_for("dashboard.campaign", name=campaign.name),
        "mechanism": config.get("mechanism"),
        "epsilon": campaign.mechanism.privacy_epsilon,
        "config": config,
        "n": state.n,
        "min_batch_size": campaign.min_batch_size,
        "status": campaign.status(),
        "estimate_status": _estimate_status(state.released),
        "created": campaign.created,
        **{k: campaign.metadata[k] for k in ("description", "unit") if k in campaign.metadata},
    }
    if state.released and days:
        summary["latest_day"] = days[-1]
        summary["reports_latest_day"] = state.days[days[-1]]
        summary["reports_per_day"] = state.n / len(days)
        summary["days"] = {
            "days": days[-SPARKLINE_DAYS:],
            "reports": [state.days[d] for d in days[-SPARKLINE_DAYS:]],
        }
    return summary


def _dap_summary(campaign: StoredDapCampaign) -> dict[str, Any]:
    """A secure-aggregation campaign in the list: its status and where its result is, no n
    and no estimate (its reports are at its Leader; ``ldp-analyze collect`` reads them)."""
    return {
        "name": campaign.name,
        "url": None,
        "mechanism": f"dap:{campaign.dap['vdaf']['type']}",
        "epsilon": campaign.dap["dp"],
        "n": None,
        "status": campaign.status(),
        "estimate_status": None,
        "note": f"secure aggregation: reports at its Leader {campaign.leader}; "
        "collect with ldp-analyze collect",
        "created": campaign.created,
        **{k: campaign.metadata[k] for k in ("description", "unit") if k in campaign.metadata},
    }


def _estimate_status(released: bool) -> str:
    return ESTIMATE_STATUSES[0] if released else ESTIMATE_STATUSES[1]


def privacy_account(state: CampaignState) -> dict[str, Any]:
    """A campaign's privacy parameters: per report, and for memoized mechanisms epsilon_inf.

    These come from the configuration alone (not from the reports), so they are shown at any n.
    """
    mechanism = state.campaign.mechanism
    account: dict[str, Any] = {
        "epsilon_per_report": mechanism.privacy_epsilon,
        "delta_per_report": mechanism.privacy_delta,
        "memoized": is_memoized(mechanism),
    }
    if account["memoized"]:
        account["epsilon_inf"] = float(mechanism.epsilon_inf)  # type: ignore[attr-defined]
    account["policy"] = state.campaign.policy
    return _finite(account)


def central_gap(state: CampaignState) -> dict[str, Any]:
    """The utility gap to a central curator at this n (``analysis.gap``; frequency oracles)."""
    mechanism = state.campaign.mechanism
    if not isinstance(mechanism, FrequencyOracle):
        return {
            "available": False,
            "reason": f"the gap compares histograms; {mechanism.name} is not a frequency oracle",
        }
    # shuffle=False: the shuffle bound takes seconds at n = 10^6, too slow for a live view.
    figures = utility_gap(mechanism, state.n, shuffle=False).to_dict()
    keys = (
        "neighbouring",
        "delta",
        "ldp_std_error",
        "central_laplace_std_error",
        "central_gaussian_std_error",
        "variance_ratio",
        "ldp_users_for_central_laplace_error",
        "central_laplace_users_for_ldp_error",
    )
    return _finite(
        {
            "available": True,
            **{key: figures[key] for key in keys},
            **_trust_models(json.dumps(state.campaign.config, sort_keys=True), state.n),
        }
    )


@functools.lru_cache(maxsize=64)
def _trust_models(config: str, n: int) -> dict[str, Any]:
    """The shuffled and secure-aggregation (DAP: Laplace, and its Gaussian alternative at the
    same epsilon and the gap's delta) models beside the local one at this n and the mechanism's
    epsilon (``analysis.kinds.frequencies.gap.trust_models``; the shuffled one for one batch of
    n). Cached by (config, n): the calibration of the shuffled epsilon takes a
    fraction of a second, and n only changes when reports arrive."""
    from analysis.gap import GapOptions
    from analysis.kinds.frequencies.gap import trust_models
    from client_sdk.mechanisms import mechanism_from_config

    models = trust_models(mechanism_from_config(json.loads(config)), n, GapOptions())["models"]
    out: dict[str, Any] = {}
    shuffled = models["shuffled"]
    if shuffled.get("applies", True):
        out["shuffled_local_epsilon"] = shuffled["local_epsilon"]
        out["shuffled_std_error"] = shuffled["std_error"]
        out["shuffled_share_of_gap_closed"] = shuffled["share_of_gap_closed"]
    dap = models["secure_aggregation"]
    out["secure_aggregation_std_error"] = dap["std_error"]
    out["secure_aggregation_share_of_gap_closed"] = dap["share_of_gap_closed"]
    # the same DAP pair with discrete Gaussian noise at the same (epsilon, delta)
    gaussian = dap["gaussian"]
    out["secure_aggregation_gaussian_rho"] = gaussian["rho"]
    out["secure_aggregation_gaussian_std_error"] = gaussian["std_error"]
    out["secure_aggregation_gaussian_share_of_gap_closed"] = gaussian["share_of_gap_closed"]
    return out


def _finite(document: dict[str, Any]) -> dict[str, Any]:
    return json_safe(document)
