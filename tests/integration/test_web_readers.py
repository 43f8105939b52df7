"""Readers are never blocked by a writer: while another connection holds SQLite's write lock
(``BEGIN IMMEDIATE``, as a crawl or an alert evaluation does), every page and every API GET still
answers, at once. A route that read through the write session would wait for the lock (15 s of
busy timeout) and then fail.

The app runs under uvicorn on 127.0.0.1 and the writer is a second, plain ``sqlite3`` connection
to the same file. Every GET route the app has is requested (the test fails on a route it does
not know, so a new route gets a URL here).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from alert_support import seed_mla_month
from api_testdata import built_store
from fastapi.routing import iter_route_contexts
from sqlmodel import select

from observatory.alerts import subscriptions
from observatory.alerts.evaluate import evaluate
from observatory.alerts.tables import Alert
from observatory.store.db import read_session
from observatory.testing.server import free_port
from observatory.web.app import create_app
from observatory.web.export_package import package_builder

MODEL = "alpha/llama-7b"
TIMEOUT_S = 5.0  # a blocked request would wait the 15 s busy timeout


@contextmanager
def serving(app):
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                           http="observatory.web.tcp:NoDelayHttpToolsProtocol"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    settings, engine = built_store(tmp_path_factory.mktemp("readers"), refresh=True)
    created = subscriptions.create(engine, settings, name="watch", rules=[{"kind": "new_dialect"}])
    seed_mla_month(engine)
    evaluate(engine, settings)
    with read_session(engine) as session:
        fingerprint = session.exec(select(Alert.fingerprint)).first()
    engine.dispose()
    app = create_app(settings)
    sub = created.subscription
    # One URL per GET route (path template -> URL); query strings reach the slower paths: a
    # streamed CSV, a population computed per request.
    urls = {
        "/api/v1/openapi.json": "/api/v1/openapi.json",
        "/api/v1/docs": "/api/v1/docs",
        "/api/v1/models": "/api/v1/models?kind=GQA&sort=group_size",
        "/api/v1/models.csv": "/api/v1/models.csv",
        "/api/v1/models/{model_id}": f"/api/v1/models/{MODEL}",
        "/api/v1/revisions/{revision_id}/config.json": "/api/v1/revisions/1/config.json",
        "/api/v1/trends": "/api/v1/trends?author=alpha",
        "/api/v1/trends.csv": "/api/v1/trends.csv?period=quarter",
        "/api/v1/hardware": "/api/v1/hardware",
        "/api/v1/hardware/{hardware_id}": "/api/v1/hardware/h100-sxm",
        "/api/v1/roofline": f"/api/v1/roofline?model={MODEL}&hardware=h100-sxm",
        "/api/v1/crawl/runs": "/api/v1/crawl/runs",
        "/api/v1/crawl/health": "/api/v1/crawl/health",
        "/trends": "/trends?author=alpha",
        "/trends.json": "/trends.json",
        "/trends.csv": "/trends.csv",
        "/": "/",
        "/index.json": "/index.json",
        "/.json": "/.json",
        "/models": "/models",
        "/models.json": "/models.json?kind=MLA",
        "/models.csv": "/models.csv?size=500",
        "/api/v1/exports/gqa-observatory-models.zip": "/api/v1/exports/gqa-observatory-models.zip",
        "/models/{model_path}": f"/models/{MODEL}",
        "/hardware": "/hardware",
        "/hardware.json": "/hardware.json",
        "/hardware.csv": "/hardware.csv",
        "/crawl": "/crawl",
        "/crawl.json": "/crawl.json",
        "/crawl.csv": "/crawl.csv",
        "/methodology": "/methodology",
        "/methodology.json": "/methodology.json",
        "/methodology.csv": "/methodology.csv",
        "/downloads/gqa-observatory-snapshot.zip": "/downloads/gqa-observatory-snapshot.zip",
        "/benchmarks": "/benchmarks",
        "/benchmarks.json": "/benchmarks.json",
        "/benchmarks.csv": "/benchmarks.csv",
        "/api/v1/alert-rules": "/api/v1/alert-rules",
        "/api/v1/alerts": "/api/v1/alerts",
        "/api/v1/alerts/{fingerprint}": f"/api/v1/alerts/{fingerprint}",
        "/api/v1/alert-events": "/api/v1/alert-events",
        "/api/v1/subscriptions": "/api/v1/subscriptions",
        "/api/v1/subscriptions/{sub_id}": f"/api/v1/subscriptions/{sub.public_id}",
        "/api/v1/subscriptions/{sub_id}/deliveries": f"/api/v1/subscriptions/{sub.public_id}/deliveries",
        "/alerts/feed.atom": "/alerts/feed.atom",
        "/alerts/feeds/{token}.atom": f"/alerts/feeds/{sub.feed_token}.atom",
        "/alerts": "/alerts",
        "/alerts.json": "/alerts.json",
        "/alerts/manage": "/alerts/manage",
        "/alerts/email/confirm": "/alerts/email/confirm?token=abc",
        "/alerts/email/unsubscribe": "/alerts/email/unsubscribe?token=abc",
        "/api/v1/claims": "/api/v1/claims",
        "/api/v1/research": "/api/v1/research?format=csv",
        "/api/v1/prices": "/api/v1/prices",
        "/api/v1/hardware-capacity": "/api/v1/hardware-capacity",
        "/claims": "/claims",
        "/claims.json": "/claims.json",
        "/claims.csv": "/claims.csv",
        "/research": "/research",
        "/research.json": "/research.json",
        "/research.csv": "/research.csv",
        "/prices": "/prices",
        "/prices.json": "/prices.json",
        "/prices.csv": "/prices.csv",
        "/api/v1/compare": "/api/v1/compare?models=alpha/llama-70b,gamma/latent-v3",
        "/api/v1/compare.csv": "/api/v1/compare.csv?models=alpha/llama-70b,gamma/latent-v3",
        "/api/v1/claims.csv": "/api/v1/claims.csv",
        "/api/v1/research.csv": "/api/v1/research.csv",
        "/api/v1/prices.csv": "/api/v1/prices.csv",
        "/api/v1/hardware-capacity.csv": "/api/v1/hardware-capacity.csv",
        "/compare": "/compare?models=alpha/llama-70b,gamma/latent-v3",
        "/compare.json": "/compare.json?models=alpha/llama-70b,gamma/latent-v3",
        "/compare.csv": "/compare.csv?models=alpha/llama-70b,gamma/latent-v3",
    }
    headers = {"Authorization": f"Bearer {created.owner_token}"}
    builder = package_builder(app)  # the data package is built before the lock is taken (it reads too)
    builder.start()
    assert builder.wait(60) is not None
    with serving(app) as base:
        yield {"app": app, "base": base, "db": settings.resolved_database_url.removeprefix("sqlite:///"),
               "urls": urls, "headers": headers, "settings": settings}


@contextmanager
def write_lock(db_path: str):
    """Another connection holding the write lock, with a write of its own not yet committed."""
    writer = sqlite3.connect(db_path, isolation_level=None, timeout=0.1)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE hub_model SET downloads = downloads + 1")
    try:
        yield
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_another_worker_starts_while_a_writer_holds_the_lock(site):
    """``serve --workers N`` starts N lifespans at once, beside a crawl's writes: on a store that
    is up to date, start-up only reads (migrations at head, snapshot present, nothing stale)."""
    from fastapi.testclient import TestClient

    with write_lock(site["db"]):
        started = time.monotonic()
        with TestClient(create_app(site["settings"])) as worker:
            assert worker.get("/api/v1/crawl/health").status_code == 200
        assert time.monotonic() - started < TIMEOUT_S


def test_every_get_route_has_a_url_here(site):
    routes = {route.path_format for route in iter_route_contexts(site["app"].routes)
              if route.methods and "GET" in route.methods}
    assert routes == set(site["urls"])


def test_pages_and_api_reads_answer_while_a_writer_holds_the_lock(site):
    headers, urls = site["headers"], site["urls"]
    with write_lock(site["db"]), httpx.Client(base_url=site["base"], headers=headers, timeout=TIMEOUT_S) as client:
        other_writer = sqlite3.connect(site["db"], isolation_level=None, timeout=0.1)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other_writer.execute("BEGIN IMMEDIATE")  # the lock is really held
        other_writer.close()
        for template, url in urls.items():
            started = time.monotonic()
            response = client.get(url)
            assert response.status_code == 200, (template, response.status_code, response.text[:300])
            assert time.monotonic() - started < TIMEOUT_S, template
        # ...and they read the last committed state, not the writer's pending one
        assert client.get(f"/api/v1/models/{MODEL}").json()["model"]["downloads"] == 5000
