"""The dashboard's login under ``--auth sigv4``: ``/ui/login`` (a form: access key id and secret),
``/ui/logout``, and the session check the edge (:mod:`murphy.api.edge`) makes for requests that
carry the session cookie instead of a signature.

A session is accepted only where the dashboard needs it: GET/HEAD of ``/ui/...`` and ``/v1/...``
(the pages, their static files, the JSON and live routes), and two state-changing calls, the Stop
button (``POST /v1/training-jobs/{name}/stop``) and ``POST /ui/logout``, which must also carry
the session's CSRF token in ``X-Murphy-Csrf``. Anything else needs a signature as before. The
principal has the key's account and actions, so account scoping and action limits apply as for a
signed request. The secret is compared in constant time and never logged.
"""

from __future__ import annotations

import logging
import re
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from fastapi import FastAPI
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import murphy.ui
from murphy.auth import sessions as s
from murphy.auth.verifier import Principal
from murphy.exceptions import AccessDeniedException
from murphy.store.base import UiSessionStore

if TYPE_CHECKING:
    from murphy.auth.keys import ResolvedKey
    from murphy.auth.verifier import Verifier
    from murphy.settings import Settings

log = logging.getLogger("murphy.api.ui_login")
LOGIN = "/ui/login"
LOGOUT = "/ui/logout"
#: Answered without a session or signature: the login form and the one stylesheet it uses.
PUBLIC = frozenset({LOGIN, "/ui/static/murphy.css"})
_STOP = re.compile(r"/v1/training-jobs/[^/]+/stop")
BAD_LOGIN = "The access key id or secret is not valid, or the key is disabled."
CSRF_REFUSED = "The request's CSRF token is missing or does not match the session."


def session_use(method: str, path: str) -> str | None:
    """'read' or 'write' where a session cookie may stand for a signature, else None."""
    if method in ("GET", "HEAD") and (path == "/ui" or path.startswith(("/ui/", "/v1/"))):
        return "read"
    if method == "POST" and (path == LOGOUT or _STOP.fullmatch(path)):
        return "write"
    return None


def safe_next(raw: str | None) -> str:
    """Where to go after login: only a dashboard path on this server (no open redirect)."""
    if raw and raw.startswith("/ui") and not raw.startswith("//") and "\\" not in raw and not urlsplit(raw).netloc:
        return raw
    return "/ui/"


class UiAuth:
    def __init__(self, verifier: Verifier, settings: Settings, sessions: s.Sessions | None = None) -> None:
        self.verifier = verifier
        self.settings = settings
        if sessions is None:
            # The job store's table when it keeps one (both stores do): logins outlive the process.
            store = getattr(verifier.keys, "store", None)
            sessions = s.Sessions(ttl_s=settings.ui_session_s,
                                  store=store if isinstance(store, UiSessionStore) else None)
        self.sessions = sessions
        self.templates = Jinja2Templates(directory=str(resources.files(murphy.ui) / "templates"))

    async def _key(self, access_key_id: str) -> ResolvedKey | None:
        key = self.verifier.key(access_key_id)
        if key is None:
            key = await run_in_threadpool(self.verifier.load, access_key_id)
        return key

    async def principal(self, method: str, path: str, headers: dict[str, list[str]]) -> Principal | None:
        """The session's principal, or None (no usable session: the caller falls back to SigV4).
        A write without the session's CSRF token is refused (AccessDeniedException)."""
        use = session_use(method, path)
        if use is None:
            return None
        jar = s.cookies("; ".join(headers.get("cookie", [])))
        session_id = jar.get(s.COOKIE)
        # The store may be a database: off the event loop.
        session = await run_in_threadpool(self.sessions.get, session_id) if session_id else None
        if session is None:
            return None
        # Through the verifier's cache: a disabled key stops working within auth_key_cache_s.
        key = await self._key(session.access_key_id)
        if not s.key_usable(key, self.verifier.now()):
            await run_in_threadpool(self.sessions.end, session_id)
            return None
        assert key is not None
        if use == "write" and not s.csrf_ok(session, (headers.get(s.CSRF_HEADER) or [""])[0]):
            log.info("refused a dashboard write without its CSRF token")
            raise AccessDeniedException(CSRF_REFUSED)
        return Principal(key.access_key_id, key.account, key.name, self.settings.default_region, key.actions)

    # --- routes -----------------------------------------------------------------------------------

    def _page(self, request: Request, status: int, error: str | None, access_key_id: str = "",
              nxt: str = "/ui/") -> Response:
        return self.templates.TemplateResponse(
            request, "login.html", {"error": error, "access_key_id": access_key_id, "next": nxt},
            status_code=status, headers={"cache-control": "no-store"})

    async def login_page(self, request: Request) -> Response:
        return self._page(request, 200, None, nxt=safe_next(request.query_params.get("next")))

    async def login(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
        akid, secret = form.get("access_key_id", "").strip(), form.get("secret", "")
        nxt = safe_next(form.get("next"))
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
            # Login CSRF: another site must not log a visitor in as someone else.
            return self._page(request, 403, "A login must come from this server's own page.", akid[:128], nxt)
        key = await run_in_threadpool(self.verifier.load, akid) if akid and len(akid) <= 128 else None
        if not s.secret_matches(key, secret, self.verifier.now()):
            log.info("refused a dashboard login")  # never the id or the secret
            return self._page(request, 401, BAD_LOGIN, akid[:128], nxt)
        assert key is not None
        # A fresh id at every login (never one the browser brought); the browser's old one ends.
        await run_in_threadpool(self.sessions.end, s.cookies(request.headers.get("cookie")).get(s.COOKIE))
        session_id, session = await run_in_threadpool(self.sessions.create, key.access_key_id)
        secure = request.url.scheme == "https"
        ttl = int(self.sessions.ttl_s)
        response = RedirectResponse(nxt, status_code=303)
        response.headers.append("set-cookie", s.set_cookie(s.COOKIE, session_id, max_age=ttl, secure=secure,
                                                           http_only=True))
        response.headers.append("set-cookie", s.set_cookie(s.CSRF_COOKIE, session.csrf, max_age=ttl, secure=secure,
                                                           http_only=False))
        return response

    async def logout(self, request: Request) -> Response:
        await run_in_threadpool(self.sessions.end, s.cookies(request.headers.get("cookie")).get(s.COOKIE))
        secure = request.url.scheme == "https"
        response = RedirectResponse(LOGIN, status_code=303)
        for name, http_only in ((s.COOKIE, True), (s.CSRF_COOKIE, False)):
            response.headers.append("set-cookie", s.set_cookie(name, "", max_age=0, secure=secure, http_only=http_only))
        return response

    def register(self, app: FastAPI) -> None:
        app.add_api_route(LOGIN, self.login_page, methods=["GET"], include_in_schema=False)
        app.add_api_route(LOGIN, self.login, methods=["POST"], include_in_schema=False)
        app.add_api_route(LOGOUT, self.logout, methods=["POST"], include_in_schema=False)


def login_redirect(path: str, query: str) -> tuple[int, list[tuple[bytes, bytes]]]:
    """The answer to a page request without a session: 303 to the login form, coming back after."""
    from urllib.parse import quote

    target = path + (f"?{query}" if query else "")
    return 303, [(b"location", f"{LOGIN}?next={quote(target, safe='')}".encode("latin-1")),
                 (b"cache-control", b"no-store"), (b"content-length", b"0")]
