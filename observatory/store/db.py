"""Engine, sessions and migrations.

SQLite is the embedded default: WAL so readers never block the single writer, a busy
timeout so a second writer waits instead of failing, foreign keys on, and ``BEGIN
IMMEDIATE`` so a write transaction takes the lock up front (a deferred transaction that
upgrades later can fail at once with SQLITE_BUSY). Python 3.11's sqlite3 legacy transaction
handling is switched off (isolation_level=None) so SQLAlchemy's BEGIN is the only one.

The same code runs on PostgreSQL through OBSERVATORY_DATABASE_URL, with the same guarantees:
a write transaction first takes one transaction-scoped advisory lock, so writers queue as they
do behind SQLite's lock (check-then-write code such as loading the snapshot into an empty store
relies on it), while readers never wait. Sessions run in UTC whatever the server's zone.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, SQLModel, create_engine

from observatory.settings import Settings, get_settings

# Every module that defines tables; imported before metadata is used (Alembic, tests).
TABLE_MODULES = [
    "observatory.store.tables",
    "observatory.crawler.tables",
    "observatory.store.trend_tables",
    "observatory.alerts.tables",
    "observatory.bench.tables",
    "observatory.store.oracle_tables",
    "observatory.uptrain.tables",
]

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def import_table_modules() -> type[SQLModel]:
    for name in TABLE_MODULES:
        importlib.import_module(name)
    return SQLModel


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=15000")
    cur.execute("PRAGMA foreign_keys=ON")
    # Reads go through the OS page cache by mmap instead of a read() per page: a web request
    # touches dozens of index pages (measured on 1M models: model-list API p50 4.3 -> 3.7 ms).
    cur.execute("PRAGMA mmap_size=1073741824")
    cur.close()


def _sqlite_begin(conn) -> None:
    # Readers (``read_only(engine)``) begin DEFERRED: under WAL they read a snapshot and
    # neither wait for nor block the one writer. Everything else takes the write lock up front.
    if conn.get_execution_options().get("observatory_read_only"):
        conn.exec_driver_sql("BEGIN")
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


# Any constant will do: advisory locks are per database, and only this code takes this one.
_PG_WRITE_LOCK = 0x0B5E_7A70


def _postgresql_begin(conn) -> None:
    # The BEGIN IMMEDIATE of PostgreSQL. Under READ COMMITTED (the default) each statement reads
    # a fresh snapshot, so what follows the lock sees everything the previous writer committed.
    if not conn.get_execution_options().get("observatory_read_only"):
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_WRITE_LOCK})")


def _no_nul(value):
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def _postgresql_text_params(conn, cursor, statement, parameters, context, executemany):
    # PostgreSQL text cannot hold NUL, which SQLite stores: a config.json (never valid JSON with
    # one), a string a config decodes to, a query parameter. It becomes U+FFFD rather than fail
    # the statement, which would fail a whole crawl batch or answer a request with a 500.
    def clean(params):
        if isinstance(params, Mapping):
            return {key: _no_nul(value) for key, value in params.items()}
        return tuple(_no_nul(value) for value in params)

    if not parameters:
        return statement, parameters
    # An "insertmanyvalues" batch comes as one mapping even though ``executemany`` is set.
    if executemany and not isinstance(parameters, Mapping):
        return statement, [clean(row) for row in parameters]
    return statement, clean(parameters)


def read_only(engine: Engine) -> Engine:
    """The same engine (same pool) for sessions that only read, e.g. web requests."""
    return engine.execution_options(observatory_read_only=True)


def read_session(engine: Engine) -> Session:
    """A session that only reads (``read_only``): it never takes SQLite's write lock."""
    return Session(read_only(engine), expire_on_commit=False)


# Ids bound per ``IN (...)`` query: SQLite refuses more than 32,766 variables in one statement
# (999 before 3.32), and a store of a million models names far more in some lookups.
IN_BATCH = 900


def batches(items: Iterable, size: int = IN_BATCH) -> Iterator[list]:
    """``items`` in lists of at most ``size``, for ``col.in_(batch)`` lookups of any length."""
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# The longest a session waits for a pooled connection (SQLAlchemy's default is 30 s); then it
# raises ``sqlalchemy.exc.TimeoutError``, which the web answers as a 503 with Retry-After.
POOL_TIMEOUT_S = 5.0


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, pool_timeout=POOL_TIMEOUT_S,
                               connect_args={"check_same_thread": False, "timeout": 15})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    elif parsed.get_backend_name() == "postgresql":
        # UTC whatever the server's default: date(created_at) must cut days where SQLite does.
        options = " ".join(filter(None, [parsed.query.get("options"), "-c timezone=UTC"]))
        engine = create_engine(url, pool_pre_ping=True, pool_timeout=POOL_TIMEOUT_S,
                               connect_args={"options": options})
        event.listen(engine, "begin", _postgresql_begin)
        event.listen(engine, "before_cursor_execute", _postgresql_text_params, retval=True)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    return engine


@lru_cache
def _engine_for(url: str) -> Engine:
    return make_engine(url)


def get_engine(settings: Settings | None = None) -> Engine:
    settings = settings or get_settings()
    return _engine_for(settings.resolved_database_url)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def _migrations_dir() -> Path:
    # Installed editable or run from a checkout: migrations/ sits beside the package.
    return PROJECT_ROOT / "migrations"


def alembic_config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(target: Engine | str | None = None) -> None:
    """Bring the schema to the newest revision of every branch (Alembic is the only DDL)."""
    from alembic import command

    if target is None:
        url = get_settings().resolved_database_url
    elif isinstance(target, Engine):
        url = target.url.render_as_string(hide_password=False)
    else:
        url = target
    if make_url(url).get_backend_name() == "sqlite":
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
    config = alembic_config(url)
    if _at_heads(url, config):  # every worker asks at start-up: at head, only read, never wait on a writer
        return
    command.upgrade(config, "heads")


def _at_heads(url: str, config) -> bool:
    from alembic.script import ScriptDirectory

    from observatory.store.history import expected_heads

    engine = make_engine(url)
    try:
        return current_revisions(read_only(engine)) == expected_heads(ScriptDirectory.from_config(config))
    finally:
        engine.dispose()


def current_revisions(engine: Engine) -> set[str]:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return set(MigrationContext.configure(conn).get_current_heads())
