"""Fixtures for the crawler tests: a stand-in Hub on 127.0.0.1 and settings pointing at it."""

from __future__ import annotations

import os
import tempfile

import pytest

# huggingface_hub fixes its cache paths at import; keep anything it writes out of the user's home.
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="observatory-hf-home-"))


@pytest.fixture
def hub():
    """A running stand-in Hub with small pages, so paging is exercised."""
    from observatory.testing.hub_standin import HubStandin

    with HubStandin(page_size=10) as standin:
        yield standin


@pytest.fixture
def hub_settings(settings, hub):
    """Settings for a crawl of ``hub`` with short timeouts and backoffs (tests must be fast)."""
    from observatory.hub.ratelimit import GATE, QUOTA

    GATE.reset()  # a pause asked for by one test's server must not slow the next test
    QUOTA.reset()  # nor the requests an earlier test spent from the request budget
    yield settings.model_copy(update={
        "hf_endpoint": hub.url,
        "hf_token": None,
        "hub_timeout_s": 1.0,
        "hub_max_retries": 2,
        "hub_backoff_base_s": 0.01,
        "hub_backoff_max_s": 0.05,
        "hub_max_wait_s": 5.0,
        "crawl_concurrency": 4,
        "crawl_retry_base_s": 0.0,  # a transient failure is due again on the very next run
        "crawl_lease_ttl_s": 30.0,
    })
    GATE.reset()
    QUOTA.reset()


# PostgreSQL (tests marked ``postgres``): one throwaway server per session, a fresh database per test.

@pytest.fixture(scope="session")
def pg_admin_url():
    """A superuser URL to a PostgreSQL server: ``OBSERVATORY_TEST_POSTGRES_URL`` or a private one."""
    from pg_support import PostgresUnavailable, server_url

    try:
        with server_url() as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")


@pytest.fixture(scope="session")
def pg_template(pg_admin_url):
    """A database migrated to every head, copied for each test (migrating each time is slow)."""
    from pg_support import create_database, drop_database
    from sqlalchemy.engine import make_url

    from observatory.store.db import upgrade

    url = create_database(pg_admin_url)
    upgrade(url)
    yield make_url(url).database
    drop_database(pg_admin_url, url)


@pytest.fixture
def pg_empty_url(pg_admin_url):
    """A fresh database with no tables."""
    from pg_support import create_database, drop_database

    url = create_database(pg_admin_url)
    yield url
    drop_database(pg_admin_url, url)


@pytest.fixture
def pg_url(pg_admin_url, pg_template):
    """A fresh database already migrated to every head."""
    from pg_support import create_database, drop_database

    url = create_database(pg_admin_url, template=pg_template)
    yield url
    drop_database(pg_admin_url, url)


@pytest.fixture
def pg_engine(pg_url):
    from observatory.store.db import make_engine

    eng = make_engine(pg_url)
    yield eng
    eng.dispose()


@pytest.fixture
def pg_settings(settings, pg_url):
    """The ``settings`` fixture pointed at a fresh PostgreSQL database."""
    return settings.model_copy(update={"database_url": pg_url})
