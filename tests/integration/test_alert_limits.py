"""Abuse limits on the anonymous write paths (issue 14): new owners per client address, shared by
every worker through the store; a global cap on channels awaiting verification."""

from __future__ import annotations

import httpx
import pytest
from alert_support import MLA_RULE, Receiver, alert_settings, seed_mla_month  # noqa: F401  (a fixture)
from fastapi.testclient import TestClient

from observatory.alerts.delivery import deliver_pending
from observatory.alerts.evaluate import evaluate
from observatory.web.app import create_app

BODY = {"name": "watch MLA", "rules": [MLA_RULE]}


@pytest.fixture
def limited(alert_settings, engine):
    return alert_settings.model_copy(update={"subscribe_burst": 3, "subscribe_per_hour": 1.0})


def test_new_owners_per_address_are_limited_across_workers(limited):
    """Two apps on one store stand for two web workers: they draw from one bucket."""
    with TestClient(create_app(limited)) as first, TestClient(create_app(limited)) as second:
        answers = [client.post("/api/v1/subscriptions", json=BODY) for client in (first, second, first, second)]
        assert [a.status_code for a in answers] == [201, 201, 201, 429]
        refused = answers[-1]
        assert refused.json()["error"].startswith("too many new subscriptions from this address")
        assert 3000 <= int(refused.headers["Retry-After"]) <= 3600  # one token an hour

        # An owner adding to its own subscriptions is no new owner: its token is the limit (50).
        token = answers[0].json()["owner_token"]
        more = first.post("/api/v1/subscriptions", json=BODY, headers={"Authorization": f"Bearer {token}"})
        assert more.status_code == 201

        # Throttled before the input is read: this name is never looked up (422 "does not resolve").
        hook = second.post("/api/v1/subscriptions", json={**BODY, "webhook_url": "https://never-looked-up.invalid/"})
        assert hook.status_code == 429

        form = first.post("/alerts/subscribe", data={"name": "x", "kind": "new_dialect"},
                          headers={"origin": "http://testserver"})
        assert form.status_code == 429 and "too many new subscriptions" in form.text


def test_channels_awaiting_verification_are_capped(alert_settings, engine):
    capped = alert_settings.model_copy(update={"max_unverified_endpoints": 2})
    with Receiver() as rx, TestClient(create_app(capped)) as client:
        for _ in range(2):
            assert client.post("/api/v1/subscriptions", json={**BODY, "webhook_url": rx.url}).status_code == 201
        full = client.post("/api/v1/subscriptions", json={**BODY, "webhook_url": rx.url})
        assert full.status_code == 503 and "waiting to be verified" in full.json()["error"]
        assert client.post("/api/v1/subscriptions", json=BODY).status_code == 201  # a feed needs no channel

        seed_mla_month(engine)  # the rule fires; a delivery answered 2xx verifies both endpoints
        evaluate(engine, capped)
        deliver_pending(engine, capped)
        assert len(rx.requests) == 2
        assert client.post("/api/v1/subscriptions", json={**BODY, "webhook_url": rx.url}).status_code == 201


@pytest.mark.slow
def test_the_limit_holds_across_the_worker_processes_of_a_real_server(tmp_path):
    from observatory.testing.server import offline_env, running_server

    env = offline_env(tmp_path / "data", OBSERVATORY_SUBSCRIBE_BURST="3", OBSERVATORY_SUBSCRIBE_PER_HOUR="1")
    with running_server(tmp_path / "data", "--workers", "2", "--no-scheduler", env=env) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:  # new connections reach both workers
            statuses = [client.post("/api/v1/subscriptions", json={"name": "n", "rules": [{"kind": "new_dialect"}]},
                                    headers={"connection": "close"}).status_code for _ in range(8)]
    assert sorted(statuses) == [201] * 3 + [429] * 5


def test_ipv6_clients_are_throttled_by_their_64_and_ipv4_by_address(limited):
    """Issue 21: twenty addresses from one /64 made 200 owners. Now the /64 is one bucket."""
    def post(address: str) -> httpx.Response:
        with TestClient(create_app(limited), client=(address, 40000)) as client:
            return client.post("/api/v1/subscriptions", json=BODY)

    same_64 = [f"2001:db8:1:2::{i:x}" for i in range(1, 6)] + ["2001:db8:1:2:ffff:ffff:ffff:ffff"]
    codes = [post(address).status_code for address in same_64]
    assert codes == [201, 201, 201, 429, 429, 429]  # burst 3 for the whole /64
    refused = post("2001:db8:1:2:abcd::1")
    assert "2001:db8:1:2::/64" in refused.json()["error"] and "Retry-After" in refused.headers
    assert post("2001:db8:1:3::1").status_code == 201  # the next /64 is another network

    # IPv4 by address: a neighbour is another client; an IPv4-mapped spelling is the same one.
    assert [post("198.51.100.7").status_code for _ in range(3)] == [201, 201, 201]
    assert post("::ffff:198.51.100.7").status_code == 429
    assert post("198.51.100.8").status_code == 201


def test_new_owners_from_all_networks_share_an_overall_cap(limited):
    capped = limited.model_copy(update={"subscribe_global_per_hour": 4.0})
    answers = []
    for i in range(6):  # six networks, each well within its own bucket
        with TestClient(create_app(capped), client=(f"2001:db8:{i + 1}::1", 40000)) as client:
            answers.append(client.post("/api/v1/subscriptions", json=BODY))
    assert [a.status_code for a in answers] == [201, 201, 201, 201, 503, 503]
    over = answers[-1]
    assert over.json()["error"].startswith("too many new subscriptions from all clients")
    assert set(over.json()) == {"ok", "error", "errors", "status"} and over.json()["status"] == 503
    assert 1 <= int(over.headers["Retry-After"]) <= 900  # 4 an hour: one back within 15 minutes
