"""Every answer carries an X-Request-ID (the caller's, when usable) and every log line written
while serving the request carries the same id, in one JSON format."""

from __future__ import annotations

import io
import json
import logging
import re
import sys

from api_support import example_body, running_client

from service.logs import JsonFormatter, RequestIdFilter, ServiceLogHandler, configure_logging


def test_a_callers_id_is_echoed_and_a_missing_or_unusable_one_replaced(database_url: str) -> None:
    with running_client(database_url) as client:
        given = client.post(
            "/v1/estimate", json=example_body(), headers={"X-Request-ID": "gw-7f3a"}
        )
        assert given.headers["x-request-id"] == "gw-7f3a"
        made = client.get("/v1/gpus")
        assert re.fullmatch(r"[0-9a-f]{32}", made.headers["x-request-id"])
        other = client.get("/v1/gpus")
        assert other.headers["x-request-id"] != made.headers["x-request-id"]
        spaced = client.get("/v1/gpus", headers={"X-Request-ID": "has space"})
        assert re.fullmatch(r"[0-9a-f]{32}", spaced.headers["x-request-id"])
        long = client.get("/v1/gpus", headers={"X-Request-ID": "x" * 129})
        assert long.headers["x-request-id"] != "x" * 129
        problem = client.get("/v1/quotes/q_00000000000000000000000000")
        assert re.fullmatch(r"[0-9a-f]{32}", problem.headers["x-request-id"])


def test_log_lines_written_while_serving_carry_the_request_id(database_url: str) -> None:
    stream = io.StringIO()
    capture = logging.StreamHandler(stream)
    capture.addFilter(RequestIdFilter())
    capture.setFormatter(JsonFormatter())
    route_logger = logging.getLogger("test.inside-a-request")
    with running_client(database_url) as client:

        @client.app.get("/test-log")  # type: ignore[attr-defined]
        async def log_something() -> dict[str, str]:
            route_logger.warning("inside %s", "the route")
            return {}

        route_logger.addHandler(capture)
        try:
            answer = client.get("/test-log", headers={"X-Request-ID": "trace-42"})
            route_logger.warning("outside a request")
        finally:
            route_logger.removeHandler(capture)
    inside, outside = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert answer.headers["x-request-id"] == "trace-42"
    assert inside["request_id"] == "trace-42" and inside["message"] == "inside the route"
    assert inside["level"] == "WARNING" and inside["logger"] == "test.inside-a-request"
    assert outside["request_id"] is None


def test_configure_logging_routes_uvicorns_loggers_through_one_handler() -> None:
    uvicorn_access = logging.getLogger("uvicorn.access")
    uvicorn_access.addHandler(logging.StreamHandler(io.StringIO()))
    uvicorn_access.propagate = False
    root = logging.getLogger()
    level = root.level
    try:
        configure_logging("INFO", "json")
        configure_logging("INFO", "json")  # again: still one handler of ours
        ours = [h for h in root.handlers if isinstance(h, ServiceLogHandler)]
        assert len(ours) == 1 and isinstance(ours[0].formatter, JsonFormatter)
        assert uvicorn_access.handlers == [] and uvicorn_access.propagate
    finally:
        for handler in [h for h in root.handlers if isinstance(h, ServiceLogHandler)]:
            root.removeHandler(handler)
        root.setLevel(level)


def test_a_json_line_holds_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed" and "ValueError: boom" in line["exception"]
