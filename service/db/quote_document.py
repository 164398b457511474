"""A quote's response document, serialised once: the same JSON text is stored and answered.

A quote document is about 8 KB of JSON (mostly the carbon factors' sources). Dumping it to a dict
for the database, encoding that dict again, then serialising the response once more for the
HTTP answer cost more than a third of a batch item's time. Here the response is serialised
once, less its two leading members: `quote_id` (known once the row is built) and `created_at`
(stamped when the row's transaction holds its connection, see `QuoteStore.save`). Those two are
written in front of the rest when the text is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

_JSON_TIME: TypeAdapter[datetime] = TypeAdapter(datetime)


def json_time(moment: datetime) -> str:
    """`moment` as a JSON document states it (ISO 8601, as pydantic serialises a datetime)."""
    text: str = _JSON_TIME.dump_python(moment, mode="json")
    return text


@dataclass(slots=True)
class QuoteDocument:
    """The JSON object `{"quote_id": ..., "created_at": ..., <members>}` kept as its parts.

    `members_json` is the serialised object without those two members and without its opening
    brace (`"model_version":...}`), as `BaseModel.model_dump_json(exclude=...)[1:]` gives it.
    """

    quote_id: str | None
    created_at: str
    members_json: str

    @classmethod
    def of(cls, object_json: str, quote_id: str | None, created_at: datetime) -> QuoteDocument:
        """From `object_json`, an object serialised without `quote_id` and `created_at`."""
        if not object_json.startswith("{") or object_json == "{}":
            raise ValueError("a quote document needs members besides quote_id and created_at")
        return cls(quote_id, json_time(created_at), object_json[1:])

    def text(self) -> str:
        """The whole document as JSON text (what is stored and answered)."""
        quote_id = "null" if self.quote_id is None else orjson.dumps(self.quote_id).decode()
        created_at = orjson.dumps(self.created_at).decode()
        return f'{{"quote_id":{quote_id},"created_at":{created_at},{self.members_json}'

    def as_dict(self) -> dict[str, Any]:
        """The document parsed (for the rare paths that need a plain dict, e.g. the spool)."""
        document: dict[str, Any] = orjson.loads(self.text())
        return document
