"""Shorten a service answer for the README without editing any value in it.

JSON answers: lists keep their first `MAX_LIST_ITEMS` items and then `...`; strings longer than
`MAX_STRING_CHARS` are cut with `...`; objects are laid out one key per line only when they do
not fit on one line of `WIDTH` characters. HTTP answers (`curl -i`): the status line, the named
headers and the body. Text answers: only the lines that match a pattern. An example may also
name members to elide (`carbon.factors`), shown as `...`.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_LIST_ITEMS = 2
MAX_STRING_CHARS = 110
MAX_TEXT_LINES = 24
WIDTH = 100
INDENT = "  "


class _Elided:
    """Stands for the list items left out."""


ELIDED = _Elided()


def shortened(value: Any) -> Any:
    """`value` with long lists and strings cut (numbers and keys untouched)."""
    if isinstance(value, dict):
        return {key: shortened(item) for key, item in value.items()}
    if isinstance(value, list):
        kept = [shortened(item) for item in value[:MAX_LIST_ITEMS]]
        return [*kept, ELIDED] if len(value) > MAX_LIST_ITEMS else kept
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        return value[: MAX_STRING_CHARS - 3] + "..."
    return value


def inline(value: Any) -> str:
    """One-line JSON, with `...` for elided list items."""
    if value is ELIDED:
        return "..."
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(inline(item) for item in value) + "]"
    return json.dumps(value)


def laid_out(value: Any, depth: int = 0) -> str:
    """JSON on one line if it fits in WIDTH; else its members packed several to a line, each
    member that cannot fit on a line laid out the same way on lines of its own."""
    flat = inline(value)
    if len(flat) + len(INDENT) * depth <= WIDTH or not isinstance(value, dict | list):
        return flat
    pad = INDENT * (depth + 1)
    if isinstance(value, dict):
        members = [f"{json.dumps(k)}: {laid_out(v, depth + 1)}" for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        members = [laid_out(item, depth + 1) for item in value]
        opening, closing = "[", "]"
    lines: list[str] = []
    for member in members:
        joined = f"{lines[-1]}, {member}" if lines else ""
        if lines and "\n" not in joined and len(joined) < WIDTH:  # room for the comma
            lines[-1] = joined
        else:
            lines.append(pad + member)
    return opening + "\n" + ",\n".join(lines) + "\n" + INDENT * depth + closing


def elided(value: Any, path: str) -> Any:
    """`value` with the member at dotted `path` replaced by `...` (`*` matches any list item
    or key); members that are not there are left alone."""
    head, _, rest = path.partition(".")
    if isinstance(value, dict):
        keys = list(value) if head == "*" else [head] if head in value else []
        return {
            k: (elided(v, rest) if rest else ELIDED) if k in keys else v for k, v in value.items()
        }
    if isinstance(value, list) and head == "*":
        return [elided(item, rest) if rest else ELIDED for item in value]
    return value


def json_documents(text: str) -> list[Any]:
    """Every JSON document in `text` (curl prints several back to back)."""
    decoder, documents, position = json.JSONDecoder(), [], 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
    return documents


def render_body(body: str, elide: tuple[str, ...] = ()) -> str:
    """A JSON body laid out and shortened, the members at `elide` paths as `...`; any other
    body as it is."""
    try:
        documents = json_documents(body)
    except json.JSONDecodeError:
        return body.rstrip("\n")
    rendered = []
    for document in documents:
        for path in elide:
            document = elided(document, path)
        rendered.append(laid_out(shortened(document)))
    return "\n\n".join(rendered)


def render_http(text: str, keep_headers: tuple[str, ...]) -> str:
    """Each response of `curl -i` output: status line, the headers named, the body."""
    rendered = []
    # curl prints a body without a newline, so the next status line may follow it directly.
    for response in re.split(r"(?:^|(?<=\n)|(?<=\}))(?=HTTP/\d(?:\.\d)? \d{3} )", text):
        if not response.strip():
            continue
        head, _, body = response.replace("\r\n", "\n").partition("\n\n")
        status, *headers = head.split("\n")
        kept = [h for h in headers if h.split(":", 1)[0].strip().lower() in keep_headers]
        rendered.append("\n".join([status, *kept]) + "\n\n" + render_body(body))
    return "\n\n".join(rendered)


def render_answer(
    text: str, keep_headers: tuple[str, ...] = (), keep_lines: str = "", elide: tuple[str, ...] = ()
) -> str:
    """The README form of a command's output (see the module docstring)."""
    if keep_headers:
        return render_http(text, keep_headers)
    if keep_lines:
        lines = [line for line in text.splitlines() if re.search(keep_lines, line)]
        return "\n".join(lines[:MAX_TEXT_LINES] + (["..."] if len(lines) > MAX_TEXT_LINES else []))
    return render_body(text, elide)
