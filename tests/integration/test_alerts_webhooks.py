"""Webhook delivery against real receivers on 127.0.0.1: signatures, retries, 410, 3xx, hangs, SSRF."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import timedelta

import pytest
from alert_support import (  # noqa: F401  (alert_settings is a fixture)
    Receiver,
    alert_settings,
    attempts,
    deliver_until,
    deliveries,
    endpoint,
    seed_mla_month,
    subscribe,
)
from sqlmodel import Session, select
from standardwebhooks import Webhook

from observatory.alerts import ssrf
from observatory.alerts.delivery import RedeliveryRefused, deliver_pending, redeliver
from observatory.alerts.evaluate import evaluate
from observatory.alerts.tables import AlertEvent, SubscriptionNotice


def _fire(engine, settings, url, **kw):
    created = subscribe(engine, settings, url, **kw)
    seed_mla_month(engine)
    report = evaluate(engine, settings)
    assert len(report.fired) == 1 and report.deliveries == 1
    return created


def test_signed_delivery_is_verified_by_the_receiver(engine, alert_settings):
    with Receiver() as rx:
        created = _fire(engine, alert_settings, rx.url)
        report = deliver_pending(engine, alert_settings)
        assert report.succeeded == 1
        (request,) = rx.wait_for(1)
        payload = Webhook(created.webhook_secret).verify(request["body"], request["headers"])
        assert deliver_pending(engine, alert_settings).attempted == 0  # nothing left to send
    (d,) = deliveries(engine)
    assert request["headers"]["webhook-id"] == d.webhook_id and d.status == "succeeded"
    assert request["headers"]["Host"] == rx.url.split("/")[2]
    assert request["path"] == "/hook" and len(request["body"]) < 20_000
    assert payload["type"] == "alert.firing"
    data = payload["data"]
    assert data["notification_reason"] == "new" and data["alert"]["status"] == "firing"
    assert data["summary"].startswith("The share of MLA is 20.0% in 2025-01")
    assert data["details"]["after"]["value"] == 0.2 and data["details"]["period"] == "2025-01"
    assert [m["id"] for m in data["details"]["models"]] == ["deepx/mla-2025-1-0"]
    assert data["links"]["trend"] == "http://observatory.test/trends?period=month&weighting=count"
    assert data["links"]["alert"].startswith("http://observatory.test/api/v1/alerts/")
    (attempt,) = attempts(engine, d.id)
    assert attempt.outcome == "success" and attempt.status_code == 200 and attempt.target_ip == "127.0.0.1"


def test_server_errors_are_retried_with_the_same_id(engine, alert_settings):
    script = {1: (500, {}, 0), 2: (503, {"Retry-After": "0"}, 0)}
    with Receiver(script=script) as rx:
        created = _fire(engine, alert_settings, rx.url)
        (d,) = deliveries(engine)
        deliver_until(engine, alert_settings, lambda: deliveries(engine)[0].status == "succeeded")
        requests = rx.wait_for(3)
    assert len(requests) == 3
    assert {r["headers"]["webhook-id"] for r in requests} == {d.webhook_id}
    bodies = {r["body"] for r in requests}
    assert len(bodies) == 1  # the same bytes on every attempt
    for r in requests:
        Webhook(created.webhook_secret).verify(r["body"], r["headers"])
    assert [a.outcome for a in attempts(engine, d.id)] == ["throttled", "throttled", "success"]
    assert endpoint(engine).consecutive_failures == 0 and endpoint(engine).status == "active"


def test_retry_after_is_honoured(engine, alert_settings):
    with Receiver(script={1: (429, {"Retry-After": "3"}, 0)}) as rx:
        _fire(engine, alert_settings, rx.url)
        deliver_pending(engine, alert_settings)
        (d,) = deliveries(engine)
        wait = (d.next_attempt_at - d.last_attempt_at).total_seconds()
        assert 2.9 < wait < 10  # not the 50 ms schedule
        assert deliver_pending(engine, alert_settings).attempted == 0
        assert len(rx.requests) == 1
        assert attempts(engine, d.id)[0].retry_after_s == 3


def test_410_disables_the_endpoint_and_tells_the_owner(engine, alert_settings):
    with Receiver(default=(410, {}, 0)) as rx:
        created = _fire(engine, alert_settings, rx.url)
        deliver_pending(engine, alert_settings)
        assert len(rx.requests) == 1
        ep = endpoint(engine)
        assert ep.status == "disabled" and "410" in ep.disabled_reason
        (d,) = deliveries(engine)
        assert d.status == "failed"
        with Session(engine) as session:
            (notice,) = session.exec(select(SubscriptionNotice)).all()
        assert notice.kind == "endpoint_disabled" and created.subscription.public_id in notice.message
        with pytest.raises(RedeliveryRefused):
            redeliver(engine, alert_settings, d.id)
        # Later notifications are not queued for the disabled endpoint.
        seed_mla_month(engine, month=2, mla=0, gqa=10)
        report = evaluate(engine, alert_settings)
        assert len(report.resolved) == 1 and report.deliveries == 0
        deliver_pending(engine, alert_settings)
        assert len(rx.requests) == 1


def test_redirects_are_failures_and_never_followed(engine, alert_settings):
    with Receiver() as target, Receiver(default=(301, {"Location": "PLACEHOLDER"}, 0)) as rx:
        rx.default = (301, {"Location": target.url}, 0)
        _fire(engine, alert_settings, rx.url)
        deliver_until(engine, alert_settings, lambda: deliveries(engine)[0].status == "failed")
        assert target.requests == []
        schedule = alert_settings.webhook_retry_schedule_s
        assert len(rx.requests) == len(schedule) + 1  # the first try and one per retry, then it gives up
    (d,) = deliveries(engine)
    log = attempts(engine, d.id)
    assert {a.outcome for a in log} == {"redirect"} and "not followed" in log[0].error
    ep = endpoint(engine)  # it never worked: disabled, the owner told
    assert ep.status == "disabled" and "retry schedule" in ep.disabled_reason


def test_a_hanging_receiver_is_cut_off(engine, alert_settings):
    settings = alert_settings.model_copy(update={"webhook_timeout_s": 0.5})
    with Receiver(script={1: (200, {}, 15)}) as rx:
        _fire(engine, settings, rx.url)
        started = time.monotonic()
        report = deliver_pending(engine, settings)
        assert time.monotonic() - started < 8  # cut off after 0.5 s of silence, not after 15 s
        assert report.outcomes == {"timeout": 1} and report.retrying == 1
        deliver_until(engine, settings, lambda: deliveries(engine)[0].status == "succeeded")
        assert len({r["headers"]["webhook-id"] for r in rx.requests}) == 1


def test_manual_redelivery_keeps_the_webhook_id(engine, alert_settings):
    with Receiver() as rx:
        _fire(engine, alert_settings, rx.url)
        deliver_pending(engine, alert_settings)
        (d,) = deliveries(engine)
        attempt = redeliver(engine, alert_settings, d.id)
        requests = rx.wait_for(2)
    assert attempt.manual and attempt.outcome == "success" and attempt.number == 2
    assert requests[0]["headers"]["webhook-id"] == requests[1]["headers"]["webhook-id"] == d.webhook_id
    assert requests[0]["body"] == requests[1]["body"]


def test_send_time_check_refuses_what_creation_allowed(engine, alert_settings):
    # The URL was accepted while loopback was allowed; a deployment without the switch must not send.
    with Receiver() as rx:
        _fire(engine, alert_settings, rx.url)
        strict = alert_settings.model_copy(update={"allow_loopback_webhooks": False})
        report = deliver_pending(engine, strict)
        assert report.outcomes == {"blocked": 1} and rx.requests == []
    (d,) = deliveries(engine)
    assert "loopback" in attempts(engine, d.id)[0].error


def test_the_connection_is_pinned_to_the_vetted_address():
    # "hooks.example.test" does not resolve on this machine: the request can only arrive if the
    # sender connects to the vetted IP and never resolves the name again.
    with Receiver() as rx:
        port = int(rx.url.split(":")[2].split("/")[0])
        vetted = ssrf.vet_url(f"http://hooks.example.test:{port}/hook?x=1", allow_http=True, allow_loopback=True,
                              resolver=lambda host, p: ["127.0.0.1"])
        response = ssrf.send_pinned(vetted, content=b"{}", headers={"content-type": "application/json"},
                                    timeout_s=2, connect_timeout_s=1, max_response_bytes=1000)
        (request,) = rx.wait_for(1)
    assert response.status_code == 200 and response.address == "127.0.0.1"
    assert request["headers"]["Host"] == f"hooks.example.test:{port}" and request["path"] == "/hook?x=1"


def test_response_body_is_capped(engine, alert_settings):
    # The receiver promises 100 MB, sends 64 KB and stalls: the sender stops at its cap at once
    # instead of waiting for the rest (which would take the whole read timeout).
    settings = alert_settings.model_copy(update={"webhook_max_response_bytes": 1024, "webhook_timeout_s": 4.0})
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100000000\r\n\r\n" + b"x" * 65536)
            stop.wait(15)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        _fire(engine, settings, f"http://127.0.0.1:{listener.getsockname()[1]}/hook")
        started = time.monotonic()
        report = deliver_pending(engine, settings)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
    assert report.succeeded == 1 and elapsed < 3
    (d,) = deliveries(engine)
    assert attempts(engine, d.id)[0].response_excerpt == "x" * 500


def test_deliveries_of_a_paused_subscription_wait(engine, alert_settings):
    from observatory.alerts import subscriptions as S

    with Receiver() as rx:
        created = _fire(engine, alert_settings, rx.url)
        S.set_status(engine, created.owner_token, created.subscription.public_id, "paused")
        assert deliver_pending(engine, alert_settings).attempted == 0
        S.set_status(engine, created.owner_token, created.subscription.public_id, "active")
        assert deliver_pending(engine, alert_settings).succeeded == 1
        assert len(rx.wait_for(1)) == 1


def test_repeat_and_resolve_notifications(engine, alert_settings):
    with Receiver() as rx:
        _fire(engine, alert_settings, rx.url)
        deliver_pending(engine, alert_settings)
        with Session(engine) as session:
            (event,) = session.exec(select(AlertEvent)).all()
        # Nothing new on the same data, until the repeat interval has passed.
        assert evaluate(engine, alert_settings).deliveries == 0
        later = event.created_at + timedelta(seconds=alert_settings.alert_repeat_interval_s + 1)
        report = evaluate(engine, alert_settings, now=later)
        assert len(report.repeated) == 1 and report.deliveries == 1
        seed_mla_month(engine, month=2, mla=0, gqa=10)
        report = evaluate(engine, alert_settings, now=later + timedelta(hours=1))
        assert len(report.resolved) == 1
        deliver_pending(engine, alert_settings, now=later + timedelta(hours=2))  # the clock of the evaluations
        requests = rx.wait_for(3)
    kinds = [(json.loads(r["body"])["type"], json.loads(r["body"])["data"]["notification_reason"]) for r in requests]
    assert kinds == [("alert.firing", "new"), ("alert.firing", "repeat"), ("alert.resolved", "resolved")]
    assert len({r["headers"]["webhook-id"] for r in requests}) == 3  # three events, three ids


def test_every_crawl_evaluates_and_delivers(engine, alert_settings):
    from observatory import pipeline
    from observatory.store.db import session_scope
    from observatory.store.tables import CrawlRun

    with Receiver() as rx:
        subscribe(engine, alert_settings, rx.url)
        seed_mla_month(engine)
        with session_scope(engine) as session:
            run = CrawlRun(status="ok", new=5)
            session.add(run)
        results = pipeline.after_crawl(engine, alert_settings, run)
        assert results["alerts"] == "ok"
        (request,) = rx.wait_for(1)
    with Session(engine) as session:
        (event,) = session.exec(select(AlertEvent)).all()
    assert event.crawl_run_id == run.id
    assert json.loads(request["body"])["type"] == "alert.firing"
