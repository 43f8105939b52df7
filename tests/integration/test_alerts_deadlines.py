"""Issue 21, findings 5 and 8 (webhooks): one attempt has a deadline from connect to the last
byte, a stop request ends it, the delivery lease never runs out while an attempt is under way,
and the delivery after a crawl is bounded. Real receivers on 127.0.0.1; no timed assertions:
each test shows what was cut off, sent, or left for later."""

from __future__ import annotations

import signal
import subprocess
import threading
from datetime import timedelta

from alert_support import (  # noqa: F401  (alert_settings is a fixture)
    MLA_RULE,
    DrippingReceiver,
    Receiver,
    alert_settings,
    attempts,
    deliveries,
    seed_mla_month,
    subscribe,
)
from sqlmodel import Session, select

from observatory.alerts.delivery import DeliveryReport, _run, claim_due, deliver_pending
from observatory.alerts.evaluate import after_crawl, evaluate
from observatory.alerts.tables import WebhookEndpoint
from observatory.hub import transport
from observatory.store.tables import utcnow
from observatory.testing.server import CLI, offline_env

LOWER_MLA_RULE = {"kind": "kind_share", "params": {"kind": "MLA", "threshold": 0.1}}


def fire(engine, settings, url: str, subscribers: int = 1, rules=(MLA_RULE,)) -> int:
    """``subscribers`` subscriptions to ``url``, then a month that fires every rule once each."""
    for _ in range(subscribers):
        subscribe(engine, settings, url, rules=rules)
    seed_mla_month(engine)
    return evaluate(engine, settings).deliveries


def test_a_receiver_that_drips_its_status_line_is_cut_off_at_the_deadline(engine, alert_settings):
    # Each byte comes 0.25 s after the last, far inside the 2 s a read may wait: only a deadline
    # over the whole attempt stops it. Dripping all of it would take over a minute.
    settings = alert_settings.model_copy(update={"webhook_timeout_s": 2.0})
    with DrippingReceiver(interval_s=0.25) as rx:
        assert fire(engine, settings, rx.url) == 1
        report = deliver_pending(engine, settings)
        assert rx.wait_cut_off(), "the sender never hung up"
    assert report.outcomes == {"timeout": 1} and report.retrying == 1
    assert rx.sent < len(DrippingReceiver.ANSWER)  # hung up before the answer was complete
    (d,) = deliveries(engine)
    (attempt,) = attempts(engine, d.id)
    assert attempt.outcome == "timeout" and "no complete answer within 2 s" in attempt.error
    assert d.status == "pending" and d.attempts == 1  # retried on the schedule, same id


def test_a_stop_request_ends_the_attempt_under_way(engine, alert_settings):
    """What SIGTERM does in the worker: the scheduler sets its stop event, which every send
    in the pass sees (through hub.transport.cancellable, on the pool's threads too)."""
    settings = alert_settings.model_copy(update={"webhook_timeout_s": 60.0})
    stop = threading.Event()
    reports: list[DeliveryReport] = []

    def worker() -> None:
        with transport.cancellable(stop.is_set):
            reports.append(deliver_pending(engine, settings))

    with DrippingReceiver(interval_s=0.25) as rx:
        assert fire(engine, settings, rx.url, subscribers=2) == 2  # two subscriptions: two threads
        thread = threading.Thread(target=worker)
        thread.start()
        assert rx.first_byte.wait(10)
        stop.set()
        thread.join(30)
        assert not thread.is_alive()
        assert rx.wait_cut_off()
    (report,) = reports
    assert report.outcomes.get("interrupted") == 2 and report.outcomes.get("success") is None
    assert rx.sent < len(DrippingReceiver.ANSWER)
    now = utcnow()
    for d in deliveries(engine):
        assert d.status == "pending" and d.next_attempt_at <= now  # due again at once, same id
        assert [a.outcome for a in attempts(engine, d.id)] == ["interrupted"]
        assert endpoint_failures(engine, d) == 0  # not the receiver's fault


def endpoint_failures(engine, delivery) -> int:
    with Session(engine) as session:
        return session.exec(select(WebhookEndpoint.consecutive_failures)
                            .where(WebhookEndpoint.subscription_id == delivery.subscription_id)).one()


def test_the_lease_outlasts_an_attempt_so_a_second_pass_never_sends_the_same_id(engine, alert_settings):
    # A configured lease shorter than an attempt (issue 21: the lease expired mid-send and two
    # webhook ids went out twice at the same time). A second pass, two seconds into the first
    # one's attempt, must find nothing to claim.
    settings = alert_settings.model_copy(update={"webhook_lease_s": 1.0, "webhook_timeout_s": 5.0})
    with Receiver(default=(200, {}, 3.0)) as rx:
        assert fire(engine, settings, rx.url) == 1
        first = threading.Thread(target=deliver_pending, args=(engine, settings))
        first.start()
        rx.wait_for(1)
        second = deliver_pending(engine, settings, now=utcnow() + timedelta(seconds=2))
        rx.release.set()
        first.join(30)
    assert second.attempted == 0
    assert len(rx.requests) == 1


def test_a_claim_taken_over_while_it_waited_is_not_sent_twice(engine, alert_settings):
    # Two deliveries of one subscription go out one after another. If the second one's lease ran
    # out while it waited its turn, and another pass claimed it, this pass must not send it too.
    with Receiver() as rx:
        assert fire(engine, alert_settings, rx.url, rules=(MLA_RULE, LOWER_MLA_RULE)) == 2
        mine = claim_due(engine, alert_settings, utcnow(), 10)
        assert len(mine) == 2
        later = utcnow() + timedelta(days=1)  # both leases have run out by then
        theirs = claim_due(engine, alert_settings, later, 10)
        assert len(theirs) == 2
        _run(engine, alert_settings, mine, DeliveryReport())
        assert rx.requests == []  # not this pass's any more
        _run(engine, alert_settings, theirs, DeliveryReport())
        ids = [r["headers"]["webhook-id"] for r in rx.wait_for(2)]
    assert len(ids) == len(set(ids)) == 2
    for d in deliveries(engine):
        assert [a.outcome for a in attempts(engine, d.id)] == ["superseded", "success"]


def test_delivery_after_a_crawl_is_bounded_and_leaves_the_rest_for_the_worker(engine, alert_settings):
    # Three subscribers behind one slow receiver, one send at a time: with a half-second budget,
    # the first attempt runs (the receiver holds it 2 s) and the other two are left due.
    settings = alert_settings.model_copy(update={"crawl_delivery_budget_s": 0.5, "webhook_workers": 1,
                                                 "webhook_timeout_s": 10.0})
    with Receiver(default=(200, {}, 2.0)) as rx:
        for _ in range(3):
            subscribe(engine, settings, rx.url)
        seed_mla_month(engine)
        after_crawl(engine, settings, None)  # evaluates, then delivers within its budget
        assert len(rx.requests) == 1
        outcomes = sorted(a.outcome for d in deliveries(engine) for a in attempts(engine, d.id))
        assert outcomes == ["deferred", "deferred", "success"]
        left = [d for d in deliveries(engine) if d.status == "pending"]
        assert len(left) == 2 and all(d.next_attempt_at <= utcnow() for d in left)
        rx.release.set()
        assert deliver_pending(engine, settings).succeeded == 2  # the delivery job's next pass



def test_a_zero_budget_leaves_all_delivery_to_the_worker(engine, alert_settings):
    settings = alert_settings.model_copy(update={"crawl_delivery_budget_s": 0.0})
    with Receiver() as rx:
        subscribe(engine, settings, rx.url)
        seed_mla_month(engine)
        after_crawl(engine, settings, None)
        (d,) = deliveries(engine)
        assert rx.requests == [] and d.status == "pending" and attempts(engine, d.id) == []
        assert deliver_pending(engine, settings).succeeded == 1


def test_sigterm_ends_the_workers_attempt_under_way(engine, alert_settings, tmp_path):
    """Issue 21: the worker kept sending to a dripping receiver for 90 s after SIGTERM although
    it printed "stopped". A real ``observatory worker``: its delivery job meets the receiver,
    SIGTERM comes mid-answer, and the attempt is ended and recorded, not abandoned."""
    with DrippingReceiver(interval_s=0.25) as rx:
        assert fire(engine, alert_settings, rx.url) == 1
        env = offline_env(alert_settings.data_dir, OBSERVATORY_AUTOLOAD_SNAPSHOT="false",
                          OBSERVATORY_ALLOW_LOOPBACK_WEBHOOKS="true", OBSERVATORY_ALLOW_HTTP_WEBHOOKS="true",
                          OBSERVATORY_ALERT_BUILTIN_RULES="false", OBSERVATORY_WEBHOOK_TIMEOUT_S="120",
                          OBSERVATORY_ALERT_DELIVERY_INTERVAL_S="1", OBSERVATORY_CRAWL_INTERVAL_S="0",
                          OBSERVATORY_STATS_REFRESH_INTERVAL_S="0", OBSERVATORY_SCHEDULER_LEASE_TTL_S="3")
        log_path = tmp_path / "worker.log"
        with open(log_path, "wb") as log:
            worker = subprocess.Popen([*CLI, "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            assert rx.first_byte.wait(60), "the worker never reached the receiver"
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        assert rx.wait_cut_off()
    output = log_path.read_text()
    assert "worker: stopped" in output and "Traceback" not in output, output[-3000:]
    (d,) = deliveries(engine)
    assert [a.outcome for a in attempts(engine, d.id)] == ["interrupted"]  # not "started": it was ended
    assert d.status == "pending" and d.next_attempt_at <= utcnow()  # due again at once, same id
