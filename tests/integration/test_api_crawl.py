"""/api/v1/crawl in-process: run list with keyset pages, and the health summary."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from observatory.crawler.tables import CrawlFailure, CrawlScope
from observatory.store.db import session_scope
from observatory.store.tables import CrawlRun, utcnow
from observatory.web.app import create_app


@pytest.fixture
def client(settings, engine):
    with TestClient(create_app(settings)) as c:
        yield c


def add_runs(engine, n: int) -> None:
    start = utcnow() - timedelta(hours=n)
    with session_scope(engine) as s:
        for i in range(n):
            ok = i % 3 != 2
            s.add(CrawlRun(started_at=start + timedelta(hours=i), finished_at=start + timedelta(hours=i, minutes=5),
                           status="ok" if ok else "failed", seen=10 * i, new=i, failed=0 if ok else 2,
                           failures_by_reason={} if ok else {"http_503": 2}, error=None if ok else "Hub 503"))


def test_empty_store(client):
    assert client.get("/api/v1/crawl/runs").json() == {"ok": True, "rows": [], "next": None, "next_url": None}
    health = client.get("/api/v1/crawl/health").json()
    assert health["last_run"] is None and health["last_success_at"] is None and health["lag_seconds"] is None
    assert health["failures_by_reason"] == {} and health["running"] is False


def test_runs_newest_first_in_pages(client, engine):
    add_runs(engine, 7)
    ids, url, pages = [], "/api/v1/crawl/runs?size=3", 0
    while url:
        r = client.get(url)
        body = r.json()
        ids += [row["id"] for row in body["rows"]]
        if body["next_url"]:
            assert r.headers["link"] == f'<{body["next_url"]}>; rel="next"'
        url, pages = body["next_url"], pages + 1
    assert ids == [7, 6, 5, 4, 3, 2, 1] and pages == 3
    failed = client.get("/api/v1/crawl/runs", params={"size": 500}).json()["rows"][4]  # run 3
    assert failed["status"] == "failed" and failed["failures_by_reason"] == {"http_503": 2}
    assert failed["error"] == "Hub 503"


def test_health(client, engine):
    add_runs(engine, 3)  # runs 1, 2 ok; run 3 failed
    mark = utcnow() - timedelta(hours=2)
    with session_scope(engine) as s:
        s.add(CrawlScope(name="default", created_mark=mark))
        s.add(CrawlFailure(model_id="org/gated", reason="gated"))
        s.add(CrawlFailure(model_id="org/gated2", reason="gated"))
        s.add(CrawlFailure(model_id="org/flaky", reason="http_503", transient=True))
        s.add(CrawlFailure(model_id="org/fixed", reason="not_json", resolved_at=utcnow()))
    body = client.get("/api/v1/crawl/health").json()
    assert body["last_run"]["id"] == 3 and body["last_run"]["status"] == "failed"
    runs = client.get("/api/v1/crawl/runs").json()["rows"]
    assert body["last_success_at"] == runs[1]["finished_at"]  # run 2
    assert 2 * 3600 - 60 < body["lag_seconds"] < 2 * 3600 + 60
    assert body["failures_by_reason"] == {"gated": 2, "http_503": 1}
    assert body["failures_retrying"] == 1


@pytest.mark.parametrize("params", [
    {"next": "abc"}, {"next": "-1"}, {"next": "1" * 19}, {"next": ""}, {"size": 0}, {"size": 501},
])
def test_bad_parameters(client, params):
    r = client.get("/api/v1/crawl/runs", params=params)
    assert r.status_code == 422 and r.json()["ok"] is False


def test_every_cursor_the_schema_allows_is_accepted(client, engine):
    """The cursor is the id of the last row shown; any id is a valid place to continue from."""
    add_runs(engine, 3)
    pattern = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/crawl/runs"]["get"]["parameters"]
    assert next(p for p in pattern if p["name"] == "next")["schema"]["anyOf"][0]["pattern"] == r"^[0-9]{1,18}$"
    for cursor, ids in (("0", []), ("2", [1]), ("000003", [2, 1]), ("9" * 18, [3, 2, 1])):
        body = client.get("/api/v1/crawl/runs", params={"next": cursor}).json()
        assert [row["id"] for row in body["rows"]] == ids, cursor
