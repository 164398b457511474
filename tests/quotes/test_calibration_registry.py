"""The calibration registry's bound, with two registries on one database file standing for two
replicas: a calibration made current, or rolled back, by one is used by the other's quotes once
`refresh_s` has passed since the commit, and not from a read made before it; the replica that
made the change re-reads after its commit, not before it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.config import Settings
from service.db import migrate
from service.db.base import utc_now
from service.db.engine import Database
from service.db.tables import GLOBAL_SCOPE, Calibration
from service.pricing.calibration import Corrections
from service.quotes.calibration_registry import CalibrationRegistry
from service.quotes.recalibration import make_current, rollback

REFRESH_S = 0.5


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    url = f"sqlite:///{tmp_path / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    one, other = Database(Settings(database_url=url)), Database(Settings(database_url=url))
    yield one, other
    one.dispose()
    other.dispose()


def stored_calibration(database: Database, calibration_id: str) -> None:
    """A global calibration (not current) whose corrections are none: its id is what counts."""
    with database.sessions.begin() as session:
        session.add(
            Calibration(
                id=calibration_id,
                created_at=utc_now(),
                tenant="ops",
                scope=GLOBAL_SCOPE,
                model_version="v",
                is_current=False,
                payload={"corrections": Corrections.none(10.0).to_payload()},
            )
        )


def make_current_by_id(database: Database, calibration_id: str) -> None:
    with database.sessions.begin() as session:
        calibration = session.get(Calibration, calibration_id)
        assert calibration is not None
        make_current(session, calibration)


def current_id(registry: CalibrationRegistry) -> str | None:
    active = registry.for_tenant("acme")
    return None if active is None else active.calibration_id


def test_a_switch_by_one_replica_reaches_the_other_within_refresh_s(
    replicas: tuple[Database, Database],
) -> None:
    one, other = replicas
    stored_calibration(one, "c_first")
    stored_calibration(one, "c_second")
    seen_by_other = CalibrationRegistry(other, refresh_s=REFRESH_S)
    assert current_id(seen_by_other) is None  # read now: uncalibrated

    make_current_by_id(one, "c_first")
    committed = time.monotonic()
    assert current_id(seen_by_other) is None  # its read predates the commit, and is fresh
    time.sleep(REFRESH_S)
    assert current_id(seen_by_other) == "c_first"  # refresh_s after the commit: read again

    make_current_by_id(one, "c_second")
    time.sleep(REFRESH_S)
    assert current_id(seen_by_other) == "c_second"
    with one.sessions.begin() as session:  # rolled back by the first replica
        rollback(session, "ops", GLOBAL_SCOPE, operator=True)
    time.sleep(REFRESH_S)
    assert current_id(seen_by_other) == "c_first"
    assert time.monotonic() - committed < 4 * REFRESH_S  # the sleeps, not slow reads, set it


def test_the_changing_replica_reads_again_after_its_commit_not_before(
    replicas: tuple[Database, Database],
) -> None:
    """A quote priced between the change and its commit reads the old calibrations; the
    first quote after the commit reads the new one, though the old read is still fresh."""
    one, _ = replicas
    stored_calibration(one, "c_first")
    registry = CalibrationRegistry(one, refresh_s=3600.0)
    assert current_id(registry) is None
    with one.sessions() as session:
        calibration = session.get(Calibration, "c_first")
        assert calibration is not None
        make_current(session, calibration)
        registry.invalidate_after_commit(session)
        assert current_id(registry) is None  # not committed yet: the old one, re-read
        session.commit()
    assert current_id(registry) == "c_first"
