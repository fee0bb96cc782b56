"""The collector: a Flask app over a Flask-free SQLite storage module (``collector.storage``).

``create_app(config=None)`` builds the app; settings come from ``LDP_*`` environment variables
(``collector.settings``), overridden by ``config``. Run it with ``ldp-collector serve`` (gunicorn).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from client_sdk._extras import require

require("collector")  # one line naming the extra, before flask's own ImportError could

from flask import Flask  # noqa: E402

from client_sdk._version import __version__  # noqa: E402
from collector.cors import install_cors  # noqa: E402
from collector.dbguard import check_private_database, file_identity  # noqa: E402
from collector.ratelimit import UploadLimiter  # noqa: E402
from collector.settings import load_settings  # noqa: E402
from collector.storage import Storage  # noqa: E402

__all__ = ["__version__", "create_app"]

logger = logging.getLogger(__name__)


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The collector app. ``config`` overrides settings (``{"DB": path, "ADMIN_TOKEN": ...}``);
    ``CORS_ORIGINS``, the web origins whose pages may call the device routes
    (``collector.cors``; none by default); ``DAP_INTEROP``, serve the DAP interop test API
    (``collector.dap.interop``; never in production).

    The database is created and migrated here, once per process, before any request.
    """
    from collector import api, ops, problems, web
    from collector.dap import api as dap_api

    app = Flask(__name__, static_folder=None)  # an ingest server: no static files
    app.config.update(load_settings(config))
    app.json.sort_keys = False  # type: ignore[attr-defined]
    if not app.config["ADMIN_TOKEN"]:
        logger.warning("LDP_ADMIN_TOKEN is not set: every admin request will be refused")
    # Before SQLite opens it (a last connection's close may remove a -wal), and after.
    check_private_database(app.config["DB"], allow_readable=app.config["ALLOW_READABLE_DB"])
    with Storage(
        app.config["DB"],
        busy_timeout=app.config["BUSY_TIMEOUT"],
        synchronous=app.config["SYNCHRONOUS"],
    ):
        pass  # creates the file (0600) and applies pending migrations
    check_private_database(app.config["DB"], allow_readable=app.config["ALLOW_READABLE_DB"])
    app.extensions["ldp_db_identity"] = file_identity(app.config["DB"])
    if app.config["RATE_LIMIT"] > 0:
        app.extensions["ldp_rate_limit"] = UploadLimiter(
            app.config["RATE_LIMIT"],
            app.config["RATE_BURST"] or app.config["MAX_BATCH"],
            per_bucket=app.config["RATE_PER_BUCKET"],
            per_bucket_burst=app.config["MAX_BATCH"],
        )
    web.init_app(app)
    problems.register_error_handlers(app)
    app.register_blueprint(api.bp)
    app.register_blueprint(ops.bp)
    app.register_blueprint(dap_api.bp)
    device_routes = {**api.DEVICE_ROUTES, **dap_api.DEVICE_ROUTES}
    install_cors(app, app.config.get("CORS_ORIGINS", ()), device_routes)
    if app.config.get("DAP_INTEROP"):  # test-only: docs/dap.md, "Interop"
        from collector.dap import interop

        interop.init_app(app)
    return app
