"""The queries of tenants' registered models. They flush, never commit."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from service.db.tables import RegisteredModel


class RegisteredModelRepository:
    """A tenant's registered models; every query is scoped to one tenant."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, model: RegisteredModel) -> RegisteredModel:
        self.session.add(model)
        self.session.flush()
        return model

    def get(self, tenant: str, model_id: str) -> RegisteredModel | None:
        """The tenant's model of that id (case-insensitive, as catalogue ids are)."""
        found = self.named(tenant, [model_id])
        return found[0] if found else None

    def named(self, tenant: str, model_ids: Collection[str]) -> list[RegisteredModel]:
        """The tenant's models among `model_ids` (case-insensitive)."""
        wanted = {model_id.lower() for model_id in model_ids}
        return [model for model in self.all(tenant) if model.model_id.lower() in wanted]

    def all(self, tenant: str) -> list[RegisteredModel]:
        """The tenant's models, by id."""
        statement = (
            select(RegisteredModel)
            .where(RegisteredModel.tenant == tenant)
            .order_by(RegisteredModel.model_id)
        )
        return list(self.session.scalars(statement))

    def delete(self, tenant: str, model_id: str) -> bool:
        """Remove the tenant's model of that id; False when it has none."""
        found = self.get(tenant, model_id)
        if found is None:
            return False
        self.session.execute(
            delete(RegisteredModel).where(
                RegisteredModel.tenant == tenant, RegisteredModel.model_id == found.model_id
            )
        )
        return True
