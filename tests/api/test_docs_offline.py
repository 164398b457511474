"""The docs pages load every asset from the service itself, so they work without internet."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

# Where a page would reach outside the service: any absolute URL in a src or href attribute.
_EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""")


def _referenced_assets(page: str) -> list[str]:
    return re.findall(r"""["'](/docs/assets/[^"']+)["']""", page)


def test_swagger_ui_and_redoc_reference_only_the_services_own_assets(client: TestClient) -> None:
    for path, expected in (
        ("/docs", {"swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"}),
        ("/redoc", {"redoc.standalone.js", "favicon.png"}),
    ):
        page = client.get(path)
        assert page.status_code == 200
        assert _EXTERNAL.search(page.text) is None, path
        assert "fonts.googleapis" not in page.text
        assets = _referenced_assets(page.text)
        assert {asset.rsplit("/", 1)[1] for asset in assets} == expected, path
        for asset in assets:
            answer = client.get(asset)
            assert answer.status_code == 200, asset
            assert answer.headers["cache-control"] == "public, max-age=86400"
            assert len(answer.content) > 1000, asset  # the real file, not an empty answer


def test_asset_media_types_and_unknown_names(client: TestClient) -> None:
    js = client.get("/docs/assets/swagger-ui-bundle.js")
    assert js.headers["content-type"].startswith("text/javascript")
    assert b"SwaggerUIBundle" in js.content
    assert client.get("/docs/assets/swagger-ui.css").headers["content-type"].startswith("text/css")
    assert client.get("/docs/assets/favicon.png").content[:4] == b"\x89PNG"
    assert client.get("/docs/assets/../../etc/passwd").status_code == 404
    assert client.get("/docs/assets/secrets.py").status_code == 422


def test_docs_pages_are_not_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith(("/docs", "/redoc"))]
