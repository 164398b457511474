"""Base classes and the problem-details body shared by every endpoint."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict

_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _iso_text_only(value: Any) -> Any:
    """Pydantic reads a number (or a numeric string) as Unix seconds; the contract's datetimes
    are RFC 3339 strings, so those are refused rather than taken for 1970."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("expected an RFC 3339 date-time with a time zone, not a number")
    return value


def utc_representable(value: datetime) -> datetime:
    """`value` unchanged, if it is also a datetime in UTC (where it is compared and stored):
    `0001-01-01T00:00:00+01:00` is in year 0 there, which no datetime can hold."""
    try:
        value.astimezone(UTC)
    except OverflowError as error:
        raise ValueError("date-time out of range once converted to UTC") from error
    return value


IsoDatetime = Annotated[
    AwareDatetime, BeforeValidator(_iso_text_only), AfterValidator(utc_representable)
]
"""An RFC 3339 date-time string with its offset (`2026-11-22T10:00:00Z`) that UTC can hold;
never a number."""


def storable_text(value: str) -> str:
    """`value` unchanged, if every database can store it: PostgreSQL refuses NUL in text, and
    a lone surrogate (JSON's `"\\ud800"`) cannot be encoded as UTF-8 for any database."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError("must not contain lone surrogates") from error
    return value


StorableText = Annotated[str, AfterValidator(storable_text)]
"""A string without NUL characters or lone surrogates (see `storable_text`)."""


def example(value: dict[str, Any]) -> ConfigDict:
    """Model config forbidding unknown fields, with one example shown in /docs."""
    return ConfigDict(extra="forbid", json_schema_extra={"examples": [value]})


class ProblemError(BaseModel):
    model_config = example({"loc": "workload.batch_size", "msg": "must be at most 4096"})

    loc: str
    msg: str


PROBLEM_EXAMPLE: dict[str, Any] = {
    "type": "https://llm-energy-quotes.dev/problems/unknown-name",
    "title": "Unknown catalogue entry",
    "status": 422,
    "detail": "hardware.gpu: unknown GPU 'H100'",
    "errors": [{"loc": "hardware.gpu", "msg": "unknown GPU 'H100'"}],
    "suggestions": ["H100-SXM5-80GB", "H100-PCIE-80GB"],
}


class Problem(BaseModel):
    """RFC 9457 problem details (`application/problem+json`); extra members such as
    `suggestions` or `required_gpu_count` depend on the problem `type`."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [PROBLEM_EXAMPLE]})

    type: str
    title: str
    status: int
    detail: str
    errors: list[ProblemError] | None = None
