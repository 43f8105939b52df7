"""Atom feeds of alert events: the public one (built-in rules) and one per subscription (their
routes are ``web.pages.feeds``).

A subscription's feed lives under an unguessable token URL (a capability, like a private
calendar link) and lists the events of that subscription's rules plus notices to its owner
(e.g. "your endpoint was disabled"). Pausing stops pushes (webhooks, e-mail), not the feed.

Entry ids are ``urn:uuid:`` names derived from the event's public id, so they never change
(readers dedupe on them) even if the site moves. The body is deterministic for the same events,
so its hash is the ETag; ``Last-Modified`` is the newest entry. Conditional GETs get 304.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

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

FEED_ENTRIES = 50
MEDIA_TYPE = "application/atom+xml"
_NAMESPACE = uuid.UUID("7b0c4a52-3d1e-5d6c-9a61-3f1f2f7b8e10")  # fixed: entry ids must never change

@dataclass(frozen=True)
class FeedEntry:
    key: str  # public id the entry id is derived from
    title: str
    content: str
    updated: datetime
    link: str | None


def entry_id(key: str) -> str:
    return f"urn:uuid:{uuid.uuid5(_NAMESPACE, key)}"


def aware(value: datetime) -> datetime:
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
                     aware(event.created_at), link)


def notice_entry(notice: SubscriptionNotice) -> FeedEntry:
    return FeedEntry(notice.public_id, "[NOTICE] webhook endpoint disabled", notice.message,
                     aware(notice.created_at), None)


def feed_updated(entries: list[FeedEntry], began: datetime) -> datetime:
    """Atom's ``updated``: the newest entry, or for a feed with none, when it began (``began``:
    a subscription's creation, the newest rule's for the public feed), never a made-up date."""
    return max((e.updated for e in entries), default=aware(began))


def build_feed(*, key: str, title: str, self_url: str, alternate_url: str, entries: list[FeedEntry],
               began: datetime) -> bytes:
    fg = FeedGenerator()
    fg.id(entry_id(key))
    fg.title(title)
    fg.author({"name": "GQA Observatory"})
    fg.link(href=self_url, rel="self", type=MEDIA_TYPE)
    fg.link(href=alternate_url, rel="alternate", type="text/html")
    fg.updated(feed_updated(entries, began))
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
