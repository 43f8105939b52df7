"""How long the Hub asks us to wait, and a gate that makes every thread wait that long.

The Hub documents ``RateLimit: "<bucket>";r=<remaining>;t=<seconds to reset>`` (IETF draft 9);
huggingface_hub parses it (``parse_ratelimit_headers``) and we reuse that parser. ``Retry-After``
is not documented for the Hub but is standard HTTP, so it is honoured too (seconds or a date).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from huggingface_hub.utils import parse_ratelimit_headers

from observatory.hub import transport


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent or bad."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def server_wait(status: int, headers: Mapping[str, str]) -> tuple[str | None, float | None]:
    """(bucket, seconds) the server asks every client of that bucket to pause, or (None, None).

    A pause is asked for when the window is spent (``r=0``, on any status: the next request would
    be refused) or by ``Retry-After`` on a 429/503.
    """
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        return info.resource_type, float(info.reset_in_seconds)
    if status in (429, 503):
        seconds = retry_after_seconds(headers)
        if seconds is not None:
            return (info.resource_type if info else None), seconds
    return None, None


def bucket_of(path: str) -> str:
    """The Hub's rate-limit bucket for a URL path (docs: API, resolvers, pages)."""
    if "/resolve/" in path or path.startswith("/api/resolve-cache/"):
        return "resolvers"
    if path.startswith("/api/"):
        return "api"
    return "pages"


class RateGate:
    """Per-bucket "not before" times shared by all threads of this process."""

    def __init__(self, clock=time.monotonic, sleep=time.sleep) -> None:
        self._lock = threading.Lock()
        self._not_before: dict[str, float] = {}
        self._clock = clock
        self._sleep = sleep

    def pause(self, bucket: str, seconds: float) -> None:
        until = self._clock() + max(0.0, seconds)
        with self._lock:
            if until > self._not_before.get(bucket, 0.0):
                self._not_before[bucket] = until

    def remaining(self, bucket: str) -> float:
        with self._lock:
            return max(0.0, self._not_before.get(bucket, 0.0) - self._clock())

    def wait(self, bucket: str, limit: float) -> float:
        """Sleep until the bucket is open, at most ``limit`` seconds; returns the time slept."""
        slept = 0.0
        while (left := self.remaining(bucket)) > 0 and slept < limit:
            step = min(left, limit - slept)
            self._sleep(step)
            slept += step
        return slept

    def reset(self) -> None:
        with self._lock:
            self._not_before.clear()


GATE = RateGate(sleep=transport.wait)  # a stop request ends the wait (transport.Cancelled)


# The Hub's published quotas per 5-minute fixed window (hub-docs docs/hub/rate-limits.md,
# "current rate limits (in September '25)"; /work/shared/docs/hub-api.md §4). The first two are
# marked "subject to change over time depending on platform health".
PUBLISHED_WINDOW_S = 300.0
PUBLISHED_LIMITS: dict[str, dict[str, int]] = {
    "anonymous": {"api": 500, "resolvers": 3_000, "pages": 100},
    "free": {"api": 1_000, "resolvers": 5_000, "pages": 200},
    "pro": {"api": 2_500, "resolvers": 12_000, "pages": 400},
    "team": {"api": 3_000, "resolvers": 20_000, "pages": 400},
    "enterprise": {"api": 6_000, "resolvers": 50_000, "pages": 600},
    "enterprise_plus": {"api": 10_000, "resolvers": 100_000, "pages": 1_000},
}


def plan_name(plan: str, has_token: bool) -> str:
    """The plan whose limits apply: "auto" is anonymous without a token, the free account's with one."""
    return ("free" if has_token else "anonymous") if plan == "auto" else plan


def plan_limits(plan: str, has_token: bool, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """Requests per window for each bucket under ``plan``, then any per-bucket ``overrides``;
    "unlimited" (a mirror, the stand-in) bounds nothing but what ``overrides`` names."""
    name = plan_name(plan, has_token)
    if name == "unlimited":
        return dict(overrides or {})
    if name not in PUBLISHED_LIMITS:
        raise ValueError(f"unknown Hub plan {plan!r}; one of auto, unlimited, {', '.join(PUBLISHED_LIMITS)}")
    return {**PUBLISHED_LIMITS[name], **(overrides or {})}


class RequestQuota:
    """At most ``limits[bucket]`` requests in any ``window`` seconds, shared by all threads.

    The Hub counts fixed windows whose start we do not know; a sliding window never exceeds the
    quota in any of them. A request books the earliest slot that keeps the count: the time of
    the request ``limit`` places before it plus the window. ``reserve`` only books a slot it is
    told the caller will wait for (``max_wait``), so a refused request costs nothing.
    """

    def __init__(self, clock=time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._window = PUBLISHED_WINDOW_S
        self._limits: dict[str, int] = {}
        self._sent: dict[str, list[float]] = {}

    def configure(self, limits: Mapping[str, int], window: float) -> None:
        with self._lock:
            if dict(limits) != self._limits or window != self._window:
                self._limits, self._window, self._sent = dict(limits), window, {}

    def rate(self, bucket: str) -> float | None:
        """Requests per second the quota allows in ``bucket`` (None: unbounded)."""
        limit = self._limits.get(bucket)
        return None if limit is None else limit / self._window

    def reserve(self, bucket: str, max_wait: float) -> float:
        """Seconds to wait before this request may go; its slot is booked only when that is at
        most ``max_wait`` (a longer wait is the caller's to refuse)."""
        with self._lock:
            limit = self._limits.get(bucket)
            if limit is None:
                return 0.0
            now = self._clock()
            sent = self._sent.setdefault(bucket, [])
            cut = 0
            while cut < len(sent) and sent[cut] <= now - self._window:
                cut += 1
            del sent[:cut]
            slot = now if len(sent) < limit else max(now, sent[-limit] + self._window)
            if slot - now <= max_wait:
                sent.append(slot)
            return slot - now

    def reset(self) -> None:
        with self._lock:
            self._sent.clear()


QUOTA = RequestQuota()
