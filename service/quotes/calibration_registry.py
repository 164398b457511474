"""The current calibrations as each process prices with them, and how soon it sees a switch.

Every replica keeps the current calibrations in memory and reads them again from the database
at most `refresh_s` seconds after its last read began; a quote looks them up when its pricing
starts. So a calibration made current (or rolled back) by any replica is used by every quote,
on every replica, whose pricing starts more than `refresh_s` seconds after that change was
committed: the read that answered it began after the commit. The replica that made the change
re-reads at its next quote after the commit.

While the database cannot be read the last calibrations are kept (and the read retried every
`refresh_s`), so during an outage the bound does not hold: pricing never waits on it.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.db.engine import Database
from service.db.repositories import CalibrationRepository
from service.db.tables import GLOBAL_SCOPE
from service.pricing.calibration import ActiveCalibration
from service.quotes.recalibration import active_calibration

logger = logging.getLogger(__name__)


class CalibrationRegistry:
    """The current calibrations, read from the database at most every `refresh_s` seconds and
    kept while it is away, so that pricing never waits on it for long. A tenant's own current
    calibration applies to its quotes, else the current global one, else none."""

    def __init__(self, database: Database, *, refresh_s: float) -> None:
        self.database = database
        self.refresh_s = refresh_s
        self._global: ActiveCalibration | None = None
        self._tenants: dict[str, ActiveCalibration] = {}
        self._loaded_at: float | None = None
        self._generation = 0  # bumped by invalidate: a read begun before it is not fresh
        self._lock = threading.Lock()

    def for_tenant(self, tenant: str) -> ActiveCalibration | None:
        self.refresh()
        return self._tenants.get(tenant, self._global)

    @property
    def generation(self) -> int:
        """Bumped by each `invalidate`: a read begun under an older one may predate a change."""
        return self._generation

    def fresh(self) -> bool:
        """Whether `for_tenant` would answer from memory now (no database read)."""
        loaded_at = self._loaded_at
        return loaded_at is not None and time.monotonic() - loaded_at < self.refresh_s

    def invalidate(self) -> None:
        """Re-read at the next quote (after this process changed the current calibrations)."""
        with self._lock:
            self._loaded_at = None
            self._generation += 1

    def invalidate_after_commit(self, session: Session) -> None:
        """Re-read at the first quote after `session` commits the change it holds: not before,
        or a quote priced between the change and its commit would keep the old calibrations
        for another `refresh_s`."""
        event.listen(session, "after_commit", lambda _session: self.invalidate(), once=True)

    def refresh(self) -> None:
        """Read the current calibrations if they are due (a database read: the event loop
        calls it through the thread pool)."""
        now = time.monotonic()
        loaded_at = self._loaded_at
        if loaded_at is not None and now - loaded_at < self.refresh_s:
            return
        generation = self._generation
        try:
            with self.database.sessions() as session:
                rows = CalibrationRepository(session).all_current()
                current = [(row.scope, row.tenant, active_calibration(row)) for row in rows]
        except SQLAlchemyError as error:
            logger.warning("could not read calibrations, keeping the last ones: %s", error)
            with self._lock:
                if generation == self._generation:
                    self._loaded_at = now
            return
        tenants: dict[str, ActiveCalibration] = {}
        global_one = None
        for scope, tenant, active in current:  # oldest activation first: the newest wins
            if scope == GLOBAL_SCOPE:
                global_one = active
            else:
                tenants[tenant] = active
        with self._lock:
            self._global, self._tenants = global_one, tenants
            # Invalidated while reading: what was read may predate the change, so the next
            # quote reads again.
            self._loaded_at = now if generation == self._generation else None
