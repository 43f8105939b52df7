"""Crashes between evaluation and delivery: nothing lost, nothing sent under a second id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from alert_support import (  # noqa: F401  (alert_settings is a fixture)
    Receiver,
    alert_settings,
    attempts,
    deliver_until,
    deliveries,
    seed_mla_month,
    subscribe,
)

from observatory.alerts.delivery import deliver_pending
from observatory.store.tables import utcnow

CLI = [sys.executable, "-c", "from observatory.cli import main; main()"]

EVALUATE_THEN_DIE = """
import os, signal
from observatory.alerts.evaluate import evaluate
from observatory.store.db import get_engine
from observatory.settings import get_settings
settings = get_settings()
report = evaluate(get_engine(settings), settings)
print(len(report.fired), report.deliveries, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # killed after the evaluation committed, before any delivery
"""


def child_env(settings) -> dict:
    env = dict(os.environ)
    env.update({
        "OBSERVATORY_DATA_DIR": str(settings.data_dir),
        "OBSERVATORY_AUTOLOAD_SNAPSHOT": "false",
        "OBSERVATORY_ALLOW_LOOPBACK_WEBHOOKS": "true",
        "OBSERVATORY_ALLOW_HTTP_WEBHOOKS": "true",
        "OBSERVATORY_ALERT_BUILTIN_RULES": "false",
        "OBSERVATORY_WEBHOOK_LEASE_S": str(settings.webhook_lease_s),
        "OBSERVATORY_WEBHOOK_TIMEOUT_S": "30",
        "OBSERVATORY_WEBHOOK_RETRY_SCHEDULE_S": json.dumps(settings.webhook_retry_schedule_s),
    })
    return env


def cli(settings, *args: str):
    proc = subprocess.run([*CLI, "alerts", *args, "--json"], env=child_env(settings), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_killed_after_evaluation_then_a_fresh_deliver_run_sends_once(engine, alert_settings):
    with Receiver() as rx:
        subscribe(engine, alert_settings, rx.url)
        seed_mla_month(engine)
        proc = subprocess.run([sys.executable, "-c", EVALUATE_THEN_DIE], env=child_env(alert_settings),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert proc.stdout.split() == ["1", "1"]
        (queued,) = deliveries(engine)
        assert queued.status == "pending" and queued.attempts == 0 and rx.requests == []

        report = cli(alert_settings, "deliver")  # a fresh process after the "restart"
        assert report["succeeded"] == 1
        (request,) = rx.wait_for(1)
        assert request["headers"]["webhook-id"] == queued.webhook_id

        assert cli(alert_settings, "evaluate")["fired"] == []  # idempotent: the same data fires nothing
        (listed,) = cli(alert_settings, "list", "--status", "firing")
        assert listed["kind"] == "kind_share" and listed["notifications"] == 1
        assert cli(alert_settings, "deliver")["attempted"] == 0
        assert len(rx.requests) == 1


def test_killed_while_sending_is_resent_with_the_same_id(engine, alert_settings):
    with Receiver(script={1: (200, {}, 15)}) as rx:  # the first answer hangs (bounded) while we kill
        subscribe(engine, alert_settings, rx.url)
        seed_mla_month(engine)
        assert cli(alert_settings, "evaluate")["deliveries"] == 1
        sender = subprocess.Popen([*CLI, "alerts", "deliver"], env=child_env(alert_settings),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            rx.wait_for(1, timeout=60)
        finally:
            os.kill(sender.pid, signal.SIGKILL)
            sender.wait(timeout=30)
        (claimed,) = deliveries(engine)
        assert claimed.status == "pending" and claimed.attempts == 1
        assert [a.outcome for a in attempts(engine, claimed.id)] == ["started"]  # the crash is on record

        assert deliver_pending(engine, alert_settings).attempted == 0  # its lease has not run out yet
        # The lease outlasts any attempt by design (webhooks.lease_s): a pass once it has run out.
        after_lease = utcnow() + timedelta(hours=1)
        assert deliver_pending(engine, alert_settings, now=after_lease).attempted == 1
        deliver_until(engine, alert_settings, lambda: deliveries(engine)[0].status == "succeeded")
        requests = rx.wait_for(2)
    assert len(requests) == 2
    assert {r["headers"]["webhook-id"] for r in requests} == {claimed.webhook_id}
    assert requests[0]["body"] == requests[1]["body"]
    assert [a.outcome for a in attempts(engine, claimed.id)] == ["started", "success"]
