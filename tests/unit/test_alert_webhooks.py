"""Standard Webhooks pieces, pure: payload limits, signatures, answer classes, retry timing."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from observatory.alerts import webhooks as W
from observatory.settings import Settings

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def test_secret_format():
    secret = W.new_secret()
    assert secret.startswith("whsec_") and len(secret) > 40 and W.new_secret() != secret
    assert W.secret_hint(secret).endswith("…") and len(W.secret_hint(secret)) < 15


def test_signature_verifies_with_the_reference_library():
    secret = W.new_secret()
    body = W.event_payload("alert.firing", NOW, {"summary": "x"})
    now = datetime.now(timezone.utc)
    headers = W.sign_headers(secret, "msg_abc", body, now)
    assert headers["webhook-id"] == "msg_abc" and headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert Webhook(secret).verify(body, headers) == json.loads(body)
    with pytest.raises(WebhookVerificationError):
        Webhook(W.new_secret()).verify(body, headers)  # another endpoint's secret
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace("x", "y"), headers)  # altered bytes
    stale = W.sign_headers(secret, "msg_abc", body, now - timedelta(minutes=10))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, stale)  # replayed outside the tolerance


def test_payload_shape_and_size_limit():
    models = [{"id": f"org/model-{i:04d}", "kind": "GQA", "group_size": 4.0, "note": "x" * 200} for i in range(400)]
    data = {"summary": "big", "details": {"models": models, "models_not_listed": 5,
                                          "before": {"models": list(models)}}, "links": {"trend": "http://t"}}
    body = W.event_payload("alert.firing", NOW, data)
    parsed = json.loads(body)
    assert set(parsed) == {"type", "timestamp", "data"}
    assert parsed["timestamp"] == "2026-11-30T12:00:00Z"
    assert len(body.encode()) <= W.MAX_PAYLOAD_BYTES
    details = parsed["data"]["details"]
    assert 0 < len(details["models"]) < 400
    assert len(details["models"]) + details["models_not_listed"] == 405  # nothing silently lost
    assert parsed["data"]["summary"] == "big" and parsed["data"]["links"] == {"trend": "http://t"}
    assert len(data["details"]["models"]) == 400  # the caller's data is not mutated


def test_payload_without_lists_that_is_still_too_big_drops_details():
    body = W.event_payload("alert.firing", NOW, {"summary": "s", "details": {"blob": "x" * 30_000}})
    assert json.loads(body)["data"]["details"] == {"truncated": True}


@pytest.mark.parametrize(("status", "headers", "outcome", "retry_after"), [
    (200, {}, "success", None),
    (204, {}, "success", None),
    (301, {"location": "https://elsewhere/"}, "redirect", None),
    (307, {}, "redirect", None),
    (400, {}, "failure", None),
    (404, {}, "failure", None),
    (410, {}, "gone", None),
    (429, {"retry-after": "120"}, "throttled", 120.0),
    (503, {"retry-after": "Mon, 30 Nov 2026 12:05:00 GMT"}, "throttled", 300.0),
    (500, {}, "throttled", None),
    (502, {"retry-after": "soon"}, "throttled", None),
])
def test_classify(status, headers, outcome, retry_after):
    got, error, after = W.classify(status, httpx.Headers(headers), NOW)
    assert got == outcome and after == retry_after
    assert (error is None) == (outcome == "success")
    if status == 301:
        assert "https://elsewhere/" in error and "not followed" in error


def test_retry_schedule_jitter_retry_after_and_give_up():
    settings = Settings(webhook_retry_schedule_s=[10, 100], webhook_retry_jitter=0.2, webhook_max_retry_after_s=500)
    rng = random.Random(1)
    delays = [W.retry_delay(1, settings, None, rng) for _ in range(200)]
    assert 8 <= min(delays) < max(delays) <= 12  # jittered around 10 s
    assert 80 <= W.retry_delay(2, settings, None, rng) <= 120
    assert W.retry_delay(3, settings, None, rng) is None  # schedule exhausted
    assert W.retry_delay(1, settings, 300, rng) == 300  # Retry-After asks for longer
    assert W.retry_delay(1, settings, 10_000, rng) == 500  # ... but is capped
    assert W.retry_delay(2, settings, 1, rng) >= 80  # a shorter Retry-After does not hurry us
