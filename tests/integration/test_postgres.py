"""The same code on PostgreSQL: migrations, the write paths, trends, the model list, a crawl,
alerts, the app and the leases, each on a fresh database of a throwaway server
(``pg_support``). Where SQLite answers the same question, both stores are filled the same way
and must give the same answer; SQLite's answers are pinned against oracles elsewhere.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import date, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from api_testdata import SPECS, Spec, add_model, build
from crawler_support import LONG_AGO, assert_stored_exactly_once, failures, runs
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url
from sqlmodel import Session, func, select

from observatory.catalog.snapshot import load_entries, load_snapshot
from observatory.settings import Settings
from observatory.store import lease
from observatory.store.db import (
    alembic_config,
    current_revisions,
    import_table_modules,
    make_engine,
    session_scope,
    upgrade,
)
from observatory.store.history import expected_heads
from observatory.store.ingest import ConfigItem, record_configs, upsert_models
from observatory.store.queries import models as queries
from observatory.store.queries.trends import plotted_trend_rows, read_trends
from observatory.web.api.models import get_model_detail
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel, utcnow
from observatory.store.trends import Population, refresh_trends, trends_stale
from observatory.web.app import create_app

pytestmark = pytest.mark.postgres

LATE_UTC = Spec("zeta/late-in-the-day", "g4", (2024, 1, 31, 23, 30), 20, 7 * 10**9)  # Feb 1 in UTC+14


def _counts(engine) -> dict[str, int]:
    with Session(engine) as s:
        return {t.__name__: s.exec(select(func.count()).select_from(t)).one()
                for t in (HubModel, ConfigRevision, GeometryRow)}


# --- schema -------------------------------------------------------------------------------------

def test_upgrade_reaches_every_head_and_builds_exactly_the_declared_tables(pg_empty_url):
    upgrade(pg_empty_url)
    engine = make_engine(pg_empty_url)
    try:
        heads = expected_heads(ScriptDirectory.from_config(alembic_config(pg_empty_url)))
        assert len(heads) >= 4 and "0002_crawler" in heads  # one branch per domain
        assert current_revisions(engine) == heads
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                    import_table_modules().metadata)
        assert diff == [], f"tables and migrations disagree on PostgreSQL: {diff}"
        upgrade(pg_empty_url)  # idempotent
        assert current_revisions(engine) == heads
    finally:
        engine.dispose()


def test_the_store_runs_in_utc_on_a_server_that_does_not(pg_url, pg_engine):
    """The trap is armed (the private server's zone is UTC+14) and the store's sessions run in UTC."""
    import psycopg
    from pg_support import SERVER_TIME_ZONE, URL_ENV

    with pg_engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW TimeZone").scalar() == "UTC"
    if not os.environ.get(URL_ENV):
        url = make_url(pg_url)
        with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname=url.database) as plain:
            assert plain.execute("SHOW TimeZone").fetchone()[0] == SERVER_TIME_ZONE


# --- write paths --------------------------------------------------------------------------------

@pytest.mark.slow
def test_snapshot_loads_once_and_again_changes_nothing(pg_engine):
    n = len(load_entries())
    first = load_snapshot(pg_engine)
    assert first["models_added"] == n and first["revisions_added"] == n and first["errors"] == []
    assert _counts(pg_engine) == {"HubModel": n, "ConfigRevision": n, "GeometryRow": n}
    with Session(pg_engine) as s:
        before = [(m.id, m.current_revision_id, m.updated_at, m.created_at, m.tags)
                  for m in s.exec(select(HubModel).order_by(HubModel.id))]

    second = load_snapshot(pg_engine)
    assert second["models_added"] == second["models_updated"] == second["revisions_added"] == 0
    assert second["models_unchanged"] == n
    with Session(pg_engine) as s:
        after = [(m.id, m.current_revision_id, m.updated_at, m.created_at, m.tags)
                 for m in s.exec(select(HubModel).order_by(HubModel.id))]
    assert after == before
    assert all(created is None or created.utcoffset() == timedelta(0) for *_, created, _ in after)


@pytest.mark.slow
def test_snapshot_geometry_matches_sqlite(pg_engine, engine):
    load_snapshot(pg_engine)
    load_snapshot(engine)

    def geometry(eng):
        with Session(eng) as s:
            return {g.model_id: g.model_dump(exclude={"id", "revision_id", "derived_at"})
                    for g in s.exec(select(GeometryRow))}

    assert geometry(pg_engine) == geometry(engine)


def test_record_configs_batch(pg_engine):
    good = json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                       "num_key_value_heads": 8, "num_hidden_layers": 32})
    newer = json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                        "num_key_value_heads": 4, "num_hidden_layers": 32})
    with session_scope(pg_engine) as session:
        upsert_models(session, {"org/a": {"downloads": 5}, "org/b": {"tags": ["x", "y"]}})
        recorded = record_configs(session, [
            ConfigItem("org/a", good, "s1"),
            ConfigItem("org/b", "{not json", "s1"),
            ConfigItem("org/a", newer, "s2"),
            ConfigItem("org/a", good, "s1"),  # the same file twice in one batch: stored once
        ])
    assert [r.created for r in recorded] == [True, True, True, True]
    assert recorded[0].revision_id == recorded[3].revision_id
    assert len({r.revision_id for r in recorded}) == 3
    assert recorded[1].parse_status == "error" and recorded[1].parse_error
    with session_scope(pg_engine) as session:
        again = record_configs(session, [ConfigItem("org/a", good, "s1"), ConfigItem("org/b", "{not json", "s1")])
        upsert_models(session, {"org/a": {"downloads": 7}})
    assert [(r.revision_id, r.created) for r in again] == [(recorded[0].revision_id, False),
                                                          (recorded[1].revision_id, False)]
    with Session(pg_engine) as s:
        a, b = s.get(HubModel, "org/a"), s.get(HubModel, "org/b")
        assert a.current_revision_id == recorded[2].revision_id and a.downloads == 7 and a.author == "org"
        assert b.tags == ["x", "y"] and b.current_revision_id == recorded[1].revision_id
        geoms = s.exec(select(GeometryRow).where(GeometryRow.model_id == "org/a")
                       .order_by(GeometryRow.revision_id)).all()
        assert [g.group_size for g in geoms] == [4.0, 8.0]
        assert geoms[0].is_hybrid is False and geoms[0].warnings == [] and geoms[0].sources
    assert _counts(pg_engine) == {"HubModel": 2, "ConfigRevision": 3, "GeometryRow": 2}


# --- trends -------------------------------------------------------------------------------------

def _build_both(pg_engine, engine) -> None:
    for eng in (pg_engine, engine):
        build(eng)
        add_model(eng, LATE_UTC)


def test_trends_match_sqlite_and_bucket_by_utc_day(pg_engine, engine):
    _build_both(pg_engine, engine)
    assert trends_stale(pg_engine)
    pg_report, sqlite_report = refresh_trends(pg_engine), refresh_trends(engine)
    assert pg_report.models == sqlite_report.models and pg_report.points == sqlite_report.points
    assert not trends_stale(pg_engine)
    with Session(pg_engine) as pg, Session(engine) as lite:
        for population in (Population(), Population(min_downloads=1000), Population(author="alpha"),
                           Population(model_type="llama")):
            for period in ("week", "month", "quarter"):
                for weighting in ("count", "downloads"):
                    ours = read_trends(pg, population, period, weighting)
                    theirs = read_trends(lite, population, period, weighting)
                    assert ours.precomputed == population.precomputed
                    assert ours.points == theirs.points, (population, period, weighting)
        january = next(p for p in read_trends(pg, Population(), "month").points if p.period_start == date(2024, 1, 1))
        assert january.count == 1  # 23:30 UTC on Jan 31 is January, whatever the server's zone
        for args in [(3, date(2023, 1, 1), None), (3, None, date(2024, 1, 31)), (100, None, None)]:
            rows, total = plotted_trend_rows(pg, Population(), *args)
            assert (rows, total) == plotted_trend_rows(lite, Population(), *args), args
        assert plotted_trend_rows(pg, Population(), 100, date(2024, 1, 31), date(2024, 1, 31))[1] == 1


# --- the model list and one model ---------------------------------------------------------------

def _all_ids(session: Session, **params) -> list[str]:
    ids, token = [], None
    for _ in range(50):
        params_now = queries.ModelListParams.model_validate({**params, "size": 3, "next": token})
        page = queries.list_models(session, params_now)
        ids += [row.id for row in page.rows]
        token = page.next
        if token is None:
            return ids
    raise AssertionError("paging did not end")


LIST_FILTERS = [
    {}, {"kind": ["GQA"]}, {"kind": ["MHA", "MQA"]}, {"hybrid": True}, {"hybrid": False}, {"g_min": 8},
    {"g_min": 4, "g_max": 8}, {"author": "alpha"}, {"model_type": "llama"}, {"min_downloads": 1000},
    {"created_from": "2024-01-31", "created_to": "2024-01-31"},
    {"created_from": "2024-02-01", "created_to": "2024-02-01"},
    {"q": "LLAMA"}, {"q": "a.b-c_d"}, {"q": "%"}, {"kind": ["GQA"], "g_min": 4, "author": "alpha"},
]


def test_model_list_filters_sorts_and_pages_like_sqlite(pg_engine, engine):
    _build_both(pg_engine, engine)
    with Session(pg_engine) as pg, Session(engine) as lite:
        for sort in ("created_at", "downloads", "group_size", "kv_bytes_per_token", "id"):
            for order in ("asc", "desc"):
                ours = _all_ids(pg, sort=sort, order=order)
                assert ours == _all_ids(lite, sort=sort, order=order), (sort, order)
                assert sorted(ours) == sorted({s.id for s in SPECS} | {LATE_UTC.id})
        for filters in LIST_FILTERS:
            assert _all_ids(pg, **filters) == _all_ids(lite, **filters), filters
        assert _all_ids(pg, created_from="2024-01-31", created_to="2024-01-31") == [LATE_UTC.id]
        assert _all_ids(pg, q="%") == []


def test_model_detail_matches_sqlite(pg_engine, engine):
    _build_both(pg_engine, engine)
    volatile = {"derived_at", "fetched_at", "first_seen_at", "updated_at"}

    def detail(eng, model_id):
        with Session(eng) as s:
            return json.loads(get_model_detail(s, model_id).model_dump_json())

    def scrub(value):
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items() if k not in volatile}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    for model_id in ("alpha/llama-70b", "gamma/latent-v3", "beta/broken-config", LATE_UTC.id):
        ours = detail(pg_engine, model_id)
        assert scrub(ours) == scrub(detail(engine, model_id)), model_id
    assert ours["model"]["created_at"].startswith("2024-01-31T23:30:00")


# --- a crawl ------------------------------------------------------------------------------------

def test_crawl_against_the_stand_in_hub(pg_engine, hub, hub_settings):
    from observatory.crawler.health import crawler_health
    from observatory.crawler.run import crawl
    from observatory.testing.hub_standin import populate

    ids = populate(hub, 25)
    hub.add_repo("meta/gated", {"model_type": "llama"}, gated="manual")
    run = crawl(pg_engine, hub_settings, since=LONG_AGO)
    assert run.status == "ok" and (run.new, run.changed, run.failed) == (25, 0, 1)
    assert run.failures_by_reason == {"gated": 1}
    assert_stored_exactly_once(pg_engine, hub, ids)
    assert failures(pg_engine)["meta/gated"].reason == "gated"
    with Session(pg_engine) as s:
        first = s.get(HubModel, ids[0])
    assert first.created_at == hub.repos[ids[0]].created_at and first.created_at.utcoffset() == timedelta(0)

    hub.reset_counts()
    again = crawl(pg_engine, hub_settings)
    assert hub.counts["resolve_get"] == 0 and (again.new, again.changed) == (0, 0)
    assert [r.id for r in runs(pg_engine)] == [run.id, again.id]
    with Session(pg_engine) as s:
        health = crawler_health(s)
    assert health["last_run"]["id"] == again.id and health["last_run"]["status"] == "ok"
    assert health["failures_by_reason"] == {"gated": 1} and health["running"] is False


# --- alerts -------------------------------------------------------------------------------------

def test_alerts_fire_deliver_and_stay_quiet_on_the_same_data(pg_engine, settings):
    from alert_support import FAST, Receiver, seed_mla_month, subscribe

    from observatory.alerts.delivery import deliver_pending
    from observatory.alerts.evaluate import evaluate
    from observatory.alerts.tables import Alert, AlertDelivery

    alert_settings = settings.model_copy(update=FAST)
    with Receiver() as rx:
        subscribe(pg_engine, alert_settings, rx.url)
        seed_mla_month(pg_engine, month=1)
        first = evaluate(pg_engine, alert_settings)
        assert [n["kind"] for n in first.fired] == ["kind_share"] and first.deliveries == 1
        again = evaluate(pg_engine, alert_settings)
        assert (again.fired, again.resolved, again.deliveries) == ([], [], 0)
        report = deliver_pending(pg_engine, alert_settings)
        assert report.succeeded == 1 and len(rx.requests) == 1
        assert json.loads(rx.requests[0]["body"])["type"] == "alert.firing"
    with Session(pg_engine) as s:
        assert s.exec(select(Alert.status)).all() == ["firing"]
        assert s.exec(select(AlertDelivery.status)).all() == ["succeeded"]

    builtin = alert_settings.model_copy(update={"alert_builtin_rules": True})
    report = evaluate(pg_engine, builtin)
    assert report.rules > 1 and evaluate(pg_engine, builtin).fired == []


# --- spot-benchmarks ----------------------------------------------------------------------------

def test_bench_results_are_stored_and_read_back(pg_engine, settings):
    from observatory.bench.jobs import bench_models, bench_new_models
    from observatory.bench.store import (
        benchmarked_models,
        latest_results,
        results_for_model,
    )

    small = {"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
             "num_hidden_layers": 4}
    with session_scope(pg_engine) as session:
        upsert_models(session, {"org/small-gqa": {"downloads": 5000}})
        record_configs(session, [ConfigItem("org/small-gqa", json.dumps(small), "a" * 40)])
    rows = bench_models(pg_engine, ["org/small-gqa"], contexts=[64], batches=[1, 2], repeats=1,
                        copy_bytes=2**20, rotate_bytes=2**20)
    assert [(r.batch, r.status) for r in rows] == [(1, "ok"), (2, "ok")] and rows[0].id is not None
    with Session(pg_engine) as s:
        shown = results_for_model(s, "org/small-gqa")
        assert [r["batch"] for r in shown] == [2, 1] and shown[0]["speedups"]
        assert [(r["model_id"], r["batch"]) for r in latest_results(s)] == [("org/small-gqa", 2), ("org/small-gqa", 1)]
        assert "org/small-gqa" in benchmarked_models(s, rows[0].device)
    assert bench_new_models(pg_engine, settings.model_copy(update={"bench_context": 64, "bench_repeats": 1})) == []


# --- the app --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_api_and_pages_on_postgres(pg_url, tmp_path):
    settings = Settings(database_url=pg_url, data_dir=tmp_path / "data", autoload_snapshot=True)
    app = create_app(settings)
    try:
        with TestClient(app) as client:
            listing = client.get("/api/v1/models", params={"kind": "GQA", "sort": "group_size", "size": 5})
            assert listing.status_code == 200, listing.text
            body = listing.json()
            assert len(body["rows"]) == 5 and body["next"]
            assert all(r["attention_kind"] == "GQA" for r in body["rows"])
            groups = [r["group_size"] for r in body["rows"]]
            assert groups == sorted(groups, reverse=True)
            nxt = client.get(body["next_url"])
            assert nxt.status_code == 200 and nxt.json()["rows"][0]["group_size"] <= groups[-1]

            detail = client.get("/api/v1/models/meta-llama/Llama-2-70b-hf")
            assert detail.status_code == 200, detail.text
            assert detail.json()["geometry"]["num_kv_heads"] == 8
            assert client.get("/api/v1/models/nobody/nothing").status_code == 404

            trends = client.get("/api/v1/trends", params={"period": "quarter"})
            assert trends.status_code == 200, trends.text
            assert trends.json()["precomputed"] is True and trends.json()["points"]
            assert client.get("/api/v1/trends", params={"author": "Qwen"}).status_code == 200
            assert client.get("/api/v1/crawl/health").status_code == 200
            assert client.get("/api/v1/alerts").status_code == 200
            created = client.post("/api/v1/subscriptions", json={
                "name": "pg", "rules": [{"kind": "kind_share", "params": {"kind": "MLA", "threshold": 0.2}}]})
            assert created.status_code == 201, created.text

            for page in ("/", "/trends", "/models", "/models/deepseek-ai/DeepSeek-V3", "/crawl", "/alerts"):
                response = client.get(page)
                assert response.status_code == 200, (page, response.text[:500])

            # A NUL in a request (PostgreSQL text cannot hold one) is an ordinary value, not a 500.
            for params in ({"q": "llama\x00"}, {"author": "meta\x00"}, {"model_type": "\x00"}):
                response = client.get("/api/v1/models", params=params)
                assert response.status_code == 200 and response.json()["rows"] == [], (params, response.text)
            assert client.get("/models", params={"q": "\x00"}).status_code == 200
    finally:
        app.state.engine.dispose()


# --- leases -------------------------------------------------------------------------------------

def test_lease_is_held_by_one_holder_at_a_time(pg_engine):
    a, b = lease.new_holder(), lease.new_holder()
    assert lease.acquire(pg_engine, "scheduler", a, 60)
    assert lease.acquire(pg_engine, "scheduler", a, 60)  # re-acquiring our own lease renews it
    assert not lease.acquire(pg_engine, "scheduler", b, 60)
    assert lease.renew(pg_engine, "scheduler", a, 60) and not lease.renew(pg_engine, "scheduler", b, 60)
    with Session(pg_engine) as s:
        held = lease.current(s, "scheduler")
        assert held.holder == a and held.expires_at > utcnow()
    lease.release(pg_engine, "scheduler", b)  # not b's: nothing happens
    assert not lease.acquire(pg_engine, "scheduler", b, 60)
    lease.release(pg_engine, "scheduler", a)
    assert lease.acquire(pg_engine, "scheduler", b, 0.05)
    threading.Event().wait(0.1)  # b's lease lapses
    assert lease.acquire(pg_engine, "scheduler", a, 60)
    assert not lease.renew(pg_engine, "scheduler", b, 60)


@pytest.mark.parametrize("taken_before", [False, True], ids=["first-insert", "lapsed-row"])
def test_racing_holders_get_one_lease(pg_engine, taken_before):
    if taken_before:
        assert lease.acquire(pg_engine, "crawl", "elsewhere:1:old", 0.01)
        threading.Event().wait(0.05)
    holders = [lease.new_holder() for _ in range(8)]
    start, results = threading.Barrier(len(holders)), {}

    def race(holder: str) -> None:
        start.wait(timeout=10)
        results[holder] = lease.acquire(pg_engine, "crawl", holder, 60)

    threads = [threading.Thread(target=race, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == len(holders)
    winners = [h for h, won in results.items() if won]
    assert len(winners) == 1
    with Session(pg_engine) as s:
        assert lease.current(s, "crawl").holder == winners[0]


# --- one writer at a time (what BEGIN IMMEDIATE gives SQLite) ---------------------------------------

def _together(n: int, work) -> list:
    """Run ``work()`` in n threads released at once; return what each returned or raised."""
    start, results = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        start.wait(timeout=10)
        try:
            results[i] = work()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return results


def test_processes_starting_together_load_the_snapshot_once(pg_engine, settings):
    from observatory.catalog.snapshot import ensure_snapshot

    results = _together(3, lambda: ensure_snapshot(pg_engine, settings.model_copy(update={"autoload_snapshot": True})))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(r is not None for r in results) == 1
    n = len(load_entries())
    assert _counts(pg_engine) == {"HubModel": n, "ConfigRevision": n, "GeometryRow": n}


def test_concurrent_trend_refreshes_do_not_collide(pg_engine):
    build(pg_engine)
    results = _together(3, lambda: refresh_trends(pg_engine))
    assert not [r for r in results if isinstance(r, Exception)], results
    with Session(pg_engine) as s:
        assert sum(p.count for p in read_trends(s, Population("all"), "quarter").points) == results[0].models


def test_concurrent_evaluations_record_each_alert_once(pg_engine, settings):
    from alert_support import FAST

    from observatory.alerts.evaluate import evaluate
    from observatory.alerts.tables import Alert, AlertRule

    build(pg_engine)
    builtin = settings.model_copy(update={**FAST, "alert_builtin_rules": True})
    results = _together(3, lambda: evaluate(pg_engine, builtin))
    assert not [r for r in results if isinstance(r, Exception)], results
    with Session(pg_engine) as s:
        fingerprints = s.exec(select(Alert.fingerprint)).all()
        rule_keys = s.exec(select(AlertRule.rule_key)).all()
    assert len(fingerprints) == len(set(fingerprints)) > 0
    assert len(rule_keys) == len(set(rule_keys))


# --- odd data the Hub can serve: stored on PostgreSQL exactly as on SQLite -------------------------

HUGE = {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 32, "sliding_window": 2**36, "max_position_embeddings": 2**38}
WIDE = {"model_type": "llama", "hidden_size": 2**20, "num_attention_heads": 2**20, "num_key_value_heads": 2**20,
        "head_dim": 2**20, "num_hidden_layers": 2**20}


def test_odd_hub_data_is_stored_as_on_sqlite(pg_engine, engine, hub, hub_settings):
    from observatory.crawler.run import crawl
    from observatory.crawler.tables import CrawlFailure

    hub.add_repo("odd/huge-window", HUGE, downloads=3 * 2**31, likes=2**40)
    hub.add_repo("odd/wide", WIDE)
    hub.add_repo("odd/nul-in-json", json.dumps({**HUGE, "model_type": "mis\u0000tral", "architectures": ["A\u0000"]}))
    hub.add_repo("odd/nul-byte", b'{"model_type": "llama"\x00}')
    hub.add_repo("odd/not-utf8", b'{"model_type": "\xff\xfe"}')
    hub.add_repo("odd/long-strings", {**HUGE, "model_type": "m" * 5000, "architectures": ["A" * 5000]},
                 pipeline_tag="p" * 500, library_name="l" * 500)
    hub.add_repo("odd/fine", {**HUGE, "sliding_window": 4096, "max_position_embeddings": 32768})

    def stored(eng):
        run = crawl(eng, hub_settings, since=LONG_AGO)
        with Session(eng) as s:
            models = {m.id: m.model_dump(include={"downloads", "likes", "pipeline_tag", "library_name", "sha",
                                                  "created_at"}) for m in s.exec(select(HubModel))}
            revisions = {r.model_id: r.model_dump(include={"sha", "raw_text", "parse_status", "parse_error"})
                         for r in s.exec(select(ConfigRevision))}
            geometry = {g.model_id: g.model_dump(exclude={"id", "revision_id", "derived_at"})
                        for g in s.exec(select(GeometryRow))}
            failed = {f.model_id: (f.reason, f.detail) for f in s.exec(select(CrawlFailure))}
        return (run.status, run.new, run.failed), models, revisions, geometry, failed

    ours, theirs = stored(pg_engine), stored(engine)
    assert ours[0] == theirs[0] and ours[0][0] == "ok"
    # PostgreSQL text cannot hold NUL: it is stored as U+FFFD there; nothing else differs.
    # (JSON columns keep it: PostgreSQL's json holds the escape \u0000.)
    def no_nul(rows: dict) -> dict:
        return {key: {name: v.replace("\x00", "\ufffd") if isinstance(v, str) else v for name, v in row.items()}
                if isinstance(row, dict) else row for key, row in rows.items()}

    theirs = (theirs[0], *(no_nul(rows) for rows in theirs[1:]))
    for name, a, b in zip(("models", "revisions", "geometry", "failures"), ours[1:], theirs[1:]):
        assert a == b, name
    assert ours[2]["odd/nul-byte"]["raw_text"] == '{"model_type": "llama"\ufffd}'
    assert ours[3]["odd/nul-in-json"]["model_type"] == "mis\ufffdtral"
    assert ours[3]["odd/nul-in-json"]["architectures"] == ["A\x00"]
    assert ours[3]["odd/huge-window"]["sliding_window"] == 2**36
    assert ours[1]["odd/huge-window"]["likes"] == 2**40
