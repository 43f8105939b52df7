"""Alerts over HTTP: the subscription API (owners only), alert lists, Atom feeds, the pages."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import feedparser
import pytest
from alert_support import (  # noqa: F401  (alert_settings is a fixture)
    MLA_RULE,
    Receiver,
    alert_settings,
    seed_mla_month,
)
from fastapi.testclient import TestClient

from observatory.alerts.delivery import deliver_pending
from observatory.alerts.evaluate import evaluate
from observatory.web.app import create_app

CUSTOM_RULE = {"kind": "kind_share", "params": {"kind": "MLA", "threshold": 0.1, "min_models": 5},
               "population": {"min_downloads": 50}}


@pytest.fixture
def client(alert_settings, engine):
    with TestClient(create_app(alert_settings), base_url="http://observatory.test") as c:
        yield c


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def create(client, rules=(MLA_RULE,), token: str | None = None, **extra) -> dict:
    response = client.post("/api/v1/subscriptions", json={"name": "watch MLA", "rules": list(rules), **extra},
                           headers=auth(token) if token else {})
    assert response.status_code == 201, response.text
    return response.json()


def test_subscription_lifecycle(client):
    with Receiver() as rx:
        created = create(client, webhook_url=rx.url)
    token, sub = created["owner_token"], created["subscription"]
    assert token.startswith("obs_") and created["webhook_secret"].startswith("whsec_")
    assert sub["status"] == "active" and sub["webhook"]["status"] == "active"
    assert sub["webhook"]["secret_hint"] == created["webhook_secret"][:10] + "…"
    assert sub["rules"][0]["title"] == "Share of MLA >= 20% (month)"
    assert re.fullmatch(r"http://observatory\.test/alerts/feeds/[\w-]{40,}\.atom", sub["feed_url"])

    shown = client.get(f"/api/v1/subscriptions/{sub['id']}", headers=auth(token))
    assert shown.status_code == 200
    assert token not in shown.text and created["webhook_secret"] not in shown.text  # shown once only

    second = create(client, rules=[{"kind": "new_dialect"}], token=token)
    assert second["owner_token"] is None and second["webhook_secret"] is None
    listed = client.get("/api/v1/subscriptions", headers=auth(token)).json()["subscriptions"]
    assert [s["id"] for s in listed] == [sub["id"], second["subscription"]["id"]]

    paused = client.post(f"/api/v1/subscriptions/{sub['id']}/pause", headers=auth(token)).json()
    assert paused["subscription"]["status"] == "paused"
    resumed = client.post(f"/api/v1/subscriptions/{sub['id']}/resume", headers=auth(token)).json()
    assert resumed["subscription"]["status"] == "active"
    assert client.delete(f"/api/v1/subscriptions/{sub['id']}", headers=auth(token)).json() == \
        {"ok": True, "deleted": sub["id"]}
    assert client.get(f"/api/v1/subscriptions/{sub['id']}", headers=auth(token)).status_code == 404
    assert len(client.get("/api/v1/subscriptions", headers=auth(token)).json()["subscriptions"]) == 1


def test_one_owner_cannot_see_or_change_another(client, engine, alert_settings):
    with Receiver() as rx:
        a = create(client, rules=[CUSTOM_RULE], webhook_url=rx.url)
        b = create(client)
        seed_mla_month(engine)
        evaluate(engine, alert_settings)
        deliver_pending(engine, alert_settings)
    a_id, a_token, b_token = a["subscription"]["id"], a["owner_token"], b["owner_token"]
    delivery = client.get(f"/api/v1/subscriptions/{a_id}/deliveries", headers=auth(a_token)).json()["deliveries"][0]
    for method, path in [
        ("get", f"/api/v1/subscriptions/{a_id}"),
        ("post", f"/api/v1/subscriptions/{a_id}/pause"),
        ("post", f"/api/v1/subscriptions/{a_id}/webhook/enable"),
        ("delete", f"/api/v1/subscriptions/{a_id}"),
        ("get", f"/api/v1/subscriptions/{a_id}/deliveries"),
        ("post", f"/api/v1/subscriptions/{a_id}/deliveries/{delivery['id']}/redeliver"),
    ]:
        response = client.request(method, path, headers=auth(b_token))
        assert response.status_code == 404, (method, path)
        assert response.json()["ok"] is False
        missing = client.request(method, path)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert [s["id"] for s in client.get("/api/v1/subscriptions", headers=auth(b_token)).json()["subscriptions"]] \
        == [b["subscription"]["id"]]
    assert client.get(f"/api/v1/subscriptions/{a_id}", headers=auth(a_token)).json()["subscription"]["status"] \
        == "active"  # B's pause and delete changed nothing

    # The alert of A's own rule is A's business; the built-in rules' alerts are public.
    fired = client.get("/api/v1/alerts", headers=auth(a_token)).json()["alerts"]
    (custom,) = [x for x in fired if not x["rule"]["built_in"]]
    assert custom["rule"]["population"]["min_downloads"] == 50
    assert client.get("/api/v1/alerts").json()["alerts"] == []  # no built-in rules run in this test
    b_sees = client.get("/api/v1/alerts", headers=auth(b_token)).json()["alerts"]
    assert len(b_sees) == 1 and b_sees[0]["fingerprint"] != custom["fingerprint"]  # only B's own rule
    assert client.get(f"/api/v1/alerts/{custom['fingerprint']}", headers=auth(b_token)).status_code == 404
    detail = client.get(f"/api/v1/alerts/{custom['fingerprint']}", headers=auth(a_token)).json()
    assert detail["events"][0]["payload"]["type"] == "alert.firing"
    assert client.post("/api/v1/subscriptions", json={"name": "x", "rules": [MLA_RULE]},
                       headers=auth("obs_not-a-real-token-at-all")).status_code == 401


def test_delivery_log_and_manual_redelivery(client, engine, alert_settings):
    with Receiver(script={1: (500, {}, 0)}) as rx:
        created = create(client, webhook_url=rx.url)
        token, sub_id = created["owner_token"], created["subscription"]["id"]
        seed_mla_month(engine)
        evaluate(engine, alert_settings)
        deliver_pending(engine, alert_settings)
        log = client.get(f"/api/v1/subscriptions/{sub_id}/deliveries", headers=auth(token)).json()
        (d,) = log["deliveries"]
        assert d["status"] == "pending" and d["attempts"] == 1 and d["last_status_code"] == 500
        assert d["attempt_log"][0]["outcome"] == "throttled" and d["next_attempt_at"] is not None
        again = client.post(f"/api/v1/subscriptions/{sub_id}/deliveries/{d['id']}/redeliver", headers=auth(token))
        assert again.status_code == 200, again.text
        body = again.json()
        assert body["attempt"]["manual"] is True and body["attempt"]["outcome"] == "success"
        assert body["delivery"]["status"] == "succeeded" and body["delivery"]["id"] == d["id"]
        requests = rx.wait_for(2)
    assert {r["headers"]["webhook-id"] for r in requests} == {d["id"]}
    filtered = client.get(f"/api/v1/subscriptions/{sub_id}/deliveries?status=failed", headers=auth(token)).json()
    assert filtered["deliveries"] == [] and filtered["next"] is None
    assert client.get(f"/api/v1/subscriptions/{sub_id}/deliveries?before=x", headers=auth(token)).status_code == 422


@pytest.mark.parametrize(("body", "words"), [
    ({"name": "x", "rules": [{"kind": "kind_share", "params": {"threshold": 3}}]},
     "rules.0.kind_share.params.threshold: Input should be less than or equal to 1"),
    ({"name": "x", "rules": [{"kind": "kind_share", "params": {"bogus": 1}}]},
     "rules.0.kind_share.params.bogus: Extra inputs are not permitted"),
    ({"name": "x", "rules": [{"kind": "kind_share", "params": {"min_models": 2.5}}]}, "params.min_models"),
    ({"name": "x", "rules": [{"kind": "kind_share", "params": {"min_models": "5"}}]}, "params.min_models"),
    ({"name": "x", "rules": [{"kind": "weather"}]}, "rules.0: Input tag 'weather'"),
    ({"name": "x", "rules": []}, "rules"),
    ({"name": "", "rules": [MLA_RULE]}, "name"),
    ({"name": " \t\x1c", "rules": [MLA_RULE]}, "name"),
    ({"name": "x", "rules": [MLA_RULE], "email": "a\x1cb@example.com"}, "email"),
    ({"name": "\u0085\u00a0", "rules": [MLA_RULE]}, "name"),
    ({"name": "x", "rules": [MLA_RULE], "email": "k\u0085\u0126\u008bX$@yPWAQwP.petGiQpeAfPchuNBqBcQp"}, "email"),
    ({"name": "x", "rules": [MLA_RULE], "colour": "red"}, "colour"),
    ({"name": "x", "rules": [MLA_RULE], "webhook_url": "http://169.254.169.254/latest/meta-data/"}, "metadata"),
    ({"name": "x", "rules": [MLA_RULE], "webhook_url": "http://10.0.0.1/"}, "private"),
    ({"name": "x", "rules": [MLA_RULE], "webhook_url": "http://0x0a000001/"}, "private"),
    ({"name": "x", "rules": [MLA_RULE], "webhook_url": "http://user@127.0.0.1/"}, "credentials"),
    ({"name": "x", "rules": [MLA_RULE], "webhook_url": "file:///etc/passwd"}, "scheme"),
    ({"name": "x", "rules": [{"kind": "new_dialect", "population": {"author": "../etc"}}]}, "population.author"),
])
def test_bad_subscriptions_get_422_and_store_nothing(client, body, words):
    response = client.post("/api/v1/subscriptions", json=body)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["ok"] is False and error["status"] == 422 and words in error["error"]


def test_what_the_schema_allows_is_accepted(client):
    """Integral numbers (JSON Schema counts 5.0 as an integer) and every parameter at its bounds."""
    rule = {"kind": "kind_share", "params": {"min_models": 5.0, "threshold": 1, "hysteresis": 0.5},
            "population": {"min_downloads": 1000.0, "author": "deepx"}}
    sub = create(client, rules=[rule])["subscription"]
    assert sub["rules"][0]["params"]["min_models"] == 5 and sub["rules"][0]["population"]["min_downloads"] == 1000


def test_subscriptions_per_owner_are_capped_with_a_conflict(client, monkeypatch):
    from observatory.alerts import subscriptions

    monkeypatch.setattr(subscriptions, "MAX_SUBSCRIPTIONS_PER_OWNER", 2)
    token = create(client)["owner_token"]
    create(client, token=token)
    full = client.post("/api/v1/subscriptions", json={"name": "third", "rules": [MLA_RULE]}, headers=auth(token))
    assert full.status_code == 409 and full.json()["error"] == "at most 2 subscriptions per owner"
    assert len(client.get("/api/v1/subscriptions", headers=auth(token)).json()["subscriptions"]) == 2


def test_a_token_that_is_sent_must_be_valid(client):
    """Anonymous reads of the public alert lists are fine; a wrong token is refused, never read as
    anonymous (its owner would silently see less than they asked for)."""
    owner = create(client)["owner_token"]
    for path in ("/api/v1/alert-events", "/api/v1/alerts", "/api/v1/alerts/0123456789abcdef"):
        assert client.get(path).status_code in (200, 404), path
        assert client.get(path, headers=auth(owner)).status_code in (200, 404), path
        for bad, reason in (("obs_not-a-real-token-at-all", "unknown owner token"), ("short", "malformed")):
            refused = client.get(path, headers=auth(bad))
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer", path
            body = refused.json()
            assert body["ok"] is False and body["status"] == 401 and reason in body["error"], path


def test_method_not_allowed_lists_every_method_of_the_path(client):
    """GET and POST of one path are separate routes; the 405 must name both (RFC 9110 Allow)."""
    for method, path, allowed in (
        ("PUT", "/api/v1/subscriptions", "GET, POST"),
        ("OPTIONS", "/api/v1/subscriptions", "GET, POST"),
        ("PATCH", "/api/v1/subscriptions/sub_abcdef", "DELETE, GET"),
        ("DELETE", "/api/v1/alert-events", "GET"),
        ("DELETE", "/alerts/manage", "GET, POST"),
    ):
        response = client.request(method, path)
        assert response.status_code == 405 and response.headers["allow"] == allowed, (method, path)
        assert response.json() == {"ok": False, "error": "Method Not Allowed", "errors": ["Method Not Allowed"],
                                   "status": 405}
    page = client.request("PUT", "/alerts/manage", headers={"accept": "text/html"})
    assert page.status_code == 405 and page.headers["allow"] == "GET, POST" and "<html" in page.text


def test_loopback_webhooks_need_the_test_switch(engine, alert_settings):
    strict = alert_settings.model_copy(update={"allow_loopback_webhooks": False})
    with TestClient(create_app(strict)) as c:
        response = c.post("/api/v1/subscriptions", json={"name": "x", "rules": [MLA_RULE],
                                                          "webhook_url": "http://127.0.0.1:9/hook"})
        assert response.status_code == 422 and "loopback" in response.json()["error"]


def test_rule_catalogue_and_openapi(client):
    catalogue = client.get("/api/v1/alert-rules").json()
    assert {k["name"] for k in catalogue["kinds"]} == {"median_g_shift", "kind_share", "g_over_16_share",
                                                       "tp8_fill_share", "release_changed", "new_dialect"}
    spec = client.get("/api/v1/openapi.json").json()
    for path in ("/api/v1/subscriptions", "/api/v1/subscriptions/{sub_id}", "/api/v1/alerts",
                 "/api/v1/subscriptions/{sub_id}/deliveries/{delivery_id}/redeliver"):
        for operation in spec["paths"][path].values():
            assert {"401", "404", "422"} <= set(operation["responses"]), path
            ok = next(code for code in operation["responses"] if code.startswith("2"))
            assert "$ref" in str(operation["responses"][ok]["content"]), path


def _fire(client, engine, settings, **extra) -> dict:
    created = create(client, **extra)
    seed_mla_month(engine)
    evaluate(engine, settings)
    return created


def test_public_atom_feed_with_conditional_get(client, engine, alert_settings):
    settings = alert_settings.model_copy(update={"alert_builtin_rules": True})
    asked = datetime.now(UTC).replace(microsecond=0)
    empty = client.get("/alerts/feed.atom")
    assert empty.status_code == 200 and feedparser.parse(empty.content).entries == []
    # An empty feed with no rule yet says it is current as of the request, not a made-up 2020-01-01
    # (with rules, it has been empty since the newest rule's creation).
    updated = datetime(*feedparser.parse(empty.content).feed.updated_parsed[:6], tzinfo=UTC)
    assert "2020-01-01" not in empty.text and updated >= asked
    _fire(client, engine, settings)

    first = client.get("/alerts/feed.atom")
    assert first.headers["content-type"].startswith("application/atom+xml")
    feed = feedparser.parse(first.content)
    assert not feed.bozo and feed.feed.title == "GQA Observatory alerts"
    titles = [e.title for e in feed.entries]
    assert any(t.startswith("[FIRING] The share of MLA is 20.0%") for t in titles)
    assert all(e.id.startswith("urn:uuid:") and e.updated for e in feed.entries)
    assert any(link.href.startswith("http://observatory.test/trends") for e in feed.entries for link in e.links)

    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert client.get("/alerts/feed.atom", headers={"If-None-Match": etag}).status_code == 304
    assert client.get("/alerts/feed.atom", headers={"If-Modified-Since": modified}).status_code == 304
    assert client.get("/alerts/feed.atom", headers={"If-None-Match": '"other"'}).status_code == 200
    second = client.get("/alerts/feed.atom")
    assert second.content == first.content and [e.id for e in feedparser.parse(second.content).entries] == \
        [e.id for e in feed.entries]  # stable ids and bytes

    seed_mla_month(engine, month=2, mla=0, gqa=10)
    evaluate(engine, settings)  # the MLA alert resolves: a new entry, a new ETag
    third = client.get("/alerts/feed.atom", headers={"If-None-Match": etag})
    assert third.status_code == 200 and third.headers["etag"] != etag
    entries = feedparser.parse(third.content).entries
    assert entries[0].title.startswith("[RESOLVED]") and {e.id for e in feed.entries} < {e.id for e in entries}


def test_subscription_feed_is_private_and_carries_notices(client, engine, alert_settings):
    with Receiver(default=(410, {}, 0)) as rx:
        created = _fire(client, engine, alert_settings, rules=[CUSTOM_RULE], webhook_url=rx.url)
        deliver_pending(engine, alert_settings)
    url = created["subscription"]["feed_url"].removeprefix("http://observatory.test")
    feed = feedparser.parse(client.get(url).content)
    titles = sorted(e.title for e in feed.entries)
    assert titles[0].startswith("[FIRING] The share of MLA") and titles[1] == "[NOTICE] webhook endpoint disabled"
    assert feed.feed.title == "GQA Observatory alerts: watch MLA"
    # The custom rule's alert is not in the public feed, and a guessed token finds nothing.
    assert feedparser.parse(client.get("/alerts/feed.atom").content).entries == []
    assert client.get("/alerts/feeds/" + "A" * 43 + ".atom").status_code == 404
    assert client.get("/alerts/feeds/short.atom").status_code == 404


def test_alert_page_form_and_json_twin(client, engine, alert_settings):
    settings = alert_settings.model_copy(update={"alert_builtin_rules": True})
    _fire(client, engine, settings)
    page = client.get("/alerts")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<form class="controls" method="post" action="/alerts/subscribe">' in page.text
    assert 'type="application/atom+xml" href="/alerts/feed.atom"' in page.text
    assert "The share of MLA is 20.0%" in page.text
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text) and " style=" not in page.text  # CSP-safe
    twin = client.get("/alerts.json").json()
    assert twin["ok"] is True and twin["firing"][0]["summary"].startswith("The share of MLA is 20.0%")
    assert twin["feed_url"] == "http://observatory.test/alerts/feed.atom"

    form = {"name": "<script>alert(1)</script>", "kind": "kind_share", "attention_kind": "MLA",
            "direction": "above", "threshold_pct": "25", "period": "month", "send_resolved": "on"}
    created = client.post("/alerts/subscribe", data=form)
    assert created.status_code == 201 and created.headers["cache-control"] == "no-store"
    token = re.search(r"<code>(obs_[\w-]+)</code>", created.text).group(1)
    assert "<script>alert(1)</script>" not in created.text and "&lt;script&gt;" in created.text
    assert "Share of MLA &gt;= 25% (month)" in created.text

    manage = client.post("/alerts/manage", data={"token": token, "action": "show"})
    assert manage.status_code == 200 and "&lt;script&gt;alert(1)" in manage.text
    sub_id = re.search(r"<code>(sub_[\w-]+)</code>", manage.text).group(1)
    paused = client.post("/alerts/manage", data={"token": token, "subscription": sub_id, "action": "pause"})
    assert "paused" in paused.text
    api = client.get(f"/api/v1/subscriptions/{sub_id}", headers=auth(token)).json()
    assert api["subscription"]["status"] == "paused"
    wrong = client.post("/alerts/manage", data={"token": "obs_wrong-token-123", "action": "show"})
    assert wrong.status_code == 404


def test_page_form_errors_and_cross_site_posts(client):
    bad = client.post("/alerts/subscribe", data={"name": "x", "kind": "kind_share", "threshold_pct": "250"})
    assert bad.status_code == 422 and "threshold must be at most 1" in bad.text
    assert 'value="x"' in bad.text  # what was typed is kept
    ssrf = client.post("/alerts/subscribe", data={"name": "x", "kind": "new_dialect",
                                                  "webhook_url": "http://[::ffff:169.254.169.254]/"})
    assert ssrf.status_code == 422 and "IPv4-mapped" in ssrf.text
    for headers in ({"sec-fetch-site": "cross-site"}, {"origin": "https://evil.example"}):
        response = client.post("/alerts/subscribe", data={"name": "x", "kind": "new_dialect"}, headers=headers)
        assert response.status_code == 403
        assert client.post("/alerts/manage", data={"token": "t", "action": "show"}, headers=headers).status_code == 403
    same = client.post("/alerts/subscribe", data={"name": "ok", "kind": "new_dialect"},
                       headers={"sec-fetch-site": "same-origin"})
    assert same.status_code == 201
