"""/api/v1/hardware and /api/v1/roofline in-process: the catalog as shipped, and roofline answers
equal to the pure core's for the stored geometry."""

from __future__ import annotations

import pytest
from api_testdata import built_store, raw_config
from fastapi.testclient import TestClient

from observatory.catalog import hardware
from observatory.core import kvcache, roofline
from observatory.core.geometry import parse_config_text, parse_geometry
from observatory.web.app import create_app


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings, engine = built_store(tmp_path_factory.mktemp("api-hw"))
    engine.dispose()
    with TestClient(create_app(settings)) as c:
        yield c


def test_catalog_with_sources(client):
    body = client.get("/api/v1/hardware").json()
    catalog = hardware.load_catalog()
    assert [d["id"] for d in body["rows"]] == [d.id for d in catalog]
    for row, device in zip(body["rows"], catalog):
        assert row["memory_bytes"] == device.memory_bytes
        assert row["bandwidth_bytes_per_s"] == device.bandwidth_bytes_per_s
        assert row["sources"] and all(s["url"].startswith("https://") for s in row["sources"])
    assert {r["id"] for r in body["ridge_points"]} == {d.id for d in catalog}


def test_one_device(client):
    body = client.get("/api/v1/hardware/h100-sxm").json()
    assert body["ok"] is True and body["id"] == "h100-sxm" and body["name"]
    r = client.get("/api/v1/hardware/h100-nope")
    assert r.status_code == 404 and "h100-sxm" in r.json()["error"]  # says what exists


def test_roofline_equals_the_core(client):
    params = {"model": "alpha/llama-70b", "hardware": "h200-sxm", "context": 32768, "batch": 16, "dtype": "fp8"}
    body = client.get("/api/v1/roofline", params=params).json()
    geom = parse_geometry(parse_config_text(raw_config("g8")))
    device = hardware.get_device("h200-sxm")
    attention = roofline.decode_estimate(geom, device, 32768, 16, "fp8")
    mha = roofline.decode_estimate(kvcache.mha_counterfactual(geom), device, 32768, 16, "fp8")
    whole = roofline.decode_estimate(geom, device, 32768, 16, "fp8", params=70 * 10**9)
    assert body["attention"]["time_s"] == pytest.approx(attention.time_s)
    assert body["attention"]["kv_bytes"] == kvcache.cache_bytes(geom, 32768, 16, "fp8") == attention.kv_bytes
    assert body["mha_attention"]["kv_bytes"] == 8 * attention.kv_bytes  # G = 8
    assert body["whole_step"]["weight_bytes"] == whole.weight_bytes == 140 * 10**9
    assert body["summary"]["speedup"] == pytest.approx(mha.time_s / attention.time_s)
    assert body["summary"]["max_batch"] == roofline.max_batch(geom, device, 32768, "fp8", params=70 * 10**9)
    assert (body["context"], body["batch"], body["dtype"]) == (32768, 16, "fp8")
    assert body["hardware"]["id"] == "h200-sxm" and body["assumptions"]


def test_roofline_defaults_and_unknown_parameter_count(client):
    body = client.get("/api/v1/roofline", params={"model": "gamma/latent-lite", "hardware": "b200"}).json()
    assert (body["context"], body["batch"], body["dtype"]) == (32768, 1, "bf16")
    assert body["whole_step"] is None  # no parameter count stored
    assert body["attention"]["kv_bytes"] == 61 * 576 * 2 * 32768  # MLA latent, no factor 2


@pytest.mark.parametrize("params, status, message", [
    ({"hardware": "h100-sxm"}, 422, "model"),
    ({"model": "alpha/llama-70b"}, 422, "hardware"),
    ({"model": "alpha/llama-70b", "hardware": "abacus"}, 404, "no hardware 'abacus'"),
    ({"model": "alpha/none", "hardware": "h100-sxm"}, 404, "no model 'alpha/none'"),
    ({"model": "gamma/mamba-130m", "hardware": "h100-sxm"}, 404, "no attention geometry"),
    ({"model": "beta/broken-config", "hardware": "h100-sxm"}, 404, "no attention geometry"),
    ({"model": "<b>x</b>", "hardware": "h100-sxm"}, 400, "not a valid Hub repo id"),
    ({"model": "alpha/llama-70b", "hardware": "h100-sxm", "context": 0}, 422, "context"),
    ({"model": "alpha/llama-70b", "hardware": "h100-sxm", "context": 10**12}, 422, "context"),
    ({"model": "alpha/llama-70b", "hardware": "h100-sxm", "batch": -1}, 422, "batch"),
    ({"model": "alpha/llama-70b", "hardware": "h100-sxm", "batch": 1.5}, 422, "batch"),
    ({"model": "alpha/llama-70b", "hardware": "h100-sxm", "dtype": "fp4"}, 422, "dtype"),
    ({"model": "alpha/llama-70b", "hardware": "x" * 101}, 422, "hardware"),
])
def test_roofline_bad_parameters(client, params, status, message):
    r = client.get("/api/v1/roofline", params=params)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["ok"] is False and body["status"] == status and message in body["error"]
