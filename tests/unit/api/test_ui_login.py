"""The dashboard's login under --auth sigv4 (murphy.api.ui_login and the edge's session path),
through starlette's TestClient on the real app: cookie attributes, redirects, CSRF, scoping,
disabled keys and logout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apihelp import TestClient, make_plane, training_request

from murphy.api.app import create_app
from murphy.api.ui_login import BAD_LOGIN, safe_next, session_use
from murphy.auth.keys import KeyRing

A, B = "111111111111", "222222222222"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[TestClient, KeyRing, dict[str, str], Any]]:
    plane = make_plane(tmp_path)
    settings = plane.settings.model_copy(update={"auth": "sigv4", "auth_key_cache_s": 0.0})
    ring = KeyRing(plane.store, settings)
    key = ring.create(A, "alice")["AccessKey"]
    plane.service.create_training_job(training_request("alices", rules=0), account=A, region="eu-west-1")
    plane.service.create_training_job(training_request("bobs", rules=0), account=B, region="eu-west-1")
    with TestClient(create_app(plane.service, settings), follow_redirects=False) as c:
        yield c, ring, key, plane


def login(c: TestClient, key: dict[str, str], secret: str | None = None, **headers: str) -> Any:
    return c.post("/ui/login", data={"access_key_id": key["AccessKeyId"],
                                     "secret": key["SecretAccessKey"] if secret is None else secret,
                                     "next": "/ui/jobs/alices"}, headers=headers)


def test_pages_redirect_to_login_and_the_api_keeps_awss_error(env: Any) -> None:
    c, _, _, _ = env
    r = c.get("/ui/jobs/alices?x=1")
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=%2Fui%2Fjobs%2Falices%3Fx%3D1"
    assert c.get("/ui/static/job.js").status_code == 303
    r = c.get("/v1/ui/jobs")
    assert r.status_code == 403 and r.json()["__type"] == "MissingAuthenticationTokenException"
    page = c.get("/ui/login?next=/ui/jobs/alices")
    assert page.status_code == 200 and 'value="/ui/jobs/alices"' in page.text
    assert c.get("/ui/static/murphy.css").status_code == 200  # the login page's only asset


def test_wrong_secret_or_unknown_key_shows_the_error(env: Any) -> None:
    c, _, key, _ = env
    r = login(c, key, "x" * 40)
    assert r.status_code == 401 and BAD_LOGIN in r.text and "set-cookie" not in r.headers
    assert key["SecretAccessKey"] not in r.text
    r = login(c, {"AccessKeyId": "AKIAAAAAAAAAAAAAAAAA", "SecretAccessKey": key["SecretAccessKey"]})
    assert r.status_code == 401 and BAD_LOGIN in r.text
    r = login(c, key, Origin="http://evil.example")
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_login_sets_a_strict_httponly_session_scoped_to_the_keys_account(env: Any) -> None:
    c, _, key, _ = env
    r = login(c, key, Origin="http://testserver")
    assert r.status_code == 303 and r.headers["location"] == "/ui/jobs/alices"
    session, csrf = r.headers.get_list("set-cookie")
    assert session.startswith("murphy_session=") and "HttpOnly" in session and "SameSite=Strict" in session
    assert csrf.startswith("murphy_csrf=") and "HttpOnly" not in csrf and "SameSite=Strict" in csrf
    assert "Secure" not in session  # plain http here; https adds it
    assert c.get("/ui/").status_code == 200 and c.get("/ui/static/job.js").status_code == 200
    rows = c.get("/v1/ui/jobs").json()["jobs"]
    assert [j["name"] for j in rows] == ["alices"]
    mine, theirs, none = (c.get(f"/v1/training-jobs/{n}/dashboard") for n in ("alices", "bobs", "nope"))
    assert mine.status_code == 200 and (theirs.status_code, theirs.json()) == (none.status_code, none.json())
    # A session is no credential for anything but the dashboard's own calls.
    r = c.post("/v1/training-jobs", json=training_request("new"))
    assert r.status_code == 403 and r.json()["__type"] == "MissingAuthenticationTokenException"


def test_stop_needs_the_csrf_token(env: Any) -> None:
    c, _, key, plane = env
    login(c, key)
    r = c.post("/v1/training-jobs/alices/stop")
    assert r.status_code == 403 and r.json()["__type"] == "AccessDeniedException"
    r = c.post("/v1/training-jobs/alices/stop", headers={"X-Murphy-Csrf": "wrong"})
    assert r.status_code == 403
    assert plane.store.get("alices").status != "Stopping"
    token = c.cookies["murphy_csrf"]
    r = c.post("/v1/training-jobs/bobs/stop", headers={"X-Murphy-Csrf": token})
    none = c.post("/v1/training-jobs/nope/stop", headers={"X-Murphy-Csrf": token})
    assert (r.status_code, r.json()) == (none.status_code, none.json()) and none.status_code == 404
    assert plane.store.get("bobs").status != "Stopping"  # another account's job is missing
    r = c.post("/v1/training-jobs/alices/stop", headers={"X-Murphy-Csrf": token})
    assert r.status_code == 200, r.text
    assert plane.store.get("alices").status == "Stopping"


def test_a_disabled_key_ends_its_sessions_and_logout_ends_one(env: Any) -> None:
    c, ring, key, _ = env
    login(c, key)
    assert c.get("/v1/ui/jobs").status_code == 200
    ring.set_status(key["AccessKeyId"], "Inactive")
    assert c.get("/v1/ui/jobs").status_code == 403 and c.get("/ui/").status_code == 303
    assert login(c, key).status_code == 401  # and no new one
    ring.set_status(key["AccessKeyId"], "Active")
    assert c.get("/v1/ui/jobs").status_code == 403  # the old session stays ended
    login(c, key)
    first = c.cookies["murphy_session"]
    assert c.get("/v1/ui/jobs").status_code == 200
    login(c, key)
    old, csrf = c.cookies["murphy_session"], c.cookies["murphy_csrf"]
    assert old != first
    c.cookies.clear()
    c.cookies.set("murphy_session", first)
    assert c.get("/v1/ui/jobs").status_code == 403  # a second login ended the first session
    c.cookies.clear()
    c.cookies.set("murphy_session", old)
    c.cookies.set("murphy_csrf", csrf)
    assert c.get("/v1/ui/jobs").status_code == 200
    assert c.post("/ui/logout").status_code == 403  # logout is a write: CSRF too
    r = c.post("/ui/logout", headers={"X-Murphy-Csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    c.cookies.clear()
    c.cookies.set("murphy_session", old)
    assert c.get("/v1/ui/jobs").status_code == 403


def test_where_a_session_counts_and_where_login_may_lead() -> None:
    assert session_use("GET", "/ui/") == session_use("GET", "/v1/ui/jobs") == "read"
    assert session_use("POST", "/v1/training-jobs/j/stop") == session_use("POST", "/ui/logout") == "write"
    assert session_use("POST", "/v1/training-jobs") is None and session_use("POST", "/") is None
    assert session_use("DELETE", "/v1/subscriptions/x") is None and session_use("GET", "/metrics") is None
    assert session_use("POST", "/v1/training-jobs/a/b/stop") is None
    assert safe_next("/ui/jobs/x") == "/ui/jobs/x"
    for bad in (None, "", "https://evil.example/ui/", "//evil.example/ui", "/v1/x", "/ui\\@evil"):
        assert safe_next(bad) == "/ui/"


def test_over_tls_both_cookies_are_secure(env: Any) -> None:
    c, _, key, _ = env
    c.base_url = "https://testserver"
    r = login(c, key)
    assert r.status_code == 303 and all("Secure" in v for v in r.headers.get_list("set-cookie"))
