"""The pure helpers behind the pages: the calculator's cache terms, number formatting, CSV
cells, URLs of twins, model paths with a format suffix."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from observatory.catalog.snapshot import load_entries
from observatory.core import kvcache
from observatory.core.geometry import ConfigError, parse_config_text, parse_geometry
from observatory.web import rendering
from observatory.web.pages import model as model_page


def _snapshot_geometries():
    for entry in load_entries():
        try:
            yield entry.id, parse_geometry(parse_config_text(entry.raw_text))
        except ConfigError:
            continue


def _terms_bytes(terms, context, batch, dtype):
    """What kv-calculator.js computes, written the same way."""
    elements = sum(t["elements_per_token"] * (context if t["cap"] is None else min(context, t["cap"])) for t in terms)
    return elements * kvcache.DTYPE_BYTES[dtype] * batch


def test_calculator_terms_reproduce_kvcache_for_every_snapshot_model():
    checked = windowed = 0
    for model_id, geom in _snapshot_geometries():
        terms = model_page.kv_terms(geom)
        counter = model_page.kv_terms(kvcache.mha_counterfactual(geom))
        windowed += any(t["cap"] is not None for t in terms)
        for context, batch, dtype in ((1, 1, "bf16"), (3000, 2, "fp8"), (131072, 7, "fp32"), (1 << 24, 1, "fp16")):
            assert _terms_bytes(terms, context, batch, dtype) == kvcache.cache_bytes(geom, context, batch, dtype), model_id
            assert _terms_bytes(counter, context, batch, dtype) == kvcache.cache_bytes(
                kvcache.mha_counterfactual(geom), context, batch, dtype), model_id
        checked += 1
    assert checked >= 100 and windowed >= 5


@pytest.mark.parametrize("value, decimal, binary", [
    (None, "—", "—"),
    (0, "0 B", "0 B"),
    (999, "999 B", "999 B"),
    (1000, "1.00 kB", "1,000 B"),
    (327_680, "328 kB", "320 KiB"),
    (671_088_640, "671 MB", "640 MiB"),
    (5_368_709_120, "5.37 GB", "5.00 GiB"),
    (42_949_672_960, "42.9 GB", "40.0 GiB"),
])
def test_byte_formatting(value, decimal, binary):
    assert rendering.fmt_bytes(value) == decimal
    assert rendering.fmt_bytes_binary(value) == binary


@pytest.mark.parametrize("value, text", [(None, "—"), (8.0, "8"), (5.333333, "5.33"), (1234.5, "1,234"),
                                         (12_345_678, "12,345,678"), (0.0123, "0.0123"), (float("nan"), "—")])
def test_number_formatting(value, text):
    assert rendering.fmt_num(value) == text


def test_seconds_and_flops_formatting():
    assert rendering.fmt_seconds(0.0000123) == "12.3 µs"
    assert rendering.fmt_seconds(0.0123) == "12.3 ms"
    assert rendering.fmt_seconds(2.5) == "2.5 s"
    assert rendering.fmt_flops(989e12) == "989 TFLOP/s"
    assert rendering.fmt_flops(2.25e15) == "2.25 PFLOP/s"
    assert rendering.fmt_pct(0.4567) == "45.7%"


@pytest.mark.parametrize("value, cell", [
    ("=1+1", "'=1+1"), ("+cmd", "'+cmd"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"), ("llama", "llama"),
    (-2, -2), (None, ""), (["a", "b"], "a; b"),
])
def test_csv_cells(value, cell):
    assert rendering.csv_cell(value) == cell


def _request(path: str, query: str = "") -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "query_string": query.encode(), "headers": []})


def test_page_urls_keep_the_query():
    req = _request("/models", "kind=GQA&size=10")
    assert rendering.page_url(req, "json") == "/models.json?kind=GQA&size=10"
    assert rendering.page_url(req, None, next="abc") == "/models?kind=GQA&size=10&next=abc"
    assert rendering.page_url(_request("/models.csv", "next=x"), None, next=None) == "/models"
    assert rendering.page_url(_request("/"), "json") == "/index.json"


@pytest.mark.parametrize("path, parsed", [
    ("meta-llama/Llama-2-70b-hf", ("meta-llama/Llama-2-70b-hf", None)),
    ("Qwen/Qwen2.5-7B.json", ("Qwen/Qwen2.5-7B", "json")),
    ("Qwen/Qwen2.5-7B", ("Qwen/Qwen2.5-7B", None)),
    ("gpt2.csv", ("gpt2", "csv")),
])
def test_model_paths(path, parsed):
    assert model_page.split_model_path(path) == parsed


def test_wants_html_only_for_browsers_on_pages():
    def req(path, accept):
        return Request({"type": "http", "method": "GET", "path": path, "query_string": b"",
                        "headers": [(b"accept", accept.encode())]})

    assert rendering.wants_html(req("/nope", "text/html,application/xhtml+xml"))
    assert not rendering.wants_html(req("/nope", "application/json"))
    assert not rendering.wants_html(req("/api/v1/nope", "text/html"))
    assert not rendering.wants_html(req("/nope.json", "text/html"))
