"""Subscriptions: create, look up by owner, pause, resume, delete; shared by the API and the pages.

Ownership: creating a subscription returns an owner token once (``obs_…``); only its SHA-256
is stored. Every later request presents it as a bearer token, and a subscription is visible
only to the token that owns it (another token gets "not found", never "forbidden", so ids
cannot be probed). Presenting an existing token when creating adds the new subscription to
the same owner.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from observatory.alerts import email as mail
from observatory.alerts import limits
from observatory.alerts import rules as R
from observatory.alerts.evaluate import rule_row
from observatory.alerts.ssrf import UnsafeURL
from observatory.alerts.tables import (
    AlertDelivery,
    AlertEvent,
    AlertRule,
    AlertSubscription,
    AlertSubscriptionRule,
    DeliveryAttempt,
    SubscriptionNotice,
    WebhookEndpoint,
    new_id,
)
from observatory.alerts.webhooks import new_secret, secret_hint, vet
from observatory.settings import Settings
from observatory.store.db import session_scope
from observatory.store.tables import utcnow

MAX_SUBSCRIPTIONS_PER_OWNER = 50
MAX_RULES = 20


class SubscriptionError(ValueError):
    """Bad input for a subscription; ``errors`` lists every problem (answered with 422)."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


class LimitReached(SubscriptionError):
    """The owner already has MAX_SUBSCRIPTIONS_PER_OWNER subscriptions (a 409: valid input, full)."""


class NotFound(LookupError):
    pass


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def owner_exists(session: Session, token: str) -> bool:
    return session.exec(
        select(AlertSubscription.id).where(AlertSubscription.owner_token_hash == token_hash(token))
    ).first() is not None


@dataclass(frozen=True)
class Created:
    subscription: AlertSubscription
    owner_token: str | None  # None when an existing owner's token was presented
    webhook_secret: str | None
    email_token: str | None  # for the confirmation message (never shown to the API caller)


def create(
    engine: Engine,
    settings: Settings,
    *,
    name: str,
    rules: list[dict],
    webhook_url: str | None = None,
    email: str | None = None,
    send_resolved: bool = True,
    owner_token: str | None = None,
    client: str | None = None,
) -> Created:
    """Validate everything first, then store the subscription in one transaction.

    ``client`` is the caller's address: a creation without an owner token (a new owner) takes a
    token from its network's bucket (``limits.client_network``) and then from the overall one,
    before any input is looked at (a webhook URL makes us resolve a name). New webhook and e-mail channels are refused while
    ``max_unverified_endpoints`` others wait to be verified. Both raise ``limits.LimitExceeded``.
    """
    if owner_token is None and client is not None:
        network = limits.client_network(client)
        wait = limits.take(engine, f"subscribe:{network}", burst=settings.subscribe_burst,
                           per_hour=settings.subscribe_per_hour)
        if wait is not None:
            raise limits.LimitExceeded(
                f"too many new subscriptions from this address; try again in {math.ceil(wait)} s "
                f"(at most {settings.subscribe_burst} at once, {settings.subscribe_per_hour:g} an hour "
                f"from {network})",
                status=429, retry_after_s=wait)
        # The overall cap: many networks (a botnet, a cloud's address pool) still share it.
        overall = max(1, int(settings.subscribe_global_per_hour))
        wait = limits.take(engine, "subscribe-all", burst=overall, per_hour=settings.subscribe_global_per_hour)
        if wait is not None:
            raise limits.LimitExceeded(
                f"too many new subscriptions from all clients; try again in {math.ceil(wait)} s "
                f"(at most {settings.subscribe_global_per_hour:g} new owners an hour)",
                status=503, retry_after_s=wait)
    errors: list[str] = []
    name = (name or "").strip()
    if not name or len(name) > 200:
        errors.append("name: between 1 and 200 characters")
    if not rules:
        errors.append("rules: at least one rule")
    if len(rules) > MAX_RULES:
        errors.append(f"rules: at most {MAX_RULES}")
    specs: list[R.RuleSpec] = []
    for i, rule in enumerate(rules[:MAX_RULES]):
        try:
            specs.append(R.make_rule(rule.get("kind"), rule.get("params"), rule.get("population")))
        except R.RuleError as exc:
            errors.extend(f"rules[{i}].{e}" for e in exc.errors)
    if webhook_url:
        try:
            vet(webhook_url, settings)
        except UnsafeURL as exc:
            errors.append(f"webhook_url: {exc}")
    if email:
        if not mail.smtp_configured(settings):
            errors.append("email: e-mail alerts are not available here (no SMTP server configured)")
        else:
            try:
                email = mail.validate_address(email)
            except mail.EmailError as exc:
                errors.append(f"email: {exc}")
    if errors:
        raise SubscriptionError(errors)

    new_token = None
    if owner_token is None:
        new_token = owner_token = "obs_" + secrets.token_urlsafe(32)
    secret = new_secret() if webhook_url else None
    email_token = secrets.token_urlsafe(32) if email else None
    now = utcnow()
    with session_scope(engine) as session:
        owned = session.exec(
            select(sa.func.count()).select_from(AlertSubscription)
            .where(AlertSubscription.owner_token_hash == token_hash(owner_token))
        ).one()
        if owned >= MAX_SUBSCRIPTIONS_PER_OWNER:
            raise LimitReached([f"at most {MAX_SUBSCRIPTIONS_PER_OWNER} subscriptions per owner"])
        if (webhook_url or email) and limits.unverified_endpoints(session) >= settings.max_unverified_endpoints:
            raise limits.LimitExceeded(
                "too many webhook endpoints and e-mail addresses are waiting to be verified; "
                "new ones are refused for now (a feed-only subscription works)", status=503)
        sub = AlertSubscription(
            public_id=new_id("sub"), owner_token_hash=token_hash(owner_token), name=name,
            send_resolved=send_resolved, feed_token=secrets.token_urlsafe(32),
            email=email or None, email_status="unconfirmed" if email else None,
            email_confirm_hash=token_hash(email_token) if email_token else None,
            email_unsubscribe_token=secrets.token_urlsafe(32) if email else None,
            created_at=now, updated_at=now,
        )
        session.add(sub)
        session.flush()
        for rule_id in dict.fromkeys(rule_row(session, spec).id for spec in specs):
            session.add(AlertSubscriptionRule(subscription_id=sub.id, rule_id=rule_id))
        if webhook_url:
            session.add(WebhookEndpoint(subscription_id=sub.id, url=webhook_url, secret=secret, created_at=now))
    return Created(sub, new_token, secret, email_token)


def send_confirmation(settings: Settings, sub: AlertSubscription, email_token: str) -> str | None:
    """Send the opt-in message; returns an error text, or None when it went out."""
    try:
        mail.send(settings, mail.confirmation_message(settings, sub.email, sub.name, email_token))
    except Exception as exc:  # SMTP trouble must not lose the subscription; the owner may resend
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def owned(session: Session, token: str, public_id: str) -> AlertSubscription:
    sub = session.exec(
        select(AlertSubscription).where(AlertSubscription.public_id == public_id,
                                        AlertSubscription.owner_token_hash == token_hash(token))
    ).first()
    if sub is None:
        raise NotFound(f"no subscription {public_id!r} for this token")
    return sub


def list_owned(session: Session, token: str) -> list[AlertSubscription]:
    return list(session.exec(
        select(AlertSubscription).where(AlertSubscription.owner_token_hash == token_hash(token))
        .order_by(AlertSubscription.id)
    ).all())


def set_status(engine: Engine, token: str, public_id: str, status: str) -> AlertSubscription:
    with session_scope(engine) as session:
        sub = owned(session, token, public_id)
        if sub.status != status:
            sub.status = status
            sub.updated_at = utcnow()
        return sub


def enable_webhook(engine: Engine, token: str, public_id: str) -> AlertSubscription:
    with session_scope(engine) as session:
        sub = owned(session, token, public_id)
        endpoint = endpoint_of(session, sub)
        if endpoint is None:
            raise NotFound("this subscription has no webhook")
        endpoint.status, endpoint.disabled_reason, endpoint.disabled_at = "active", None, None
        endpoint.consecutive_failures = 0
        sub.updated_at = utcnow()
        return sub


def delete(engine: Engine, token: str, public_id: str) -> None:
    """Remove the subscription with its deliveries, their log, notices and endpoint."""
    with session_scope(engine) as session:
        sub = owned(session, token, public_id)
        deliveries = sa.select(AlertDelivery.id).where(AlertDelivery.subscription_id == sub.id)
        session.execute(sa.delete(DeliveryAttempt).where(DeliveryAttempt.delivery_id.in_(deliveries)))
        session.execute(sa.delete(AlertDelivery).where(AlertDelivery.subscription_id == sub.id))
        for table in (SubscriptionNotice, WebhookEndpoint, AlertSubscriptionRule):
            session.execute(sa.delete(table).where(table.subscription_id == sub.id))
        session.delete(sub)


def confirm_email(engine: Engine, token: str) -> AlertSubscription | None:
    with session_scope(engine) as session:
        sub = session.exec(
            select(AlertSubscription).where(AlertSubscription.email_confirm_hash == token_hash(token))
        ).first()
        if sub is None or sub.email_status == "unsubscribed":
            return None
        if sub.email_status != "confirmed":
            sub.email_status, sub.email_confirmed_at = "confirmed", utcnow()
        return sub


def unsubscribe_email(engine: Engine, token: str) -> AlertSubscription | None:
    with session_scope(engine) as session:
        sub = session.exec(
            select(AlertSubscription).where(AlertSubscription.email_unsubscribe_token == token)
        ).first()
        if sub is None:
            return None
        sub.email_status = "unsubscribed"
        session.execute(
            sa.update(AlertDelivery)
            .where(AlertDelivery.subscription_id == sub.id, AlertDelivery.channel == "email",
                   AlertDelivery.status == "pending")
            .values(status="failed", last_error="unsubscribed")
        )
        return sub


def resend_confirmation(engine: Engine, settings: Settings, token: str, public_id: str) -> str | None:
    """A fresh opt-in token and message; returns an error text or None."""
    email_token = secrets.token_urlsafe(32)
    with session_scope(engine) as session:
        sub = owned(session, token, public_id)
        if sub.email is None or sub.email_status != "unconfirmed":
            raise SubscriptionError(["email: there is no unconfirmed address on this subscription"])
        sub.email_confirm_hash = token_hash(email_token)
    return send_confirmation(settings, sub, email_token)


# ---- reading ------------------------------------------------------------------------------------


def endpoint_of(session: Session, sub: AlertSubscription) -> WebhookEndpoint | None:
    return session.exec(select(WebhookEndpoint).where(WebhookEndpoint.subscription_id == sub.id)).first()


def rules_of(session: Session, sub: AlertSubscription) -> list[AlertRule]:
    return list(session.exec(
        select(AlertRule).join(AlertSubscriptionRule, AlertSubscriptionRule.rule_id == AlertRule.id)
        .where(AlertSubscriptionRule.subscription_id == sub.id).order_by(AlertRule.id)
    ).all())


def rule_dict(rule: AlertRule) -> dict:
    return {"id": rule.rule_key, "kind": rule.kind, "title": rule.title, "params": rule.params,
            "population": rule.population, "built_in": rule.built_in}


def feed_path(sub: AlertSubscription) -> str:
    return f"/alerts/feeds/{sub.feed_token}.atom"


def subscription_dict(session: Session, sub: AlertSubscription, base_url: str) -> dict:
    endpoint = endpoint_of(session, sub)
    notices = session.exec(
        select(SubscriptionNotice).where(SubscriptionNotice.subscription_id == sub.id)
        .order_by(SubscriptionNotice.id.desc()).limit(20)
    ).all()
    return {
        "id": sub.public_id,
        "name": sub.name,
        "status": sub.status,
        "send_resolved": sub.send_resolved,
        "created_at": sub.created_at,
        "updated_at": sub.updated_at,
        "rules": [rule_dict(r) for r in rules_of(session, sub)],
        "webhook": None if endpoint is None else {
            "url": endpoint.url,
            "status": endpoint.status,
            "disabled_reason": endpoint.disabled_reason,
            "disabled_at": endpoint.disabled_at,
            "consecutive_failures": endpoint.consecutive_failures,
            "last_success_at": endpoint.last_success_at,
            "last_failure_at": endpoint.last_failure_at,
            "secret_hint": secret_hint(endpoint.secret),
        },
        "email": None if sub.email is None else {
            "address": sub.email, "status": sub.email_status, "confirmed_at": sub.email_confirmed_at},
        "feed_url": base_url + feed_path(sub),
        "notices": [{"id": n.public_id, "kind": n.kind, "message": n.message, "created_at": n.created_at,
                     "email_status": n.email_status} for n in notices],
    }


def attempt_dict(a: DeliveryAttempt) -> dict:
    return {"number": a.number, "manual": a.manual, "started_at": a.started_at, "duration_ms": a.duration_ms,
            "outcome": a.outcome, "status_code": a.status_code, "error": a.error,
            "response_excerpt": a.response_excerpt, "retry_after_s": a.retry_after_s, "target_ip": a.target_ip}


def delivery_dict(session: Session, d: AlertDelivery) -> dict:
    event = session.get(AlertEvent, d.event_id)
    attempts = session.exec(
        select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == d.id).order_by(DeliveryAttempt.number)
    ).all()
    return {
        "id": d.webhook_id,
        "event_id": event.public_id,
        "event_type": event.type,
        "summary": event.summary,
        "channel": d.channel,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": d.next_attempt_at if d.status == "pending" else None,
        "created_at": d.created_at,
        "delivered_at": d.delivered_at,
        "last_status_code": d.last_status_code,
        "last_error": d.last_error,
        "attempt_log": [attempt_dict(a) for a in attempts],
    }


def deliveries_of(session: Session, sub: AlertSubscription, *, status: str | None, limit: int,
                  before: int | None) -> tuple[list[AlertDelivery], int | None]:
    """Newest first; keyset pagination on the row id."""
    query = select(AlertDelivery).where(AlertDelivery.subscription_id == sub.id)
    if status:
        query = query.where(AlertDelivery.status == status)
    if before is not None:
        query = query.where(AlertDelivery.id < before)
    rows = list(session.exec(query.order_by(AlertDelivery.id.desc()).limit(limit + 1)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more and rows else None)


def delivery_owned(session: Session, sub: AlertSubscription, delivery_public_id: str) -> AlertDelivery:
    d = session.exec(
        select(AlertDelivery).where(AlertDelivery.webhook_id == delivery_public_id,
                                    AlertDelivery.subscription_id == sub.id)
    ).first()
    if d is None:
        raise NotFound(f"no delivery {delivery_public_id!r} in this subscription")
    return d
