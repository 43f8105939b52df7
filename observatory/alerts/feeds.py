"""Atom feeds of alert events: the public one (built-in rules) and one per subscription.

A subscription's feed lives under an unguessable token URL (a capability, like a private
calendar link) and lists the events of that subscription's rules plus notices to its owner
(e.g. "your endpoint was disabled"). Pausing stops pushes (webhooks, e-mail), not the feed.

Entry ids are ``urn:uuid:`` names derived from the event's public id, so they never change
(readers dedupe on them) even if the site moves. The body is deterministic for the same events,
so its hash is the ETag; ``Last-Modified`` is the newest entry. Conditional GETs get 304.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response
from feedgen.feed import FeedGenerator
from sqlmodel import Session, select

from observatory.alerts.tables import (
    Alert,
    AlertEvent,
    AlertRule,
    AlertSubscription,
    AlertSubscriptionRule,
    SubscriptionNotice,
)
from observatory.web.deps import ReadSessionDep, SettingsDep
from observatory.web.errors import ApiError

FEED_ENTRIES = 50
MEDIA_TYPE = "application/atom+xml"
_NAMESPACE = uuid.UUID("7b0c4a52-3d1e-5d6c-9a61-3f1f2f7b8e10")  # fixed: entry ids must never change
EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class FeedEntry:
    key: str  # public id the entry id is derived from
    title: str
    content: str
    updated: datetime
    link: str | None


def entry_id(key: str) -> str:
    return f"urn:uuid:{uuid.uuid5(_NAMESPACE, key)}"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def event_entry(event: AlertEvent) -> FeedEntry:
    data = json.loads(event.payload)["data"]
    status = "RESOLVED" if event.type == "alert.resolved" else "FIRING"
    lines = [data["summary"], "", f"Rule: {data['rule']['title']}"]
    details = data.get("details") or {}
    models = details.get("models") or []
    if models:
        lines.append("Models: " + ", ".join(m["id"] for m in models))
    for name, url in (data.get("links") or {}).items():
        lines.append(f"{name}: {url}")
    link = (data.get("links") or {}).get("trend")
    return FeedEntry(event.public_id, f"[{status}] {event.summary}"[:300], "\n".join(lines),
                     _aware(event.created_at), link)


def notice_entry(notice: SubscriptionNotice) -> FeedEntry:
    return FeedEntry(notice.public_id, "[NOTICE] webhook endpoint disabled", notice.message,
                     _aware(notice.created_at), None)


def build_feed(*, key: str, title: str, self_url: str, alternate_url: str, entries: list[FeedEntry]) -> bytes:
    fg = FeedGenerator()
    fg.id(entry_id(key))
    fg.title(title)
    fg.author({"name": "GQA Observatory"})
    fg.link(href=self_url, rel="self", type=MEDIA_TYPE)
    fg.link(href=alternate_url, rel="alternate", type="text/html")
    fg.updated(max((e.updated for e in entries), default=EPOCH))
    for e in sorted(entries, key=lambda e: (e.updated, e.key), reverse=True):
        fe = fg.add_entry(order="append")
        fe.id(entry_id(e.key))
        fe.title(e.title)
        fe.updated(e.updated)
        fe.published(e.updated)
        fe.content(e.content, type="text")
        if e.link:
            fe.link(href=e.link, rel="alternate", type="text/html")
    return fg.atom_str(pretty=True)


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
        if when is not None and _aware(when) >= last_modified:
            return Response(status_code=304, headers=headers)
    return Response(body, media_type=f"{MEDIA_TYPE}; charset=utf-8", headers=headers)


def public_events(session: Session, limit: int = FEED_ENTRIES) -> list[AlertEvent]:
    return list(session.exec(
        select(AlertEvent).join(Alert, Alert.id == AlertEvent.alert_id).join(AlertRule, AlertRule.id == Alert.rule_id)
        .where(AlertRule.built_in.is_(True)).order_by(AlertEvent.id.desc()).limit(limit)
    ).all())


def subscription_events(session: Session, sub: AlertSubscription, limit: int = FEED_ENTRIES) -> list[AlertEvent]:
    return list(session.exec(
        select(AlertEvent).join(Alert, Alert.id == AlertEvent.alert_id)
        .join(AlertSubscriptionRule, AlertSubscriptionRule.rule_id == Alert.rule_id)
        .where(AlertSubscriptionRule.subscription_id == sub.id).order_by(AlertEvent.id.desc()).limit(limit)
    ).all())


def _feed(request: Request, key: str, title: str, alternate: str, entries: list[FeedEntry], base: str) -> Response:
    body = build_feed(key=key, title=title, self_url=base + request.url.path, alternate_url=base + alternate,
                      entries=entries)
    return conditional_response(request, body, max((e.updated for e in entries), default=EPOCH))


def request_base(request: Request, settings) -> str:
    return settings.base_url.rstrip("/") if settings.base_url else str(request.base_url).rstrip("/")


@router.get("/alerts/feed.atom")
def public_feed(request: Request, session: ReadSessionDep, settings: SettingsDep) -> Response:
    entries = [event_entry(e) for e in public_events(session)]
    return _feed(request, "gqa-observatory:alerts", "GQA Observatory alerts", "/alerts", entries,
                 request_base(request, settings))


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
                 "/alerts", entries, request_base(request, settings))

