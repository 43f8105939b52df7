"""The HTML pages, their JSON twins and CSV exports, through the app in-process on a real SQLite
file holding the bundled snapshot plus a few hostile models.

Hostile strings cannot go into repo ids (they are validated), so they sit where a crawler would
pass them through: config values (``model_type``, ``architectures``), parse errors, crawl
failure details, and query parameters.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from datetime import datetime, timezone
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from observatory.store.db import read_session, session_scope
from observatory.store.ingest import record_config, upsert_model
from observatory.store.queries.models import SUMMARY_FIELDS

XSS = "<script>alert(1)</script>"
XSS_ATTR = '"><img src=x onerror=alert(2)>'
FORMULA = "=HYPERLINK(\"http://evil\",\"x\")"
HOSTILE_ID = "evil-org/hostile-config"
LLAMA2_70B = "meta-llama/Llama-2-70b-hf"

PAGES = ["/", "/trends", "/models", f"/models/{LLAMA2_70B}", "/models/deepseek-ai/DeepSeek-V3", "/hardware",
         "/methodology", "/crawl", "/benchmarks", f"/models/{HOSTILE_ID}"]


def _hostile_models(engine) -> None:
    config = {
        "model_type": XSS, "architectures": [XSS_ATTR, FORMULA], "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 4, "num_hidden_layers": 32,
    }
    broken = '{"num_attention_heads": "</script><script>alert(3)</script>", "num_hidden_layers": 2}'
    with session_scope(engine) as session:
        upsert_model(session, HOSTILE_ID, created_at=datetime(2025, 6, 1, tzinfo=timezone.utc), downloads=7)
        record_config(session, HOSTILE_ID, json.dumps(config), "sha-hostile")
        upsert_model(session, "evil-org/broken", created_at=datetime(2025, 6, 2, tzinfo=timezone.utc))
        record_config(session, "evil-org/broken", broken, "sha-broken")
        upsert_model(session, "evil-org/formula", created_at=datetime(2025, 6, 3, tzinfo=timezone.utc))
        record_config(session, "evil-org/formula", json.dumps({**config, "model_type": FORMULA}), "sha-formula")


def _crawl_history(engine) -> None:
    from observatory.crawler.tables import CrawlFailure
    from observatory.store.tables import CrawlRun

    with session_scope(engine) as session:
        session.add(CrawlRun(status="failed", seen=12, new=3, failed=2, error=f"listing failed: {XSS}",
                             finished_at=datetime.now(timezone.utc), failures_by_reason={"gated": 2}))
        session.add(CrawlFailure(model_id="<b>not-an-id</b>", reason="gated", detail=XSS))


def _bench_result(engine) -> None:
    from observatory.bench.tables import BenchResult

    with session_scope(engine) as session:
        session.add(BenchResult(model_id=LLAMA2_70B, device="cpu: test machine", device_type="cpu",
                                backend="torch", dtype="fp32", batch=1, num_heads=64, num_kv_heads=8,
                                head_dim=128, context=32768, median_s=0.0123, kv_bytes=268435456,
                                bytes_per_s=2.18e10, ceiling_bytes_per_s=4.0e10, fraction_of_ceiling=0.545,
                                predicted_s=0.0067, peer_times_s={"sdpa_gqa": 0.03}))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from observatory.settings import Settings
    from observatory.store.db import make_engine
    from observatory.store.trends import refresh_trends
    from observatory.web.app import create_app

    data_dir = tmp_path_factory.mktemp("pages") / "data"
    settings = Settings(data_dir=data_dir, scheduler_enabled=False)
    app = create_app(settings)
    with TestClient(app) as test_client:  # lifespan: migrations, snapshot, trends
        engine = make_engine(settings.resolved_database_url)
        _hostile_models(engine)
        _crawl_history(engine)
        _bench_result(engine)
        refresh_trends(engine)
        engine.dispose()
        yield test_client


class _Scan(HTMLParser):
    """Every <script>, <style> and attribute of a page."""

    def __init__(self):
        super().__init__()
        self.scripts: list[dict] = []
        self.styles = 0
        self.attributes: list[tuple[str, str, str | None]] = []
        self.canvases: list[str] = []
        self.json_blocks: dict[str, str] = {}
        self._in_json: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs_d = dict(attrs)
        self.attributes.extend((tag, k, v) for k, v in attrs)
        if tag == "script":
            self.scripts.append(attrs_d)
            if attrs_d.get("type") == "application/json":
                self._in_json = attrs_d.get("id")
        if tag == "style":
            self.styles += 1
        if tag == "canvas":
            self.canvases.append(attrs_d.get("data-chart"))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_json = None

    def handle_data(self, data):
        if self._in_json:
            self.json_blocks[self._in_json] = self.json_blocks.get(self._in_json, "") + data


def scan(html: str) -> _Scan:
    parser = _Scan()
    parser.feed(html)
    return parser


# ---- every page -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.slow
def test_page_renders_with_csp_and_no_inline_code(client, path):
    r = client.get(path)
    assert r.status_code == 200, r.text[:500]
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    page = scan(r.text)
    for script in page.scripts:  # site scripts by URL, data as inert JSON; nothing else
        assert script.get("src", "").startswith("/static/") or script.get("type") == "application/json", script
    assert page.styles == 0
    inline = [(t, k) for t, k, _ in page.attributes if k == "style" or k.startswith("on")]
    assert inline == []
    for chart_id in page.canvases:  # each chart has its data block and a table for readers without scripts
        assert chart_id in page.json_blocks
        json.loads(page.json_blocks[chart_id])
    assert r.text.count("<canvas") == r.text.count('<details class="chart-data" open>')


@pytest.mark.parametrize("path", ["/index.json", "/.json", "/trends.json", "/models.json", f"/models/{LLAMA2_70B}.json",
                                  "/hardware.json", "/methodology.json", "/crawl.json", "/benchmarks.json"])
def test_json_twins(client, path):
    r = client.get(path)
    assert r.status_code == 200, r.text[:500]
    assert r.headers["content-type"] == "application/json"
    assert r.json()["ok"] is True


def test_pages_link_their_twins(client):
    page = client.get("/trends?period=quarter").text
    assert 'href="/trends.json?period=quarter"' in page
    assert 'href="/trends.csv?period=quarter"' in page
    assert 'rel="alternate" type="application/json"' in page


# ---- escaping -------------------------------------------------------------------------------


def _assert_inert(html: str) -> None:
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "</script><script>" not in html


def test_hostile_config_strings_are_escaped_everywhere(client):
    model = client.get(f"/models/{HOSTILE_ID}").text
    _assert_inert(model)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in model  # shown, as text
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in model or "&quot;&gt;&lt;img" in model
    listing = client.get("/models?q=evil").text
    _assert_inert(listing)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing
    broken = client.get("/models/evil-org/broken").text
    _assert_inert(broken)
    assert "parse" in broken and "error" in broken
    crawl = client.get("/crawl").text
    _assert_inert(crawl)
    assert "&lt;b&gt;not-an-id&lt;/b&gt;" in crawl


@pytest.mark.parametrize("path", [
    f"/models?q={XSS}", f"/trends?author={XSS}", f"/trends?model_type={XSS_ATTR}",
    f"/models?author={XSS_ATTR}&model_type={XSS}", f"/models/{LLAMA2_70B}?context={XSS}",
    f"/models?g_min={XSS}", f"/models/{XSS}", "/models/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
])
def test_hostile_query_parameters_are_escaped(client, path):
    r = client.get(path)
    assert r.status_code in (200, 400, 404, 422)
    _assert_inert(r.text)


def test_chart_data_cannot_close_its_script_block():
    from observatory.web.rendering import environment

    spec = {"type": "xy", "series": [{"label": "</script><script>alert(1)</script>", "points": []}]}
    html = environment().from_string(
        '{% from "_chart.html" import chart %}{% call chart("c", spec, "caption") %}<table></table>{% endcall %}'
    ).render(spec=spec)
    _assert_inert(html)
    block = scan(html).json_blocks["chart-c"]
    assert json.loads(block) == spec


def test_csv_neutralises_spreadsheet_formulas(client):
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(client.get("/models.csv?author=evil-org").text))}
    assert rows["evil-org/formula"]["model_type"] == "'" + FORMULA  # a spreadsheet shows it, never runs it
    assert rows[HOSTILE_ID]["model_type"] == XSS  # CSV is data: escaping is the reader's job


# ---- the model list ------------------------------------------------------------------------


def test_models_json_matches_the_api_and_pages_cover_everything(client):
    seen: list[str] = []
    url = "/models.json?size=40&sort=group_size&order=desc"
    pages = 0
    while url:
        r = client.get(url)
        assert r.status_code == 200
        body = r.json()
        seen += [row["id"] for row in body["rows"]]
        if body["next"]:
            assert r.headers["link"] == f'<{body["next_url"]}>; rel="next"'
            assert body["next_url"].startswith("/models.json?")
        url = body["next_url"]
        pages += 1
    assert pages >= 4
    assert len(seen) == len(set(seen))
    api_ids, url = [], "/api/v1/models.csv?sort=group_size&order=desc&size=500"
    while url:  # the CSV twin, page by page through its Link headers
        r = client.get(url)
        api_ids += [row["id"] for row in csv.DictReader(io.StringIO(r.text))]
        url = r.headers.get("x-next-url")
    assert seen == api_ids
    first = client.get("/models.json?size=5&kind=MLA").json()
    assert first["rows"] == client.get("/api/v1/models?size=5&kind=MLA").json()["rows"]
    assert {row["attention_kind"] for row in first["rows"]} == {"MLA"}


def test_models_html_paginates_with_links(client):
    html = client.get("/models?size=10&sort=id&order=asc").text
    match = re.search(r'<a href="([^"]+)" rel="next">', html)
    assert match
    second = client.get(match.group(1).replace("&amp;", "&")).text
    assert "« First page" in second
    first_ids = re.findall(r'<td class="id"><a href="/models/([^"]+)">', html)
    second_ids = re.findall(r'<td class="id"><a href="/models/([^"]+)">', second)
    assert len(first_ids) == len(second_ids) == 10
    assert max(first_ids) < min(second_ids)


def test_models_csv_same_query_and_stream(client):
    page = client.get("/models.csv?size=7&kind=GQA")
    assert page.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(page.text)))
    assert list(rows[0].keys()) == list(SUMMARY_FIELDS)
    assert len(rows) == 7 and {r["attention_kind"] for r in rows} == {"GQA"}
    assert 'rel="next"' in page.headers["link"]
    # The old "all rows" link is a page like any other now; every row is the data package.
    old_link = client.get("/models.csv?size=7&kind=GQA&_stream=on")
    assert old_link.text == page.text and 'rel="next"' in old_link.headers["link"]
    assert '/api/v1/exports/gqa-observatory-models.zip' in client.get("/models").text


@pytest.mark.parametrize("query, message, status", [
    ("kind=XYZ", "kind", 422), ("g_min=abc", "g_min", 422), ("g_min=9&g_max=2", "g_min", 422),
    ("size=0", "size", 422), ("size=9999", "size", 422), ("next=not-a-token", "next", 400),
    ("created_from=2025-13-01", "created_from", 422), ("limit=5", "limit", 400),
])
def test_models_bad_parameters(client, query, message, status):
    # A value out of range is a 422 and an unknown name (or an unreadable token) a 400, on the
    # page, its twins and /api/v1 alike, as the README says.
    html = client.get(f"/models?{query}")
    assert html.status_code == status and html.headers["content-type"].startswith("text/html")
    assert message in html.text
    assert ("Invalid parameter" if status == 422 else "Bad request") in html.text
    for url in (f"/models.json?{query}", f"/models.csv?{query}", f"/api/v1/models?{query}"):
        body = client.get(url)
        assert body.status_code == status, url
        assert body.json()["ok"] is False and message in body.json()["error"], url
        assert "_stream" not in body.json()["error"], url  # the page's own link parameter is not offered


# ---- trends and home ------------------------------------------------------------------------


def test_trends_twin_and_csv_agree(client):
    data = client.get("/trends.json?period=quarter&weighting=count").json()
    assert data["params"]["period"] == "quarter" and data["params"]["weighting"] == "count"
    assert data["points"] and data["points"][-1]["label"].startswith("20")
    rows = list(csv.DictReader(io.StringIO(client.get("/trends.csv?period=quarter&weighting=count").text)))
    assert [r["period_start"] for r in rows] == [p["period_start"] for p in data["points"]]
    assert [int(r["count"]) for r in rows] == [p["count"] for p in data["points"]]
    with_models = [p for p in data["points"] if p["attn_count"]]
    assert with_models
    assert all(abs(sum(v for v in p["shares"].values() if v) - 1) < 1e-9 for p in with_models)
    api = client.get("/api/v1/trends?period=quarter&weighting=count").json()
    assert [p["period_start"] for p in api["points"]] == [p["period_start"] for p in data["points"]]
    # The snapshot's download counts are unknown: by downloads, every model is left out, and says so.
    by_downloads = client.get("/trends.json?period=quarter&weighting=downloads").json()
    assert all(p["weight_unknown"] == p["count"] and p["weight_total"] == 0 for p in by_downloads["points"])
    page = client.get("/trends?period=quarter&weighting=downloads").text
    assert "have no known download count" in page


def test_trends_charts_carry_the_same_numbers_as_the_tables(client):
    page = scan(client.get("/trends?period=quarter").text)
    share = json.loads(page.json_blocks["chart-kind-share"])
    data = client.get("/trends.json?period=quarter").json()
    assert share["labels"] == [p["label"] for p in data["points"]]
    gqa = next(s for s in share["series"] if s["label"] == "GQA")
    assert gqa["values"] == [p["shares"]["GQA"] for p in data["points"]]
    g_chart = json.loads(page.json_blocks["chart-g-dist"])
    plotted = sum(len(s["points"]) for s in g_chart["series"] if s["style"] == "points")
    assert plotted == sum(1 for m in data["plotted_models"]["rows"] if m["group_size"] is not None) > 100


def test_trends_population_filters(client):
    org = client.get("/trends.json?author=Meta-Llama&population=all").json()
    assert org["population"] == "all;author=Meta-Llama" and org["precomputed"] is False
    listed = client.get("/models.json?author=meta-llama&size=500").json()["rows"]
    counted = [r for r in listed if r["created_at"] and r["attention_kind"]]
    assert len(counted) >= 5 and sum(p["count"] for p in org["points"]) == len(counted)
    empty = client.get("/trends?author=nobody-at-all")
    assert empty.status_code == 200 and "No models with a release date match" in empty.text


@pytest.mark.parametrize("query", ["period=year", "weighting=likes", "min_downloads=-1", "since=2025-02-30",
                                   "since=2025-01-01&until=2024-01-01"])
def test_trends_bad_parameters(client, query):
    assert client.get(f"/trends?{query}").status_code == 422
    for url in (f"/trends.json?{query}", f"/trends.csv?{query}", f"/api/v1/trends?{query}"):
        assert client.get(url).json()["status"] == 422, url


def test_home_headlines(client):
    data = client.get("/index.json").json()
    quarter = data["headlines"]["kinds"]
    assert quarter["n"] >= 5 and quarter["count"] >= quarter["n"]
    assert 0 <= quarter["share_gqa_or_mla"] <= 1
    assert all(data["headlines"][h]["n"] >= 5 for h in ("g", "kv"))  # the floor is on the value's own n
    assert data["snapshot_end"] is None  # the store holds crawled models too
    counts = data["models_tracked"]
    assert counts["total"] >= 150 and counts["total"] == counts["hub"] + counts["snapshot"]
    assert counts["hub"] == 3 and client.get("/crawl.json").json()["models"] == counts  # the hostile ones
    assert data["last_crawl"]["status"] == "failed"
    html = client.get("/").text
    assert f"{quarter['quarter']}" in html and "models tracked" in html


def test_model_counts_are_exact_and_skip_the_hub_rows(engine, db_url):
    """``store_counts`` against a GROUP BY over every row (what it replaces), with sources that
    sort before and after "hub"; the per-source query reads index ranges only."""
    from sqlalchemy.dialects import sqlite

    from observatory.store.queries.counts import _OTHER_SOURCES, store_counts
    from observatory.store.tables import HubModel

    with read_session(engine) as session:
        assert store_counts(session) == {"total": 0, "hub": 0, "snapshot": 0}
    with session_scope(engine) as session:
        for i, source in enumerate(["hub"] * 40 + ["snapshot"] * 7 + ["archive"] * 2 + ["zoo"]):
            session.add(HubModel(id=f"org/m{i}", source=source))
    db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    oracle = dict(db.execute("SELECT source, count(*) FROM hub_model GROUP BY source").fetchall())
    with read_session(engine) as session:
        assert store_counts(session) == {"total": 50, **oracle} == \
            {"total": 50, "archive": 2, "hub": 40, "snapshot": 7, "zoo": 1}
    sql = str(_OTHER_SOURCES.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    plan = [row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + sql)]
    steps = [step for step in plan if "hub_model" in step]
    assert len(steps) == 2 and all(step.startswith("SEARCH hub_model USING COVERING INDEX") for step in steps), plan
    db.close()


# ---- one model ------------------------------------------------------------------------------


def test_model_page_kv_calculator_server_side(client):
    # The seed example: Llama 2 70B, 2,048 tokens, batch 1, fp16 -> 0.671 GB, MHA 5.37 GB.
    html = client.get(f"/models/{LLAMA2_70B}?context=2048&batch=1&dtype=fp16").text
    assert 'id="kv-bytes">671,088,640 B<' in html
    assert 'id="kv-mha-bytes">5,368,709,120 B<' in html
    assert 'id="kv-gb">671 MB<' in html and "8.00× smaller than MHA" in html
    kv = json.loads(scan(html).json_blocks["kv-data"])
    assert kv["terms"] == [{"elements_per_token": 80 * 2 * 8 * 128, "cap": None}]
    assert kv["params"] == {"context": 2048, "batch": 1, "dtype": "fp16", "source": None}


def test_model_twin_has_geometry_provenance_history_and_roofline(client):
    data = client.get(f"/models/{LLAMA2_70B}.json?context=4096&batch=8").json()
    geometry = data["geometry"]
    assert (geometry["num_query_heads"], geometry["num_kv_heads"], geometry["group_size"]) == (64, 8, 8.0)
    sources = {p["field"]: p for p in geometry["provenance"]}
    assert sources["num_kv_heads"]["source"] == "num_key_value_heads" and sources["num_kv_heads"]["kind"] == "disclosed"
    assert sources["head_dim"]["kind"] == "derived"
    assert data["revisions"][0]["config_url"].startswith("/api/v1/revisions/")
    roof = data["roofline_at"]
    assert (roof["context"], roof["batch"]) == (4096, 8)
    h100 = next(r for r in roof["rows"] if r["hardware"]["id"] == "h100-sxm")
    assert h100["bound"] == "memory" and h100["speedup"] > 1
    assert data["calculator"]["rows"][0]["bytes"] * 8 == data["calculator"]["rows"][0]["mha_bytes"]
    assert data["bench_results"] and data["bench_results"][0]["device"] == "cpu: test machine"
    raw = client.get(data["revisions"][0]["config_url"])
    assert raw.status_code == 200 and json.loads(raw.text)["num_key_value_heads"] == 8


def test_model_page_sections(client):
    html = client.get(f"/models/{LLAMA2_70B}").text
    for section in ('id="geometry"', 'id="kv"', 'id="roofline"', 'id="history"', 'id="bench"'):
        assert section in html
    roof = json.loads(scan(html).json_blocks["chart-roofline"])
    names = [s["label"] for s in roof["series"]]
    assert "NVIDIA H100 SXM" in names and "MHA counterfactual" in names
    mla = client.get("/models/deepseek-ai/DeepSeek-V3").text
    assert "kv_lora_rank + qk_rope_head_dim" in mla


@pytest.mark.parametrize("query, status", [("context=0", 422), ("context=abc", 422), ("batch=100000", 422),
                                           ("dtype=fp4", 422), ("ctx=4096", 400)])
def test_model_page_bad_calculator_input(client, query, status):
    r = client.get(f"/models/{LLAMA2_70B}?{query}")
    assert r.status_code == status and ("Invalid parameter" if status == 422 else "Bad request") in r.text
    assert client.get(f"/models/{LLAMA2_70B}.json?{query}").json()["status"] == status


def test_encoder_decoder_page_shows_the_cross_attention_cache(client):
    """Issue 23: mT5's page, calculator and twin carry the cross-attention cache the API has."""
    model = "google/mt5-base"
    per_source = client.get(f"/api/v1/models/{model}").json()["geometry"]["cross_kv_elements_per_source_token"]
    assert per_source == 12 * 2 * 12 * 64  # decoder layers x (K and V) x heads x head dim
    twin = client.get(f"/models/{model}.json?context=1000&source=300&batch=2&dtype=fp8").json()["calculator"]
    assert twin["cross_elements_per_source_token"] == per_source
    assert twin["cross_bytes_per_source_token"] == per_source  # fp8: one byte an element
    assert twin["cross_bytes"] == per_source * 300 * 2 and twin["params"]["source"] == 300
    html = client.get(f"/models/{model}?source=300").text
    assert "cross-attention cache per source token, bf16" in html and f"{per_source:,} elements" in html
    assert 'name="source"' in html and "Cross-attention (encoder side)" in html
    # a decoder-only model has no cross-attention and no source input
    plain = client.get(f"/models/{LLAMA2_70B}").text
    assert 'name="source"' not in plain and "Cross-attention (encoder side)" not in plain
    assert client.get(f"/models/{LLAMA2_70B}.json").json()["calculator"]["cross_bytes"] is None


def test_model_page_missing_and_invalid(client):
    missing = client.get("/models/nobody/nothing")
    assert missing.status_code == 404 and "no model" in missing.text
    assert client.get("/models/nobody/nothing.json").json() == {
        "ok": False, "error": "no model 'nobody/nothing' in the store",
        "errors": ["no model 'nobody/nothing' in the store"], "status": 404}
    assert client.get("/models/a--b/c").status_code == 400
    assert client.get(f"/models/{LLAMA2_70B}.csv").status_code == 404


def test_unknown_page_is_an_html_error_for_browsers(client):
    r = client.get("/no-such-page", headers={"accept": "text/html"})
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert client.get("/no-such-page.json").json()["status"] == 404


# ---- other lists ----------------------------------------------------------------------------


def test_hardware_page_json_csv(client):
    data = client.get("/hardware.json").json()
    assert len(data["rows"]) >= 15
    h100 = next(r for r in data["rows"] if r["id"] == "h100-sxm")
    assert h100["sources"] and abs(h100["ridge_bf16"] - 989e12 / 3.35e12) < 1e-6
    rows = list(csv.DictReader(io.StringIO(client.get("/hardware.csv").text)))
    assert [r["id"] for r in rows] == [r["id"] for r in data["rows"]]
    ridge = json.loads(scan(client.get("/hardware").text).json_blocks["chart-ridge"])
    assert sum(len(s["points"]) for s in ridge["series"]) == sum(
        (r["ridge_bf16"] is not None) + (r["ridge_fp8"] is not None) for r in data["rows"])


def test_crawl_and_benchmarks_lists(client):
    crawl = client.get("/crawl.json").json()
    assert crawl["runs"][0]["status"] == "failed" and crawl["health"]["failures_by_reason"] == {"gated": 1}
    runs = list(csv.DictReader(io.StringIO(client.get("/crawl.csv").text)))
    assert runs[0]["status"] == "failed" and runs[0]["seen"] == "12"
    bench = list(csv.DictReader(io.StringIO(client.get("/benchmarks.csv").text)))
    assert bench[0]["model_id"] == LLAMA2_70B and bench[0]["backend"] == "torch"
    page = client.get("/benchmarks").text
    assert LLAMA2_70B in page and "PyTorch path · fp32" in page  # the backend by name, not its code


def test_methodology_numbers_come_from_the_code(client):
    data = client.get("/methodology.json").json()
    assert data["example"]["gqa_bytes"] == 671_088_640 and data["example"]["mha_bytes"] == 5_368_709_120
    html = client.get("/methodology").text
    assert "671,088,640" in html and "GiB" in html and "Known limits" in html


def test_static_assets_are_vendored(client):
    html = client.get("/").text
    assets = re.findall(r'<script src="([^"]+)"', html) + re.findall(r'<link rel="(?:stylesheet|icon)" href="([^"]+)"', html)
    assert any("chart.umd.min.js" in a for a in assets)
    for url in assets:
        assert url.startswith("/static/"), url  # no CDN: the site works offline
        r = client.get(url)
        assert r.status_code == 200 and len(r.content) > 100, url


def test_wording_a_reader_can_follow(client):
    """Issue 23: no internal tracker cited, no schedule that is off by default promised, and the
    hardware page's "newest models" dated by the store's last release, not called today's."""
    claims = client.get("/claims").text
    assert "issue 15" not in claims and "issue 24" not in claims and "observatory's seed" not in claims
    benchmarks = client.get("/benchmarks").text
    assert "let the schedule benchmark" not in benchmarks
    if "No results yet" in benchmarks:
        assert "Scheduled benchmarks are off (the default)" in benchmarks
        assert "OBSERVATORY_BENCH_SCHEDULE_ENABLED=true" in benchmarks
    hardware = client.get("/hardware").text
    assert "today's new models" not in hardware and "today&#39;s new models" not in hardware
    assert "the newest release date in the store, not today" in hardware


@pytest.mark.parametrize("query", ["period=quarter", "population=all&period=quarter", "population=derivatives&period=quarter"])
def test_every_population_a_page_names_counts_the_models_of_the_api_series(client, query):
    """Issue 23: one population per statement. Each figure that says how many models it rests on
    counts the models of the trend series it sits beside, as /api/v1/trends counts them (encoder-only
    and uncertain geometries counted apart, in no statistic and no chart)."""
    points = client.get(f"/api/v1/trends?{query}&weighting=count").json()["points"]
    counted, with_g, with_kv = (sum(p[key] for p in points) for key in ("count", "g_count", "kv_count"))
    assert counted > with_g > 0 and with_kv > 0
    note = f"the {with_g:,} with a G of the {counted:,} counted models"
    trends = client.get(f"/trends?{query}").text
    assert note in trends
    twin = client.get(f"/trends.json?{query}").json()["plotted_models"]
    assert twin["total"] == counted and sum(1 for r in twin["rows"] if r["group_size"] is not None) == with_g
    if query != "period=quarter":
        return
    # The home page, /prices and /hardware speak of the default population: the originals by quarter.
    assert note in client.get("/").text
    kv_panel = client.get("/api/v1/prices").json()["kv_per_token"]
    assert kv_panel["models"] == with_kv == sum(p["n"] for p in kv_panel["points"])
    assert f"({with_kv} models)" in client.get("/prices").text
    capacity = client.get("/api/v1/hardware-capacity").json()
    assert capacity["models"] + capacity["skipped_without_cache"] == with_kv
    assert f"{capacity['models']:,} models with a per-token cache" in client.get("/hardware").text
