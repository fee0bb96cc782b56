"""Cross-origin access (CORS) for the routes a device calls, so that a web page on another origin
can fetch campaign documents and upload reports, to the collector (``collector.api``) or to a
DAP Leader (``collector.dap.api``: the upload and ``hpke_config``) (``--cors-origin``,
docs/collector.md#cors).

Only the listed origins, only the device routes, only their method and request headers: a
preflight (``OPTIONS`` with ``Access-Control-Request-Method``) for a device route from a listed
origin is answered 204 with ``Access-Control-Allow-Origin`` (that origin, never ``*``),
``-Allow-Methods`` (the route's one method), ``-Allow-Headers`` (what the route needs) and
``-Max-Age``; the route's actual responses, errors included, carry ``Access-Control-Allow-Origin``
and expose ``Retry-After`` (so a page can back off). Anything else gets no CORS header: another
origin, another method or header than the route needs, an admin route (even at the same path,
``GET .../reports`` being the admin export), DAP's aggregation and collection routes, the
metrics. No credentials mode: devices send no cookies. Every response of a device route says
``Vary: Origin`` once CORS is on, since it depends on the request's origin.
"""

from __future__ import annotations

import argparse
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

__all__ = ["PREFLIGHT_MAX_AGE", "DeviceRoute", "check_origin", "cors_origin", "install_cors"]

PREFLIGHT_MAX_AGE = 600
"""Seconds a browser may cache a preflight's answer (``Access-Control-Max-Age``)."""

_EXPOSED = "Retry-After"
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class DeviceRoute:
    """A route devices call: its method and the request headers it needs (beyond the ones
    browsers always may send)."""

    method: str
    headers: tuple[str, ...] = ()


def check_origin(value: str, flag: str = "--cors-origin") -> str:
    """``value`` as a browser's ``Origin`` header spells it (``scheme://host[:port]``, lower
    case, no default port), or ``ValueError`` naming ``flag`` and the value."""

    def refuse(why: str) -> ValueError:
        return ValueError(f"{flag} {value!r}: {why}; an origin is scheme://host[:port]")

    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError as error:  # a port that is not a number or out of range
        raise refuse(str(error)) from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise refuse("the scheme must be http or https")
    if not parts.hostname or "@" in parts.netloc:
        raise refuse("it needs a host (and no user name)")
    if parts.path or parts.query or parts.fragment or value.endswith(("?", "#")):
        raise refuse("no path, query or fragment, not even a trailing '/'")
    if any(c.isspace() for c in value) or "*" in value:
        raise refuse("one exact origin, without spaces or wildcards")
    host = parts.hostname.lower()
    if ":" in host:  # IPv6
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def cors_origin(text: str) -> str:
    """``check_origin`` as an argparse ``type`` (its error: ``argument --cors-origin: origin
    'VALUE': why``)."""
    try:
        return check_origin(text, "origin")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def install_cors(app: Flask, origins: Iterable[str], routes: Mapping[str, DeviceRoute]) -> None:
    """Answer CORS for the endpoints ``routes`` names (``"blueprint.view"``) and ``origins``
    (each checked by ``check_origin``); nothing at all when ``origins`` is empty."""
    allowed = frozenset(check_origin(origin) for origin in origins)
    if not allowed:
        return
    for endpoint in routes:
        if endpoint not in app.view_functions:
            raise ValueError(f"CORS: no endpoint {endpoint!r} in the app")

    def route_of(preflight: bool) -> DeviceRoute | None:
        """The device route this request is for (a preflight: the one its requested method
        would reach), or None."""
        if not preflight:
            route = routes.get(request.endpoint or "")
            if route is None:
                return None
            accepted = {"GET", "HEAD"} if route.method == "GET" else {route.method}
            return route if request.method in accepted else None
        method = request.headers["Access-Control-Request-Method"].strip()
        adapter = app.create_url_adapter(request)
        if adapter is None:
            return None
        try:
            endpoint, _ = adapter.match(request.path, method=method)
        except HTTPException:  # no route, or not this method
            return None
        route = routes.get(str(endpoint))
        return route if route is not None and route.method == method else None

    @app.after_request
    def add_cors(response: Response) -> Response:
        preflight = (
            request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers
        )
        route = route_of(preflight)
        if route is None:
            return response
        response.vary.add("Origin")
        origin = request.headers.get("Origin")
        if origin not in allowed:
            return response
        if not preflight:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = _EXPOSED
            return response
        asked = request.headers.get("Access-Control-Request-Headers", "")
        wanted = {h.strip().lower() for h in asked.split(",") if h.strip()}
        if not wanted <= {h.lower() for h in route.headers}:
            return response  # a header the route does not take: no permission
        preflight_response = Response(status=204)
        preflight_response.vary.add("Origin")
        headers = preflight_response.headers
        headers.remove("Content-Type")  # no content
        headers["Access-Control-Allow-Origin"] = origin
        headers["Access-Control-Allow-Methods"] = route.method
        if route.headers:
            headers["Access-Control-Allow-Headers"] = ", ".join(route.headers)
        headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
        return preflight_response
