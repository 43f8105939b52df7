"""Property-based tests of the alert API: generated requests (valid and invalid, with and without
an owner token) never cause a server error and every answer matches the declared schema."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
from alert_support import seed_mla_month  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import allow_header_conformance, positive_data_acceptance  # noqa: E402

from observatory.alerts import subscriptions  # noqa: E402
from observatory.alerts.evaluate import evaluate  # noqa: E402
from observatory.db import make_engine, upgrade  # noqa: E402
from observatory.settings import Settings  # noqa: E402
from observatory.web.app import create_app  # noqa: E402

MAX_EXAMPLES = 40


def _app(tmp_dir: Path):
    config = Settings(data_dir=tmp_dir, autoload_snapshot=False, allow_loopback_webhooks=True,
                      allow_http_webhooks=True, webhook_timeout_s=0.5, webhook_connect_timeout_s=0.5)
    upgrade(config.resolved_database_url)
    engine = make_engine(config.resolved_database_url)
    created = subscriptions.create(engine, config, name="fixture", rules=[{"kind": "new_dialect"}],
                                   webhook_url="http://127.0.0.1:9/closed-port")
    seed_mla_month(engine)
    evaluate(engine, config)
    engine.dispose()
    return create_app(config), created.owner_token


_STORE = Path(tempfile.mkdtemp(prefix="observatory-alerts-schemathesis-"))
atexit.register(shutil.rmtree, _STORE, ignore_errors=True)
APP, TOKEN = _app(_STORE)
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", APP).include(tag="alerts")


@schema.auth()
class OwnerToken:
    """The real owner token, so owner-only routes are reached; schemathesis also probes each
    route without it and with a forged one, expecting 401."""

    def get(self, case, context):
        return TOKEN

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_alert_api_conforms_to_its_schema(case):
    # Schema-valid requests may be refused for reasons a JSON schema cannot state (a webhook host
    # that does not resolve, a rule parameter out of range): those are 4xx, never 5xx.
    # Starlette's 405 lists only the methods of the first route matching a path (GET and POST of
    # /subscriptions are two routes), so the Allow-header check is left out.
    case.call_and_validate(excluded_checks=[positive_data_acceptance, allow_header_conformance])


def test_every_alert_route_declares_its_errors():
    spec = APP.openapi()
    ops = [(m, p, op) for p, methods in spec["paths"].items() for m, op in methods.items()
           if "alerts" in op.get("tags", ())]
    assert len(ops) >= 13
    for method, path, op in ops:
        assert {"401", "404", "422"} <= set(op["responses"]), (method, path)
