"""Property-based tests of the whole /api/v1: schemathesis generates requests from the published
OpenAPI document (valid and invalid, with and without an owner token, unsupported methods) and
runs every one of its default checks on each answer: no 5xx, declared status codes, content
types, headers and bodies, valid requests accepted, invalid ones rejected, authentication not
ignored, ``Allow`` on a 405 listing exactly the documented methods.

The app runs in-process on one real SQLite store holding the API test models (so generated ids
such as revision 1 hit real rows as well as misses) and an alert subscription whose rule has
fired. Where a rule cannot be written in JSON Schema, the generator is taught it instead of the
check being weakened (``map_case`` below): ranges given both ends come in order, and the model
list's opaque ``next`` token is one the API issued, a comparison names stored models, and a webhook URL names a host this
deployment may call (127.0.0.1 here; a schema cannot say "resolves to an allowed address").
The example budget keeps the run under a minute on two cores.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import get_args

import pytest

schemathesis = pytest.importorskip("schemathesis")
from alert_support import seed_mla_month  # noqa: E402
from api_testdata import built_store  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from observatory.alerts import subscriptions  # noqa: E402
from observatory.alerts.evaluate import evaluate  # noqa: E402
from observatory.store.db import read_session  # noqa: E402
from observatory.store.queries.models import ModelListParams, SortKey, list_models  # noqa: E402
from observatory.web.app import create_app  # noqa: E402
from observatory.web.export_package import package_builder  # noqa: E402

MAX_EXAMPLES = 100
# Nothing listens on port 9 of 127.0.0.1: webhook and SMTP connections fail at once.
CLOSED = "127.0.0.1:9"


def _app(tmp_dir: Path):
    config, engine = built_store(
        tmp_dir, refresh=True,
        allow_loopback_webhooks=True, allow_http_webhooks=True, webhook_timeout_s=0.5, webhook_connect_timeout_s=0.5,
        smtp_host="127.0.0.1", smtp_port=9, smtp_timeout_s=0.5,  # e-mail subscriptions are offered
    )
    created = subscriptions.create(engine, config, name="fixture", rules=[{"kind": "new_dialect"}],
                                   webhook_url=f"http://{CLOSED}/closed-port")
    seed_mla_month(engine)
    evaluate(engine, config)
    with read_session(engine) as session:
        tokens = {(sort, order): list_models(session, ModelListParams(sort=sort, order=order, size=1)).next
                  for sort in get_args(SortKey) for order in ("asc", "desc")}
    engine.dispose()
    app = create_app(config)
    builder = package_builder(app)  # a built data package: its first download would be a 503 (being built)
    builder.start()
    builder.wait(60)
    return app, created.owner_token, tokens


# schemathesis' fixture-based loader (``from_fixture``) does not run under pytest 9, so the
# store and app are built when the module is imported; the directory goes at exit.
_STORE = Path(tempfile.mkdtemp(prefix="observatory-schemathesis-"))
atexit.register(shutil.rmtree, _STORE, ignore_errors=True)
APP, OWNER_TOKEN, PAGE_TOKENS = _app(_STORE)
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", APP)

# Stored models of every kind for /api/v1/compare: GQA, MLA, MQA, attention-free, unparsable config, hybrid.
COMPARED = ["alpha/llama-70b", "gamma/latent-v3", "beta/coder-15b", "gamma/mamba-130m", "beta/broken-config",
            "gamma/next-hybrid"]

# (low, high) query parameters that the API refuses in the wrong order.
RANGES = (("g_min", "g_max"), ("created_from", "created_to"), ("since", "until"))


@schema.hook
def map_case(context, case):
    """Valid requests made valid in the ways a JSON schema cannot state."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return case
    query = case.query if isinstance(case.query, dict) else {}
    for low, high in RANGES:
        if query.get(low) is not None and query.get(high) is not None and query[low] > query[high]:
            query[low], query[high] = query[high], query[low]
    if query.get("next") is not None and case.path in ("/api/v1/models", "/api/v1/models.csv"):
        query["next"] = PAGE_TOKENS[(query.get("sort", "created_at"), query.get("order", "desc"))]
        if query["next"] is None:
            del query["next"]
    if case.path in ("/api/v1/compare", "/api/v1/compare.csv") and isinstance(query.get("models"), list):
        # two to six stored models (a generated id is almost never one): the comparison itself is exercised
        query["models"] = COMPARED[:max(2, min(len(query["models"]), len(COMPARED)))]
    if isinstance(case.body, dict) and case.body.get("webhook_url"):
        case.body["webhook_url"] = f"http://{CLOSED}/hook"  # a host this deployment may call
    return case


@schema.auth()
class OwnerToken:
    """The real owner token, so owner-only routes are reached; schemathesis also probes each
    route without it and with a forged one, expecting 401."""

    def get(self, case, context):
        return OWNER_TOKEN

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(case):
    case.call_and_validate()


def test_every_route_declares_its_errors():
    spec = APP.openapi()
    ops = [(method, path, op) for path, methods in spec["paths"].items() for method, op in methods.items()]
    assert len(ops) >= 25
    for method, path, op in ops:
        codes = set(op["responses"])
        assert path.startswith("/api/v1/"), path
        assert codes & {"200", "201"} and {"400", "404", "422"} <= codes, (method, path)
        if op.get("security"):  # routes that read an owner token say it may be refused
            assert "401" in codes, (method, path)
