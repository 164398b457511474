"""The base of every response document the client returns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Document(BaseModel):
    """A response body as the service sent it. Unknown members are kept (the contract lets the
    service add fields), readable as attributes and in `model_extra`; none is dropped."""

    # protected_namespaces: `model`, `model_version` are contract fields (pydantic < 2.10 warns).
    model_config = ConfigDict(extra="allow", frozen=True, protected_namespaces=())
