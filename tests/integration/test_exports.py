"""Issue 21, finding 4: exports cannot take the site down. The app runs under uvicorn on
127.0.0.1 and the clients are real httpx clients, some at once; every count and wait is bounded
and nothing is timed: each test shows what came back and in which shape."""

from __future__ import annotations

import csv
import io
import zipfile
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from api_testdata import built_store
from test_web_readers import serving

from observatory.store.db import POOL_TIMEOUT_S
from observatory.web.app import create_app
from observatory.web.export_limits import export_slots
from observatory.web.export_package import package_builder

ERROR_KEYS = {"ok", "error", "errors", "status"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    settings, engine = built_store(tmp_path_factory.mktemp("exports"), api_export_per_client=1,
                                   api_export_concurrency=2)
    engine.dispose()
    app = create_app(settings)
    with serving(app) as base:
        yield {"app": app, "base": base, "settings": settings}


def in_error_shape(r: httpx.Response, status: int) -> bool:
    body = r.json()
    return r.status_code == status and set(body) == ERROR_KEYS and body["status"] == status and not body["ok"]


def test_past_the_cap_an_export_is_a_429_in_the_error_shape(site):
    slots = export_slots(site["app"])
    url = f"{site['base']}/api/v1/models.csv?size=3"
    with httpx.Client(timeout=30) as client:
        assert client.get(url).status_code == 200
        with slots.hold("127.0.0.1"):  # this client's one export is running
            mine = client.get(url)
            page = client.get(f"{site['base']}/models.csv?size=3")
            json_page = client.get(f"{site['base']}/api/v1/models?size=3")
        with slots.hold("198.51.100.1"), slots.hold("2001:db8::1"):  # two others: the overall cap
            everyone = client.get(url)
        again = client.get(url)
    assert in_error_shape(mine, 429) and "from this address" in mine.json()["error"]
    assert mine.headers["retry-after"] == "2"
    assert page.status_code == 429 and "from this address" in page.text  # the page's CSV counts too
    assert json_page.status_code == 200  # a JSON page is no export
    assert in_error_shape(everyone, 429) and "over all clients" in everyone.json()["error"]
    assert again.status_code == 200 and slots.running == 0


def test_concurrent_exports_get_whole_pages_or_429s_and_nothing_else(site):
    url = f"{site['base']}/api/v1/models.csv"

    def fetch(i: int) -> httpx.Response:
        with httpx.Client(timeout=30) as client:
            return client.get(url, params={"size": 1 + i % 5, "sort": "id"})

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(fetch, range(24)))
    whole = [a for a in answers if a.status_code == 200]
    busy = [a for a in answers if a.status_code == 429]
    assert len(whole) + len(busy) == len(answers) and whole
    for a in whole:  # never cut: every row the page promised, up to the final line break
        rows = list(csv.DictReader(io.StringIO(a.text)))
        assert a.text.endswith("\r\n") and len(rows) == int(a.request.url.params["size"])
    assert all(in_error_shape(a, 429) and a.headers["retry-after"] for a in busy)
    assert export_slots(site["app"]).running == 0


@pytest.mark.slow
def test_an_exhausted_pool_answers_503_in_the_error_shape(site):
    engine = site["app"].state.engine
    pool = engine.pool
    held = [engine.connect() for _ in range(pool.size() + pool._max_overflow)]  # every connection
    try:
        with httpx.Client(timeout=POOL_TIMEOUT_S + 30) as client:
            r = client.get(f"{site['base']}/api/v1/models?size=2")
            page = client.get(f"{site['base']}/models", headers={"accept": "text/html"})
    finally:
        for conn in held:
            conn.close()
    assert in_error_shape(r, 503) and r.headers["retry-after"] == "2" and "busy" in r.json()["error"]
    assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
    with httpx.Client(timeout=30) as client:
        assert client.get(f"{site['base']}/api/v1/models?size=2").status_code == 200  # and back


def test_every_model_at_once_is_the_prebuilt_data_package(site):
    url = f"{site['base']}/api/v1/exports/gqa-observatory-models.zip"
    builder = package_builder(site["app"])
    with httpx.Client(timeout=60) as client:
        first = client.get(url)
        if first.status_code == 503:  # the first download starts the first build
            assert in_error_shape(first, 503) and first.headers["retry-after"] == "30"
            assert builder.wait(60) is not None
            first = client.get(url)
        second = client.get(url)
        listed = []
        page = f"{site['base']}/api/v1/models.csv?size=500&sort=id&order=asc"
        while page:
            r = client.get(page)
            listed += list(csv.DictReader(io.StringIO(r.text)))
            page = r.headers.get("x-next-url")
    assert first.status_code == second.status_code == 200
    assert first.headers["x-built-at"] == second.headers["x-built-at"]  # built once, served twice
    with zipfile.ZipFile(io.BytesIO(first.content)) as archive:
        table = list(csv.DictReader(io.StringIO(archive.read("gqa-observatory-models/models.csv").decode())))
        descriptor = archive.read("gqa-observatory-models/datapackage.json").decode()
    assert int(first.headers["x-row-count"]) == len(table) == len(listed) > 0
    assert table == listed  # the package is the list, every page of it
    assert f'"rows": {len(table)}' in descriptor and '"primaryKey"' in descriptor
