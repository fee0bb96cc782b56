"""Sign-in, sessions and CSRF of the dashboard (Flask test client on a real SQLite file)."""

from __future__ import annotations

from http.cookies import SimpleCookie

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
    assert sign_in(client, token="wrong-token-guess").status_code == 429
    assert sign_in(client).status_code == 429  # even the right token waits out the window


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
