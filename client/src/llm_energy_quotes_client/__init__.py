"""Typed client of the llm-energy-quotes service: `QuotesClient` (blocking) and
`AsyncQuotesClient` (asyncio), on httpx. Errors are raised as `ApiProblem` subclasses carrying
the service's problem details; 429 and 503 are retried as `RetryPolicy` allows."""

from llm_energy_quotes_client.async_client import AsyncQuotesClient
from llm_energy_quotes_client.errors import (
    ApiProblem,
    BadRequest,
    Conflict,
    FieldProblem,
    Forbidden,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    QuotesClientError,
    QuotesTimeout,
    QuotesTransportError,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
)
from llm_energy_quotes_client.retry_after import NO_RETRIES, RetryPolicy
from llm_energy_quotes_client.sync_client import QuotesClient

__all__ = [
    "NO_RETRIES",
    "ApiProblem",
    "AsyncQuotesClient",
    "BadRequest",
    "Conflict",
    "FieldProblem",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "QuotesClient",
    "QuotesClientError",
    "QuotesTimeout",
    "QuotesTransportError",
    "RateLimited",
    "RetryPolicy",
    "ServiceUnavailable",
    "Unauthorized",
]
