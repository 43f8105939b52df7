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
    from observatory.hub.ratelimit import GATE

    GATE.reset()  # a pause asked for by one test's server must not slow the next test
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
