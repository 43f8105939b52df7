"""Listing entries are data to validate (issue 21, findings 2 and 3): one hostile entry of each
kind among good ones, through the real huggingface_hub client against the stand-in Hub."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import sqlalchemy as sa
from crawler_support import (
    LLAMA,
    LONG_AGO,
    assert_stored_exactly_once,
    model,
    scope_state,
)

from observatory.crawler.run import crawl
from observatory.crawler.scope import build_scope
from observatory.store.db import read_session
from observatory.store.trend_tables import TrendPointRow
from observatory.store.trends import refresh_trends
from observatory.testing.hub_standin import populate

FUTURE = datetime(2030, 1, 1, tzinfo=timezone.utc)
FAR_FUTURE = datetime(9999, 12, 31, tzinfo=timezone.utc)


def _hostile(hub, newest: datetime) -> dict[str, str]:
    """One of each kind, dated among the good ones (or in the future, where the listing puts them)."""
    at = lambda minutes: newest - timedelta(minutes=minutes)
    hub.add_repo("evil/dated-2030", LLAMA, created_at=FUTURE, last_modified=FUTURE)
    hub.add_repo("evil/dated-9999", LLAMA, created_at=FAR_FUTURE, last_modified=FAR_FUTURE)
    hub.add_repo("evil/null-counts", LLAMA, created_at=at(5.5), downloads=None, likes=None)
    hub.add_repo("evil/negative-counts", LLAMA, created_at=at(9.5), downloads=-5, likes=-1)
    hub.add_repo("evil/bad-date", LLAMA, created_at=at(12.5), overrides={"createdAt": "soon", "lastModified": 7})
    hub.add_repo("evil/unreadable", LLAMA, created_at=at(15.5), overrides={"tags": 7, "siblings": "x"})
    return {"future": "evil/dated-2030", "far": "evil/dated-9999", "null": "evil/null-counts",
            "negative": "evil/negative-counts", "bad_date": "evil/bad-date", "unreadable": "evil/unreadable"}


def test_one_hostile_entry_of_each_kind_stops_no_good_model(engine, hub, hub_settings):
    newest = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
    good = populate(hub, 20, start=newest)
    evil = _hostile(hub, newest)

    first = crawl(engine, hub_settings, since=LONG_AGO)
    assert first.status == "ok", first.error
    assert_stored_exactly_once(engine, hub, good)
    # Stored as listed, with a warning on the run; the marks stay at the crawl's own clock.
    assert model(engine, evil["future"]).created_at == FUTURE
    assert model(engine, evil["far"]).created_at == FAR_FUTURE
    assert set(first.stats["future_dated"]) == {evil["future"], evil["far"]}
    state = scope_state(engine)
    horizon = datetime.now(timezone.utc) + timedelta(seconds=hub_settings.crawl_future_tolerance_s)
    assert state.created_mark <= horizon and state.modified_mark <= horizon
    # Counts the listing gave as null or negative are unknown, never 0 and never a TypeError.
    for repo_id in (evil["null"], evil["negative"]):
        row = model(engine, repo_id)
        assert (row.downloads, row.likes) == (None, None)
    # A date that does not parse is unknown; the entry is stored all the same.
    assert model(engine, evil["bad_date"]).created_at is None
    assert model(engine, evil["unreadable"]) is None  # skipped by the scope, alone
    assert first.stats["skipped_by_reason"]["out_of_scope"] == 1

    # The crux: models listed after a future-dated one are still found by the next run.
    later = populate(hub, 5, start=datetime.now(timezone.utc).replace(microsecond=0), prefix="later")
    second = crawl(engine, hub_settings)
    assert second.status == "ok", second.error
    assert second.new == 5
    assert_stored_exactly_once(engine, hub, later)

    # Trend periods that have not happened hold nothing (9999 once wrote 1.6M points).
    report = refresh_trends(engine)
    with read_session(engine) as session:
        last = session.execute(sa.select(sa.func.max(TrendPointRow.period_start))).scalar_one()
    assert date.fromisoformat(str(last)) <= date.today()
    assert report.points < 2000


def test_a_download_threshold_skips_unknown_counts_instead_of_failing(engine, hub, hub_settings):
    good = populate(hub, 6)
    for repo_id in good:
        hub.set_stats(repo_id, downloads=500)
    evil = _hostile(hub, datetime.now(timezone.utc) - timedelta(minutes=30))

    run = crawl(engine, hub_settings, since=LONG_AGO, scope=build_scope("popular", min_downloads=100))
    assert run.status == "ok", run.error
    assert_stored_exactly_once(engine, hub, good)
    assert model(engine, evil["null"]) is None and model(engine, evil["negative"]) is None
