"""The API documents' pages, ``/docs`` (Swagger UI) and ``/redoc``, served without internet.

FastAPI's own pages load their scripts and styles from a CDN, so they were blank offline. These
serve the same pages with the assets of the PyPI package ``fastapi-offline`` (Swagger UI's
bundle and stylesheet, ReDoc's standalone script), mounted at :data:`ASSETS`; ``docs/api.md``.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

ASSETS = "/docs-assets"
"""Where the pages' scripts, stylesheet and icon are served."""


def install(app: FastAPI, openapi_url: str) -> None:
    """Serve ``/docs`` and ``/redoc`` for the document at ``openapi_url``, and their assets."""
    folder = resources.files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(folder)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
