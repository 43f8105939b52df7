"""/api/v1/models through the app in-process, on a real SQLite file filled through the ingest
path; every filter, sort and page boundary is compared with a plain-sqlite3 oracle."""

from __future__ import annotations

import base64
import csv
import io
import json
from datetime import date

import pytest
from api_testdata import (
    SPECS,
    Spec,
    add_model,
    built_store,
    oracle,
    oracle_rows,
    raw_config,
)
from fastapi.testclient import TestClient

from observatory.store.queries import models as queries
from observatory.web.app import create_app

ALL_IDS = {s.id for s in SPECS}
SORTS = ("created_at", "downloads", "group_size", "kv_bytes_per_token", "id")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    settings, engine = built_store(tmp_path_factory.mktemp("api-models"))
    yield settings, engine
    engine.dispose()


@pytest.fixture(scope="module")
def client(store):
    with TestClient(create_app(store[0])) as c:
        yield c


@pytest.fixture(scope="module")
def rows(store):
    return oracle_rows(store[0].resolved_database_url.removeprefix("sqlite:///"))


def all_pages(client, params: dict, size: int = 3) -> list[str]:
    ids, url, pages = [], "/api/v1/models", 0
    query = {**params, "size": size}
    while url:
        r = client.get(url, params=query if pages == 0 else None)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ok"] is True and len(body["rows"]) <= size
        ids += [row["id"] for row in body["rows"]]
        url, pages = body["next_url"], pages + 1
        if url:
            assert r.headers["link"] == f'<{url}>; rel="next"'
            assert len(body["rows"]) == size
        else:
            assert "link" not in r.headers and body["next"] is None
        assert pages <= 50
    return ids


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("sort", SORTS)
def test_every_sort_pages_through_everything_in_order(client, rows, sort, order, index_choice):
    ids = all_pages(client, {"sort": sort, "order": order}, size=3)
    assert ids == oracle(rows, sort=sort, order=order)
    assert set(ids) == ALL_IDS  # models with no date/geometry come last, never lost


FILTERS = [
    {"kind": ["GQA"]},
    {"kind": ["MHA", "MQA"]},
    {"kind": ["MLA"]},
    {"kind": ["none"]},
    {"hybrid": True},
    {"hybrid": False},
    {"g_min": 8},
    {"g_max": 4},
    {"g_min": 4, "g_max": 8},
    {"g_min": 8, "g_max": 8},
    {"author": "alpha"},
    {"author": "nobody"},
    {"model_type": "qwen2"},
    {"model_type": "deepseek_v3"},
    {"created_from": date(2024, 9, 19)},
    {"created_to": date(2023, 5, 4)},
    {"created_from": date(2024, 1, 1), "created_to": date(2024, 12, 31)},
    {"created_from": date(2023, 2, 1), "created_to": date(2023, 2, 1)},
    {"min_downloads": 1000},
    {"min_downloads": 0},
    {"q": "LLAMA"},
    {"q": "_"},  # literal underscore, not LIKE's any-character
    {"q": "a.b-c"},
    {"q": "%"},
    {"kind": ["GQA"], "min_downloads": 1000, "created_from": date(2024, 1, 1), "author": "alpha"},
]


@pytest.fixture(params=["geometry-index", "sort-index"])
def index_choice(request, monkeypatch):
    """Run a test with both query shapes: filters driving through their geometry index (small
    stores), and filters applied while walking the sort index (big stores; see store/queries/models.py)."""
    if request.param == "sort-index":
        monkeypatch.setattr(queries, "_SELECTIVE_ROWS", 1)
    return request.param


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: "&".join(f"{k}={v}" for k, v in f.items()))
def test_filters(client, rows, filters, index_choice):
    params = {k: (v.isoformat() if isinstance(v, date) else v) for k, v in filters.items()}
    expected = oracle(rows, **filters)
    assert all_pages(client, params, size=4) == expected
    assert all_pages(client, {**params, "sort": "group_size", "order": "asc"}, size=5) == \
        oracle(rows, **filters, sort="group_size", order="asc")


def test_filters_are_not_vacuous(rows):
    # Each filter above keeps something and drops something (else it tests nothing), bar the
    # deliberate empty ones.
    empty_ok = ({"author": "nobody"}, {"q": "%"})
    for filters in FILTERS:
        kept = oracle(rows, **filters)
        if filters in empty_ok:
            assert kept == []
        else:
            assert 0 < len(kept) < len(rows) or filters == {"min_downloads": 0}, filters


def test_row_fields(client):
    body = client.get("/api/v1/models", params={"q": "gamma/latent-v3"}).json()
    (row,) = body["rows"]
    assert row == {
        "id": "gamma/latent-v3", "author": "gamma", "created_at": "2024-12-26T00:00:00Z",
        "downloads": 2_000_000, "likes": None, "num_parameters": 671_000_000_000, "parameters_source": "published",
        "active_parameters": row["active_parameters"], "relation": "original", "base_models": None, "source": "hub",
        "model_type": "deepseek_v3", "attention_kind": "MLA", "is_hybrid": False, "num_query_heads": 128,
        "num_kv_heads": 128, "group_size": None, "head_dim": 192, "num_layers": 61, "kv_layers": 61,
        "sliding_window": None, "kv_bytes_per_token": 61 * (512 + 64) * 2,
    }
    broken = client.get("/api/v1/models", params={"q": "broken"}).json()["rows"][0]
    assert broken["attention_kind"] is None and broken["kv_bytes_per_token"] is None


def test_next_url_keeps_the_query(client):
    r = client.get("/api/v1/models", params={"kind": ["GQA", "MLA"], "sort": "downloads", "size": 2})
    next_url = r.json()["next_url"]
    assert "kind=GQA" in next_url and "kind=MLA" in next_url and "sort=downloads" in next_url
    assert next_url.startswith("http://testserver/api/v1/models?")


def test_size_bounds(client):
    assert len(client.get("/api/v1/models", params={"size": 1}).json()["rows"]) == 1
    assert len(client.get("/api/v1/models", params={"size": 500}).json()["rows"]) == len(SPECS)
    assert client.get("/api/v1/models").json()["next"] is None  # default 50 > 17 models


def test_keyset_pages_survive_new_models(client, store):
    first = client.get("/api/v1/models", params={"size": 4}).json()
    add_model(store[1], Spec("zeta/newest", "g4", (2026, 6, 1), 1, 7 * 10**9))
    try:
        rest = all_pages(client, {"next": first["next"]}, size=4)
        shown = [r["id"] for r in first["rows"]] + rest
        assert len(shown) == len(set(shown)) == len(SPECS)  # no repeat, none skipped
        assert "zeta/newest" not in shown  # newer than the cursor: it belongs to page one
    finally:
        with store[1].begin() as conn:
            conn.exec_driver_sql("DELETE FROM geometry WHERE model_id = 'zeta/newest'")
            conn.exec_driver_sql("DELETE FROM config_revision WHERE model_id = 'zeta/newest'")
            conn.exec_driver_sql("DELETE FROM hub_model WHERE id = 'zeta/newest'")


# --- CSV ----------------------------------------------------------------------------------

def parse_csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("path, extra", [("/api/v1/models.csv", {}), ("/api/v1/models", {"format": "csv"})])
def test_csv_pages_follow_the_same_keyset_links_as_json(client, rows, path, extra):
    """Issue 21: the CSV export ignored ``size`` and streamed up to 100,000 rows per request."""
    expected = oracle(rows, kind=["GQA"], sort="downloads")
    got, url, pages = [], None, 0
    r = client.get(path, params={"kind": "GQA", "sort": "downloads", "size": 2, **extra})
    while True:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
        assert "attachment" in r.headers["content-disposition"] and r.headers["x-max-size"] == "500"
        parsed = parse_csv(r.text)
        assert len(parsed) <= 2
        got += [row["id"] for row in parsed]
        pages += 1
        url = r.headers.get("x-next-url")
        if url is None:
            assert "link" not in r.headers
            break
        assert r.headers["link"] == f'<{url}>; rel="next"'
        r = client.get(url)
    assert got == expected and pages == -(-len(expected) // 2)
    assert list(parse_csv(client.get(path, params=extra).text)[0]) == list(client.get("/api/v1/models").json()["rows"][0])


@pytest.mark.parametrize("path", ["/api/v1/models.csv", "/models.csv"])
def test_csv_size_has_the_documented_maximum(client, path):
    json_page = client.get(path.replace(".csv", ".json") if path == "/models.csv" else "/api/v1/models").json()
    assert len(parse_csv(client.get(path).text)) == len(json_page["rows"])  # the JSON page's default size
    assert len(parse_csv(client.get(path, params={"size": 3}).text)) == 3
    r = client.get(path, params={"size": 501})
    assert r.status_code in (400, 422) and "size" in r.text
    assert client.get(path, params={"size": 500}).status_code == 200


def test_csv_continues_from_a_json_token(client, rows):
    token = client.get("/api/v1/models", params={"size": 5}).json()["next"]
    parsed = parse_csv(client.get("/api/v1/models.csv", params={"next": token, "size": 500}).text)
    assert [r["id"] for r in parsed] == oracle(rows)[5:505]


def test_csv_neutralises_formulas(store, client):
    # An id cannot start with "=", but a model_type (config string) can: the cell is quoted.
    add_model(store[1], Spec("eta/formula", "g4", (2020, 1, 1)), sha="x")
    with store[1].begin() as conn:
        conn.exec_driver_sql("UPDATE geometry SET model_type = '=HYPERLINK(\"x\")' WHERE model_id = 'eta/formula'")
    try:
        parsed = parse_csv(client.get("/api/v1/models.csv", params={"q": "eta/formula"}).text)
        assert parsed[0]["model_type"] == "'=HYPERLINK(\"x\")"
    finally:
        with store[1].begin() as conn:
            conn.exec_driver_sql("DELETE FROM geometry WHERE model_id = 'eta/formula'")
            conn.exec_driver_sql("DELETE FROM config_revision WHERE model_id = 'eta/formula'")
            conn.exec_driver_sql("DELETE FROM hub_model WHERE id = 'eta/formula'")


# --- bad parameters: 4xx in the one error shape ---------------------------------------------

def token(payload) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


BAD_PARAMS = [
    ({"size": 0}, 422, "size"),
    ({"size": 501}, 422, "size"),
    ({"size": "ten"}, 422, "size"),
    ({"kind": "GQB"}, 422, "kind"),
    ({"g_min": -1}, 422, "g_min"),
    ({"g_min": "nan"}, 422, "g_min"),
    ({"g_min": 9, "g_max": 2}, 422, "g_min (9.0) is greater than g_max (2.0)"),
    ({"created_from": "2024-13-01"}, 422, "created_from"),
    ({"created_from": "2025-01-01", "created_to": "2024-01-01"}, 422, "is after created_to"),
    ({"min_downloads": -5}, 422, "min_downloads"),
    ({"sort": "likes"}, 422, "sort"),
    ({"order": "up"}, 422, "order"),
    ({"format": "xml"}, 422, "format"),
    ({"q": "x" * 201}, 422, "q"),
    ({"author": "a" * 101}, 422, "author"),
    ({"hybrid": "maybe"}, 422, "hybrid"),
    ({"next": "%%%"}, 400, "next token is not one this API issued"),
    ({"next": "bm90IGpzb24"}, 400, "next token is not one this API issued"),  # "not json"
    ({"next": token({"a": 1})}, 400, "next token is not one this API issued"),
    ({"next": token([1, "created_at", "desc", "2024-01-01T00:00:00+00:00"])}, 400, "not one this API issued"),
    ({"next": token([1, "downloads", "desc", 5, "a/b"])}, 400, "issued for sort=downloads&order=desc"),
    ({"next": token([1, "created_at", "desc", 5, "a/b"])}, 400, "does not fit sort=created_at"),
    ({"next": token([1, "created_at", "desc", "2024-01-01", "a/b"])}, 400, "does not fit"),  # naive time
    ({"next": token([1, "downloads", "desc", "many", "a/b"]), "sort": "downloads"}, 400, "does not fit"),
    ({"next": token([1, "group_size", "desc", "x", "a/b"]), "sort": "group_size"}, 400, "does not fit"),
    ({"next": token([2, "created_at", "desc", None, "a/b"])}, 400, "not one this API issued"),
    ({"next": "x" * 1001}, 422, "next"),
]


@pytest.mark.parametrize("params, status, message", BAD_PARAMS, ids=[str(p[0])[:60] for p in BAD_PARAMS])
@pytest.mark.parametrize("path", ["/api/v1/models", "/api/v1/models.csv"])
def test_bad_parameters(client, path, params, status, message):
    if path.endswith(".csv") and "format" in params:
        params = {}  # the CSV path takes no format; covered on the JSON path
        status = 200
    r = client.get(path, params=params)
    assert r.status_code == status, r.text
    if status != 200:
        body = r.json()
        assert r.headers["content-type"] == "application/json"
        assert body["ok"] is False and body["status"] == status and body["errors"]
        assert message in body["error"]


def test_token_of_another_order_is_refused(client):
    nxt = client.get("/api/v1/models", params={"size": 2, "sort": "downloads"}).json()["next"]
    r = client.get("/api/v1/models", params={"size": 2, "sort": "downloads", "order": "asc", "next": nxt})
    assert r.status_code == 400 and "sort=downloads&order=desc" in r.json()["error"]


# --- one model ----------------------------------------------------------------------------

def test_model_detail(client):
    r = client.get("/api/v1/models/alpha/llama-70b")
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is True
    assert body["model"]["id"] == "alpha/llama-70b" and body["model"]["downloads"] == 900_000
    geom = body["geometry"]
    assert (geom["attention_kind"], geom["num_query_heads"], geom["num_kv_heads"], geom["group_size"]) == \
        ("GQA", 64, 8, 8.0)
    provenance = {p["field"]: p for p in geom["provenance"]}
    assert provenance["num_kv_heads"] == {"field": "num_kv_heads", "value": 8, "source": "num_key_value_heads",
                                          "kind": "disclosed"}
    assert provenance["head_dim"]["kind"] == "derived" and provenance["head_dim"]["value"] == 128
    assert provenance["group_size"]["kind"] == "derived"
    (revision,) = body["revisions"]
    assert revision["is_current"] and revision["parse_status"] == "ok"
    assert revision["config_url"] == f"/api/v1/revisions/{revision['id']}/config.json"
    # 80 layers x 8 heads x (128 + 128) x 2 bytes per token; MHA has 64 heads: 8x more
    per_token = 80 * 8 * 256 * 2
    kv = body["kv_cache"]
    assert kv["bytes_per_token"] == per_token and kv["mha_bytes_per_token"] == 8 * per_token
    assert [(p["context"], p["bytes"], p["saving"]) for p in kv["contexts"]] == [
        (4096, 4096 * per_token, 8.0), (32768, 32768 * per_token, 8.0), (131072, 131072 * per_token, 8.0)]
    assert len(body["roofline"]) >= 5
    h100 = next(d for d in body["roofline"] if d["hardware_id"] == "h100-sxm")
    assert [p["context"] for p in h100["points"]] == [4096, 32768, 131072]
    assert all(p["bound"] == "memory" and p["speedup"] > 1 for p in h100["points"])


def test_model_detail_matches_the_core_arithmetic(client):
    from observatory.catalog import hardware
    from observatory.core import kvcache, roofline
    from observatory.core.geometry import parse_config_text, parse_geometry

    geom = parse_geometry(parse_config_text(raw_config("hybrid")))
    body = client.get("/api/v1/models/gamma/next-hybrid").json()
    assert body["kv_cache"]["contexts"][1]["bytes"] == kvcache.cache_bytes(geom, 32768)
    device = hardware.get_device("h200-sxm")
    point = next(d for d in body["roofline"] if d["hardware_id"] == "h200-sxm")["points"][2]
    assert point["time_s"] == pytest.approx(roofline.decode_estimate(geom, device, 131072).time_s)
    assert point["max_batch"] == roofline.max_batch(geom, device, 131072, params=80 * 10**9)


def test_model_without_geometry(client):
    body = client.get("/api/v1/models/beta/broken-config").json()
    assert body["geometry"] is None and body["kv_cache"] is None and body["roofline"] == []
    (revision,) = body["revisions"]
    assert revision["parse_status"] == "error" and "JSON" in revision["parse_error"]


def test_attention_free_model_has_no_cache(client):
    body = client.get("/api/v1/models/gamma/mamba-130m").json()
    assert body["geometry"]["attention_kind"] == "none"
    assert body["kv_cache"] is None and body["roofline"] == []


def test_model_without_organisation(client):
    assert client.get("/api/v1/models/solo-model").json()["model"]["author"] is None


def test_config_change_keeps_history_and_moves_the_model(client, store):
    add_model(store[1], Spec("alpha/tiny", "g32", (2024, 9, 25), 0, 1 * 10**9), sha="rev2")
    body = client.get("/api/v1/models/alpha/tiny").json()
    assert [r["sha"] for r in body["revisions"]] == ["rev2", "rev1"]
    assert [r["is_current"] for r in body["revisions"]] == [True, False]
    assert body["geometry"]["group_size"] == 32.0
    listed = client.get("/api/v1/models", params={"q": "alpha/tiny"}).json()["rows"]
    assert len(listed) == 1 and listed[0]["group_size"] == 32.0
    old = client.get(body["revisions"][1]["config_url"])
    assert old.text == raw_config("g8b")
    # back to the first config for the other tests
    add_model(store[1], Spec("alpha/tiny", "g8b", (2024, 9, 25), 0, 1 * 10**9), sha="rev3")


def test_raw_config_is_verbatim_attachment(client):
    # A stored file that is not JSON is still served verbatim, but not labelled JSON.
    for spec_id, name, media_type in (("alpha/llama-7b", "g4", "application/json"),
                                      ("beta/broken-config", "broken", "text/plain; charset=utf-8")):
        url = client.get(f"/api/v1/models/{spec_id}").json()["revisions"][0]["config_url"]
        r = client.get(url)
        assert r.status_code == 200
        assert r.content == raw_config(name).encode()
        assert r.headers["content-type"] == media_type
        disposition = r.headers["content-disposition"]
        assert disposition.startswith("attachment; filename=") and "/" not in disposition.split("=", 1)[1]


@pytest.mark.parametrize("path, status", [
    ("/api/v1/revisions/999999/config.json", 404),
    ("/api/v1/revisions/0/config.json", 422),
    ("/api/v1/revisions/abc/config.json", 422),
    ("/api/v1/revisions/99999999999999999999999/config.json", 422),
])
def test_bad_revision(client, path, status):
    r = client.get(path)
    assert r.status_code == status and r.json()["ok"] is False


HOSTILE_IDS = [
    "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "..%2F..%2Fetc%2Fpasswd",
    "org/%2E%2E",
    "org/name/extra",
    "a" * 5000,
    "org/" + "b" * 97,
    "-org/name",
    "org/na--me",
    "org/name%00",
    "%E2%80%AEorg/name",
    "org%2Fname%2F",
    "' OR 1=1 --",
]


@pytest.mark.parametrize("model_id", HOSTILE_IDS, ids=lambda s: s[:30])
def test_hostile_ids_are_refused_inert(client, model_id):
    r = client.get(f"/api/v1/models/{model_id}")
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["ok"] is False and body["error"].startswith("model_id: not a valid Hub repo id")
    assert len(r.content) < 500  # a 5000-character id is not echoed back whole
    r = client.get("/api/v1/roofline", params={"model": model_id.replace("%2F", "/"), "hardware": "h100-sxm"})
    assert r.status_code in (400, 422) and r.json()["ok"] is False


def test_unknown_ids_are_404_and_suffixes_are_part_of_the_id(client):
    for model_id in ("alpha/nothing", "alpha/llama-7b.json", "alpha/llama-7b.csv", "nothing"):
        r = client.get(f"/api/v1/models/{model_id}")
        assert r.status_code == 404, model_id
        assert model_id in r.json()["error"]
    assert client.get("/api/v1/models/alpha/llama-7b").status_code == 200


def test_model_detail_lists_latest_bench_results(client, store):
    from observatory.bench.tables import BenchResult
    from observatory.store.db import session_scope

    with session_scope(store[1]) as s:
        s.add(BenchResult(model_id="alpha/llama-7b", device="cpu: test", device_type="cpu", dtype="fp32",
                          batch=1, num_heads=32, num_kv_heads=8, head_dim=128, context=4096, median_s=0.002,
                          bytes_per_s=1.5e9, peer_times_s={"sdpa": 0.004}))
        s.add(BenchResult(model_id="gamma/latent-v3", status="skipped", reason="MLA is not benchmarked",
                          device="cpu: test", device_type="cpu", dtype="fp32", batch=1, context=4096))
    try:
        (result,) = client.get("/api/v1/models/alpha/llama-7b").json()["bench"]
        assert (result["status"], result["median_s"], result["speedups"]) == ("ok", 0.002, {"sdpa": 2.0})
        (skipped,) = client.get("/api/v1/models/gamma/latent-v3").json()["bench"]
        assert skipped["status"] == "skipped" and "MLA" in skipped["reason"]
        assert client.get("/api/v1/models/alpha/llama-13b").json()["bench"] == []
    finally:
        with store[1].begin() as conn:
            conn.exec_driver_sql("DELETE FROM bench_result")


# ---- lineage filters, strict parameters and helpful errors (issue 12) ---------------------------


def test_relation_filter_lists_exactly_the_derivatives(client):
    quantized = client.get("/api/v1/models", params={"relation": "quantized"}).json()["rows"]
    assert [r["id"] for r in quantized] == ["fans/llama-70b-awq"]
    assert quantized[0]["base_models"] == ["alpha/llama-70b"] and quantized[0]["relation"] == "quantized"
    both = client.get("/api/v1/models", params={"relation": "finetune,quantized"}).json()["rows"]
    repeated = client.get("/api/v1/models", params={"relation": ["finetune", "quantized"]}).json()["rows"]
    assert {r["id"] for r in both} == {r["id"] for r in repeated} == {"fans/llama-70b-chat-ft", "fans/llama-70b-awq"}


def test_min_params_uses_the_disclosed_count_else_the_estimate(client):
    rows = client.get("/api/v1/models", params={"min_params": 50e9, "size": 500}).json()["rows"]
    assert rows and all(r["num_parameters"] >= 50e9 for r in rows)
    assert "alpha/llama-7b" not in {r["id"] for r in rows} and "gamma/latent-v3" in {r["id"] for r in rows}


def test_kind_takes_a_comma_list_or_repeats(client):
    a = client.get("/api/v1/models", params={"kind": "MLA,GQA", "size": 500}).json()["rows"]
    b = client.get("/api/v1/models", params={"kind": ["MLA", "GQA"], "size": 500}).json()["rows"]
    assert a == b and {r["attention_kind"] for r in a} == {"MLA", "GQA"}
    bad = client.get("/api/v1/models", params={"kind": "MLA,XYZ"})
    assert bad.status_code == 422 and "kind: 'XYZ': Input should be 'MHA'" in bad.json()["error"]
    assert "kind.1" not in bad.json()["error"]  # no internal list index in the message


def test_author_matches_in_any_case(client):
    lower = client.get("/api/v1/models", params={"author": "alpha"}).json()["rows"]
    upper = client.get("/api/v1/models", params={"author": "ALPHA"}).json()["rows"]
    assert lower and lower == upper


@pytest.mark.parametrize("path", ["/api/v1/models", "/api/v1/models.csv", "/models.json", "/models.csv"])
def test_unknown_parameters_are_400s_that_list_the_allowed_ones(client, path):
    r = client.get(path, params={"limit": 2})
    assert r.status_code == 400
    body = r.json()
    assert body["ok"] is False and body["status"] == 400
    assert "unknown query parameter 'limit'" in body["error"] and "size" in body["error"]


def test_a_missing_model_suggests_the_closest_ids(client):
    r = client.get("/api/v1/models/llama-70b")
    assert r.status_code == 404
    assert "did you mean alpha/llama-70b" in r.json()["error"]
    assert "did you mean" not in client.get("/api/v1/models/zz/nothing-like-it").json()["error"]


def test_integral_group_sizes_are_integers(client):
    r = client.get("/api/v1/models", params={"q": "alpha/llama-70b"})
    (row,) = [x for x in r.json()["rows"] if x["id"] == "alpha/llama-70b"]
    assert row["group_size"] == 8 and isinstance(row["group_size"], int)
    csv_text = client.get("/api/v1/models.csv", params={"q": "alpha/llama-70b"}).text
    assert ",8," in csv_text and ",8.0," not in csv_text


def test_model_record_carries_lineage_siblings_and_derivatives(client):
    body = client.get("/api/v1/models/alpha/llama-70b").json()
    assert body["model"]["relation"] == "original"
    arch = body["architecture"]
    # same g8 config: gamma/qwen-72b, delta/unknown-downloads and the two derivatives
    assert arch["first_seen"] is True and arch["siblings"] == 4
    assert set(arch["sibling_ids"]) == {"gamma/qwen-72b", "delta/unknown-downloads", "fans/llama-70b-chat-ft",
                                        "fans/llama-70b-awq"}
    d = body["derivatives"]
    assert (d["finetune"], d["quantized"], d["adapter"], d["merge"]) == (1, 1, 0, 0)
    assert d["downloads"] == 40_000 and d["downloads_unknown"] == 1
