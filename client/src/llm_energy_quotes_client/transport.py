"""What the sync and async clients share about sending: headers and URLs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import httpx
from httpx._client import UseClientDefault


def _user_agent() -> str:
    try:
        return f"llm-energy-quotes-client/{version('llm-energy-quotes-client')}"
    except PackageNotFoundError:  # imported from a source tree, not installed
        return "llm-energy-quotes-client"


USER_AGENT = _user_agent()
DEFAULT_TIMEOUT_S = 10.0


def auth_headers(api_key: str | None) -> dict[str, str]:
    """Headers sent with every request: the Bearer key (when given) and the user agent."""
    headers = {"User-Agent": USER_AGENT}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def request_url(base_url: str | None, path: str) -> str:
    """`path` under `base_url`; with no base URL, the path alone (the http client's own base
    URL applies)."""
    return path if base_url is None else base_url.rstrip("/") + path


def attempt_timeout(
    timeout_s: float | None, *, own_client: bool
) -> httpx.Timeout | UseClientDefault:
    """The timeout of each attempt: `timeout_s` when given, else 10 s on the client's own
    httpx client, else (a caller's httpx client) that client's own timeout."""
    if timeout_s is not None:
        return httpx.Timeout(timeout_s)
    return httpx.Timeout(DEFAULT_TIMEOUT_S) if own_client else httpx.USE_CLIENT_DEFAULT
