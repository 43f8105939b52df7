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
