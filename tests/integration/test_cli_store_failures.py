"""One line, never a traceback (issue 21, findings 6 and 7): the real CLI, in a subprocess, on
read-only, damaged and wrongly migrated stores, on a full disk and against a hostile listing;
``--debug`` shows the traceback. A damaged store is refused before anything is written."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from store_support import damage, snapshot_store

from observatory.store.db import PROJECT_ROOT
from observatory.testing.hub_standin import populate

OBSERVATORY = str(Path(sys.executable).parent / "observatory")
COMMANDS = [("db", "upgrade"), ("worker",), ("crawl", "--no-progress"), ("crawl", "--list"), ("alerts", "evaluate")]
CLOSED_HUB = "http://127.0.0.1:9"  # no Hub: a crawl that got past the store would fail differently


def _cli(url: str, *args: str, endpoint: str = CLOSED_HUB, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OBSERVATORY_DATABASE_URL": url, "PYTHONPATH": str(PROJECT_ROOT), "HF_ENDPOINT": endpoint,
           "OBSERVATORY_HUB_TIMEOUT_S": "2", "OBSERVATORY_HUB_MAX_RETRIES": "0"}
    return subprocess.run([OBSERVATORY, *args], check=False, env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=PROJECT_ROOT)


def _error_line(result: subprocess.CompletedProcess) -> str:
    """The one ``Error:`` line of a failed command (log lines of the worker may precede it)."""
    assert result.returncode == 1, (result.returncode, result.stdout[-500:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert result.stderr.rstrip().splitlines()[-1] == errors[0]
    return errors[0]


def _counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                for t in ("hub_model", "config_revision", "lease", "crawl_scope")}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> Path:
    return snapshot_store(tmp_path_factory.mktemp("base") / "base.db")


@contextmanager
def _tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                           check=False, capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@contextmanager
def _read_only_store(base: Path, tmp_path: Path):
    """The store on a file system mounted read-only (root ignores file modes), else a read-only file."""
    if os.geteuid() == 0:
        with _tmpfs(tmp_path / "ro", "64m") as mnt:
            shutil.copy(base, mnt / "store.db")
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
            yield mnt / "store.db"
    else:
        path = tmp_path / "ro" / "store.db"
        path.parent.mkdir()
        shutil.copy(base, path)
        path.chmod(0o444)
        path.parent.chmod(0o555)
        try:
            yield path
        finally:
            path.parent.chmod(0o755)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join(a))
@pytest.mark.slow
def test_a_damaged_store_is_refused_in_one_line(args, base_store, tmp_path):
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)
    damage(path, "crawl_run")  # a table every command reads or a crawl writes
    before = _counts(path)

    line = _error_line(_cli(f"sqlite:///{path}", *args))
    assert "damaged" in line and "malformed" in line
    assert _counts(path) == before  # nothing written: no lease, no scope, no models


def test_a_crawl_refuses_a_store_damaged_where_it_does_not_write(base_store, tmp_path, hub):
    """On main the crawl wrote every model, said "ok" and exit 0; only after-crawl steps failed."""
    populate(hub, 5)
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)
    damage(path, "sqlite_autoindex_trend_point_1")
    before = _counts(path)

    line = _error_line(_cli(f"sqlite:///{path}", "crawl", "--no-progress", "--since", "7d", endpoint=hub.url))
    assert "damaged" in line and "nothing was written" in line
    assert _counts(path) == before and hub.counts["listing"] == 0


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join(a))
def test_a_wrongly_migrated_store_is_one_line(args, base_store, tmp_path):
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO alembic_version VALUES ('0099_from_a_newer_version')")
    conn.commit()
    conn.close()

    line = _error_line(_cli(f"sqlite:///{path}", *args))
    assert "wrongly migrated" in line and "0099_from_a_newer_version" in line


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join(a))
def test_a_read_only_store_is_one_line(args, base_store, tmp_path):
    with _read_only_store(base_store, tmp_path) as path:
        result = _cli(f"sqlite:///{path}", *args)
        if args == ("crawl", "--list"):  # reading is all it does: it may work, and must not trace back
            assert "Traceback" not in result.stderr, result.stderr[-3000:]
            if result.returncode == 0:
                return
        line = _error_line(result)
        assert "read-only" in line or "cannot be opened" in line


def test_debug_shows_the_traceback(base_store, tmp_path):
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)
    damage(path, "crawl_run")
    for args in (("--debug", "crawl", "--list"), ("crawl", "--list", "--debug"), ("--debug", "db", "upgrade")):
        result = _cli(f"sqlite:///{path}", *args)
        assert result.returncode == 1 and "Traceback (most recent call last)" in result.stderr, args


def test_a_crawl_on_a_full_disk_is_one_line_and_keeps_what_it_committed(base_store, tmp_path, hub):
    populate(hub, 300)
    size = base_store.stat().st_size
    with _tmpfs(tmp_path / "full", f"{size // 1024 + 96}k") as mnt:
        path = mnt / "store.db"
        shutil.copy(base_store, path)
        result = _cli(f"sqlite:///{path}", "crawl", "--no-progress", "--since", "7d", endpoint=hub.url)
        line = _error_line(result)
        assert "full" in line
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
            assert conn.execute("SELECT count(*) FROM hub_model").fetchone()[0] >= 398
        finally:
            conn.close()


@pytest.mark.slow
def test_a_listing_page_of_nested_brackets_is_one_line(base_store, tmp_path, hub):
    populate(hub, 3)
    hub.add_fault("listing", status=200, times=-1, body=b"[" * 200_000 + b"]" * 200_000,
                  headers={"Content-Type": "application/json"})
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)

    line = _error_line(_cli(f"sqlite:///{path}", "crawl", "--no-progress", "--since", "7d", endpoint=hub.url))
    assert "nested too deeply" in line
    listed = _cli(f"sqlite:///{path}", "crawl", "--list", "--json")
    assert listed.returncode == 0 and '"status": "failed"' in listed.stdout
