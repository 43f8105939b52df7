"""The model page's estimates, kept per (store, geometry row, parameter counts, catalog version):
what the API and the page serve from the caches equals the arithmetic done afresh, and a changed
parameter count, a new config revision or another store with the same row ids never serves the
old numbers. Real SQLite files filled through the ingest path, the app in-process."""

from __future__ import annotations

import json

import pytest
from api_testdata import SPECS, B, built_store, raw_config
from fastapi.testclient import TestClient

from observatory.catalog.hardware import catalog_version, load_catalog
from observatory.store.db import make_engine, session_scope, upgrade
from observatory.store.ingest import derive, record_config, upsert_model
from observatory.store.memo import BoundedCache
from observatory.web.app import create_app
from observatory.web.estimates import _ROOFLINES, kv_summary, roofline_summary

CACHED_IDS = [s.id for s in SPECS if s.config not in ("broken", "none")]


def fresh(model_id: str, config: str, params: int | None, active: int | None = None) -> dict:
    """kv_cache and roofline computed here, from the config text, without any cache."""
    geom = derive(raw_config(config)).geometry
    return {"kv_cache": json.loads(kv_summary(geom).model_dump_json()),
            "roofline": json.loads(_ROOFLINES.dump_json(roofline_summary(geom, load_catalog(), params, active)))}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    settings, engine = built_store(tmp_path_factory.mktemp("estimates"))
    yield settings, engine
    engine.dispose()


@pytest.fixture(scope="module")
def client(store):
    with TestClient(create_app(store[0])) as c:
        yield c


@pytest.mark.parametrize("spec", [s for s in SPECS if s.id in CACHED_IDS], ids=lambda s: s.id)
def test_served_estimates_equal_fresh_arithmetic_on_miss_and_hit(client, spec):
    expected = fresh(spec.id, spec.config, spec.params)
    for _ in range(2):  # the first answer computes, the second comes from the cache
        body = client.get(f"/api/v1/models/{spec.id}").json()
        assert body["ok"] is True and body["model"]["id"] == spec.id
        assert {"kv_cache": body["kv_cache"], "roofline": body["roofline"]} == expected


def test_models_without_a_cache_have_no_estimates(client):
    for model_id in ("gamma/mamba-130m", "beta/broken-config"):
        body = client.get(f"/api/v1/models/{model_id}").json()
        assert body["kv_cache"] is None and body["roofline"] == []


def test_page_json_twin_serves_the_same_estimates_as_the_api(client):
    api = client.get("/api/v1/models/alpha/llama-70b").json()
    for _ in range(2):
        page = client.get("/models/alpha/llama-70b.json?context=4096&batch=8&dtype=fp8").json()
        assert page["roofline"] == api["roofline"] and page["kv_cache"] == api["kv_cache"]
        assert page["roofline_at"]["context"] == 4096 and page["roofline_at"]["batch"] == 8
        assert page["calculator"]["params"] == {"context": 4096, "batch": 8, "dtype": "fp8", "source": None}
    other = client.get("/models/alpha/llama-70b.json?context=32768&batch=1").json()
    assert other["roofline_at"]["context"] == 32768 and other["calculator"]["params"]["batch"] == 1


def test_a_changed_parameter_count_is_never_served_from_the_old_entry(tmp_path):
    settings, engine = built_store(tmp_path)
    try:
        with TestClient(create_app(settings)) as c:
            before = c.get("/api/v1/models/alpha/llama-7b").json()
            assert before["roofline"][0]["points"][0]["weight_bytes"] == 7 * B * 2
            with session_scope(engine) as s:
                upsert_model(s, "alpha/llama-7b", num_parameters=8 * B)
            after = c.get("/api/v1/models/alpha/llama-7b").json()
            assert after["roofline"][0]["points"][0]["weight_bytes"] == 8 * B * 2
            assert after["roofline"] == fresh("alpha/llama-7b", "g4", 8 * B)["roofline"]
    finally:
        engine.dispose()


def test_a_new_config_revision_is_never_served_from_the_old_entry(tmp_path):
    settings, engine = built_store(tmp_path)
    try:
        with TestClient(create_app(settings)) as c:
            before = c.get("/api/v1/models/alpha/llama-7b").json()
            with session_scope(engine) as s:
                record_config(s, "alpha/llama-7b", raw_config("g8"), "rev2")
            after = c.get("/api/v1/models/alpha/llama-7b").json()
            assert after["geometry"]["group_size"] != before["geometry"]["group_size"]
            assert after["kv_cache"] == fresh("alpha/llama-7b", "g8", 7 * B)["kv_cache"]
            assert [r["sha"] for r in after["revisions"]] == ["rev2", "rev1"]
            assert [r["is_current"] for r in after["revisions"]] == [True, False]
    finally:
        engine.dispose()


def test_two_stores_with_the_same_row_ids_do_not_share_entries(tmp_path):
    """Both stores give alpha/llama-7b revision 1 and geometry 1, with different configs."""
    apps = []
    for name, config in (("one", "g4"), ("two", "mha")):
        url = f"sqlite:///{tmp_path / name}.db"
        upgrade(url)
        engine = make_engine(url)
        with session_scope(engine) as s:
            upsert_model(s, "alpha/llama-7b", num_parameters=7 * B)
            record_config(s, "alpha/llama-7b", raw_config(config), "rev1")
        engine.dispose()
        from observatory.settings import Settings
        apps.append((config, Settings(data_dir=tmp_path / name, database_url=url, autoload_snapshot=False)))
    for _ in range(2):
        for config, settings in apps:
            with TestClient(create_app(settings)) as c:
                body = c.get("/api/v1/models/alpha/llama-7b").json()
            assert body["kv_cache"] == fresh("alpha/llama-7b", config, 7 * B)["kv_cache"]


def test_catalog_version_follows_the_file(tmp_path):
    path = tmp_path / "hardware.json"
    path.write_text("[]")
    first = catalog_version(path)
    path2 = tmp_path / "hardware2.json"
    path2.write_text("[ ]")
    assert first != catalog_version(path2) and len(first) == 16
    assert catalog_version() == catalog_version()


def test_bounded_cache_keeps_the_most_recently_used():
    cache: BoundedCache[int] = BoundedCache(2)
    calls = []

    def compute(v):
        return lambda: calls.append(v) or v

    assert cache.get("a", compute(1)) == 1 and cache.get("b", compute(2)) == 2
    assert cache.get("a", compute(9)) == 1  # a hit: not computed again, and now the most recent
    assert cache.get("c", compute(3)) == 3  # evicts b, the least recently used
    assert len(cache) == 2 and cache.get("b", compute(4)) == 4
    assert calls == [1, 2, 3, 4] and (cache.hits, cache.misses) == (1, 4)
    with pytest.raises(ValueError):
        BoundedCache(0)


def test_the_whole_answer_follows_the_row_its_siblings_and_its_derivatives(tmp_path):
    """The API keeps whole answers per what they are read from: a changed download count (even
    one written without touching updated_at), a new model of the same architecture and refreshed
    derivative counts are all seen on the next request."""
    from api_testdata import Spec, add_model

    from observatory.store.ingest import update_model_rows
    from observatory.store.trends import refresh_trends

    settings, engine = built_store(tmp_path)
    try:
        with TestClient(create_app(settings)) as c:
            url = "/api/v1/models/alpha/llama-70b"
            before = c.get(url).json()
            assert c.get(url).json() == before  # served again from the cache
            page = "/models/alpha/llama-70b"
            assert c.get(page + ".json").json()["model"]["downloads"] == before["model"]["downloads"]
            html = c.get(page).text
            with session_scope(engine) as s:
                update_model_rows(s, {"alpha/llama-70b": {"downloads": 123}})
            after = c.get(url).json()
            assert after["model"]["downloads"] == 123
            assert c.get(page + ".json").json()["model"]["downloads"] == 123
            assert c.get(page).text != html
            siblings = after["architecture"]["siblings"]
            add_model(engine, Spec("omega/llama-70b-copy", "g8", (2025, 5, 1), 1, 70 * B))
            assert c.get(url).json()["architecture"]["siblings"] == siblings + 1
            add_model(engine, Spec("omega/llama-70b-ft", "g8", (2025, 5, 2), 7, 70 * B, "finetune",
                                   ("alpha/llama-70b",)))
            refresh_trends(engine)
            derivatives = c.get(url).json()["derivatives"]
            assert derivatives["finetune"] == before["derivatives"]["finetune"] + 1
    finally:
        engine.dispose()
