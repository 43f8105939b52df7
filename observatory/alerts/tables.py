"""Alert tables: rules, subscriptions and their channels, alert state, the event outbox, deliveries.

The outbox pattern: evaluation writes alert state, the events it caused and one delivery row per
(event, subscription, channel) in one transaction. A delivery carries its ``webhook_id`` from that
moment on, so whoever sends it (now, after a crash, on a manual redelivery) sends the same id and
receivers can deduplicate. Nothing is sent inside a database transaction.

Secrets: owner tokens and e-mail confirmation tokens are stored only as SHA-256 hashes. Webhook
secrets must stay readable (they sign every message); feed and unsubscribe tokens are capability
URLs the owner may look up again.
"""

from __future__ import annotations

import secrets
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.store.tables import utcnow


def new_id(prefix: str) -> str:
    """A public id such as ``msg_…``; Standard Webhooks ids must not contain ".", and
    token_urlsafe never produces one."""
    return f"{prefix}_{secrets.token_urlsafe(16)}"


class AlertRule(SQLModel, table=True):
    """One rule definition (kind + parameters + population), shared by every subscription naming it."""

    __tablename__ = "alert_rule"

    id: int | None = Field(default=None, primary_key=True)
    # Hash of the canonical definition: two subscriptions to the same rule share one alert state.
    rule_key: str = Field(max_length=64, unique=True)
    kind: str = Field(max_length=40, index=True)
    params: dict = Field(default_factory=dict, sa_type=sa.JSON)
    population: dict = Field(default_factory=dict, sa_type=sa.JSON)
    title: str = Field(max_length=300)
    built_in: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    # Set once the rule has been evaluated on data: one-shot rules absorb what they see first
    # as history (see rules.py).
    last_evaluated_at: datetime | None = None


class AlertSubscription(SQLModel, table=True):
    __tablename__ = "alert_subscription"

    id: int | None = Field(default=None, primary_key=True)
    public_id: str = Field(max_length=40, unique=True)  # "sub_…", used in URLs
    owner_token_hash: str = Field(max_length=64, index=True)  # sha256 hex of the bearer token
    name: str = Field(max_length=200)
    status: str = Field(default="active", max_length=20)  # active | paused
    send_resolved: bool = True
    feed_token: str = Field(max_length=64, unique=True)  # unguessable per-subscription feed URL
    email: str | None = Field(default=None, max_length=320)
    # unconfirmed | confirmed | unsubscribed (None without an address)
    email_status: str | None = Field(default=None, max_length=20)
    email_confirm_hash: str | None = Field(default=None, max_length=64, index=True)
    email_confirmed_at: datetime | None = None
    email_unsubscribe_token: str | None = Field(default=None, max_length=64, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class AlertSubscriptionRule(SQLModel, table=True):
    __tablename__ = "alert_subscription_rule"

    subscription_id: int = Field(foreign_key="alert_subscription.id", primary_key=True)
    rule_id: int = Field(foreign_key="alert_rule.id", primary_key=True, index=True)


class WebhookEndpoint(SQLModel, table=True):
    """The webhook target of a subscription, with its own signing secret."""

    __tablename__ = "webhook_endpoint"

    id: int | None = Field(default=None, primary_key=True)
    subscription_id: int = Field(foreign_key="alert_subscription.id", unique=True)
    url: str = Field(max_length=2000)
    secret: str = Field(max_length=100)  # "whsec_" + base64, shown to the owner once
    status: str = Field(default="active", max_length=20)  # active | disabled
    disabled_reason: str | None = Field(default=None, max_length=500)
    disabled_at: datetime | None = None
    consecutive_failures: int = 0
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)


class Alert(SQLModel, table=True):
    """The state of one alert, identified by its fingerprint (rule + labels)."""

    __tablename__ = "alert"

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(max_length=64, unique=True)
    rule_id: int = Field(foreign_key="alert_rule.id", index=True)
    labels: dict = Field(default_factory=dict, sa_type=sa.JSON)
    status: str = Field(max_length=20, index=True)  # firing | resolved
    # False for one-shot events (a release, a new dialect): notified once, never "resolved".
    stateful: bool = True
    # True when the alert was absorbed as history on a rule's first evaluation (never notified).
    baseline: bool = False
    value: float | None = None
    summary: str = Field(max_length=500)
    details: dict = Field(default_factory=dict, sa_type=sa.JSON)
    started_at: datetime = Field(default_factory=utcnow)
    resolved_at: datetime | None = None
    last_evaluated_at: datetime = Field(default_factory=utcnow)
    last_notified_at: datetime | None = None
    notifications: int = 0


class AlertEvent(SQLModel, table=True):
    """A notification-worthy change of an alert: the outbox row every channel reads."""

    __tablename__ = "alert_event"
    __table_args__ = (sa.UniqueConstraint("alert_id", "sequence", name="uq_alert_event_alert_sequence"),)

    id: int | None = Field(default=None, primary_key=True)
    public_id: str = Field(max_length=40, unique=True)  # "evt_…"
    alert_id: int = Field(foreign_key="alert.id", index=True)
    sequence: int  # 1, 2, … per alert: makes a second copy of the same notification impossible
    type: str = Field(max_length=40)  # alert.firing | alert.resolved
    reason: str = Field(max_length=20)  # new | repeat | resolved
    summary: str = Field(max_length=500)
    # The exact webhook body ({type, timestamp, data}); retries send these bytes unchanged.
    payload: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    crawl_run_id: int | None = None


class AlertDelivery(SQLModel, table=True):
    """One event to one subscription over one channel, retried until it succeeds or gives up."""

    __tablename__ = "alert_delivery"
    __table_args__ = (
        sa.UniqueConstraint("event_id", "subscription_id", "channel", name="uq_alert_delivery_target"),
    )

    id: int | None = Field(default=None, primary_key=True)
    event_id: int = Field(foreign_key="alert_event.id", index=True)
    subscription_id: int = Field(foreign_key="alert_subscription.id", index=True)
    channel: str = Field(max_length=20)  # webhook | email
    webhook_id: str = Field(max_length=40, unique=True)  # "msg_…", the same on every attempt
    status: str = Field(default="pending", max_length=20, index=True)  # pending | succeeded | failed
    attempts: int = 0
    next_attempt_at: datetime = Field(default_factory=utcnow, index=True)
    last_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, max_length=500)
    created_at: datetime = Field(default_factory=utcnow)


class DeliveryAttempt(SQLModel, table=True):
    """The log of every attempt (also the ones a crash interrupted: outcome stays "started")."""

    __tablename__ = "alert_delivery_attempt"

    id: int | None = Field(default=None, primary_key=True)
    delivery_id: int = Field(foreign_key="alert_delivery.id", index=True)
    number: int
    manual: bool = False
    started_at: datetime = Field(default_factory=utcnow)
    duration_ms: int | None = None
    # started | success | failure | redirect | gone | throttled | timeout | blocked | error
    outcome: str = Field(default="started", max_length=20)
    status_code: int | None = None
    error: str | None = Field(default=None, max_length=500)
    response_excerpt: str | None = Field(default=None, max_length=500)
    retry_after_s: float | None = None
    target_ip: str | None = Field(default=None, max_length=64)


class SubscriptionNotice(SQLModel, table=True):
    """Something the owner must hear about that is not an alert (an endpoint was disabled)."""

    __tablename__ = "alert_notice"

    id: int | None = Field(default=None, primary_key=True)
    public_id: str = Field(max_length=40, unique=True)
    subscription_id: int = Field(foreign_key="alert_subscription.id", index=True)
    kind: str = Field(max_length=40)  # endpoint_disabled
    message: str = Field(max_length=1000)
    created_at: datetime = Field(default_factory=utcnow)
    # none (no confirmed address or no SMTP) | pending | sent | failed
    email_status: str = Field(default="none", max_length=20)


class RateBucket(SQLModel, table=True):
    """A token bucket (``observatory.alerts.limits``): one per purpose and client address, in the
    store so every web worker draws from the same one. Revision ``0008_reliability``."""

    __tablename__ = "rate_bucket"

    key: str = Field(primary_key=True, max_length=200)  # "subscribe:203.0.113.7"
    tokens: float
    updated_at: datetime = Field(default_factory=utcnow, index=True)
