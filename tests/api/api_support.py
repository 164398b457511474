"""Helpers of the API tests: settings, apps over a migrated database, keys, request bodies."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from llm_energy_quotes_client import QuotesClient
from sqlalchemy import create_engine, func, make_url, select

from service.api.deps import AppServices
from service.api.keys import generate_key
from service.config import Settings
from service.db import migrate
from service.db.base import utc_now
from service.db.engine import Database, build_in_loop_engine
from service.db.repositories import ApiKeyRepository
from service.db.tables import ApiKey, Quote
from service.main import create_app


def example_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
    }
    body.update(overrides)
    return body


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "run_migrations_on_start": False,
        "api_key_mode_ttl_s": 0.0,
        "api_key_cache_s": 0.0,  # revocation tests see the database at once
        "sqlite_busy_timeout_ms": 500,
        "db_connect_timeout_s": 1.0,
        "billing_settle_s": 0.0,  # the concurrent-insert test sets a real settle window
        "db_reconnect_backoff_s": 0.2,
        "log_level": "WARNING",
        # API tests pin the analytical numbers; test_regressor_api turns the regressor on.
        "use_regressor": False,
    }
    values.update(overrides)
    return Settings(**values)


@contextmanager
def running_client(database_url: str, **overrides: Any) -> Iterator[TestClient]:
    app = create_app(make_settings(database_url, **overrides))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def quotes_client(client: TestClient, key: str | None = None) -> QuotesClient:
    """The repository's own client (client/) over the in-process app, sending `key`."""
    return QuotesClient(api_key=key, http_client=client)


def services_of(client: TestClient) -> AppServices:
    services: AppServices = client.app.state.services  # type: ignore[attr-defined]
    return services


def create_key(database_url: str, tenant: str, scopes: str) -> str:
    """A new API key (the secret) stored for `tenant`."""
    new = generate_key()
    database = Database(make_settings(database_url))
    try:
        with database.sessions.begin() as session:
            ApiKeyRepository(session).add(
                ApiKey(
                    tenant=tenant,
                    scopes=scopes,
                    prefix=new.prefix,
                    key_sha256=new.sha256,
                    created_at=utc_now(),
                )
            )
    finally:
        database.dispose()
    return new.secret


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def take_database_away(client: TestClient) -> None:
    """Point the app's engine at a database that cannot be reached."""
    if os.environ.get("TEST_DATABASE_URL"):
        url = "postgresql+psycopg://nobody:nothing@127.0.0.1:1/none?connect_timeout=1"
    else:
        url = "sqlite:////proc/no-such-dir/quotes.sqlite3"
    database = services_of(client).database
    database.engine.dispose()
    database.engine = create_engine(url)
    database.sessions.configure(bind=database.engine)
    if database.in_loop_engine is not None:  # SQLite's commits in the event loop
        database.in_loop_engine.dispose()
        database.in_loop_engine = create_engine(url)


def bring_database_back(client: TestClient, database_url: str) -> None:
    """Undo `take_database_away`: a fresh engine on the real database."""
    database = services_of(client).database
    database.engine.dispose()
    database.engine = create_engine(database_url)
    database.sessions.configure(bind=database.engine)
    if database.in_loop_engine is not None:
        database.in_loop_engine.dispose()
        database.in_loop_engine = build_in_loop_engine(database.settings, database.sqlite_guard)


def count_quotes(database_url: str, *, tenant: str, idempotency_key: str | None = None) -> int:
    """Rows in `quotes` for `tenant` (and `idempotency_key` when given), read directly."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            statement = select(func.count()).select_from(Quote).where(Quote.tenant == tenant)
            if idempotency_key is not None:
                statement = statement.where(Quote.idempotency_key == idempotency_key)
            return int(connection.execute(statement).scalar_one())
    finally:
        engine.dispose()


def count_quotes_by_id(database_url: str, quote_ids: list[str]) -> int:
    """Rows in `quotes` whose id is one of `quote_ids`, read directly."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            statement = select(func.count()).select_from(Quote).where(Quote.id.in_(quote_ids))
            return int(connection.execute(statement).scalar_one())
    finally:
        engine.dispose()


def migrated_database_url(tmp_path_factory: Any) -> Iterator[str]:
    """A freshly migrated schema (upgrade, not create_all): a temp SQLite file, or
    TEST_DATABASE_URL downgraded to base first and again afterwards. For module fixtures."""
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        migrate.downgrade(url, "base")
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    yield url
    if os.environ.get("TEST_DATABASE_URL"):
        migrate.downgrade(url, "base")


class TcpProxy:
    """A TCP forwarder in front of PostgreSQL: `cut()` drops every open connection and refuses
    new ones (the server going away), `stall()` accepts connections and never answers (a hung
    server), `restore()` forwards again on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listen(stalled=False)

    def url(self, database_url: str) -> str:
        parsed = make_url(database_url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    def stall(self) -> None:
        """Drop open connections; accept new ones but never answer (a hung server)."""
        self.cut()
        self._listen(stalled=True)

    def restore(self) -> None:
        self.cut()
        self._listen(stalled=False)

    def _listen(self, *, stalled: bool) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._acceptor = threading.Thread(
            target=self._accept, args=(listener, stalled), daemon=True
        )
        self._acceptor.start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if self._acceptor is not None:
            self._acceptor.join()  # it polls the listener: it is closed once the thread is out
        if listener is not None:
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket, stalled: bool) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if stalled:
                with self._lock:
                    self._sockets.add(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class Outage:
    """Takes the database away from an app and brings it back. PostgreSQL: the app connects
    through a TcpProxy that is cut (open connections die, new ones are refused, as when the
    server stops). SQLite: the app's engine is pointed at a file that cannot be opened."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.proxy: TcpProxy | None = None
        parsed = make_url(database_url)
        if parsed.get_backend_name() == "postgresql":
            self.proxy = TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432)

    @property
    def app_url(self) -> str:
        """The URL to build the app with."""
        return self.proxy.url(self.database_url) if self.proxy else self.database_url

    def begin(self, client: TestClient) -> None:
        if self.proxy is not None:
            self.proxy.cut()
        else:
            take_database_away(client)

    def hang(self) -> None:
        """PostgreSQL only: the server accepts connections and never answers."""
        assert self.proxy is not None
        self.proxy.stall()

    def end(self, client: TestClient) -> None:
        if self.proxy is not None:
            self.proxy.restore()
        else:
            bring_database_back(client, self.database_url)

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.cut()
