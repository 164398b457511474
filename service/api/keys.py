"""API keys: generation, SHA-256 hashing, and a key store that survives a database outage."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from service.db.engine import Database
from service.db.repositories import ApiKeyRepository
from service.quotes.shared_read import SharedRead

logger = logging.getLogger(__name__)

KEY_PREFIX = "lq"
SCOPES = frozenset({"estimate", "billing", "observe", "admin"})
"""The scopes routes require."""
OPERATOR_SCOPE = "operator"
"""The service operator's: what changes quotes for every tenant (a global calibration). No
other scope grants it; it grants every other one."""
KEY_SCOPES = SCOPES | {OPERATOR_SCOPE}
DEV_TENANT = "dev"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a tenant and its scopes (`admin` grants every route scope, `operator`
    every scope)."""

    tenant: str
    scopes: frozenset[str]
    key_prefix: str | None

    def allows(self, scope: str) -> bool:
        if OPERATOR_SCOPE in self.scopes:
            return True
        return scope != OPERATOR_SCOPE and (scope in self.scopes or "admin" in self.scopes)


# The open dev mode has one tenant: nothing it does can change another tenant's quotes.
DEV_PRINCIPAL = Principal(DEV_TENANT, KEY_SCOPES, None)


@dataclass(frozen=True, slots=True)
class NewKey:
    """A freshly generated key: `secret` is shown once and never stored."""

    secret: str
    prefix: str
    sha256: str


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def generate_key() -> NewKey:
    prefix = secrets.token_hex(6)
    secret = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    return NewKey(secret, prefix, hash_key(secret))


def key_prefix(secret: str) -> str | None:
    """The display prefix embedded in a key, or None when the token is not one of ours."""
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1]:
        return None
    return parts[1]


def parse_scopes(text: str) -> frozenset[str]:
    scopes = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = scopes - KEY_SCOPES
    if unknown:
        raise ValueError(f"unknown scopes {sorted(unknown)}; use {sorted(KEY_SCOPES)}")
    return scopes


@dataclass(frozen=True, slots=True)
class _KnownKey:
    principal: Principal
    sha256: str
    revoked: bool
    checked_at: float = 0.0  # the store's clock at the database read [s]


NEEDS_DATABASE = object()
"""What the cached checks answer when only the database can tell."""


class KeyStore:
    """Checks bearer keys against the database, falling back to keys it has already seen
    (so estimates keep working while the database is away). `clock` [s] times the cache:
    time.monotonic, or in tests a clock the test moves itself."""

    def __init__(
        self,
        database: Database,
        *,
        require_key: bool,
        mode_ttl_s: float,
        key_ttl_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.database = database
        self.clock = clock
        self.require_key = require_key
        self.mode_ttl_s = mode_ttl_s
        self.key_ttl_s = key_ttl_s
        self._known: dict[str, _KnownKey] = {}
        self._any_key: bool | None = None
        self._checked_at = 0.0
        self._lock = threading.Lock()
        # The event loop's read of `open_mode`, one at a time for the requests that find it due.
        self.open_mode_read = SharedRead(self.open_mode, mode_ttl_s)

    def open_mode(self) -> bool:
        """True while no key was ever created (and keys are not required): single-tenant dev."""
        if self.require_key or self._any_key:
            return False
        now = self.clock()
        if self._any_key is None or now - self._checked_at >= self.mode_ttl_s:
            try:
                with self.database.sessions() as session:
                    self._any_key = ApiKeyRepository(session).count() > 0
                self._checked_at = now
            except SQLAlchemyError:
                if self._any_key is None:
                    logger.warning("could not check for API keys; refusing the open dev mode")
                    return False
                logger.warning("could not re-check for API keys; keeping the last answer")
        return not self._any_key

    def cached_open_mode(self) -> bool | object:
        """`open_mode()` when it needs no database read, else NEEDS_DATABASE."""
        if self.require_key or self._any_key:
            return False
        if self._any_key is None or self.clock() - self._checked_at >= self.mode_ttl_s:
            return NEEDS_DATABASE
        return not self._any_key

    def authenticate(self, secret: str) -> Principal | None:
        """The principal of a valid, unrevoked key; None otherwise (reads the database)."""
        prefix = key_prefix(secret)
        if prefix is None:
            return None
        return self._check(self._lookup(prefix), secret)

    def cached_authenticate(self, secret: str) -> Principal | object | None:
        """`authenticate()` from a key read within `key_ttl_s`, else NEEDS_DATABASE.

        The cache keeps the estimate path off the database: a key revoked in the database is
        refused by every worker within `key_ttl_s` seconds."""
        prefix = key_prefix(secret)
        if prefix is None:
            return None
        known = self._known.get(prefix)
        if known is None or self.clock() - known.checked_at >= self.key_ttl_s:
            return NEEDS_DATABASE
        return self._check(known, secret)

    @staticmethod
    def _check(known: _KnownKey | None, secret: str) -> Principal | None:
        if known is None or known.revoked:
            return None
        if not hmac.compare_digest(known.sha256, hash_key(secret)):
            return None
        return known.principal

    def _lookup(self, prefix: str) -> _KnownKey | None:
        try:
            with self.database.sessions() as session:
                row = ApiKeyRepository(session).by_prefix(prefix)
        except SQLAlchemyError:
            logger.warning("database unavailable: checking key %s against cached keys", prefix)
            return self._known.get(prefix)
        if row is None:
            return None
        principal = Principal(row.tenant, parse_scopes(row.scopes), row.prefix)
        known = _KnownKey(
            principal, row.key_sha256, row.revoked_at is not None, checked_at=self.clock()
        )
        with self._lock:
            self._known[prefix] = known
        return known
