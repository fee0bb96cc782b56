"""A campaign's lifecycle beyond creation: what its creator should hear at creation, and the
retention cleanup the collector's master process runs every ``LDP_RETENTION_INTERVAL`` seconds."""

from __future__ import annotations

import logging
import threading

from flask import Flask

from client_sdk.policy import DEFAULT_POLICY, PolicyViolation
from collector.storage import Storage, StoredCampaign
from collector.web import today

__all__ = ["default_policy_warnings", "start_retention_loop"]

logger = logging.getLogger(__name__)


def default_policy_warnings(campaign: StoredCampaign) -> list[str]:
    """Why devices running the SDK's default ``PrivacyPolicy`` would refuse ``campaign`` (an
    epsilon above its ``max_epsilon``...), as messages for its creator; empty when they accept
    it. The check is the devices' own (``client_sdk.policy.PrivacyPolicy.check``)."""
    try:
        DEFAULT_POLICY.check(
            campaign.name,
            campaign.mechanism,
            config_id=campaign.config_id,
            shuffle=campaign.shuffle,
            through_shuffler=campaign.shuffle is not None,
        )
    except PolicyViolation as violation:
        return [
            f"devices with the SDK's default PrivacyPolicy will refuse this campaign: {violation}; "
            "an app must raise its policy to report to it"
        ]
    return []


def start_retention_loop(app: Flask) -> threading.Event | None:
    """Run ``Storage.apply_retention`` now and every ``RETENTION_INTERVAL`` seconds in a daemon
    thread (``None`` when the interval is 0); set the returned event to stop it. Started in
    gunicorn's master, so one loop runs whatever the number of workers."""
    interval = float(app.config["RETENTION_INTERVAL"])
    if interval <= 0:
        return None
    stop = threading.Event()

    def loop() -> None:
        while True:
            try:
                with app.app_context():
                    day = today()
                with Storage(
                    app.config["DB"],
                    busy_timeout=app.config["BUSY_TIMEOUT"],
                    synchronous=app.config["SYNCHRONOUS"],
                    create=False,
                ) as storage:
                    deleted = storage.apply_retention(day)
                for name, count in deleted.items():
                    if count:
                        logger.warning("campaign %r: retention deleted %d reports", name, count)
            except Exception:  # the next round retries; the server keeps serving
                logger.exception("retention cleanup failed")
            if stop.wait(interval):
                return

    threading.Thread(target=loop, name="ldp-retention", daemon=True).start()
    return stop
