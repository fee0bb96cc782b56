"""Collector settings: defaults, overridden by ``LDP_*`` environment variables, overridden by the
mapping passed to ``create_app`` (tests).

The rule is one name per setting: the environment variable ``LDP_<NAME>`` sets
``app.config["<NAME>"]``:

============================  ================================================  ==============
variable                      meaning                                           default
============================  ================================================  ==============
``LDP_DB``                    path of the SQLite database                       (required)
``LDP_ADMIN_TOKEN``           bearer token of the admin routes                  (none: admin
                                                                                routes refuse
                                                                                everyone)
``LDP_MAX_BATCH``             most reports in one upload (more: 413)            10000
``LDP_MAX_CONTENT_LENGTH``    largest request body in bytes (more: 413)         16 MiB
``LDP_BUSY_TIMEOUT``          seconds to wait for the SQLite write lock         5
``LDP_SYNCHRONOUS``           SQLite ``synchronous`` pragma (FULL or NORMAL)    FULL
``LDP_RETRY_AFTER``           seconds a client is told to wait on 503           1
``LDP_MAX_EXPORT_LIMIT``      largest ``limit`` of one export page              100000
``LDP_RATE_LIMIT``            reports per second per worker (more: 429), 0=off  0
``LDP_RATE_BURST``            most reports admitted at once by the rate limit   LDP_MAX_BATCH
``LDP_RATE_PER_BUCKET``       reports per second per ``Ldp-Rate-Bucket`` key    0
                              (needs LDP_RATE_LIMIT), 0=off
``LDP_TODAY``                 the UTC date (YYYY-MM-DD) expiry and retention    the real date
                              use; set it only for drills and tests
``LDP_RETENTION_INTERVAL``    seconds between retention cleanups in ``serve``   3600
                              (``retention_days``; ``--retention-interval``),
                              0=off
``LDP_DAP_DRIVE_INTERVAL``    seconds between the DAP Leader's aggregation      2
                              runs in ``serve`` (``--dap-drive-interval``),
                              0=off (``ldp-collector dap drive`` then)
``LDP_ALLOW_READABLE_DB``     1: serve a database other users may read (it      0
                              holds the private keys; collector.dbguard)
============================  ================================================  ==============
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from typing import Any

ENV_PREFIX = "LDP_"


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            message = f"{ENV_PREFIX}{name} must be a positive integer; got {value!r}"
            raise ValueError(message) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{ENV_PREFIX}{name} must be a positive integer; got {value!r}")
    return value


def _positive_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{ENV_PREFIX}{name} must be a positive number; got {value!r}") from None
    if isinstance(value, bool) or not number > 0 or number == float("inf"):
        raise ValueError(f"{ENV_PREFIX}{name} must be a positive number; got {value!r}")
    return number


def _non_negative_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{ENV_PREFIX}{name} must be a number >= 0; got {value!r}") from None
    if isinstance(value, bool) or not 0 <= number < float("inf"):
        raise ValueError(f"{ENV_PREFIX}{name} must be a number >= 0; got {value!r}")
    return number


def _optional_positive_int(name: str, value: Any) -> int | None:
    return None if value is None else _positive_int(name, value)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{ENV_PREFIX}{name} must be a string; got {value!r}")
    return value


def _optional_text(name: str, value: Any) -> str | None:
    return None if value is None or value == "" else _text(name, value)


def _optional_date(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    try:
        return datetime.date.fromisoformat(_text(name, value)).isoformat()
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name} must be a date YYYY-MM-DD; got {value!r}") from None


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("0", "1", "true", "false", "yes", "no", ""):
        raise ValueError(f"{ENV_PREFIX}{name} must be 0 or 1; got {value!r}")
    return text in ("1", "true", "yes")


def _synchronous(name: str, value: Any) -> str:
    text = _text(name, value).upper()
    if text not in ("NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"{ENV_PREFIX}{name} must be NORMAL, FULL or EXTRA; got {value!r}")
    return text


SETTINGS: dict[str, tuple[Any, Callable[[str, Any], Any]]] = {
    "DB": (None, _optional_text),
    "ADMIN_TOKEN": (None, _optional_text),
    "SHUFFLER_TOKEN": (None, _optional_text),
    "MAX_BATCH": (10_000, _positive_int),
    "MAX_CONTENT_LENGTH": (16 * 1024 * 1024, _positive_int),
    "BUSY_TIMEOUT": (5.0, _positive_float),
    "SYNCHRONOUS": ("FULL", _synchronous),
    "RETRY_AFTER": (1, _positive_int),
    "MAX_EXPORT_LIMIT": (100_000, _positive_int),
    "RATE_LIMIT": (0.0, _non_negative_float),
    "RATE_BURST": (None, _optional_positive_int),
    "RATE_PER_BUCKET": (0.0, _non_negative_float),
    "ALLOW_READABLE_DB": (False, _flag),
    "TODAY": (None, _optional_date),
    "RETENTION_INTERVAL": (3600.0, _non_negative_float),
    "DAP_DRIVE_INTERVAL": (2.0, _non_negative_float),
}
"""Setting name -> (default, validator)."""


def load_settings(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Defaults, then ``LDP_*`` variables of ``environ`` (``os.environ``), then ``overrides``.

    Raises ``ValueError`` naming the variable on a bad value, and when no database is set.
    Keys of ``overrides`` that are not settings pass through to Flask's config (``TESTING``...).
    """
    env = os.environ if environ is None else environ
    settings: dict[str, Any] = {}
    for name, (default, check) in SETTINGS.items():
        value = env.get(ENV_PREFIX + name, default)
        settings[name] = default if value is None else check(name, value)
    for name, value in (overrides or {}).items():
        settings[name] = SETTINGS[name][1](name, value) if name in SETTINGS else value
    if not settings["DB"]:
        raise ValueError(f"no database: set {ENV_PREFIX}DB (or pass DB to create_app)")
    return settings
