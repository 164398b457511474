"""The app served in the test's own event loop: its lifespan run there, the async client package
sending through httpx's ASGI transport (for the async client and the LiteLLM callback)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from api_support import make_settings
from llm_energy_quotes_client import AsyncQuotesClient

from service.main import create_app

BASE_URL = "http://quotes.test"


@asynccontextmanager
async def serving_app(database_url: str, **overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx.AsyncClient into a started app (lifespan entered, left on exit)."""
    app = create_app(make_settings(database_url, **overrides))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            yield http


def async_quotes(http: httpx.AsyncClient, key: str | None = None) -> AsyncQuotesClient:
    return AsyncQuotesClient(api_key=key, http_client=http)
