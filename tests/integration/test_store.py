"""The store: Alembic builds exactly the tables the code declares, with SQLite set up for one writer."""

from __future__ import annotations

import sqlite3

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.exc import IntegrityError

from observatory.store.db import current_revisions, import_table_modules, session_scope
from observatory.store.tables import ConfigRevision, HubModel


def test_migrations_match_tables(engine):
    metadata = import_table_modules().metadata
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
    assert diff == [], f"tables and migrations disagree: {diff}"


def test_upgrade_reaches_every_head_and_is_idempotent(engine, db_url):
    from observatory.store.db import upgrade

    before = current_revisions(engine)
    assert "0001_core" in before or any(r.startswith("00") for r in before)
    upgrade(db_url)
    assert current_revisions(engine) == before


def test_sqlite_pragmas(engine, db_url):
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 15000


def test_foreign_keys_enforced(engine):
    with pytest.raises(IntegrityError):
        with session_scope(engine) as s:
            s.add(ConfigRevision(model_id="nobody/nothing", sha="x", raw_text="{}"))


def test_revision_unique_per_model_and_sha(engine):
    with session_scope(engine) as s:
        s.add(HubModel(id="org/m"))
    with session_scope(engine) as s:
        s.add(ConfigRevision(model_id="org/m", sha="a", raw_text="{}"))
    with pytest.raises(IntegrityError):
        with session_scope(engine) as s:
            s.add(ConfigRevision(model_id="org/m", sha="a", raw_text="{}"))


def test_reader_not_blocked_by_open_writer(engine, db_url):
    path = db_url.removeprefix("sqlite:///")
    with session_scope(engine) as s:
        s.add(HubModel(id="org/a"))
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO hub_model (id, downloads, likes, tags, source, first_seen_at, updated_at) "
                   "VALUES ('org/b', 0, 0, '[]', 'hub', '2026-01-01', '2026-01-01')")
    try:
        reader = sqlite3.connect(path)
        assert reader.execute("SELECT count(*) FROM hub_model").fetchone()[0] == 1
        reader.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
