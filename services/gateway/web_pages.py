"""The web page: ``/`` serves the player's page, ``/web/…`` its scripts, styles and card faces.

Plain files shipped in the package (``services/gateway/web/``): ES modules, CSS and SVG drawn
by hand, no build step and nothing fetched from the internet; ``docs/web.md`` describes them.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import FileResponse, Response
from starlette.types import Scope

ASSETS = "/web"
"""Where the page's files are served."""

FOLDER = Path(str(resources.files("services.gateway") / "web"))
"""The page's files in the installed package."""

NO_CACHE = {"Cache-Control": "no-cache"}  # revalidate (ETag) so that an upgrade shows at once

POLICY = (
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: its own origin only (HTTP and WebSocket), so the browser
itself refuses anything from elsewhere; inline styles are the meld colours of the cards."""


class _Assets(StaticFiles):
    """StaticFiles that asks browsers to revalidate, and serves ``.js`` as JavaScript."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(NO_CACHE)
        if str(full_path).endswith(".js"):
            response.headers["content-type"] = "text/javascript; charset=utf-8"
        return response


def install(app: FastAPI) -> None:
    """Serve the page at ``/`` and its files under :data:`ASSETS`."""
    app.mount(ASSETS, _Assets(directory=str(FOLDER)), name="web")

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def index() -> FileResponse:
        headers = {**NO_CACHE, "Content-Security-Policy": POLICY}
        return FileResponse(FOLDER / "index.html", headers=headers, media_type="text/html")
