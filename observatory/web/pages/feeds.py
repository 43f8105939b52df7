"""The Atom feeds: /alerts/feed.atom (built-in rules) and /alerts/feeds/{token}.atom (one subscription).

The body is deterministic for the same events, so its hash is the ETag; ``Last-Modified`` is the
newest entry, and conditional GETs get 304 (``alerts.feeds`` builds the entries and the XML).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import func, select

from observatory.alerts.feeds import (
    FEED_ENTRIES,
    MEDIA_TYPE,
    FeedEntry,
    aware,
    build_feed,
    event_entry,
    feed_updated,
    notice_entry,
    public_events,
    subscription_events,
)
from observatory.alerts.tables import AlertRule, AlertSubscription, SubscriptionNotice
from observatory.web.deps import ReadSessionDep, SettingsDep
from observatory.web.errors import ApiError
from observatory.web.rendering import request_base

router = APIRouter(include_in_schema=False)


def conditional_response(request: Request, body: bytes, last_modified: datetime) -> Response:
    """200 with ETag/Last-Modified, or 304 when the client's copy is current."""
    etag = f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'
    last_modified = last_modified.astimezone(timezone.utc).replace(microsecond=0)
    headers = {"ETag": etag, "Last-Modified": format_datetime(last_modified, usegmt=True),
               "Cache-Control": "no-cache"}
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        if "*" in tags or etag.removeprefix("W/") in tags:
            return Response(status_code=304, headers=headers)
    elif (since := request.headers.get("if-modified-since")) is not None:
        try:
            when = parsedate_to_datetime(since)
        except (TypeError, ValueError):
            when = None
        if when is not None and aware(when) >= last_modified:
            return Response(status_code=304, headers=headers)
    return Response(body, media_type=f"{MEDIA_TYPE}; charset=utf-8", headers=headers)


def _feed(request: Request, key: str, title: str, alternate: str, entries: list[FeedEntry], base: str,
          began: datetime) -> Response:
    body = build_feed(key=key, title=title, self_url=base + request.url.path, alternate_url=base + alternate,
                      entries=entries, began=began)
    return conditional_response(request, body, feed_updated(entries, began))


@router.get("/alerts/feed.atom")
def public_feed(request: Request, session: ReadSessionDep, settings: SettingsDep) -> Response:
    entries = [event_entry(e) for e in public_events(session)]
    # With no alert yet, the feed has held nothing since its newest rule was created.
    began = session.exec(select(func.max(AlertRule.created_at))).one() or datetime.now(UTC)
    return _feed(request, "gqa-observatory:alerts", "GQA Observatory alerts", "/alerts", entries,
                 request_base(request, settings), began)


@router.get("/alerts/feeds/{token}.atom")
def subscription_feed(token: str, request: Request, session: ReadSessionDep, settings: SettingsDep) -> Response:
    sub = session.exec(select(AlertSubscription).where(AlertSubscription.feed_token == token)).first() \
        if 20 <= len(token) <= 64 else None
    if sub is None:
        raise ApiError(404, "no such feed")
    entries = [event_entry(e) for e in subscription_events(session, sub)]
    notices = session.exec(select(SubscriptionNotice).where(SubscriptionNotice.subscription_id == sub.id)
                           .order_by(SubscriptionNotice.id.desc()).limit(FEED_ENTRIES)).all()
    entries += [notice_entry(n) for n in notices]
    return _feed(request, f"gqa-observatory:subscription:{sub.public_id}", f"GQA Observatory alerts: {sub.name}",
                 "/alerts", entries, request_base(request, settings), sub.created_at)
