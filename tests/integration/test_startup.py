"""Start-up work once per store: under the ``startup`` lease, skipped (never failed) on a locked
store, and beside serving in ``observatory serve``'s workers, on a generated store of 20,000
models that has never evaluated a rule. Real SQLite files, real server processes."""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlmodel import select

from observatory.alerts.tables import AlertRule
from observatory.settings import Settings
from observatory.store import lease
from observatory.store.db import make_engine, read_session, upgrade
from observatory.testing.server import offline_env, running_server
from observatory.web.startup import LEASE_NAME, run_startup

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from api import build_store  # noqa: E402  (the benchmark's generator: realistic mix, raw inserts)


def evaluated_rules(engine) -> int:
    with read_session(engine) as s:
        return len(s.exec(select(AlertRule.id).where(AlertRule.last_evaluated_at.is_not(None))).all())


def small_store(tmp_path: Path):
    settings = Settings(data_dir=tmp_path, autoload_snapshot=False)
    upgrade(settings.resolved_database_url)
    build_store(tmp_path / "observatory.db", 300)
    return settings, make_engine(settings.resolved_database_url)


def test_start_up_work_waits_for_no_one_and_runs_once_per_store(tmp_path):
    settings, engine = small_store(tmp_path)
    try:
        other = lease.new_holder()  # a live holder: this process's pid, another token
        assert lease.acquire(engine, LEASE_NAME, other, 600)
        assert run_startup(engine, settings) == {"lease": "held by another worker"}
        assert evaluated_rules(engine) == 0  # the holder does the work, not us
        lease.release(engine, LEASE_NAME, other)
        results = run_startup(engine, settings)
        # no snapshot to load (autoload off), nothing derived by an older parser: not run
        assert results == {"trends": "ok", "alerts": "ok"}
        assert evaluated_rules(engine) > 0
        with read_session(engine) as s:
            assert lease.current(s, LEASE_NAME) is None  # released when done
        assert run_startup(engine, settings) == {}  # up to date: found by reads, nothing written
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_write_locked_store_is_skipped_not_an_error(tmp_path):
    settings, engine = small_store(tmp_path)
    blocker = sqlite3.connect(tmp_path / "observatory.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
        results = run_startup(engine, settings, locked_retries=0)  # one busy timeout, then skipped
        assert list(results) == ["lease"] and results["lease"].startswith("skipped: database is locked")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        engine.dispose()
    assert evaluated_rules(make_engine(settings.resolved_database_url)) == 0


@pytest.mark.slow
def test_two_workers_on_a_generated_store_serve_and_evaluate_once(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    build_store(data_dir / "observatory.db", 20_000)  # never evaluated: a worker's start-up evaluates
    env = offline_env(data_dir, OBSERVATORY_CRAWL_INTERVAL_S="0", OBSERVATORY_AUTOLOAD_SNAPSHOT="false")
    engine = make_engine(f"sqlite:///{data_dir / 'observatory.db'}")
    try:
        with running_server(data_dir, "--workers", "2", "--log-level", "warning", env=env, timeout=180) as server:
            for _ in range(4):  # requests land on both workers, while one of them evaluates
                for path in ("/", "/api/v1/models?size=1", "/alerts"):
                    assert httpx.get(server.url + path, timeout=30).status_code == 200, path
            deadline = time.monotonic() + 240  # bounded: the evaluation runs beside serving
            while evaluated_rules(engine) == 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert evaluated_rules(engine) > 0
            process = server.process
        # running_server sent SIGTERM and waited (bounded) for both workers to go
        assert process.returncode is not None
    finally:
        engine.dispose()
    text = server.log_text()
    # the second worker neither evaluated again nor met the first one's write lock
    assert "database is locked" not in text and "failed" not in text and "Traceback" not in text, text[-3000:]
