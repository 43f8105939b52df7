"""/claims, /research, /prices and the hardware page's capacity chart, with their JSON twins, CSV
exports and /api/v1 routes, through the app in-process on a real SQLite file holding the bundled
snapshot. Numbers are checked against an oracle that reads the file with plain ``sqlite3`` and
recomputes with the core's kvcache/roofline functions, not with the code under test."""

from __future__ import annotations

import csv
import io
import re
import sqlite3
import statistics
from datetime import date, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from observatory.bench.tables import BenchResult
from observatory.catalog.hardware import load_catalog
from observatory.catalog.prices import load_prices
from observatory.catalog.research import load_research
from observatory.uptrain.store import read_results_file
from observatory.core import claims as core_claims
from observatory.core import kvcache, roofline
from observatory.settings import Settings
from observatory.store.db import make_engine, session_scope
from observatory.store.ingest import derive
from observatory.web.app import create_app

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
LLAMA2_70B = "meta-llama/Llama-2-70b-hf"
PAGES = ["/claims", "/research", "/prices", "/hardware"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("claims") / "data"
    settings = Settings(data_dir=data_dir, scheduler_enabled=False)
    with TestClient(create_app(settings)) as client:  # lifespan: migrations and the bundled snapshot
        engine = make_engine(settings.resolved_database_url)
        with session_scope(engine) as session:  # a benchmark without a GQA dividend must not count as one
            session.add(BenchResult(model_id=LLAMA2_70B, device="cpu: test machine", device_type="cpu",
                                    backend="torch", dtype="fp32", batch=1, num_heads=64, num_kv_heads=8,
                                    head_dim=128, context=32768, median_s=0.0123, kv_bytes=268435456))
        engine.dispose()
        yield client, settings.resolved_database_url.removeprefix("sqlite:///")


@pytest.fixture(scope="module")
def client(store):
    return store[0]


@pytest.fixture(scope="module")
def db(store):
    conn = sqlite3.connect(store[1])
    yield conn
    conn.close()


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


# ---- pages, twins, CSV --------------------------------------------------------------------------

@pytest.mark.parametrize("path", PAGES)
@pytest.mark.slow
def test_pages_render_with_csp_and_data_tables(client, path):
    r = client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    html = r.text
    assert not re.search(r"<script(?![^>]*(src=\"/static/|type=\"application/json\"))", html)  # no inline code
    assert " style=" not in html and " onclick=" not in html
    assert html.count("<canvas") == html.count('<details class="chart-data" open>')
    assert f'href="{path}.json"' in html
    assert f'aria-current="page"' in html


@pytest.mark.parametrize("path, key", [("/claims.json", "claims"), ("/research.json", "rows"),
                                       ("/prices.json", "rows"), ("/hardware.json", "capacity")])
def test_json_twins(client, path, key):
    r = client.get(path)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json()["ok"] is True and r.json()[key]


@pytest.mark.parametrize("page, api", [("/claims", "/api/v1/claims"), ("/research", "/api/v1/research"),
                                       ("/prices", "/api/v1/prices")])
def test_pages_and_api_answer_the_same_data(client, page, api):
    twin, answer = client.get(page + ".json").json(), client.get(api).json()
    for key in answer:
        assert twin[key] == answer[key], key
    assert client.get(page + ".csv").text == client.get(api, params={"format": "csv"}).text


def test_csv_exports(client):
    claims_rows = _csv(client.get("/claims.csv").text)
    assert [r["id"] for r in claims_rows] == [c.id for c in core_claims.CLAIMS]
    assert all(r["verdict"] in core_claims.VERDICTS and r["source_title"] for r in claims_rows)
    research = _csv(client.get("/research.csv").text)
    ours = client.get("/research.json").json()["ours_rows"]  # the committed uptrain run, when the store has none
    assert len(research) == len(load_research()["rows"]) + len(ours)
    assert all(r["paper_url"] and r["table"] for r in research)
    assert [r["id"] for r in research[len(research) - len(ours):]] == [r["id"] for r in ours]
    prices = _csv(client.get("/prices.csv").text)
    assert len(prices) == len(load_prices()["rows"])
    assert {r["currency"] for r in prices} == {"USD"} and {r["unit"] for r in prices} == {"per 1,000,000 tokens"}
    assert all(r["source_url"].startswith("https://") and r["date"] for r in prices)
    capacity = _csv(client.get("/api/v1/hardware-capacity", params={"format": "csv"}).text)
    assert [r["id"] for r in capacity] == [r["id"] for r in client.get("/api/v1/hardware-capacity").json()["rows"]]


def test_routes_declare_their_response_models(client):
    spec = client.get("/api/v1/openapi.json").json()
    for path in ("/api/v1/claims", "/api/v1/research", "/api/v1/prices", "/api/v1/hardware-capacity"):
        ok = spec["paths"][path]["get"]["responses"]["200"]["content"]
        assert "$ref" in ok["application/json"]["schema"] and "text/csv" in ok, path
        assert "422" in spec["paths"][path]["get"]["responses"]


@pytest.mark.parametrize("path", ["/api/v1/claims?format=xml", "/api/v1/research?format=", "/api/v1/prices?format=1",
                                  "/api/v1/hardware-capacity?format=pdf"])
def test_bad_format_gets_the_error_shape(client, path):
    r = client.get(path)
    assert r.status_code == 422
    body = r.json()
    assert body["ok"] is False and body["status"] == 422 and "format" in body["error"] and body["errors"]


def test_unknown_twin_is_a_404_in_the_error_shape(client):
    r = client.get("/claims.xml")
    assert r.status_code == 404 and r.json()["ok"] is False


# ---- the claims --------------------------------------------------------------------------------

def test_claims_recompute_from_the_stored_geometry(client, db):
    answer = {c["id"]: c for c in client.get("/api/v1/claims").json()["claims"]}
    geometries, parameters = {}, {}
    for model_id in {m for c in core_claims.CLAIMS for m in c.models}:
        raw, params = db.execute(
            "SELECT r.raw_text, m.num_parameters FROM hub_model m JOIN config_revision r "
            "ON r.id = m.current_revision_id WHERE m.id = ?", (model_id,)).fetchone()
        geometries[model_id], parameters[model_id] = derive(raw).geometry, params
    quarters = tuple({"label": p["period_start"][:4] + "-Q" + str((int(p["period_start"][5:7]) - 1) // 3 + 1),
                      "n": p["tp8_count"], "share": p["share_tp8_fill"], "share_mla": p["share_tp8_mla"]}
                     for p in client.get("/api/v1/trends?period=quarter").json()["points"] if p["tp8_count"])
    # The uptraining claim is judged on the committed results file (the store holds no run here).
    committed = read_results_file()
    oracle = core_claims.check_all(core_claims.Inputs(geometries, parameters, {d.id: d for d in load_catalog()},
                                                      tp8_quarters=quarters, uptrain=committed))
    for expected in oracle:
        got = answer[expected["id"]]
        assert got["verdict"] == expected["verdict"]
        assert [f["ours"] for f in got["figures"]] == pytest.approx([f["ours"] for f in expected["figures"]])
    assert answer["gqa-uptraining"]["verdict"] in core_claims.VERDICTS
    assert {c: answer[c]["verdict"] for c in answer if c != "gqa-uptraining"} == {
        "llama2-70b-kv-2048": "unsourced", "deepseek-v2-kv-93": "holds with caveats",
        "trtllm-gqa-70b-throughput": "unsourced", "hf-llama31-kv-128k": "does not hold",
        "mistral-7b-rolling-buffer": "holds", "deepseek-v3-kv-per-token": "holds", "tp-kv-heads": "unsourced"}
    # The two unsourced ones still show what our arithmetic alone says.
    assert answer["trtllm-gqa-70b-throughput"]["arithmetic_verdict"] == "holds with caveats"
    assert answer["tp-kv-heads"]["arithmetic_verdict"] == "holds with caveats"
    share = next(f for f in answer["tp-kv-heads"]["figures"] if f["label"].startswith("new originals"))
    assert 0 < share["ours"] < 1 and "n = " in share["how"]  # the snapshot's last judged quarter


def test_measurable_claim_says_not_measured_yet(client):
    trt = next(c for c in client.get("/claims.json").json()["claims"] if c["measurable"])
    assert trt["measurement"] is None  # a plain spot-benchmark row carries no GQA dividend
    assert "not measured yet" in client.get("/claims").text


def test_claims_on_an_empty_store_are_unchecked(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", scheduler_enabled=False, autoload_snapshot=False)
    with TestClient(create_app(settings)) as empty:
        body = empty.get("/claims.json").json()
        # The uptraining claim needs no stored model: it is judged on the committed run's results file.
        on_geometry = [c for c in body["claims"] if c["id"] != "gqa-uptraining"]
        assert all(c["arithmetic_verdict"] is None and c["missing"] for c in on_geometry)
        assert {c["verdict"] for c in on_geometry} == {None, "unsourced"}  # unsourced even when unchecked
        page = empty.get("/claims")
        assert page.status_code == 200 and "not checked" in page.text and "Not in the store" in page.text
        capacity = empty.get("/api/v1/hardware-capacity").json()
        assert capacity["models"] == 0 and capacity["today"] is None
        assert all(r["at_release"] == {"median": None, "n": 0, "weights_do_not_fit": 0} for r in capacity["rows"])
        assert empty.get("/prices").status_code == 200 and empty.get("/hardware").status_code == 200


# ---- the median new model: capacity and the KV panel ------------------------------------------------

# The originals as the trends count them: encoder-only and uncertain geometries are counted apart.
POPULATION_SQL = ("SELECT m.id, m.created_at, COALESCE(m.num_parameters, g.params_estimate), "
                  "g.kv_bytes_per_token_bf16, r.raw_text, m.num_parameters IS NULL "
                  "FROM hub_model m JOIN geometry g ON g.revision_id = m.current_revision_id "
                  "JOIN config_revision r ON r.id = m.current_revision_id "
                  "WHERE g.attention_kind != 'none' AND m.created_at IS NOT NULL AND g.kv_bytes_per_token_bf16 > 0 "
                  "AND NOT g.encoder_only AND NOT g.uncertain "
                  "AND m.relation = 'original' AND NOT m.is_test_repo "
                  "AND COALESCE(m.num_parameters, g.params_estimate) >= 1000000000")  # the originals


def test_capacity_matches_an_independent_oracle(client, db):
    body = client.get("/api/v1/hardware-capacity").json()
    models, estimated = [], 0
    for model_id, created, params, _, raw, is_estimate in db.execute(POPULATION_SQL):
        models.append((date.fromisoformat(created[:10]), params, derive(raw).geometry))
        estimated += bool(is_estimate)
    # every model the >= 1B floor admits has the parameter count the floor read: none is skipped
    with_params = models
    assert body["models"] == len(models) and body["parameters_estimated"] == estimated > 0
    assert body["context"] == 32768 and body["weights_bytes_per_parameter"] == 2
    today = max(m[0] for m in with_params)
    assert body["today"] == today.isoformat()
    devices = {d.id: d for d in load_catalog()}
    for row in body["rows"]:
        device = devices[row["id"]]
        for key, end in (("at_release", device.released), ("today", today)):
            new = [m for m in with_params if end - timedelta(days=365) < m[0] <= end]
            fits = [roofline.max_batch(g, device, 32768, params=p) for _, p, g in new]
            assert row[key]["n"] == len(fits), (row["id"], key)
            assert row[key]["median"] == (statistics.median(fits) if fits else None), (row["id"], key)
            assert row[key]["weights_do_not_fit"] == fits.count(0)
        new = [m for m in with_params if today - timedelta(days=365) < m[0] <= today]
        for key, chip in (("chips_today", device.memory_bytes), ("chips_today_on_chip", device.on_chip_bytes)):
            if key == "chips_today_on_chip" and not 0 < chip < device.memory_bytes:
                assert row[key] is None, row["id"]  # only a chip with SRAM and off-chip memory has the second count
                continue
            needed = [-(-(2 * p + kvcache.cache_bytes(g, 32768)) // chip) for _, p, g in new]
            assert row[key] == {"median": statistics.median(needed), "n": len(needed), "max": max(needed)}, row["id"]


def test_kv_panel_matches_an_independent_oracle(client, db):
    panel = client.get("/api/v1/prices").json()["kv_per_token"]
    quarters: dict[date, list[int]] = {}
    for _, created, _, kv, _, _ in db.execute(POPULATION_SQL):
        day = date.fromisoformat(created[:10])
        quarters.setdefault(date(day.year, (day.month - 1) // 3 * 3 + 1, 1), []).append(kv)
    assert [(p["period_start"], p["median"], p["n"]) for p in panel["points"]] == [
        (q.isoformat(), statistics.median(v), len(v)) for q, v in sorted(quarters.items())]
    assert panel["models"] == sum(len(v) for v in quarters.values())


def test_hardware_page_shows_the_capacity_chart_and_counts(client):
    html = client.get("/hardware").text
    assert 'data-chart="chart-capacity"' in html and "32k-token sequences" in html
    body = client.get("/hardware.json").json()["capacity"]
    assert f"{body['models']:,} models with a per-token cache, {body['parameters_estimated']:,} of them with" in html
    assert "without a parameter count were skipped" not in html


def test_prices_page_says_correlation_not_cause(client):
    html = client.get("/prices").text
    assert "Correlation, not cause." in html
    assert html.count('data-chart="chart-prices"') == 1 and html.count('data-chart="chart-kv"') == 1
    for row in load_prices()["rows"]:
        assert row["source_url"] in html


# ---- the README's page list ---------------------------------------------------------------------

def test_readme_lists_the_new_pages_and_every_listed_page_answers(client):
    table = README.split("## Pages and API", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(/[a-z]*)`", table, flags=re.M)
    for path in ("/claims", "/research", "/prices"):
        assert path in listed, f"README's Pages and API table does not list {path}"
    for path in listed:
        if "{" not in path:
            assert client.get(path).status_code == 200, path
    for api in ("/api/v1/claims", "/api/v1/research", "/api/v1/prices", "/api/v1/hardware-capacity"):
        assert api in table, api


@pytest.mark.slow
def test_measurable_claim_shows_our_measured_gqa_dividend(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", scheduler_enabled=False)
    with TestClient(create_app(settings)) as fresh:
        engine = make_engine(settings.resolved_database_url)
        with session_scope(engine) as session:  # as `observatory bench --dividend` stores one
            session.add(BenchResult(model_id=LLAMA2_70B, device="cpu: test machine", device_type="cpu",
                                    backend="cpu", dtype="fp32", batch=1, num_heads=64, num_kv_heads=8,
                                    head_dim=128, context=8192, median_s=0.0123, kv_bytes=268435456,
                                    mha_median_s=0.0451, predicted_s=0.001, mha_predicted_s=0.0079))
        engine.dispose()
        trt = next(c for c in fresh.get("/claims.json").json()["claims"] if c["measurable"])
        assert trt["measurement"]["speedup"] == pytest.approx(3.667, abs=1e-3)
        assert trt["measurement"]["predicted_speedup"] == 7.9 and trt["measurement"]["context"] == 8192
        page = fresh.get("/claims").text
        assert "3.67x measured (roofline 7.9x)" in page and "not measured yet" not in page
        listed = _csv(fresh.get("/api/v1/claims", params={"format": "csv"}).text)
        assert float(next(r for r in listed if r["id"] == trt["id"])["measured_speedup"]) == pytest.approx(3.667, abs=1e-3)
