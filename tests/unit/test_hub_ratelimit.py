"""Reading the Hub's rate-limit headers and pausing every thread for as long as it asks."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from observatory.hub.ratelimit import (
    RateGate,
    bucket_of,
    retry_after_seconds,
    server_wait,
)
from observatory.hub.session import request_kind

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(("value", "expected"), [
    ("7", 7.0),
    (" 120 ", 120.0),
    ("Thu, 01 Jan 2026 12:00:30 GMT", 30.0),
    ("Thu, 01 Jan 2026 11:00:00 GMT", 0.0),  # in the past: no wait
    ("soon", None),
    ("-5", None),
    ("", None),
])
def test_retry_after_seconds_or_http_date(value, expected):
    assert retry_after_seconds({"Retry-After": value}, now=NOW) == expected


def test_retry_after_absent_and_case_insensitive():
    assert retry_after_seconds({}, now=NOW) is None
    assert retry_after_seconds({"retry-after": "3"}, now=NOW) == 3.0


@pytest.mark.parametrize(("status", "headers", "expected"), [
    (429, {"RateLimit": '"api";r=0;t=55', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}, ("api", 55.0)),
    (200, {"ratelimit": '"resolvers";r=0;t=12'}, ("resolvers", 12.0)),  # spent window, even on a 200
    (200, {"RateLimit": '"resolvers";r=2998;t=172'}, (None, None)),  # quota left: go on
    (429, {"Retry-After": "4"}, (None, 4.0)),
    (503, {"Retry-After": "2"}, (None, 2.0)),
    (500, {"Retry-After": "2"}, (None, None)),  # Retry-After means nothing on a plain 500
    (429, {"RateLimit": "garbage"}, (None, None)),
    (429, {}, (None, None)),
])
def test_server_wait(status, headers, expected):
    assert server_wait(status, headers) == expected


@pytest.mark.parametrize(("path", "bucket", "kind"), [
    ("/api/models", "api", "listing"),
    ("/api/models/org/name", "api", "model_info"),
    ("/org/name/resolve/abc/config.json", "resolvers", "config"),
    ("/api/resolve-cache/models/org/name/abc/config.json", "resolvers", "config"),
    ("/org/name", "pages", "other"),
])
def test_buckets_and_request_kinds(path, bucket, kind):
    assert bucket_of(path) == bucket
    assert request_kind(path) == kind


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_gate_pauses_one_bucket_and_keeps_the_longest_pause():
    clock = FakeClock()
    gate = RateGate(clock=clock, sleep=clock.sleep)
    gate.pause("resolvers", 10)
    gate.pause("resolvers", 3)  # a shorter pause never shortens a longer one
    assert gate.remaining("resolvers") == 10 and gate.remaining("api") == 0
    assert gate.wait("api", limit=60) == 0
    assert gate.wait("resolvers", limit=60) == 10 and gate.remaining("resolvers") == 0


def test_gate_wait_is_capped():
    clock = FakeClock()
    gate = RateGate(clock=clock, sleep=clock.sleep)
    gate.pause("resolvers", 300)
    assert gate.wait("resolvers", limit=5) == 5
    assert gate.remaining("resolvers") == 295
    gate.reset()
    assert gate.remaining("resolvers") == 0


def test_the_request_quota_keeps_any_window_within_its_limit():
    from observatory.hub.ratelimit import RequestQuota

    now = [0.0]
    quota = RequestQuota(clock=lambda: now[0])
    quota.configure({"resolvers": 3}, window=10.0)
    assert [quota.reserve("resolvers", 60) for _ in range(3)] == [0.0, 0.0, 0.0]
    # The fourth books the slot one window after the first; the fifth, after the second.
    assert quota.reserve("resolvers", 60) == 10.0
    now[0] = 4.0
    assert quota.reserve("resolvers", 60) == 6.0
    # A wait past max_wait books nothing: the next caller is not pushed further back by it.
    assert quota.reserve("resolvers", 1.0) == 6.0
    assert quota.reserve("resolvers", 60) == 6.0
    assert quota.reserve("api", 0) == 0.0  # a bucket without a limit never waits
    assert quota.rate("resolvers") == 0.3 and quota.rate("api") is None


def test_the_published_plans_and_a_bad_one():
    from observatory.hub.ratelimit import plan_limits

    assert plan_limits("auto", has_token=False)["resolvers"] == 3_000
    assert plan_limits("auto", has_token=True)["resolvers"] == 5_000
    assert plan_limits("enterprise_plus", has_token=True) == {"api": 10_000, "resolvers": 100_000, "pages": 1_000}
    with pytest.raises(ValueError, match="unknown Hub plan 'gold'"):
        plan_limits("gold", has_token=True)
