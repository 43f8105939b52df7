"""Is the store sound enough to write to? Asked before a crawl writes anything (issue 21).

A crawl into a corrupt SQLite file can go on writing for minutes (what it touches may be sound)
and report success, while ``serve`` on the same file refuses. So before writing the crawler asks:
``PRAGMA quick_check`` of the whole file (every page's structure, without matching indexes to
rows), then ``PRAGMA integrity_check(table)`` of each table it writes, which also matches their
indexes to their rows. Both are bounded: past ``budget_s`` the check stops and says it did not
finish (logged), rather than hold up every scheduled crawl on a very large store. PostgreSQL keeps
its own pages and has no such check; it is skipped there.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable

from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

# SQLite calls the progress handler every this many virtual-machine steps; it checks the clock.
_PROGRESS_STEPS = 10_000


class StoreCorrupt(RuntimeError):
    """The store's file fails SQLite's own checks: nothing should be written to it."""


def check_writable(engine: Engine, tables: Iterable[str], *, budget_s: float = 10.0) -> bool:
    """Raise ``StoreCorrupt`` if the file or one of ``tables`` is damaged, and sqlite3's own
    error if the file cannot be written at all (read-only); True when the check finished, False
    when it ran out of ``budget_s`` first (nothing found so far)."""
    if engine.dialect.name != "sqlite":
        return True
    deadline = time.monotonic() + budget_s
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
        try:
            # Writable at all? Taking the write lock and letting it go writes nothing, and fails at once
            # on a read-only file or directory, before any work is done.
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("ROLLBACK")
            found = _problems(raw, "PRAGMA quick_check(20)")
            for table in tables:
                if found:
                    break
                found = _problems(raw, f'PRAGMA integrity_check("{table}")')
        except sqlite3.DatabaseError as exc:
            if "interrupted" in str(exc) and time.monotonic() > deadline:
                log.warning("store check stopped after %.0f s without finding damage; the crawl goes on", budget_s)
                return False
            if "malformed" not in str(exc) and "not a database" not in str(exc):
                raise  # read-only, locked, full: the caller says what that means
            found = [str(exc)]
        finally:
            raw.set_progress_handler(None, 0)
            if conn.in_transaction():
                conn.rollback()
    if found:
        where = engine.url.database or str(engine.url)
        raise StoreCorrupt(f"the store {where} is damaged ({'; '.join(found[:3])}); nothing was written. "
                           "Restore it from a backup, or move it aside to start a new one")
    return True


def _problems(raw, pragma: str) -> list[str]:
    rows = [str(row[0]) for row in raw.execute(pragma).fetchall()]
    return [] if rows == ["ok"] else [" ".join(r.split())[:200] for r in rows]
