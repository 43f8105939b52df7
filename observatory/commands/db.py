"""``observatory db``: schema management (Alembic is the only DDL)."""

from __future__ import annotations

import click

from observatory.settings import get_settings
from observatory.store.db import current_revisions, get_engine, upgrade
from observatory.store.integrity import check_writable
from observatory.store.rederive import rederive_stale


@click.group()
def db() -> None:
    """Manage the database schema."""


@db.command("upgrade")
def upgrade_command() -> None:
    """Create or migrate the database to the newest schema."""
    settings = get_settings()
    engine = get_engine(settings)
    # Migrating a damaged or read-only file can only fail part-way or make it worse (store/integrity.py).
    check_writable(engine, (), budget_s=settings.store_check_budget_s)
    upgrade(settings.resolved_database_url)
    redone = rederive_stale(engine)
    heads = sorted(current_revisions(engine))
    click.echo(f"database at {', '.join(heads)}: {_display_url(settings.resolved_database_url)}")
    if redone:
        click.echo(f"re-derived the geometry of {redone} stored config revision(s) with the current parser")


def _display_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
