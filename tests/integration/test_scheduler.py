"""The schedule runs in exactly one process per store, and the crawl job never overlaps itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from crawler_support import runs

from observatory.scheduler import JobSpec, SchedulerHandle, start_in_process
from observatory.store import lease
from observatory.testing.hub_standin import populate

CLI = [sys.executable, "-c", "from observatory.cli import main; main()"]


def _wait_for(condition, timeout: float = 10.0, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(step)


class Recorder:
    """A job that remembers which handle ran it and whether two runs ever overlapped."""

    def __init__(self, duration: float = 0.0) -> None:
        self.calls: list[str] = []
        self.active = 0
        self.overlapped = False
        self.duration = duration
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}

    def job(self, name: str):
        def run(engine, settings) -> None:
            with self.lock:
                self.active += 1
                self.overlapped |= self.active > 1
            time.sleep(self.duration)
            with self.lock:
                self.active -= 1
                self.calls.append(name)
        return run


def test_two_schedulers_on_one_store_only_the_lease_holder_runs_jobs(engine, settings):
    quick = settings.model_copy(update={"scheduler_lease_ttl_s": 0.6})
    recorder = Recorder()
    first = SchedulerHandle(engine, quick, [JobSpec("tick", recorder.job("first"), lambda s: 0.1, first_delay_s=0)])
    second = SchedulerHandle(engine, quick, [JobSpec("tick", recorder.job("second"), lambda s: 0.1, first_delay_s=0)])
    first.start()
    _wait_for(lambda: first.is_leader)
    second.start()
    try:
        _wait_for(lambda: recorder.calls.count("first") >= 3)
        time.sleep(0.3)
        assert not second.is_leader and set(recorder.calls) == {"first"}
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT holder FROM lease WHERE name='scheduler'").scalar() == first.holder

        first.shutdown()  # releases the lease: the standby takes over within a third of the TTL
        _wait_for(lambda: second.is_leader, timeout=3)
        _wait_for(lambda: recorder.calls.count("second") >= 2)
        assert recorder.calls.index("second") > recorder.calls.index("first")
    finally:
        first.shutdown()
        second.shutdown()
    assert not recorder.overlapped
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM lease WHERE name='scheduler'").scalar() == 0


def test_a_lapsed_leader_stops_its_schedule(engine, settings):
    quick = settings.model_copy(update={"scheduler_lease_ttl_s": 0.6})
    recorder = Recorder()
    handle = SchedulerHandle(engine, quick, [JobSpec("tick", recorder.job("h"), lambda s: 0.1, first_delay_s=0)])
    handle.start()
    try:
        _wait_for(lambda: handle.is_leader)
        # Another process takes the lease over (as if ours had stalled past its TTL).
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE lease SET holder='elsewhere:1:x' WHERE name='scheduler'")
        _wait_for(lambda: not handle.is_leader, timeout=3)
        count = len(recorder.calls)
        time.sleep(0.4)
        assert len(recorder.calls) <= count + 1  # at most a run already under way
    finally:
        handle.shutdown()


def test_a_long_job_never_runs_twice_at_once(engine, settings):
    recorder = Recorder(duration=0.35)
    handle = SchedulerHandle(engine, settings, [JobSpec("slow", recorder.job("h"), lambda s: 0.1, first_delay_s=0)])
    handle.start()
    try:
        _wait_for(lambda: len(recorder.calls) >= 2)
    finally:
        handle.shutdown()
    assert not recorder.overlapped


def test_in_process_schedulers_crawl_the_stand_in_one_crawl_at_a_time(engine, hub, hub_settings):
    populate(hub, 8)
    hub.add_fault("resolve", None, delay=0.05, times=-1)  # crawls long enough to collide if they could
    config = hub_settings.model_copy(update={"crawl_interval_s": 1, "crawl_first_run_days": 1,
                                             "stats_refresh_interval_s": 0, "bench_interval_s": 0,
                                             "scheduler_lease_ttl_s": 1.0})
    handles = [start_in_process(engine, config), start_in_process(engine, config)]
    try:
        _wait_for(lambda: len([r for r in runs(engine) if r.status == "ok"]) >= 2, timeout=15)
        assert sum(h.is_leader for h in handles) == 1
    finally:
        for handle in handles:
            handle.shutdown()
    finished = sorted((r for r in runs(engine) if r.finished_at), key=lambda r: r.started_at)
    for before, after in zip(finished, finished[1:]):
        assert after.started_at >= before.finished_at  # no two crawls overlapped
    assert finished[0].new == 8
    assert "crawl" in handles[0].job_ids and "stats-refresh" not in handles[0].job_ids  # interval 0: off


def test_disabled_scheduler_is_a_no_op(engine, settings):
    handle = start_in_process(engine, settings.model_copy(update={"scheduler_enabled": False}))
    assert not handle.is_leader
    handle.shutdown()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM lease").scalar() == 0


def test_optional_job_is_skipped_when_its_module_is_missing(engine, settings):
    spec = JobSpec("absent", "observatory.no_such_domain.jobs:run", lambda s: 10, optional=True)
    assert SchedulerHandle(engine, settings, [spec]).job_ids == []
    assert SchedulerHandle(engine, settings, [JobSpec("off", "x:y", lambda s: 0)]).job_ids == []


@pytest.mark.slow
def test_worker_command_runs_the_schedule_until_sigterm(engine, hub, hub_settings):
    populate(hub, 4)
    env = {**os.environ, "OBSERVATORY_DATA_DIR": str(hub_settings.data_dir), "HF_ENDPOINT": hub.url,
           "OBSERVATORY_CRAWL_INTERVAL_S": "2", "OBSERVATORY_STATS_REFRESH_INTERVAL_S": "0",
           "OBSERVATORY_BENCH_INTERVAL_S": "0", "OBSERVATORY_SCHEDULER_LEASE_TTL_S": "3"}
    proc = subprocess.Popen([*CLI, "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: any(r.status == "ok" for r in runs(engine)), timeout=30, step=0.1)
        assert lease.acquire(engine, "scheduler", "intruder:1:x", 60) is False  # held by the worker
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "now running the schedule" in err and "worker: stopped" in err
    assert runs(engine)[0].new == 4 and all(r.status == "ok" for r in runs(engine))
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM lease").scalar() == 0


def test_shutdown_stops_a_running_crawl_early_and_keeps_what_it_fetched(engine, hub, hub_settings):
    from crawler_support import (
        assert_stored_exactly_once,
        revisions_by_model,
        scope_state,
    )

    from observatory.crawler.run import crawl

    ids = populate(hub, 400)
    hub.page_size = 50
    hub.add_fault("resolve", None, delay=0.05, times=-1)  # 400 fetches, 4 at a time: ~5 s
    config = hub_settings.model_copy(update={"crawl_interval_s": 60, "crawl_first_run_days": 1,
                                             "stats_refresh_interval_s": 0, "bench_interval_s": 0})
    handle = SchedulerHandle(engine, config, [JobSpec("crawl", "observatory.pipeline:scheduled_crawl",
                                                      lambda s: 60, first_delay_s=0)]).start()
    try:
        _wait_for(lambda: len(revisions_by_model(engine)) >= 20, timeout=20)
    finally:
        started = time.monotonic()
        handle.shutdown(wait=True)
    assert time.monotonic() - started < 3  # it did not wait for the remaining ~350 fetches
    [stopped] = runs(engine)
    assert stopped.status == "interrupted" and stopped.error.startswith("Stopped")
    assert 20 <= stopped.new < 400 and stopped.new == len(revisions_by_model(engine))
    assert scope_state(engine).created_mark is None

    hub.faults.clear()
    crawl(engine, config)
    assert_stored_exactly_once(engine, hub, ids)


def test_offline_the_schedule_says_so_once_without_a_traceback(engine, settings, caplog):
    """A dead Hub: the crawl is stored as "unreachable" after one attempt, the first job that meets
    it logs what to set, later ones one INFO line; the stats refresh prints no traceback either."""
    import logging

    dead = settings.model_copy(update={"hf_endpoint": "http://127.0.0.1:9", "hub_backoff_base_s": 600.0})
    jobs = [JobSpec("crawl", "observatory.pipeline:scheduled_crawl", lambda s: 0.2, first_delay_s=0),
            JobSpec("stats-refresh", "observatory.crawler.stats:refresh_popular", lambda s: 0.2, first_delay_s=0)]
    with caplog.at_level(logging.INFO):
        handle = SchedulerHandle(engine, dead, jobs).start()
        try:
            _wait_for(lambda: sum(r.status == "unreachable" for r in runs(engine)) >= 2, timeout=20)
        finally:
            handle.shutdown(wait=True)
    # Every finished run met the dead Hub; one more may have been under way at shutdown (interrupted).
    statuses = [r.status for r in runs(engine)]
    assert statuses.count("unreachable") >= 2 and set(statuses) <= {"unreachable", "interrupted"}, statuses
    ours = [r for r in caplog.records if r.name.startswith("observatory")]
    assert all(r.exc_info is None for r in ours) and not any(r.levelno >= logging.ERROR for r in ours)
    [hint] = [r.getMessage() for r in ours if r.levelno == logging.WARNING]
    assert hint.startswith("Hub not reachable at http://127.0.0.1:9: ConnectError")
    assert "HF_ENDPOINT" in hint and "HTTPS_PROXY" in hint and "`observatory crawl`" in hint
    assert any("stats-refresh" in r.getMessage() for r in ours if r.levelno == logging.INFO)


def test_after_a_rate_limited_run_the_schedule_waits_until_the_hub_said(engine, hub, hub_settings):
    from observatory.hub.ratelimit import GATE
    from observatory.pipeline import scheduled_crawl

    populate(hub, 3)
    hub.add_fault("listing", 429, times=1, headers={"Retry-After": "3600"})
    first = scheduled_crawl(engine, hub_settings)
    assert first.status == "rate_limited"
    GATE.reset()  # even a fresh process (no pause in memory) keeps to the stored time
    hub.reset_counts()

    assert scheduled_crawl(engine, hub_settings) is None
    assert hub.counts == {} and len(runs(engine)) == 1

    with engine.begin() as conn:  # the hour has passed
        conn.exec_driver_sql("UPDATE crawl_run SET stats = json_set(stats, '$.retry_at', '2000-01-01T00:00:00+00:00')")
    second = scheduled_crawl(engine, hub_settings.model_copy(update={"crawl_first_run_days": 1}))
    assert second.status == "ok" and second.new == 3


def test_benchmarks_are_scheduled_only_when_enabled(engine, settings):
    assert "bench-new-models" not in SchedulerHandle(engine, settings).job_ids
    enabled = settings.model_copy(update={"bench_schedule_enabled": True})
    assert "bench-new-models" in SchedulerHandle(engine, enabled).job_ids
