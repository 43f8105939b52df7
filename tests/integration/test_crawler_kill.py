"""A crawl killed with SIGKILL at any moment, then restarted: every model stored exactly once."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest
from crawler_support import (
    LONG_AGO,
    assert_stored_exactly_once,
    revisions_by_model,
    runs,
    scope_state,
)

from observatory.crawler.run import crawl
from observatory.testing.hub_standin import populate

CLI = [sys.executable, "-c", "from observatory.cli import main; main()"]


def _stored(db_path: str) -> int:
    try:
        with sqlite3.connect(db_path, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM config_revision").fetchone()[0]
    except sqlite3.OperationalError:  # schema not there yet
        return 0


def _crawl_process(hub_settings) -> subprocess.Popen:
    env = {
        **os.environ,
        "OBSERVATORY_DATA_DIR": str(hub_settings.data_dir),
        "HF_ENDPOINT": hub_settings.hf_endpoint,
        "OBSERVATORY_CRAWL_CONCURRENCY": "4",
        "OBSERVATORY_HUB_TIMEOUT_S": "5",
    }
    env.pop("OBSERVATORY_DATABASE_URL", None)
    return subprocess.Popen([*CLI, "crawl", "--since", "2000-01-01", "--no-progress", "--json"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when_stored(proc: subprocess.Popen, db_path: str, at_least: int, baseline: int) -> int:
    deadline = time.monotonic() + 60
    while _stored(db_path) - baseline < at_least:
        assert proc.poll() is None, f"crawl ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "crawl made no progress"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return _stored(db_path)


@pytest.mark.parametrize(("before", "new", "kill_at"), [
    (0, 300, 1),  # first run, right after the first commit
    (0, 300, 150),  # first run, half way
    (20, 300, 100),  # a later run: the old mark must hold
])
def test_sigkill_then_restart_stores_every_model_exactly_once(engine, hub, hub_settings, before, new, kill_at):
    hub.page_size = 50
    old = populate(hub, before, prefix="old") if before else []
    if old:
        crawl(engine, hub_settings, since=LONG_AGO)
    mark_before = scope_state(engine).created_mark if old else None
    ids = populate(hub, new, prefix="new", start=datetime.now(timezone.utc), step_s=0.1)  # all above the mark
    hub.add_fault("resolve", None, delay=0.01, times=-1)  # slow enough to kill mid-way
    db_path = str(hub_settings.data_dir / "observatory.db")

    proc = _crawl_process(hub_settings)
    committed = _kill_when_stored(proc, db_path, kill_at, baseline=len(old))

    assert len(old) + kill_at <= committed < len(old) + new, "killed too late to test anything"
    state = scope_state(engine)
    assert (state.created_mark if state else None) == mark_before  # never past an unstored model
    hub.faults.clear()
    hub.reset_counts()

    resumed = crawl(engine, hub_settings, since=LONG_AGO)

    assert_stored_exactly_once(engine, hub, old + ids)
    assert sum(len(v) for v in revisions_by_model(engine).values()) == len(old) + new
    # Only what the killed run had not committed was fetched again.
    assert hub.counts["resolve_get"] == len(old) + new - committed
    assert resumed.new == len(old) + new - committed
    assert scope_state(engine).created_mark == hub.repos[ids[-1]].created_at
    killed = [r for r in runs(engine) if r.id != resumed.id and r.status != "ok"]
    assert len(killed) == 1 and killed[0].status == "interrupted" and killed[0].finished_at is not None
