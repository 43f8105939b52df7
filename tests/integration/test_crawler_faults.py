"""Faults injected by the stand-in Hub: every failure recorded with its reason, nothing lost."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from crawler_support import (
    LLAMA,
    LONG_AGO,
    assert_stored_exactly_once,
    failures,
    model,
    revisions_by_model,
    runs,
    scope_state,
)

from observatory.crawler.run import crawl
from observatory.testing.hub_standin import populate


def test_429_with_ratelimit_headers_is_waited_out_then_fetched(engine, hub, hub_settings):
    ids = populate(hub, 6)
    hub.add_fault("resolve", 429, repo=ids[2], headers={"RateLimit": '"resolvers";r=0;t=1',
                                                        "RateLimit-Policy": '"fixed window";"resolvers";q=3000;w=300'})
    started = time.monotonic()

    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert time.monotonic() - started >= 0.9  # the server's t=1 was honoured, not hammered
    assert_stored_exactly_once(engine, hub, ids)
    assert run.failed == 0 and hub.counts["faults"] == 1


def test_429_on_a_listing_page_is_retried_by_our_policy(engine, hub, hub_settings):
    ids = populate(hub, 25)
    hub.add_fault("listing", 429, headers={"RateLimit": '"api";r=0;t=0'})

    crawl(engine, hub_settings, since=LONG_AGO)

    assert_stored_exactly_once(engine, hub, ids)
    assert hub.counts["faults"] == 1


def test_quota_exhausted_mid_crawl_pauses_every_worker_until_the_window_resets(engine, settings, hub_settings):
    from observatory.testing.hub_standin import HubStandin

    with HubStandin(page_size=10, quota={"resolvers": 8}, window_s=1) as limited:
        ids = populate(limited, 20)
        started = time.monotonic()
        run = crawl(engine, hub_settings.model_copy(update={"hf_endpoint": limited.url}), since=LONG_AGO)
        assert_stored_exactly_once(engine, limited, ids)
        assert run.failed == 0
        assert time.monotonic() - started >= 1.5  # 20 fetches at 8 a window need three windows
        # The response that says r=0 pauses every worker: only requests already in flight when a
        # window runs out meet a 429 (20 fetches at 8 a window run out at most three windows).
        assert limited.counts["rate_limited"] <= hub_settings.crawl_concurrency * 3


def test_5xx_is_retried_within_the_run_and_a_persistent_one_on_the_next_run(engine, hub, hub_settings):
    ids = populate(hub, 6)
    hub.add_fault("resolve", 503, repo=ids[0], times=2)  # within hub_max_retries=2: recovered
    hub.add_fault("resolve", 502, repo=ids[1], times=-1)  # persistent for this run

    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert run.failures_by_reason == {"http_502": 1}
    failure = failures(engine)[ids[1]]
    assert failure.transient and failure.attempts == 1 and failure.next_attempt_at is not None
    assert failure.sha == hub.repos[ids[1]].sha
    assert model(engine, ids[1]) is not None and model(engine, ids[1]).current_revision_id is None
    assert ids[0] in revisions_by_model(engine)
    assert scope_state(engine).created_mark is not None  # a recorded failure does not hold the mark

    hub.faults.clear()
    hub.reset_counts()
    second = crawl(engine, hub_settings)

    assert_stored_exactly_once(engine, hub, ids)
    assert second.stats["retried"] == 1 and second.new == 1
    assert failures(engine)[ids[1]].resolved_at is not None
    assert hub.counts["resolve_get"] == 1


def test_slow_response_past_the_timeout_is_a_transient_timeout(engine, hub, hub_settings):
    ids = populate(hub, 5)
    hub.add_fault("resolve", None, repo=ids[4], delay=0.8, times=-1)
    fast = hub_settings.model_copy(update={"hub_timeout_s": 0.3, "hub_max_retries": 1})
    started = time.monotonic()

    run = crawl(engine, fast, since=LONG_AGO)

    assert time.monotonic() - started < 5
    assert run.failures_by_reason == {"timeout": 1}
    assert failures(engine)[ids[4]].transient
    assert set(revisions_by_model(engine)) == set(ids[:4])


def test_slow_listing_page_times_out_and_is_retried(engine, hub, hub_settings):
    ids = populate(hub, 5)
    hub.add_fault("listing", None, delay=0.6, times=1)

    crawl(engine, hub_settings.model_copy(update={"hub_timeout_s": 0.3}), since=LONG_AGO)

    # hub_timeout_s made the page give up, and the policy asked again.
    assert_stored_exactly_once(engine, hub, ids)
    assert hub.counts["listing"] >= 3  # the timed-out page, its retry, and the change pass


def test_gated_repos_with_a_token_get_401_or_403_and_are_recorded_not_retried(engine, hub, hub_settings):
    hub.approved_tokens = {"hf_approved"}
    hub.add_repo("meta/gated", LLAMA, gated="manual")
    listed_open = hub.add_repo("meta/gated-late", LLAMA).id
    hub.add_fault("resolve", 401, repo=listed_open, times=-1,
                  headers={"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model is restricted."})
    with_token = hub_settings.model_copy(update={"hf_token": "hf_not_approved"})

    crawl(engine, with_token, since=LONG_AGO)

    recorded = failures(engine)
    assert recorded["meta/gated"].reason == "gated" and not recorded["meta/gated"].transient
    assert recorded[listed_open].reason == "gated"
    hub.reset_counts()
    crawl(engine, with_token)
    assert hub.counts["resolve_get"] == 0  # permanent: not asked again for the same commit

    approved = hub_settings.model_copy(update={"hf_token": "hf_approved"})
    hub.update_repo("meta/gated", {**LLAMA, "num_key_value_heads": 4})  # a new commit is a new attempt
    crawl(engine, approved)
    assert "meta/gated" in revisions_by_model(engine)
    assert failures(engine)["meta/gated"].resolved_at is not None


def test_missing_repo_missing_config_non_json_and_huge_configs(engine, hub, hub_settings):
    gone = hub.add_repo("gone/deleted", LLAMA).id
    hub.add_fault("resolve", 404, repo=gone, times=-1,
                  headers={"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
    no_config = hub.add_repo("odd/entry", LLAMA).id
    hub.add_fault("resolve", 404, repo=no_config, times=-1, headers={"X-Error-Code": "EntryNotFound"})
    hub.add_repo("odd/html", b"<html>Sorry</html>")
    hub.add_repo("odd/latin1", b'{"name": "caf\xe9"}')
    hub.add_repo("odd/huge", {"pad": "x" * 50_000, **LLAMA})
    ok = hub.add_repo("fine/model", LLAMA).id
    capped = hub_settings.model_copy(update={"hub_max_config_bytes": 20_000})

    run = crawl(engine, capped, since=LONG_AGO)

    recorded = failures(engine)
    reasons = {k: (v.reason, v.transient) for k, v in recorded.items()}
    assert reasons == {
        "gone/deleted": ("repo_missing", False),
        "odd/entry": ("missing_config", False),
        "odd/html": ("not_json", False),
        "odd/latin1": ("not_json", False),
        "odd/huge": ("too_large", False),
    }
    stored = revisions_by_model(engine)
    # A file that arrived is kept verbatim with its parse error; one refused unread is not stored.
    assert stored["odd/html"][0].raw_text == "<html>Sorry</html>" and stored["odd/html"][0].parse_status == "error"
    assert "odd/huge" not in stored and "odd/latin1" not in stored and ok in stored
    assert run.new == 1 and run.failed == 5

    hub.reset_counts()
    crawl(engine, capped)
    assert hub.counts["resolve_get"] == 0  # permanent failures are not hammered


def test_invalid_repo_id_from_the_listing_is_recorded_and_never_stored_as_a_model(engine, hub, hub_settings):
    hub.add_repo("bad--org/x..y", LLAMA)
    hub.add_repo("good/one", LLAMA)

    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert failures(engine)["bad--org/x..y"].reason == "invalid_id"
    assert model(engine, "bad--org/x..y") is None
    assert run.new == 1 and run.failures_by_reason == {"invalid_id": 1}
    assert hub.counts["resolve_get"] == 1


def test_transient_failure_is_given_up_after_max_attempts(engine, hub, hub_settings):
    flaky = hub.add_repo("flaky/model", LLAMA).id
    hub.add_fault("resolve", 500, repo=flaky, times=-1)
    few = hub_settings.model_copy(update={"crawl_max_attempts": 3, "hub_max_retries": 0})

    for _ in range(4):
        crawl(engine, few, since=LONG_AGO)

    failure = failures(engine)[flaky]
    assert failure.attempts == 3 and not failure.transient and "gave up after 3 attempts" in failure.detail
    assert hub.counts["resolve_get"] == 3  # the fourth run did not ask again


def test_rate_limit_longer_than_we_wait_stops_the_run_and_keeps_the_mark(engine, hub, hub_settings):
    ids = populate(hub, 12)
    hub.add_fault("resolve", 429, times=1, headers={"RateLimit": '"resolvers";r=0;t=100'})
    from observatory.hub.ratelimit import GATE

    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert run.status == "rate_limited" and "wait 100s" in run.error
    assert datetime.fromisoformat(run.stats["retry_at"]) > run.started_at + timedelta(seconds=99)
    assert scope_state(engine).created_mark is None
    assert not any(f.reason.startswith("http_429") for f in failures(engine).values())
    GATE.reset()  # the hour has passed
    crawl(engine, hub_settings, since=LONG_AGO)
    assert_stored_exactly_once(engine, hub, ids)
    assert scope_state(engine).created_mark == hub.repos[ids[-1]].created_at


def test_unreachable_hub_is_one_attempt_and_one_line_without_a_traceback(engine, hub_settings, caplog):
    """Offline (the embedded default's usual state) a crawl is stored as "unreachable" with the
    reason after one attempt: no retries (huggingface_hub's own listing back-off took ~23 s)."""
    import logging

    from observatory.testing.server import free_port

    closed = f"http://127.0.0.1:{free_port()}"  # a port nobody listens on
    slow_backoff = hub_settings.model_copy(update={"hf_endpoint": closed, "hub_backoff_base_s": 600.0})
    with caplog.at_level(logging.INFO):
        run = crawl(engine, slow_backoff, since=LONG_AGO)  # a backoff would sleep 600 s here
    (stored,) = runs(engine)
    assert run.status == stored.status == "unreachable"
    assert stored.error.startswith(f"Hub not reachable at {closed}: ConnectError")
    assert run.requests == 1
    crawl_records = [r for r in caplog.records if r.name.startswith("observatory")]
    assert crawl_records and all(r.exc_info is None and r.levelno < logging.WARNING for r in crawl_records)


def test_an_offline_first_run_reads_as_offline_not_failed_on_the_pages(engine, settings, hub_settings):
    from fastapi.testclient import TestClient

    from observatory.testing.server import free_port
    from observatory.web.app import create_app

    crawl(engine, hub_settings.model_copy(update={"hf_endpoint": f"http://127.0.0.1:{free_port()}"}))
    offline = settings.model_copy(update={"scheduler_enabled": False, "autoload_snapshot": True})
    with TestClient(create_app(offline)) as client:  # the bundled snapshot, as on a fresh install
        home, page = client.get("/").text, client.get("/crawl").text
        health = client.get("/api/v1/crawl/health").json()
    said = "Hub not reachable — showing the bundled snapshot"
    assert "last crawl" in home and said in home and ": failed" not in home
    assert said in page
    assert health["last_run"]["status"] == "unreachable" and health["last_run"]["summary"] == said
