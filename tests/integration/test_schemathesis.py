"""Property-based API tests: schemathesis generates requests from /api/v1/openapi.json and checks
every response against the schema (no 5xx, declared status codes, content types, headers and
bodies). The app runs in-process on a real SQLite store holding the test models, so generated
ids such as revision 1 or ``alpha/llama-7b``-shaped paths hit real rows as well as misses.

The models, trends, hardware and crawl routers are exercised (all reads); the example budget
keeps the run well under two minutes on two cores.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

from api_testdata import built_store  # noqa: E402
from observatory.web.app import create_app  # noqa: E402

MAX_EXAMPLES = 60


def _app(tmp_dir: Path):
    settings, engine = built_store(tmp_dir, refresh=True, api_csv_max_rows=200)
    engine.dispose()
    return create_app(settings)


# schemathesis' fixture-based loader (``from_fixture``) does not run under pytest 9, so the
# store and app are built when the module is imported; the directory goes at exit.
_STORE = Path(tempfile.mkdtemp(prefix="observatory-schemathesis-"))
atexit.register(shutil.rmtree, _STORE, ignore_errors=True)
APP = _app(_STORE)
# The routers of this part of the API; other domains' routes have their own suites.
TAGS = ["models", "trends", "hardware", "crawl"]
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", APP).include(method="GET", tag=TAGS)


# Schema-valid requests the API refuses on purpose, for reasons a JSON schema cannot state:
# cross-field ranges and opaque page tokens. Anything else valid must be answered 2xx or 404.
CROSS_FIELD_REFUSALS = (
    "is greater than g_max",
    "is after created_to",
    "is after until",
    "next: next token",
)


def positive_data_accepted(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code < 400 or response.status_code == 404:
        return None
    if response.status_code in (400, 422):
        error = response.json().get("error", "")
        if any(reason in error for reason in CROSS_FIELD_REFUSALS):
            return None
    raise AssertionError(f"valid request refused with {response.status_code}: {response.text[:300]}")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(case):
    case.call_and_validate(excluded_checks=[positive_data_acceptance], additional_checks=[positive_data_accepted])


def test_every_route_declares_its_errors():
    spec = APP.openapi()
    ops = [(method, path, op) for path, methods in spec["paths"].items() for method, op in methods.items()
           if set(op.get("tags", ())) & set(TAGS)]
    assert len(ops) >= 10
    for method, path, op in ops:
        assert path.startswith("/api/v1/"), path
        assert {"200", "400", "404", "422"} <= set(op["responses"]), (method, path)
