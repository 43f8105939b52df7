"""/compare and /api/v1/compare in-process on the bundled snapshot: the same numbers in the page,
its JSON and CSV twins and the API, equal to ``core.deployment`` worked by hand; unknown ids get the
model page's "did you mean"; every bad input is refused in the one error shape. Also the model
page's capacity-by-TP section and the model list's select-then-compare form."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from observatory.settings import Settings
from observatory.web.app import create_app

LLAMA, QWEN, DSV3, RWKV = ("meta-llama/Meta-Llama-3-70B", "Qwen/Qwen3-32B", "deepseek-ai/DeepSeek-V3",
                           "RWKV/rwkv-4-7b-pile")
IDS = f"{LLAMA},{QWEN},{DSV3},{RWKV}"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("compare"), hub_timeout_s=1)
    with TestClient(create_app(settings)) as c:
        yield c


def _cell(model: dict, hardware_id: str, tp: int, mode: str = "tp") -> dict:
    row = next(r for r in model["capacity"]["rows"] if r["hardware_id"] == hardware_id)
    return next(c for c in row["cells"] if c["tp"] == tp and c["mode"] == mode)


@pytest.mark.slow
def test_api_json_twin_and_numbers_agree(client):
    api = client.get("/api/v1/compare", params={"models": IDS}).json()
    twin = client.get("/compare.json", params=[("models", LLAMA), ("models", QWEN), ("models", DSV3),
                                               ("models", RWKV)]).json()  # repeats mean the same as commas
    assert api["ok"] is True and twin["models"] == api["models"] and api["context"] == 32768
    llama, qwen, dsv3, rwkv = api["models"]
    assert [m["id"] for m in api["models"]] == [LLAMA, QWEN, DSV3, RWKV]  # the order asked for
    assert llama["kv_bytes_per_token"] == 327_680 and [p["bytes"] for p in llama["kv"]] == [
        327_680 * 4096, 327_680 * 32768, 327_680 * 131072]
    assert llama["kv"][1]["beyond_max_context"] is True  # Llama 3 was released with an 8k context
    assert dsv3["kv_bytes_per_token"] == 70_272 and dsv3["geometry"]["kv_tp_max"] is None
    assert llama["geometry"]["kv_tp_max"] == 8 and qwen["geometry"]["kv_tp_max"] == 8
    # The hand-worked cases of tests/unit/test_deployment.py, through the API.
    assert _cell(llama, "h100-sxm", 8)["max_sequences"] == 46 and _cell(llama, "h100-sxm", 16)["max_sequences"] == 53
    assert llama["capacity"]["sentence"].startswith("From TP = 16 this model stores its KV twice")
    assert dsv3["capacity"]["modes"] == ["tp", "dp_attention"] and _cell(dsv3, "h200-sxm", 16, "dp_attention")
    copies = {(lay["mode"], lay["tp"]): lay["copies"] for lay in dsv3["capacity"]["layouts"]}
    assert copies[("tp", 8)] == 8 and copies[("dp_attention", 8)] == 1
    assert rwkv["capacity"] is None and rwkv["kv"] == [] and rwkv["curve"] == []  # no per-token cache
    assert len(llama["curve"]) == 11 and llama["curve"][0]["context"] == 1024 and llama["curve"][-1]["context"] == 1 << 20


def test_csv_is_one_row_per_model_device_mode_and_degree(client):
    data = client.get("/api/v1/compare", params={"models": IDS}).json()
    for path in ("/api/v1/compare?format=csv&models=" + IDS, "/compare.csv?models=" + IDS):
        response = client.get(path)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.text)))
        devices = len(data["models"][0]["capacity"]["rows"])
        assert len(rows) == devices * 5 + devices * 5 + devices * 10 + 1  # Llama, Qwen, DeepSeek (two modes), RWKV
        h100 = next(r for r in rows if r["model_id"] == LLAMA and r["hardware_id"] == "h100-sxm" and r["tp"] == "16")
        assert h100["max_sequences"] == "53" and h100["copies"] == "2.0" and h100["kv_32k"] == str(327_680 * 32768)
        assert next(r for r in rows if r["model_id"] == RWKV)["hardware_id"] == ""


def test_the_page_shows_the_comparison(client):
    html = client.get("/compare", params={"models": IDS}).text
    for text in (LLAMA, QWEN, DSV3, "KV of one sequence at 32,768 tokens", "At TP = 8 (one node)",
                 "From TP = 16 this model stores its KV twice", 'data-chart="chart-kv-context"',
                 "No measured spot-benchmark yet for"):
        assert text in html, text


@pytest.mark.parametrize(("params", "status", "message"), [
    ({"models": "meta-llama/Llama-3-70B,Qwen/Qwen3-32B"}, 404, "did you mean meta-llama/Meta-Llama-3-70B?"),
    ({"models": "Qwen/Qwen3-32B"}, 422, "models: List should have at least 2 items"),
    ({"models": ",".join(f"a/m{i}" for i in range(7))}, 422, "at most 6 items"),
    ({"models": "Qwen/Qwen3-32B,Qwen/Qwen3-32B"}, 422, "Qwen/Qwen3-32B listed more than once"),
    ({"models": "Qwen/Qwen3-32B,../etc"}, 422, "'../etc' is not a Hub repo id"),
    ({"models": f"{LLAMA},{QWEN}", "context": 0}, 422, "context"),
    ({"models": f"{LLAMA},{QWEN}", "tp": 8}, 400, "tp"),
    ({}, 422, "models"),
])
def test_bad_input_is_refused_in_the_error_shape(client, params, status, message):
    body = client.get("/api/v1/compare", params=params).json()
    assert body["ok"] is False and body["status"] == status and message in body["error"], body
    # the page and its twin refuse the same input; the page answers the HTML error page
    twin = client.get("/compare.json", params=params)
    assert twin.status_code == status and twin.json()["ok"] is False and message in twin.json()["error"]
    page = client.get("/compare", params=params)
    assert page.status_code == twin.status_code and "text/html" in page.headers["content-type"]


def test_model_page_has_the_capacity_by_tp_section(client):
    html = client.get(f"/models/{DSV3}").text
    assert 'id="deployment"' in html and "data-parallel attention stores it once" in html
    assert "plain TP · data-parallel attention" in html and 'action="/compare"' in html
    data = client.get(f"/models/{LLAMA}.json").json()["deployment"]
    assert data["sentence"].startswith("From TP = 16") and data["degrees"] == [1, 2, 4, 8, 16]
    assert client.get("/models/RWKV/rwkv-4-7b-pile.json").json()["deployment"] is None


def test_model_list_selects_rows_for_compare(client):
    html = client.get("/models", params={"q": "llama-3", "size": 5}).text
    assert '<form id="compare-form" method="get" action="/compare">' in html
    assert html.count('type="checkbox" name="models"') == 5
