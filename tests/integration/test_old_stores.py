"""Every store a past revision of the schema made upgrades to head with its rows intact (issue 21).

The stores under ``tests/data/stores`` were made by ``make_stores.py`` with each past head's own
migrations, taken from git history, and filled with rows in plain SQL. Each is upgraded here by
the real CLI (``observatory db upgrade`` in a subprocess), then compared with what it held and with
a store migrated from empty: same tables, columns, indexes and foreign keys; every row still there.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from observatory.store.db import (
    PROJECT_ROOT,
    alembic_config,
    current_revisions,
    make_engine,
    upgrade,
)

STORES = Path(__file__).resolve().parents[1] / "data" / "stores"
OBSERVATORY = str(Path(sys.executable).parent / "observatory")  # the console script, as a user runs it
STORE_FILES = sorted(STORES.glob("*.sqlite.gz"))

# Tables whose rows a migration replaces by design: derived data, recomputed by the next refresh.
REWRITTEN = {"trend_point": "0010_trends_v2"}
# Rows re-derived from the stored configs after every upgrade (PARSER_VERSION moved on since).
REDERIVED = {"geometry"}


def _unpack(packed: Path, target: Path) -> Path:
    with gzip.open(packed, "rb") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def _cli(url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OBSERVATORY_DATABASE_URL": url, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.run([OBSERVATORY, *args], check=False, env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=PROJECT_ROOT)


def _rows(path: Path) -> dict[str, list[dict]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                             "AND name NOT LIKE 'sqlite_%' AND name != 'alembic_version'")]
        return {t: [dict(r) for r in conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid')] for t in tables}
    finally:
        conn.close()


def _schema(path: Path) -> dict[str, tuple]:
    conn = sqlite3.connect(path)
    try:
        out = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                     "AND name NOT LIKE 'sqlite_%'"):
            columns = sorted((r[1], r[2].upper(), r[3], r[4]) for r in conn.execute(f'PRAGMA table_info("{table}")'))
            indexes = sorted((r[1], r[2], tuple(c[2] for c in conn.execute(f'PRAGMA index_info("{r[1]}")')))
                             for r in conn.execute(f'PRAGMA index_list("{table}")'))
            fks = sorted((r[2], r[3], r[4]) for r in conn.execute(f'PRAGMA foreign_key_list("{table}")'))
            out[table] = (columns, indexes, fks)
        return out
    finally:
        conn.close()


def _versions(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT version_num FROM alembic_version")}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def fresh_schema(tmp_path_factory) -> dict[str, tuple]:
    path = tmp_path_factory.mktemp("fresh") / "fresh.db"
    upgrade(f"sqlite:///{path}")
    return _schema(path)


def _heads() -> set[str]:
    from alembic.script import ScriptDirectory

    from observatory.store.history import expected_heads

    return expected_heads(ScriptDirectory.from_config(alembic_config("sqlite://")))


def _assert_upgraded(before: dict[str, list[dict]], path: Path, fresh_schema, versions_before: set[str]) -> None:
    assert _versions(path) == _heads()
    assert _schema(path) == fresh_schema
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    after = _rows(path)
    for table, rows in before.items():
        if table in REWRITTEN and REWRITTEN[table] not in versions_before:
            continue
        assert len(after[table]) == len(rows), table
        if table in REDERIVED:
            assert {r["revision_id"] for r in after[table]} == {r["revision_id"] for r in rows}
            continue
        for old, new in zip(rows, after[table], strict=True):
            assert {k: new[k] for k in old} == old, table


def _migration_state(commit: str) -> frozenset[tuple[str, str]]:
    listing = subprocess.run(["git", "-C", str(PROJECT_ROOT), "ls-tree", commit, "migrations/versions/"],
                             check=True, capture_output=True, text=True).stdout
    return frozenset((line.split("\t")[1], line.split()[2]) for line in listing.splitlines()
                     if line.endswith(".py"))


def test_every_past_head_has_a_store():
    """Each state migrations/ had on this branch's first-parent history has a store made from it."""
    spec = importlib.util.spec_from_file_location("make_stores", STORES / "make_stores.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = [stem for stem, *_ in module.HEADS] + [stem for stem, *_ in module.HALF_MIGRATED]
    assert sorted(f"{stem}.sqlite.gz" for stem in made) == [p.name for p in STORE_FILES]
    if not (PROJECT_ROOT / ".git").exists():
        pytest.skip("not a git checkout: the history to compare with is not here")
    log = subprocess.run(["git", "-C", str(PROJECT_ROOT), "log", "--first-parent", "--format=%H", "HEAD", "--",
                          "migrations/versions"], check=True, capture_output=True, text=True).stdout.split()
    current = frozenset(
        (f"migrations/versions/{p.name}", subprocess.run(["git", "hash-object", str(p)], check=True,
                                                         capture_output=True, text=True).stdout.strip())
        for p in (PROJECT_ROOT / "migrations" / "versions").glob("*.py"))
    past = {_migration_state(c) for c in log} - {current}
    covered = {_migration_state(commit) for _stem, commit, _note in module.HEADS}
    assert past - covered == set(), "a past migration head has no store: add it to make_stores.HEADS"


@pytest.mark.parametrize("packed", STORE_FILES, ids=[p.name.split(".")[0] for p in STORE_FILES])
@pytest.mark.slow
def test_old_store_upgrades_with_its_rows(packed, tmp_path, fresh_schema):
    path = _unpack(packed, tmp_path / "store.db")
    before, versions_before = _rows(path), _versions(path)
    assert sum(map(len, before.values())) > 0

    result = _cli(f"sqlite:///{path}", "db", "upgrade")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "database at" in result.stdout and "Traceback" not in result.stderr
    _assert_upgraded(before, path, fresh_schema, versions_before)

    upgrade(f"sqlite:///{path}")  # at head: nothing to do, nothing lost
    _assert_upgraded(before, path, fresh_schema, versions_before)


KILL_AT = """
import os, signal, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
from observatory.store.db import upgrade

marker = sys.argv[2]

@event.listens_for(Engine, "before_cursor_execute")
def _kill(conn, cursor, statement, parameters, context, executemany):
    if marker in statement:
        os.kill(os.getpid(), signal.SIGKILL)

upgrade(sys.argv[1])
"""


@pytest.mark.parametrize(("stem", "marker"), [
    ("h05_bigint", "DROP TABLE hub_model"),  # inside 0007's rebuild of the table rows point at
    ("h05_bigint", "INSERT INTO _alembic_tmp_geometry"),  # the copy of a rebuilt table
    ("h06_lineage_v1", "UPDATE hub_model SET author_key"),  # inside 0012, after its ALTER TABLE
    ("x01_half_migrated_0006", "DROP TABLE hub_model"),  # where main's upgrade of it failed
])
def test_a_kill_mid_upgrade_leaves_a_store_the_next_upgrade_finishes(stem, marker, tmp_path, fresh_schema):
    path = _unpack(STORES / f"{stem}.sqlite.gz", tmp_path / "store.db")
    before, versions_before = _rows(path), _versions(path)
    url = f"sqlite:///{path}"

    killed = subprocess.run([sys.executable, "-c", KILL_AT, url, marker], check=False, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    partial = current_revisions(make_engine(url))
    assert partial != _heads()  # it really stopped part-way

    result = _cli(url, "db", "upgrade")
    assert result.returncode == 0, result.stderr[-2000:]
    _assert_upgraded(before, path, fresh_schema, versions_before)

