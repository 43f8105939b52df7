"""A backfill told (issue 26, part 4): progress lines off a terminal, the request budget kept
(counted at the stand-in Hub, through the real huggingface_hub client), and no re-listing of a
range the scope already covers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from crawler_support import LONG_AGO, revisions_by_model, scope_state

from observatory.crawler.run import crawl
from observatory.hub.ratelimit import QUOTA
from observatory.testing.hub_standin import populate


def created_pages(hub) -> int:
    return sum(1 for _, target in hub.log if target.startswith("/api/models?") and "sort=createdAt" in target)


def test_the_request_budget_is_kept_and_the_run_stops_as_rate_limited(engine, hub, hub_settings):
    ids = populate(hub, 12)
    budget = hub_settings.model_copy(update={"hub_quota": {"resolvers": 5}, "hub_max_wait_s": 1.0})

    run = crawl(engine, budget, since=LONG_AGO)

    # Five configs in the window, not one more: the sixth slot is a window (300 s) away, past
    # hub_max_wait_s, so the run ends as rate_limited and says when to come back.
    assert hub.counts["resolve_get"] == 5 and hub.counts["rate_limited"] == 0
    assert run.status == "rate_limited" and "retry after" in run.error
    assert datetime.fromisoformat(run.stats["retry_at"]) > run.started_at + timedelta(seconds=250)
    assert len(revisions_by_model(engine)) == 5
    assert scope_state(engine).created_mark is None  # cut short: the next run reads the range again

    # Each later window takes five more; stored ones are skipped by sha, not fetched again.
    statuses = []
    for _ in range(2):
        QUOTA.reset()  # the window has passed
        statuses.append(crawl(engine, budget, since=LONG_AGO).status)
    assert statuses == ["rate_limited", "ok"] and hub.counts["resolve_get"] == 12
    assert set(revisions_by_model(engine)) == set(ids)


def test_the_published_limit_is_the_default_budget(hub_settings):
    from observatory.hub.ratelimit import plan_limits

    assert plan_limits(hub_settings.hub_plan, False) == {"api": 500, "resolvers": 3_000, "pages": 100}
    assert plan_limits(hub_settings.hub_plan, True) == {"api": 1_000, "resolvers": 5_000, "pages": 200}
    assert plan_limits("pro", True, {"resolvers": 6_000})["resolvers"] == 6_000
    assert plan_limits("unlimited", False) == {}


def test_a_routine_crawl_with_since_does_not_relist_the_covered_range(engine, hub, hub_settings):
    now = datetime.now(UTC).replace(microsecond=0)
    populate(hub, 40, start=now - timedelta(hours=2), step_s=3600)  # 40 h of repos, 10 to a page
    first = crawl(engine, hub_settings, since=LONG_AGO)
    assert first.status == "ok" and created_pages(hub) == 4
    assert scope_state(engine).floor.replace(tzinfo=UTC) == LONG_AGO

    populate(hub, 3, start=now, step_s=60, prefix="late")
    hub.reset_counts()
    for since in (LONG_AGO, now - timedelta(days=7)):  # the same bound again, and a span inside it
        run = crawl(engine, hub_settings, since=since)
        assert run.status == "ok"
    # One page each: the three new repos and the overlap below the mark, nothing of the 40 h.
    assert created_pages(hub) == 2
    assert len(revisions_by_model(engine)) == 43

    hub.reset_counts()  # a since older than the floor does read further back, once
    crawl(engine, hub_settings, since=LONG_AGO - timedelta(days=1))
    assert created_pages(hub) == 5  # all 43 repos, 10 to a page
