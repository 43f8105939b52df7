"""SIGTERM ends ``crawl``, ``worker`` and ``serve`` within seconds whatever they are waiting on
(issue 14: a listing ``Retry-After`` or a dripping server), and the crawl is stored as interrupted.

Real processes against the stand-in Hub. The 10 s bound is the issue's requirement; the Hub in
these tests asks for waits of minutes, so a process that honoured it instead would miss it by far.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from crawler_support import LLAMA, runs

from observatory.testing.hub_standin import populate
from observatory.testing.server import CLI, offline_env, running_server

STOP_WITHIN_S = 10


def _env(hub_settings, hub, **extra: str) -> dict[str, str]:
    return offline_env(hub_settings.data_dir, HF_ENDPOINT=hub.url, OBSERVATORY_HUB_MAX_RETRIES="4",
                       OBSERVATORY_HUB_MAX_WAIT_S="600", OBSERVATORY_CRAWL_FIRST_RUN_DAYS="1",
                       OBSERVATORY_STATS_REFRESH_INTERVAL_S="0", OBSERVATORY_SCHEDULER_LEASE_TTL_S="3", **extra)


def _wait_for(condition, timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process is None or process.poll() is None, f"the process exited early ({process.returncode})"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f}s"
        time.sleep(0.05)


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        pytest.fail(f"still running {STOP_WITHIN_S}s after SIGTERM")


def _slow_hub(hub, state: str) -> None:
    """The Hub keeps the crawler waiting: on a listing Retry-After, or on a config that drips."""
    if state == "listing_retry_after":
        hub.add_fault("listing", 429, times=-1, headers={"Retry-After": "300"})
    else:  # a 150-byte config at 1 byte/s: 2.5 minutes per fetch
        hub.add_fault("resolve", 200, times=-1, body=json.dumps(LLAMA).encode(), drip_s=1.0)


def _spawn(args: list[str], env: dict[str, str], log) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *args], env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("state", ["listing_retry_after", "dripping_config"])
@pytest.mark.slow
def test_worker_stops_within_seconds_of_sigterm_while_the_hub_keeps_it_waiting(engine, hub, hub_settings,
                                                                              tmp_path, state):
    populate(hub, 3)
    _slow_hub(hub, state)
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = _spawn(["worker"], _env(hub_settings, hub, OBSERVATORY_CRAWL_INTERVAL_S="3600"), log)
    try:
        _wait_for(lambda: hub.counts["faults"] >= 1, 60, "the crawl meeting the slow Hub", worker)
        time.sleep(0.5)  # well inside the wait now
        assert _stop(worker) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    output = log_path.read_text()
    assert "worker: stopped" in output and "Traceback" not in output, output[-3000:]
    [run] = runs(engine)
    assert run.status == "interrupted" and run.error.startswith("Stopped"), (run.status, run.error)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM lease").scalar() == 0


@pytest.mark.slow
def test_serve_stops_within_seconds_of_sigterm_while_its_crawl_waits_on_the_hub(engine, hub, hub_settings):
    populate(hub, 3)
    _slow_hub(hub, "listing_retry_after")
    with running_server(hub_settings.data_dir, env=_env(hub_settings, hub)) as server:
        _wait_for(lambda: hub.counts["faults"] >= 1, 60, "the in-process crawl meeting the 429", server.process)
        time.sleep(0.5)
        _stop(server.process)
        output = server.log_text()
    assert "Traceback" not in output, output[-3000:]
    assert [(r.status, r.error[:7]) for r in runs(engine)] == [("interrupted", "Stopped")]


def test_crawl_command_stops_on_sigterm_and_still_prints_its_json(engine, hub, hub_settings, tmp_path):
    populate(hub, 3)
    _slow_hub(hub, "listing_retry_after")
    crawl = subprocess.Popen([*CLI, "crawl", "--since", "7d", "--json", "--no-progress"],
                             env=_env(hub_settings, hub), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: hub.counts["faults"] >= 1, 60, "the crawl meeting the 429", crawl)
        time.sleep(0.5)
        assert _stop(crawl) == 3
    finally:
        if crawl.poll() is None:
            crawl.kill()
    result = json.loads(crawl.stdout.read())
    assert result["ok"] is False and result["status"] == "interrupted" and result["error"].startswith("Stopped")
    assert b"Traceback" not in crawl.stderr.read()
    assert [r.status for r in runs(engine)] == ["interrupted"]
