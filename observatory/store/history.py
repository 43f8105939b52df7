"""What ``migrations/env.py`` needs to upgrade a store made by any past revision of the schema.

Two things in our history stop Alembic on its own (issue 21):

- ``0007_lineage`` gained ``depends_on = '0004_trends'`` after it had shipped. A store that applied
  the first 0007 records both ``0004_trends`` and ``0007_lineage`` as heads; under today's graph
  0004 is an ancestor of 0007, and Alembic refuses ("Requested revision 0007_lineage overlaps
  with other requested revisions 0004_trends"). Such a store is where Alembic would have left it
  had the edit been there all along once 0004 leaves its version table: ``redundant_heads``
  names what to drop (``alembic stamp`` does the same by hand). The columns the edit added come
  from ``0012_history_repair``.
- SQLite rebuilds a table to alter it (create, copy, drop, rename). With foreign keys on, the
  drop of a table that other rows point at fails (``FOREIGN KEY constraint failed`` at ``DROP
  TABLE hub_model``), and ``PRAGMA foreign_keys`` is a no-op inside a transaction. So env.py turns
  them off on the connection before any transaction and checks every migration's result with
  ``PRAGMA foreign_key_check`` before it commits (``check_foreign_keys``): a violation rolls that
  migration back instead of landing.

- ``0004_trends`` gained the author index ``ix_hub_model_author_created_at_id`` after it had
  shipped, and ``0007_lineage`` drops it. A store whose 0004 ran before that edit has no such index,
  and 0007 fails on it ("No such index"). Shipped migrations are never edited, so before 0007 runs
  on such a store, ``restore_shipped_indexes`` builds the index the edited 0004 would have made.

Each migration runs in its own transaction together with its version-table update (Alembic does
this for SQLite, whose DDL it treats as non-transactional; SQLite's DDL is transactional), so a
kill mid-upgrade leaves the store at the last whole migration and the next upgrade finishes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class ForeignKeyViolation(RuntimeError):
    """A migration would leave rows pointing at rows that do not exist."""


def _ancestors(script, revision: str) -> set[str]:
    """Every revision ``revision`` builds on, through ``down_revision`` and ``depends_on``."""
    seen: set[str] = set()
    todo = [revision]
    while todo:
        rev = script.get_revision(todo.pop())
        if rev is None:
            continue
        for parent in (*_as_tuple(rev.down_revision), *_as_tuple(rev.dependencies)):
            resolved = script.get_revision(parent).revision
            if resolved not in seen:
                seen.add(resolved)
                todo.append(resolved)
    return seen


def _as_tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def redundant_heads(script, current: Iterable[str]) -> set[str]:
    """Recorded heads that another recorded head already builds on (only an edited graph makes them)."""
    current = set(current)
    known = {rev for rev in current if script.get_revision(rev) is not None}
    redundant: set[str] = set()
    for rev in known:
        redundant |= _ancestors(script, rev) & known
    return redundant


def expected_heads(script) -> set[str]:
    """What the version table holds at head: the script's heads less those another depends on."""
    heads = set(script.get_heads())
    return heads - redundant_heads(script, heads)


def drop_redundant_heads(migration_context, script) -> set[str]:
    """Remove ``redundant_heads`` from the version table and commit; return them."""
    from sqlalchemy import text

    connection = migration_context.connection
    redundant = redundant_heads(script, migration_context.get_current_heads())
    if redundant:
        table = migration_context.version_table
        for rev in sorted(redundant):
            connection.execute(text(f'DELETE FROM "{table}" WHERE version_num = :rev'), {"rev": rev})
    if connection.in_transaction():
        connection.commit()
    return redundant


# Indexes a later edit added to a migration that stores had already applied: (the migration that
# should have made it, the migration that drops it, table, index, columns).
EDITED_INDEXES = (("0004_trends", "0007_lineage", "hub_model", "ix_hub_model_author_created_at_id",
                   ("author", "created_at", "id")),)


def restore_shipped_indexes(migration_context, script) -> list[str]:
    """Build, where a store lacks them, the ``EDITED_INDEXES`` that a pending migration drops; return
    their names. Runs before the migrations, in a transaction of its own."""
    import sqlalchemy as sa

    connection = migration_context.connection
    current = set(migration_context.get_current_heads())
    applied = set(current)
    for rev in current:
        applied |= _ancestors(script, rev) if script.get_revision(rev) is not None else set()
    made = []
    inspector = sa.inspect(connection)
    for after, dropped_by, table, name, columns in EDITED_INDEXES:
        if after not in applied or dropped_by in applied or not inspector.has_table(table):
            continue
        if name not in {index["name"] for index in inspector.get_indexes(table)}:
            connection.execute(sa.text(f'CREATE INDEX "{name}" ON "{table}" ({", ".join(columns)})'))
            made.append(name)
    if connection.in_transaction():
        connection.commit()
    return made


@contextmanager
def sqlite_foreign_keys_off(connection) -> Iterator[None]:
    """Foreign keys off for the migrations on this SQLite connection, on again afterwards."""
    if connection.dialect.name != "sqlite":
        yield
        return
    if connection.in_transaction():
        connection.commit()
    raw = connection.connection.dbapi_connection  # the pragma must run outside any transaction
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        if connection.in_transaction():
            connection.rollback()
        raw.execute("PRAGMA foreign_keys=ON")


def check_foreign_keys(ctx, step, heads, run_args) -> None:
    """Alembic's ``on_version_apply``: runs inside the migration's transaction, before its commit."""
    if ctx.connection.dialect.name != "sqlite":
        return  # PostgreSQL never turns its constraints off
    rows = ctx.connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if rows:
        tables = sorted({row[0] for row in rows})
        raise ForeignKeyViolation(
            f"migration {step.up_revision_id or step.down_revision_ids} would leave {len(rows)} row(s) "
            f"pointing at missing rows in {', '.join(tables)}; rolled back")
