"""What a failure means and when to try again (pure).

Transient failures (timeouts, 5xx, 429 after our retries, dropped connections) are retried on
later runs with exponential backoff, then given up. Permanent ones (gated, no config.json in the
commit, not JSON, geometry that does not parse, repo gone, invalid id) are never retried for the
same commit: a new sha from the listing is a new attempt, since a new commit can fix them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class RetryPolicy:
    base_s: float
    max_s: float
    max_attempts: int


@dataclass(frozen=True)
class FailureState:
    attempts: int
    transient: bool
    next_attempt_at: datetime | None
    gave_up: bool = False


def next_state(*, previous_attempts: int, same_sha: bool, transient: bool, now: datetime,
               policy: RetryPolicy) -> FailureState:
    """The failure row after one more failed attempt.

    Attempts count per commit: a new sha starts again at 1.
    """
    attempts = previous_attempts + 1 if same_sha else 1
    if not transient:
        return FailureState(attempts=attempts, transient=False, next_attempt_at=None)
    if attempts >= policy.max_attempts:
        return FailureState(attempts=attempts, transient=False, next_attempt_at=None, gave_up=True)
    delay = min(policy.max_s, policy.base_s * 2 ** (attempts - 1))
    return FailureState(attempts=attempts, transient=True, next_attempt_at=now + timedelta(seconds=delay))
