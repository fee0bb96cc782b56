"""Sign-in, sessions and CSRF of the dashboard (Flask test client on a real SQLite file)."""

from __future__ import annotations

from http.cookies import SimpleCookie

import pytest
from flask import Flask
from flask.testing import FlaskClient

from analysis.dashboard import auth
from tests.analysis.dashboard.conftest import TOKEN, login_csrf, sign_in


def _set_cookie(response: object, name: str) -> str:
    headers = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(name + "=")]  # type: ignore[attr-defined]
    assert len(headers) == 1, headers
    return headers[0]


def test_pages_and_api_need_a_session(client: FlaskClient) -> None:
    page = client.get("/")
    assert page.status_code == 303 and page.headers["Location"].endswith("/login")
    assert client.get("/campaigns/colors").status_code == 303
    api = client.get("/api/campaigns")
    assert api.status_code == 401
    assert api.mimetype == "application/problem+json"
    assert client.get("/api/campaigns/colors").status_code == 401
    assert client.get("/healthz").status_code == 200


def test_a_wrong_token_is_refused(client: FlaskClient) -> None:
    response = sign_in(client, token=TOKEN + "x")
    assert response.status_code == 401
    assert "Wrong admin token" in response.get_data(as_text=True)
    assert not [h for h in response.headers.getlist("Set-Cookie") if auth.SESSION_COOKIE in h]
    assert client.get("/api/campaigns").status_code == 401


def test_sign_in_without_the_form_csrf_token_is_refused(client: FlaskClient) -> None:
    login_csrf(client)
    response = client.post("/login", data={"csrf": "forged", "token": TOKEN})
    assert response.status_code == 400
    assert client.get("/api/campaigns").status_code == 401
    fresh = client.application.test_client()  # no login cookie at all
    assert fresh.post("/login", data={"csrf": "", "token": TOKEN}).status_code == 400


def test_session_cookie_flags_over_http(client: FlaskClient) -> None:
    response = sign_in(client)
    assert response.status_code == 303 and response.headers["Location"].endswith("/")
    header = _set_cookie(response, auth.SESSION_COOKIE)
    cookie = SimpleCookie(header)[auth.SESSION_COOKIE]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Strict"
    assert not cookie["secure"]  # plain HTTP: a Secure cookie would never come back
    assert TOKEN not in header
    assert client.get("/api/campaigns").status_code == 200


def test_session_cookie_is_secure_over_https(app: Flask) -> None:
    with app.test_client() as client:
        response = sign_in(client, base_url="https://localhost")
        assert response.status_code == 303
        cookie = SimpleCookie(_set_cookie(response, auth.SESSION_COOKIE))[auth.SESSION_COOKIE]
        assert cookie["secure"] is True and cookie["httponly"] is True
        assert cookie["samesite"] == "Strict"


def test_the_token_appears_in_no_page_or_response(client: FlaskClient) -> None:
    bodies = [client.get("/login").get_data(as_text=True)]
    assert sign_in(client).status_code == 303
    for path in ("/", "/campaigns/colors", "/campaigns/small", "/api/campaigns"):
        response = client.get(path)
        assert response.status_code == 200, path
        bodies.append(response.get_data(as_text=True))
        assert TOKEN not in str(response.headers)
    bodies.append(client.get("/api/campaigns/colors").get_data(as_text=True))
    assert all(TOKEN not in body for body in bodies)
    assert 'type="password"' in bodies[0] and 'method="post"' in bodies[0]


def test_sign_out_needs_its_csrf_token_and_ends_the_session(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    session_id = client.get_cookie(auth.SESSION_COOKIE)
    assert session_id is not None
    page = client.get("/").get_data(as_text=True)
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    csrf = page[start : page.index('"', start)]

    assert client.post("/logout", data={"csrf": "forged"}).status_code == 400
    assert client.get("/api/campaigns").status_code == 200  # still signed in

    response = client.post("/logout", data={"csrf": csrf})
    assert response.status_code == 303 and response.headers["Location"].endswith("/login")
    assert client.get("/api/campaigns").status_code == 401
    # The old cookie, replayed, no longer works: the session is gone on the server.
    client.set_cookie(auth.SESSION_COOKIE, session_id.value)
    assert client.get("/api/campaigns").status_code == 401


def test_failed_sign_ins_are_throttled(client: FlaskClient) -> None:
    for _ in range(auth.MAX_FAILURES):
        assert sign_in(client, token="wrong-token-guess").status_code == 401
    wrong = sign_in(client, token="wrong-token-guess")
    assert wrong.status_code == 429 and wrong.headers["Retry-After"] == "60"
    # A throttled client that never signed in learns nothing from a guess: the right token
    # answers exactly as a wrong one (else the throttle would be an unlimited oracle).
    right = sign_in(client)
    assert right.status_code == 429
    assert _without_csrf(right.get_data(as_text=True)) == _without_csrf(
        wrong.get_data(as_text=True)
    )


def _without_csrf(page: str) -> str:
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[:start] + page[page.index('"', start) :]


def _client_at(app: Flask, address: str) -> FlaskClient:
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def test_one_address_cannot_lock_out_another(app: Flask) -> None:
    attacker = _client_at(app, "203.0.113.7")
    for _ in range(auth.MAX_FAILURES + 5):
        assert sign_in(attacker, token="wrong-token-guess").status_code in (401, 429)
    assert sign_in(attacker, token="wrong-token-guess").status_code == 429
    assert sign_in(_client_at(app, "198.51.100.2")).status_code == 303
    # One IPv6 host holds a /64: its addresses share one count.
    host = [_client_at(app, f"2001:db8:1:2::{i:x}") for i in range(1, auth.MAX_FAILURES + 2)]
    assert [sign_in(c, token="wrong-token-guess").status_code for c in host][-1] == 429
    assert sign_in(_client_at(app, "2001:db8:1:3::1")).status_code == 303


def test_a_trusted_browser_signs_in_through_its_address_throttle(app: Flask) -> None:
    admin = _client_at(app, "192.0.2.10")
    signed = sign_in(admin)
    assert signed.status_code == 303
    assert "HttpOnly" in _set_cookie(signed, auth.TRUSTED_BROWSER_COOKIE)
    admin.delete_cookie(auth.SESSION_COOKIE)  # the session ended; the browser is still trusted
    attacker = _client_at(app, "192.0.2.10")  # the same address (a shared NAT, a proxy)
    for _ in range(auth.MAX_FAILURES):
        assert sign_in(attacker, token="wrong-token-guess").status_code == 401
    assert sign_in(attacker).status_code == 429
    # The admin's browser, at the same address, mistypes and then signs in.
    assert sign_in(admin, token="typo").status_code == 401
    assert sign_in(admin).status_code == 303
    # Its own wrong tokens do throttle it.
    admin.delete_cookie(auth.SESSION_COOKIE)
    for _ in range(auth.MAX_FAILURES):
        sign_in(admin, token="wrong-token-guess")
    assert sign_in(admin).status_code == 429


def test_the_throttle_counts_per_client_under_a_global_ceiling() -> None:
    now = [0.0]
    throttle = auth.LoginThrottle(clock=lambda: now[0])
    addresses = [auth.client_key(f"10.0.{i // 250}.{i % 250}") for i in range(60)]
    for address in addresses[: auth.MAX_FAILURES_ALL // auth.MAX_FAILURES]:
        for _ in range(auth.MAX_FAILURES):
            assert not throttle.blocked(address)
            throttle.failed(address)
        assert throttle.blocked(address)
    assert throttle.blocked(addresses[-1])  # the ceiling over every address is reached
    assert not throttle.blocked(addresses[-1], browser="trusted-id")  # not for trusted browsers
    now[0] += auth.THROTTLE_SECONDS + 1
    assert not throttle.blocked(addresses[0]) and not throttle.blocked(addresses[-1])
    assert auth.MAX_FAILURES_ALL >= 20 * auth.MAX_FAILURES


def test_trusted_browser_cookies_are_bound_to_the_admin_token() -> None:
    cookie = auth.new_trusted_browser(TOKEN)
    browser_id = auth.trusted_browser(cookie, TOKEN)
    assert browser_id is not None and cookie.startswith(browser_id + ".")
    assert auth.trusted_browser(cookie, TOKEN + "-rotated") is None
    assert auth.trusted_browser(cookie[:-1] + ("0" if cookie[-1] != "0" else "1"), TOKEN) is None
    for forged in (None, "", "id", "id.", ".mac", "idé.mac", f"other.{cookie.split('.')[1]}"):
        assert auth.trusted_browser(forged, TOKEN) is None


def test_every_sign_in_path_compares_both_secrets(
    app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throttled or not, right or wrong: the same two constant-time comparisons."""
    calls: list[int] = []
    compare = auth.tokens_equal

    def counting(given: str, expected: str) -> bool:
        calls[-1] += 1
        return compare(given, expected)

    monkeypatch.setattr(auth, "tokens_equal", counting)
    client = _client_at(app, "192.0.2.99")
    statuses = []
    for token in ["wrong-token-guess"] * (auth.MAX_FAILURES + 1) + [TOKEN]:
        csrf = login_csrf(client)
        calls.append(0)
        statuses.append(client.post("/login", data={"csrf": csrf, "token": token}).status_code)
    assert statuses[-3:] == [401, 429, 429]
    assert calls == [2] * len(statuses)
    calls.append(0)
    assert sign_in(_client_at(app, "192.0.2.98")).status_code == 303
    assert calls[-1] == 2


def test_session_store_expiry() -> None:
    now = [1000.0]
    store = auth.SessionStore(clock=lambda: now[0])
    session_id, session = store.create()
    assert store.get(session_id) is session
    now[0] += auth.SESSION_IDLE_SECONDS - 1
    assert store.get(session_id) is session  # a request resets the idle clock
    now[0] += auth.SESSION_IDLE_SECONDS + 1
    assert store.get(session_id) is None
    long_lived, _ = store.create()
    for _ in range(int(auth.SESSION_MAX_SECONDS / (auth.SESSION_IDLE_SECONDS / 2)) + 1):
        now[0] += auth.SESSION_IDLE_SECONDS / 2
        if store.get(long_lived) is None:
            break
    else:
        raise AssertionError("a session outlived SESSION_MAX_SECONDS")
    assert store.get(None) is None and store.get("unknown") is None


def test_security_headers(client: FlaskClient) -> None:
    response = client.get("/login")
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script>" not in response.get_data(as_text=True)  # no inline script anywhere
