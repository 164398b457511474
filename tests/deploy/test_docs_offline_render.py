"""/docs renders in a real browser with no internet: Chromium resolving only 127.0.0.1 runs the
Swagger UI the service serves itself, which lists every operation (a CDN asset would not load)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from docs_offline import chromium, render, running_service

BROWSER = chromium()
SWAGGER_DRAWN = 'class="swagger-ui"'  # the root the Swagger UI bundle draws into the page


@pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed (.ci/run installs it)")
def test_swagger_ui_renders_every_operation_offline() -> None:
    assert BROWSER is not None
    with running_service() as url:
        dom = render(BROWSER, f"{url}/docs", "--dump-dom").stdout
    assert SWAGGER_DRAWN in dom
    for path in ("/v1/estimate", "/v1/estimate/batch", "/v1/quotes", "/v1/health/ready"):
        assert f'data-path="{path}"' in dom, path  # drawn by the Swagger UI bundle


@pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed (.ci/run installs it)")
def test_a_page_that_needs_the_internet_does_not_render_offline() -> None:
    """The check can fail: FastAPI's own docs page, its assets on a CDN, draws nothing."""
    assert BROWSER is not None
    page = Path(__file__).with_name("cdn_docs_page.html")
    dom = render(BROWSER, page.as_uri(), "--dump-dom").stdout
    assert '<div id="swagger-ui">' in dom and SWAGGER_DRAWN not in dom
