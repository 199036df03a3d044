"""The dashboard's pages at ``/ui/`` and its static files at ``/ui/static/`` (vendored uPlot and
murphy's own scripts), served by the API's app and port: no Node build, no CDN.

Pages are Jinja2 templates rendered on the server with the job's name; everything else comes from
the JSON routes (``murphy.api.ui_routes``) and one SSE stream per page.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import murphy.ui

STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")


class UiPages:
    def __init__(self) -> None:
        root = resources.files(murphy.ui)
        self.templates = Jinja2Templates(directory=str(root / "templates"))
        self.static_dir = str(root / "static")

    async def jobs(self, request: Request) -> Response:
        return self.templates.TemplateResponse(request, "jobs.html", {"statuses": STATUSES})

    async def job(self, request: Request, name: str) -> Response:
        return self.templates.TemplateResponse(request, "job.html", {"name": name})

    async def root(self) -> Response:
        return RedirectResponse("/ui/")

    def register(self, app: FastAPI) -> None:
        app.add_api_route("/ui", self.root, methods=["GET"], include_in_schema=False)
        app.add_api_route("/ui/", self.jobs, methods=["GET"], include_in_schema=False)
        app.add_api_route("/ui/jobs/{name}", self.job, methods=["GET"], include_in_schema=False)
        app.mount("/ui/static", StaticFiles(directory=self.static_dir), name="ui-static")


def dashboard_url(base: str, job: str | None = None) -> str:
    """The dashboard's address on the server at ``base`` (e.g. ``http://127.0.0.1:8080``)."""
    base = base.rstrip("/")
    return f"{base}/ui/jobs/{job}" if job else f"{base}/ui/"
