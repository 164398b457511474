"""A quote's response document, serialised once: the same JSON text is answered and stored.

A quote document is about 7.5 KB of JSON, of which 5.9 KB are the carbon factors with their
sources (`carbon.factors`). Those depend on the request's context only (region, GPU, server
profile, caller overrides), not on its workload, so they are serialised once per context
(`CarbonFactorSet`, content-addressed by the sha256 of its text) and stored once per distinct
set in `carbon_factor_sets`; a quote row stores its document without them and names its set in
`quotes.carbon_factor_set_id`. The caller is answered with the whole document.

The rest of the document is serialised once per quote, less its two leading members:
`quote_id` (known once the row is built) and `created_at` (stamped when the row's transaction
holds its connection, see `QuoteStore.save`). Those two are written in front of the rest, and
the factors are put back in their place, when the text is needed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

_JSON_TIME: TypeAdapter[datetime] = TypeAdapter(datetime)
FACTORS_MEMBER = ',"factors":'
_FACTORS_MEMBER_UTF8 = FACTORS_MEMBER.encode()
# What a writer puts where the factors go (QuoteDocument.written takes it out again).
_FACTORS_PLACEHOLDER = FACTORS_MEMBER + "null"


def json_time(moment: datetime) -> str:
    """`moment` as a JSON document states it (ISO 8601, as pydantic serialises a datetime)."""
    text: str = _JSON_TIME.dump_python(moment, mode="json")
    return text


@dataclass(frozen=True, slots=True)
class CarbonFactorSet:
    """The JSON text of a quote's `carbon.factors` object, its id (sha256 of the text), and the
    text as UTF-8 (what every answer priced with this set writes: encoded once, not per quote)."""

    id: str
    json: str
    utf8: bytes

    @classmethod
    def of(cls, factors_json: str) -> CarbonFactorSet:
        utf8 = factors_json.encode()
        return cls(hashlib.sha256(utf8).hexdigest(), factors_json, utf8)


@dataclass(slots=True)
class QuoteDocument:
    """The JSON object `{"quote_id": ..., "created_at": ..., <members>}` kept as its parts.

    `members_json` is the serialised object without those two members, without its opening
    brace (`"model_version":...}`) and without `carbon.factors`; `factors` go back in at
    `factors_at` (the end of the `carbon` object's other members).
    """

    quote_id: str | None
    created_at: str
    members_json: str
    factors: CarbonFactorSet
    factors_at: int

    @classmethod
    def written(
        cls, object_json: str, created_at: datetime, factors: CarbonFactorSet
    ) -> QuoteDocument:
        """From `object_json`, an object serialised without `quote_id` and `created_at` whose
        `carbon.factors` member is `null`, standing for `factors`."""
        at = object_json.find(_FACTORS_PLACEHOLDER)  # the only "factors" member: carbon's
        if not object_json.startswith("{") or at < 0:
            raise ValueError("a quote document is an object whose carbon factors are null")
        members = object_json[1:at] + object_json[at + len(_FACTORS_PLACEHOLDER) :]
        return cls(None, json_time(created_at), members, factors, at - 1)

    def with_id(self, quote_id: str) -> QuoteDocument:
        """A copy naming `quote_id` (the priced document stays as it was, without one)."""
        # Built directly: dataclasses.replace looks every field up again, per quote.
        return QuoteDocument(
            quote_id, self.created_at, self.members_json, self.factors, self.factors_at
        )

    def _leading(self) -> bytes:
        """`{"quote_id":...,"created_at":...,` as UTF-8 (orjson writes null for no id)."""
        return b"".join(
            (
                b'{"quote_id":',
                orjson.dumps(self.quote_id),
                b',"created_at":',
                orjson.dumps(self.created_at),
                b",",
            )
        )

    def json_parts(self) -> tuple[bytes, bytes, bytes]:
        """The whole document as UTF-8 JSON in three parts, to be written one after the other:
        the members up to the carbon factors, the factors (the set's own bytes, shared by every
        quote priced with it), the rest. A batch's answer joins its items' parts once, instead
        of copying each ~9 KB document into bytes of its own first."""
        members, at = self.members_json, self.factors_at
        head = b"".join((self._leading(), members[:at].encode(), _FACTORS_MEMBER_UTF8))
        return head, self.factors.utf8, members[at:].encode()

    def text(self) -> str:
        """The whole document as JSON text (what the caller is answered)."""
        return b"".join(self.json_parts()).decode()

    def stored_text(self) -> str:
        """The document as its row stores it: without the factors its set id points to."""
        return self._leading().decode() + self.members_json

    def as_dict(self) -> dict[str, Any]:
        """The whole document parsed (for the rare paths that need a plain dict, e.g. the
        spool)."""
        document: dict[str, Any] = orjson.loads(self.text())
        return document


def with_factors(stored: dict[str, Any], factors: dict[str, Any]) -> dict[str, Any]:
    """A stored document (parsed) with its carbon factors put back: a new dict, in the key
    order the caller was answered with (`factors` is the last member of `carbon`)."""
    return {**stored, "carbon": {**stored["carbon"], "factors": factors}}
