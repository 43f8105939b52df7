"""Fixtures shared by every layer: a real SQLite file migrated by Alembic, per test."""

from __future__ import annotations

import os

import pytest

# Tests never reach the real Hub or a user's token/cache; stand-in servers set HF_ENDPOINT.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ.pop("HF_TOKEN", None)
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
# Belt and braces: code that forgets to take the stand-in's endpoint reaches a closed loopback
# port (the discard port), never huggingface.co. Set before huggingface_hub is imported.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """Settings pointing at a fresh data dir; the snapshot is not auto-loaded unless asked."""
    from observatory.settings import Settings

    monkeypatch.setenv("OBSERVATORY_DATA_DIR", str(tmp_path / "data"))
    # The oracle's children import torch and transformers (seconds of CPU each): only the tests
    # that are about the oracle turn it on (tests/integration/test_oracle.py).
    monkeypatch.setenv("OBSERVATORY_ORACLE_ENABLED", "false")
    return Settings(data_dir=tmp_path / "data", autoload_snapshot=False, oracle_enabled=False)


@pytest.fixture
def db_url(settings) -> str:
    from observatory.store.db import upgrade

    url = settings.resolved_database_url
    upgrade(url)
    return url


@pytest.fixture
def engine(db_url):
    from observatory.store.db import make_engine

    eng = make_engine(db_url)
    yield eng
    eng.dispose()
