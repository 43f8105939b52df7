"""Alembic environment: the only place DDL comes from."""

from alembic import context

from observatory.settings import get_settings
from observatory.store.db import import_table_modules, make_engine
from observatory.store.history import (
    check_foreign_keys,
    drop_redundant_heads,
    restore_shipped_indexes,
    sqlite_foreign_keys_off,
)

config = context.config
target_metadata = import_table_modules().metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().resolved_database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=_url().startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # Why foreign keys go off, what a redundant head is, and why a kill is safe: store/history.py.
    engine = make_engine(_url())
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            on_version_apply=check_foreign_keys,
        )
        drop_redundant_heads(context.get_context(), context.script)
        restore_shipped_indexes(context.get_context(), context.script)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
