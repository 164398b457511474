"""The interactive API docs (Swagger UI at /docs, ReDoc at /redoc), public and offline.

FastAPI's own docs pages load Swagger UI and ReDoc from a CDN, which leaves a blank page on a
machine without internet. These pages load the same assets from the service itself: the files
the `fastapi-offline` package ships (only its static files are used), served below /docs/assets.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse

from service.api.deps import public_route

ASSETS_PATH = "/docs/assets"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"
AssetName = Literal["swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"]
_MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
# The assets change only with the package version: a day in the browser's cache.
_ASSET_CACHE_CONTROL = "public, max-age=86400"

router = APIRouter(include_in_schema=False, dependencies=[Depends(public_route)])


def _title(request: Request) -> str:
    return f"{request.app.title} - API docs"


def _openapi_url(request: Request) -> str:
    return f"{request.scope.get('root_path', '')}{request.app.openapi_url}"


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=_title(request),
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
        oauth2_redirect_url=OAUTH2_REDIRECT_PATH,
    )


@router.get(OAUTH2_REDIRECT_PATH)
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=_openapi_url(request),
        title=_title(request),
        redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
        with_google_fonts=False,
    )


@router.get(ASSETS_PATH + "/{name}")
async def docs_asset(name: Annotated[AssetName, Path()]) -> Response:
    """One of the four packaged asset files (any other name: 422 from the Literal)."""
    media_type = _MEDIA_TYPES[name[name.rindex(".") :]]
    return Response(
        _asset_bytes(name),
        media_type=media_type,
        headers={"Cache-Control": _ASSET_CACHE_CONTROL},
    )


@cache
def _asset_bytes(name: str) -> bytes:
    """The file's bytes, read once per process (the Swagger UI bundle is about 1.4 MB)."""
    return (files("fastapi_offline") / "static" / name).read_bytes()
