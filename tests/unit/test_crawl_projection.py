"""The crawl's projection: fraction by date, bounded by the pace or by the request budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from observatory.crawler.projection import duration, project

T = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def counts(seen, at, requests, first=T, stop=T - 10 * DAY):
    return {"seen": seen, "new": seen, "changed": 0, "failed": 0, "requests": requests,
            "first": first, "at": at, "stop": stop}


def test_a_quarter_of_the_span_at_the_pace_so_far():
    p = project(counts(1_000, T - 2.5 * DAY, {"listing": 1, "config": 1_000}), 100.0, {})
    assert p.fraction == 0.25 and p.listed_total == 4_000 and p.rate == 10.0
    assert p.bound == "pace" and p.remaining_s == 300.0


def test_the_budget_bounds_a_fast_start():
    # 2 resolver requests per model at 10 allowed per second: 3,000 models left take 600 s,
    # though the first window's burst went at 100 models/s.
    p = project(counts(1_000, T - 2.5 * DAY, {"listing": 1, "config": 2_000}), 10.0,
                {"resolvers": 10.0, "api": 500 / 300})
    assert p.bound == "budget" and p.remaining_s == 600.0


def test_no_projection_before_a_share_of_the_span_or_without_dates():
    assert project(counts(100, T - timedelta(minutes=5), {"config": 100}), 1.0, {}).remaining_s is None
    assert project(counts(100, None, {"config": 100}), 1.0, {}).remaining_s is None
    assert project(counts(0, T, {}), 1.0, {}).remaining_s is None


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (None, 45, 750, 18_120, 3 * 86_400 + 4 * 3600)] == ["—", "45s", "12m30s", "5h02m", "3d04h"]
