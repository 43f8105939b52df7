"""Abuse limits for the anonymous write paths (issue 14: 300 anonymous subscriptions in 4.4 s,
each a new owner, so the per-owner limit never applied).

- ``take``: a token bucket per purpose and client network, kept in the store (``RateBucket``)
  so every web worker and process draws from the same bucket. The read-modify-write runs in
  one write transaction (the store's single writer on SQLite, a row lock on PostgreSQL).
- ``client_network``: the key a client's address is throttled under (issue 21: twenty IPv6
  addresses from one /64 created 200 owners, since every address had a bucket of its own).
- ``unverified_endpoints``: how many channels nobody has shown to work yet, for a global cap:
  webhook endpoints that never answered a delivery with a 2xx, and e-mail addresses not
  confirmed.
"""

from __future__ import annotations

import ipaddress
import math
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, delete, select

from observatory.alerts.tables import AlertSubscription, RateBucket, WebhookEndpoint
from observatory.store.db import session_scope
from observatory.store.tables import utcnow


class LimitExceeded(Exception):
    """A request refused by a limit: ``status`` 429 (this client, come back after
    ``retry_after_s``) or 503 (the service as a whole, no time known)."""

    def __init__(self, message: str, *, status: int, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.retry_after_s is None else {"Retry-After": str(max(1, math.ceil(self.retry_after_s)))}


def client_network(client: str) -> str:
    """What one client is throttled as: an IPv4 address as it is; an IPv6 address by its /64,
    the smallest allocation a site gets (RFC 6177), so one host cannot mint a bucket per address;
    an IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 peer) as its IPv4 address.
    Anything that is not an address (a test client's name) is its own key."""
    try:
        address = ipaddress.ip_address(client.split("%")[0])
    except ValueError:
        return client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def take(engine: Engine, key: str, *, burst: int, per_hour: float, now: datetime | None = None) -> float | None:
    """Take one token from ``key``'s bucket (``burst`` at most, refilled at ``per_hour``).

    None when a token was taken; otherwise the seconds until one is back (nothing taken).
    """
    now = now or utcnow()
    rate = per_hour / 3600.0
    for _ in range(2):  # a racing first insert loses on the key once; the second pass reads its row
        try:
            with session_scope(engine) as session:
                return _take(session, key[:200], burst, rate, now)
        except IntegrityError:
            continue
    return _seconds_for_one(0.0, rate)


def _take(session: Session, key: str, burst: int, rate: float, now: datetime) -> float | None:
    row = session.exec(select(RateBucket).where(RateBucket.key == key).with_for_update()).first()
    if row is None:
        tokens = float(burst)
        row = RateBucket(key=key, tokens=tokens, updated_at=now)
        session.add(row)
    else:
        elapsed = max(0.0, (now - row.updated_at).total_seconds())
        tokens = min(float(burst), row.tokens + elapsed * rate)
    if tokens < 1.0:
        return _seconds_for_one(tokens, rate)
    row.tokens, row.updated_at = tokens - 1.0, now
    if rate > 0:  # buckets idle long enough to be full again are the same as no row
        session.flush()
        full_after = timedelta(seconds=burst / rate)
        session.exec(delete(RateBucket).where(col(RateBucket.updated_at) < now - full_after))
    return None


def _seconds_for_one(tokens: float, rate: float) -> float:
    return (1.0 - tokens) / rate if rate > 0 else math.inf


def unverified_endpoints(session: Session) -> int:
    webhooks = session.exec(
        select(sa.func.count()).select_from(WebhookEndpoint)
        .where(WebhookEndpoint.status == "active", col(WebhookEndpoint.last_success_at).is_(None))
    ).one()
    emails = session.exec(
        select(sa.func.count()).select_from(AlertSubscription).where(AlertSubscription.email_status == "unconfirmed")
    ).one()
    return webhooks + emails
