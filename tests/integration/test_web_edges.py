"""Every GET route, pages and API: dates at the edges of the calendar never give a 5xx, and HEAD
answers what GET answers, without the body (issue 14)."""

from __future__ import annotations

from datetime import date

import httpx
import pytest
from api_testdata import built_store
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.routing import Mount, Route

# Path parameters filled with ids the store holds (a route answering 404 is still compared).
PATH_VALUES = {"model_id": "alpha/llama-7b", "model_path": "alpha/llama-7b", "hardware_id": "h100-sxm",
               "revision_id": "1", "fingerprint": "0" * 64, "sub_id": "sub_0000000000000000",
               "delivery_id": "dlv_0000000000000000"}
EDGES = ["0001-01-01", "0001-01-02", "9999-12-30", "9999-12-31"]
# Spelled like dates but outside what a date can hold: refused with a 4xx, never a 5xx.
OUTSIDE = ["0000-01-01", "0000-12-31", "10000-01-01", "9999-12-32", "9999-13-01", "0001-00-01", "-0001-01-01"]


@pytest.fixture(scope="module")
def app_and_client(tmp_path_factory):
    from observatory.web.app import create_app

    settings, engine = built_store(tmp_path_factory.mktemp("edges") / "data", refresh=True, scheduler_enabled=False)
    engine.dispose()
    app = create_app(settings)
    with TestClient(app, raise_server_exceptions=False) as client:
        # The data package is built first: a download during its build is a 503, after it a 200,
        # and a GET then a HEAD must not straddle the build.
        from observatory.web.export_package import package_builder

        builder = package_builder(app)
        builder.start()
        assert builder.wait(60) is not None
        yield app, client


def get_routes(app) -> list[Route]:
    """Every route answering GET, however the app nests its routers."""
    found, todo = [], list(app.routes)
    while todo:
        route = todo.pop(0)
        if hasattr(route, "original_router"):  # FastAPI's included routers
            todo[:0] = route.original_router.routes
        elif not isinstance(route, Mount) and "GET" in (getattr(route, "methods", None) or ()):
            found.append(route)
    return found


def get_paths(app) -> list[str]:
    paths = []
    for route in get_routes(app):
        values = {name: PATH_VALUES.get(name, "x") for name in route.param_convertors}
        paths.append(route.path_format.format(**values))
    assert len(paths) > 30 and "/trends" in paths and "/api/v1/models.csv" in paths  # the walk found them
    return paths


def date_parameters(app) -> list[str]:
    """Query parameters that hold dates, as OpenAPI declares them (format: date). The pages take
    the same parameter models as their API twins (/models and /api/v1/models, /trends and
    /api/v1/trends), so every route is asked with every one of them."""
    names = set()
    for operations in app.openapi()["paths"].values():
        for operation in operations.values():
            for param in operation.get("parameters", []):
                schema = param.get("schema", {})
                if "date" in {s.get("format") for s in [schema, *schema.get("anyOf", [])]}:
                    names.add(param["name"])
    assert {"created_from", "created_to", "since", "until"} <= names
    return sorted(names)


def _no_5xx(client, path: str, params: dict) -> None:
    response = client.get(path, params=params)
    assert response.status_code < 500, (path, params, response.status_code, response.text[:300])


@pytest.fixture(scope="module")
def date_routes(app_and_client) -> list[tuple[str, list[str]]]:
    """Every GET route with the date parameters it takes: those an ordinary date is not refused
    for (an unknown parameter is a 400; a route that ignored unknown ones would take them all,
    which is harmless). Pages are found the same way as API routes."""
    app, client = app_and_client
    names = date_parameters(app)
    routes = []
    for path in get_paths(app):
        taken = [name for name in names if client.get(path, params={name: "2020-06-15"}).status_code != 400]
        if taken:
            routes.append((path, taken))
    found = {path for path, _ in routes}
    assert {"/models", "/models.csv", "/trends", "/trends.json", "/api/v1/models", "/api/v1/trends"} <= found
    return routes


@pytest.mark.slow
def test_every_date_parameter_at_each_edge_on_every_route(app_and_client, date_routes):
    """Each parameter a route takes at each edge, alone and all together, then the widest range."""
    _app, client = app_and_client
    for path, taken in date_routes:
        for value in EDGES + OUTSIDE:
            for name in taken:
                _no_5xx(client, path, {name: value})
        for value in EDGES:
            _no_5xx(client, path, dict.fromkeys(taken, value))
        _no_5xx(client, path, {name: EDGES[-1] if name in ("created_to", "until") else EDGES[0] for name in taken})


near_edges = st.one_of(
    st.dates(max_value=date(1, 3, 1)),
    st.dates(min_value=date(9999, 10, 1)),
    st.dates(),
).map(date.isoformat)


@given(data=st.data())
@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_date_ranges_near_the_edges_on_every_route(app_and_client, date_routes, data):
    _app, client = app_and_client
    path, taken = data.draw(st.sampled_from(date_routes))
    chosen = data.draw(st.lists(st.sampled_from(taken), min_size=1, unique=True))
    values = st.one_of(st.sampled_from(EDGES), near_edges, st.sampled_from(OUTSIDE))
    _no_5xx(client, path, {name: data.draw(values) for name in chosen})


# Headers that legitimately differ between two answers to the same request.
VOLATILE = {"date", "x-request-id"}


def test_head_answers_every_get_route_with_its_status_and_headers_and_no_body(app_and_client):
    app, client = app_and_client
    for path in get_paths(app) + ["/static/no-such-file.js", "/no/such/page"]:
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code != 405, path
        assert head.content == b"", path
        same = {k: v for k, v in got.headers.items() if k not in VOLATILE}
        assert {k: v for k, v in head.headers.items() if k not in VOLATILE} == same, path


def test_head_on_a_post_only_route_is_still_405(app_and_client):
    _app, client = app_and_client
    assert client.head("/alerts/subscribe").status_code == 405


@pytest.mark.slow
def test_head_through_the_real_server(tmp_path):
    from observatory.testing.server import running_server

    with running_server(tmp_path / "data", "--no-scheduler") as server:
        for path in ["/", "/models", "/api/v1/models", "/api/v1/trends.csv", "/static/no-such-file.js"]:
            got = httpx.get(server.url + path, timeout=30)
            head = httpx.head(server.url + path, timeout=30)
            assert head.status_code == got.status_code, path
            assert head.content == b"" and head.headers.get("content-length") == got.headers.get("content-length")
            assert head.headers["content-type"] == got.headers["content-type"]
        assert "Traceback" not in server.log_text()


def test_every_api_resource_with_a_csv_form_has_its_csv_twin(app_and_client):
    """Issue 23: each /api/v1 route that answers ``format=csv`` answers the same bytes at
    ``.csv``; a ``.csv`` no route serves is a 404 in the error shape naming the twins there are."""
    app, client = app_and_client
    with_format = []
    for path, operations in app.openapi()["paths"].items():
        get = operations.get("get", {})
        names = {p["name"] for p in get.get("parameters", []) if p["in"] == "query"}
        if path.startswith("/api/v1/") and "format" in names and "{" not in path:
            with_format.append(path)
    assert {"/api/v1/claims", "/api/v1/research", "/api/v1/prices", "/api/v1/hardware-capacity",
            "/api/v1/models", "/api/v1/trends"} <= set(with_format)
    required = {"/api/v1/compare": {"models": "alpha/llama-7b,alpha/llama-70b"}}
    for path in with_format:
        params = required.get(path, {})
        twin = client.get(f"{path}.csv", params=params)
        assert twin.status_code == 200 and twin.headers["content-type"].startswith("text/csv"), path
        assert twin.text == client.get(path, params={**params, "format": "csv"}).text, path
    missing = client.get("/api/v1/hardware.csv")
    body = missing.json()
    assert missing.status_code == 404 and body["ok"] is False and body["status"] == 404
    assert body["error"].startswith("no CSV twin at /api/v1/hardware.csv")
    assert all(f"{path}.csv" in body["error"] for path in with_format)
    assert "every route is listed in /api/v1/openapi.json" in client.get("/api/v1/nothing").json()["error"]


def test_api_reference_page_carries_its_openapi_document(app_and_client):
    """Issue 23: the reference page renders from the document it carries (no "LOADING" while a
    second request builds it), and its header line has a stylesheet of its own."""
    import json
    import re

    _app, client = app_and_client
    page = client.get("/api/v1/docs").text
    embedded = re.search(r'<script type="application/json" id="openapi-spec">(.*?)</script>', page, re.DOTALL)
    assert embedded and json.loads(embedded.group(1)) == client.get("/api/v1/openapi.json").json()
    assert 'href="/static/api-docs.css"' in page
    assert "font:" in client.get("/static/api-docs.css").text
