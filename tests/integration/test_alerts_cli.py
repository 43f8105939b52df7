"""`observatory alerts evaluate` says where its links point when OBSERVATORY_BASE_URL is unset."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from observatory.commands.alerts import alerts
from observatory.settings import get_settings


@pytest.fixture
def store_env(tmp_path, monkeypatch):
    monkeypatch.setenv("OBSERVATORY_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OBSERVATORY_AUTOLOAD_SNAPSHOT", "false")
    monkeypatch.setenv("OBSERVATORY_ALERT_BUILTIN_RULES", "false")
    monkeypatch.delenv("OBSERVATORY_BASE_URL", raising=False)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def _evaluate():
    get_settings.cache_clear()
    return CliRunner().invoke(alerts, ["evaluate", "--json"])


def test_evaluate_names_the_link_base_when_no_public_url_is_set(store_env):
    store_env.setenv("OBSERVATORY_PORT", "8123")
    unset = _evaluate()
    assert unset.exit_code == 0, unset.output
    json.loads(unset.stdout)  # stdout stays one JSON object
    assert "alert links point at http://127.0.0.1:8123; set OBSERVATORY_BASE_URL" in unset.stderr
    store_env.setenv("OBSERVATORY_BASE_URL", "https://gqa.example.org")
    named = _evaluate()
    assert named.exit_code == 0 and "OBSERVATORY_BASE_URL" not in named.stderr
