"""One log format for the whole process, JSON by default, each line with its request's id.

`configure_logging` sends the root logger and uvicorn's own loggers (start-up, errors, access
lines) through one handler, so an operator's log pipeline parses every line the same way.
`request_id` holds the id of the request being served (service.api.request_record sets it); a line
logged outside a request carries null.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["json", "text"]  # as Settings.log_format

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)

# uvicorn's loggers keep handlers of their own (its log config); they are routed to the root's.
_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request's id (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id, and
    the traceback as `exception` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class ServiceLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The process's one log handler (to stderr); a marker class, so that configuring again
    replaces it instead of adding a second."""


def configure_logging(level: str, log_format: LogFormat) -> None:
    """Route every log line of the process through one handler in `log_format` at `level`.
    Other handlers on the root logger (a test runner's capture) are left in place."""
    handler = ServiceLogHandler(sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, ServiceLogHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in _UVICORN_LOGGERS:
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
