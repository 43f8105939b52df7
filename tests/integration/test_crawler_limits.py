"""Bounded waits, deadlines and redirects: a Hub that stalls, drips or points elsewhere ends the
run by itself, with its reason stored (issue 14)."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta

from crawler_support import (
    LLAMA,
    LONG_AGO,
    failures,
    revisions_by_model,
    runs,
    scope_state,
)

from observatory.crawler.run import crawl
from observatory.testing.hub_standin import HubStandin, populate


def test_a_huge_listing_retry_after_ends_the_run_as_rate_limited_at_once(engine, hub, hub_settings):
    populate(hub, 5)
    hub.add_fault("listing", 429, times=-1, headers={"Retry-After": "100000"})

    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert run.status == "rate_limited" and "asked to wait 100000s" in run.error
    retry_at = datetime.fromisoformat(run.stats["retry_at"])
    assert run.started_at + timedelta(seconds=99_999) < retry_at
    assert f"retry after {retry_at:%Y-%m-%dT%H:%M}" in run.error
    assert hub.counts["listing"] == 1 and revisions_by_model(engine) == {}
    assert scope_state(engine).created_mark is None


def test_an_endless_short_retry_after_is_honoured_up_to_hub_max_wait_s(engine, hub, hub_settings):
    populate(hub, 5)
    hub.add_fault("listing", 429, times=-1, headers={"Retry-After": "1"})
    capped = hub_settings.model_copy(update={"hub_max_wait_s": 2.5, "hub_max_retries": 10})

    run = crawl(engine, capped, since=LONG_AGO)

    # Two 1 s waits fit in 2.5 s, a third would not: the third answer ends the run.
    assert run.status == "rate_limited" and hub.counts["listing"] == 3
    assert run.error.startswith("RateLimited: the Hub asked to wait 1s")


def test_a_stop_request_ends_a_listing_wait(engine, hub, hub_settings):
    populate(hub, 5)
    hub.add_fault("listing", 429, times=-1, headers={"Retry-After": "300"})
    patient = hub_settings.model_copy(update={"hub_max_wait_s": 600.0})
    stop = threading.Event()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(crawl(engine, patient, since=LONG_AGO,
                                                               should_stop=stop.is_set)))
    worker.start()
    served = threading.Event()
    while not served.wait(0.05):
        if hub.counts["faults"] >= 1:
            served.set()
    stop.set()
    worker.join(60)  # far less than the 300 s the Hub asked for

    assert not worker.is_alive()
    [run] = done
    assert run.status == "interrupted" and run.error.startswith("Stopped")
    assert hub.counts["listing"] == 1


def test_a_dripping_config_fetch_ends_at_its_deadline(engine, hub, hub_settings):
    ids = populate(hub, 4)
    body = json.dumps(LLAMA).encode()  # ~150 bytes at 0.2 s each: ~30 s without a deadline
    hub.add_fault("resolve", 200, repo=ids[0], times=-1, body=body, drip_s=0.2)
    bounded = hub_settings.model_copy(update={"hub_timeout_s": 2.0, "hub_deadline_s": 1.0, "hub_max_retries": 0})

    run = crawl(engine, bounded, since=LONG_AGO)

    failure = failures(engine)[ids[0]]
    assert failure.reason == "timeout" and failure.transient
    assert "deadline" in failure.detail
    assert run.failures_by_reason == {"timeout": 1} and set(revisions_by_model(engine)) == set(ids[1:])


def test_a_redirect_to_another_loopback_origin_is_refused_and_recorded(engine, hub, hub_settings):
    with HubStandin() as elsewhere:
        where = elsewhere.url.removeprefix("http://")
        target = elsewhere.add_repo("org/secret", {"secret": "not for the crawler"})
        repo = hub.add_repo("org/model", LLAMA)
        hub.add_fault("resolve", 307, repo="org/model", times=-1, body=b"",
                      headers={"Location": f"{elsewhere.url}/org/secret/resolve/{target.sha}/config.json"})
        ok = hub.add_repo("org/fine", LLAMA).id

        run = crawl(engine, hub_settings, since=LONG_AGO)

        assert elsewhere.counts == {}  # never asked
    failure = failures(engine)[repo.id]
    assert failure.reason == "redirect_refused" and not failure.transient
    assert where in failure.detail and "refused" in failure.detail
    assert set(revisions_by_model(engine)) == {ok}
    assert run.status == "ok" and run.failures_by_reason == {"redirect_refused": 1}


def test_a_listing_link_to_another_host_is_refused(engine, hub, hub_settings):
    with HubStandin() as elsewhere:
        populate(elsewhere, 3)
        hub.add_fault("listing", 200, body=b"[]",
                      headers={"Link": f'<{elsewhere.url}/api/models?sort=createdAt>; rel="next"'})

        run = crawl(engine, hub_settings, since=LONG_AGO)

        assert elsewhere.counts == {}
    assert run.status == "failed" and run.error.startswith("RedirectRefused: the listing's next page is on another host")
    assert [r.status for r in runs(engine)] == ["failed"]


def test_the_hubs_own_redirect_to_resolve_cache_is_followed(engine, hub_settings):
    with HubStandin(page_size=10, redirect_resolve=True) as redirecting:
        ids = populate(redirecting, 3)
        run = crawl(engine, hub_settings.model_copy(update={"hf_endpoint": redirecting.url}), since=LONG_AGO)
    assert run.status == "ok" and run.new == 3 and set(revisions_by_model(engine)) == set(ids)
    assert run.stats["requests_by_kind"]["config"] == 6  # the 307 and the answer, per model


def test_a_dripping_config_with_retries_ends_at_the_request_budget(engine, hub, hub_settings):
    """Issue 21, finding 8: each attempt met its deadline, but deadline x retries plus back-off
    held one fetch slot for about five minutes. Ten retries are allowed here; the budget of
    2.5 s over 1 s attempts leaves room for three or four of them."""
    ids = populate(hub, 4)
    body = json.dumps(LLAMA).encode()
    hub.add_fault("resolve", 200, repo=ids[0], times=-1, body=body, drip_s=0.2)
    bounded = hub_settings.model_copy(update={"hub_timeout_s": 2.0, "hub_deadline_s": 1.0, "hub_max_retries": 10,
                                              "hub_request_budget_s": 2.5})

    run = crawl(engine, bounded, since=LONG_AGO)

    failure = failures(engine)[ids[0]]
    assert failure.reason == "timeout" and failure.transient
    assert "hub_request_budget_s" in failure.detail
    assert hub.counts["faults"] <= 4  # not the 11 attempts the retries alone would allow
    assert run.status == "ok" and set(revisions_by_model(engine)) == set(ids[1:])


def test_a_run_past_its_time_budget_ends_as_timed_out_with_its_marks_safe(engine, hub, hub_settings):
    ids = populate(hub, 6)
    body = json.dumps(LLAMA).encode()  # ~150 bytes at 0.2 s each: a fetch that takes ~30 s
    hub.add_fault("resolve", 200, repo=ids[2], times=-1, body=body, drip_s=0.2)
    patient = hub_settings.model_copy(update={"hub_timeout_s": 5.0, "hub_deadline_s": 60.0, "hub_max_retries": 0,
                                              "hub_request_budget_s": 120.0, "crawl_max_run_s": 1.5})

    run = crawl(engine, patient, since=LONG_AGO)

    assert run.status == "timed_out" and "crawl_max_run_s = 1.5 s" in run.error
    assert ids[2] not in revisions_by_model(engine)  # cut off mid-drip, not stored
    assert scope_state(engine).created_mark is None  # a first run cut short moves no mark

    # The next run (no budget trouble now) resumes and stores everything.
    hub.faults.clear()
    again = crawl(engine, hub_settings, since=LONG_AGO)
    assert again.status == "ok" and set(revisions_by_model(engine)) == set(ids)
