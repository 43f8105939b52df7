"""Helpers for the tests of stores in trouble: a populated store, and damage done to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from observatory.store.db import make_engine, upgrade


def snapshot_store(path: Path) -> Path:
    """A store at head holding the bundled snapshot (398 models), its journal folded into one file."""
    from observatory.catalog.snapshot import ensure_snapshot
    from observatory.settings import Settings

    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    ensure_snapshot(engine, Settings(database_url=url, autoload_snapshot=True))
    engine.dispose()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    return path


def damage(path: Path, name: str) -> None:
    """Scribble over the first bytes of the root page of table or index ``name``, as a bad disk would."""
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
    conn.close()
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * 64)
