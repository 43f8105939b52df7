"""The delivery worker: sends pending deliveries from the outbox, retries, disables dead endpoints.

A pass claims the deliveries that are due in one short transaction (attempt count + 1, an
attempt row saying "started", and ``next_attempt_at`` pushed out by a lease), sends them with no
transaction open, then records each outcome in its own short transaction. If the process dies
mid-send, the lease runs out and a later pass sends the same delivery again with the **same**
``webhook-id``: at-least-once, deduplicable by the receiver, never a second id for one event.

One attempt is bounded as a whole (``ssrf.send_pinned``), and the lease is renewed just before
each attempt and outlasts any attempt (``webhooks.lease_s``), so a lease never runs out while
its attempt is under way: a delivery is never sent by two passes at once. A claim whose lease
ran out while it waited its turn (another pass has claimed it since) is not sent by this pass.
A stop request (SIGTERM in the worker, through ``hub.transport.cancellable``) ends the attempt
under way within a tenth of a second and sends nothing more; those deliveries are due again at
once, for the next process.

Endpoints: 2xx resets the failure count; 410 disables the endpoint at once; a delivery that
exhausts the retry schedule with no success from the endpoint since it was queued disables it
too. Disabling fails the endpoint's other pending deliveries and leaves a notice for the owner
(API, subscription feed, and e-mail when the subscription has a confirmed address).

Deliveries of a paused subscription wait (nothing is lost); they go out after it resumes.
"""

from __future__ import annotations

import contextvars
import random
import smtplib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from observatory.alerts import email as mail
from observatory.alerts.tables import (
    AlertDelivery,
    AlertEvent,
    AlertSubscription,
    DeliveryAttempt,
    SubscriptionNotice,
    WebhookEndpoint,
    new_id,
)
from observatory.alerts.webhooks import (
    AttemptOutcome,
    lease_s,
    retry_at,
    retry_delay,
    send_webhook,
)
from observatory.hub import transport as guarded
from observatory.settings import Settings
from observatory.store.db import session_scope
from observatory.store.tables import utcnow

_rng = random.Random()


@dataclass(frozen=True)
class Claim:
    delivery_id: int
    subscription_id: int
    attempt_id: int
    number: int
    manual: bool
    previous_status: str


@dataclass
class DeliveryReport:
    attempted: int = 0
    succeeded: int = 0
    retrying: int = 0
    failed: int = 0
    disabled_endpoints: list[str] = field(default_factory=list)
    notices_emailed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> dict:
        return {"attempted": self.attempted, "succeeded": self.succeeded, "retrying": self.retrying,
                "failed": self.failed, "disabled_endpoints": self.disabled_endpoints,
                "notices_emailed": self.notices_emailed, "outcomes": self.outcomes}


def _start_attempt(session: Session, delivery: AlertDelivery, now: datetime, settings: Settings,
                   manual: bool) -> Claim:
    previous = delivery.status
    delivery.status = "pending"
    delivery.attempts += 1
    delivery.last_attempt_at = now
    delivery.next_attempt_at = retry_at(now, lease_s(settings))  # the lease
    attempt = DeliveryAttempt(delivery_id=delivery.id, number=delivery.attempts, manual=manual, started_at=now)
    session.add(attempt)
    session.flush()
    return Claim(delivery.id, delivery.subscription_id, attempt.id, delivery.attempts, manual, previous)


def claim_due(engine: Engine, settings: Settings, now: datetime, limit: int) -> list[Claim]:
    with session_scope(engine) as session:
        due = session.exec(
            select(AlertDelivery)
            .join(AlertSubscription, AlertSubscription.id == AlertDelivery.subscription_id)
            .where(AlertDelivery.status == "pending", AlertDelivery.next_attempt_at <= now,
                   AlertSubscription.status == "active")
            .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        return [_start_attempt(session, d, now, settings, manual=False) for d in due]


def renew(engine: Engine, settings: Settings, claim: Claim) -> bool:
    """Extend ``claim``'s lease from now; False when the claim is no longer this pass's (its
    lease ran out while it waited and another pass claimed it: that pass sends it)."""
    with session_scope(engine) as session:
        result = session.execute(
            sa.update(AlertDelivery)
            .where(AlertDelivery.id == claim.delivery_id, AlertDelivery.attempts == claim.number,
                   AlertDelivery.status == "pending")
            .values(next_attempt_at=retry_at(utcnow(), lease_s(settings)))
        )
        return result.rowcount == 1


def _not_sent(engine: Engine, claim: Claim, outcome: str, error: str, *, due_now: bool) -> None:
    """Close an attempt row that sent nothing; ``due_now`` hands the delivery to the next pass."""
    with session_scope(engine) as session:
        attempt = session.get(DeliveryAttempt, claim.attempt_id)
        if attempt is not None:
            attempt.outcome, attempt.error, attempt.duration_ms = outcome, error, 0
        if due_now:
            session.execute(
                sa.update(AlertDelivery)
                .where(AlertDelivery.id == claim.delivery_id, AlertDelivery.attempts == claim.number,
                       AlertDelivery.status == "pending")
                .values(next_attempt_at=utcnow())
            )


def _send(engine: Engine, settings: Settings, claim: Claim) -> tuple[AttemptOutcome, bool]:
    """(outcome, terminal): terminal outcomes are not retried whatever the schedule says."""
    with Session(engine) as session:
        delivery = session.get(AlertDelivery, claim.delivery_id)
        event = session.get(AlertEvent, delivery.event_id)
        sub = session.get(AlertSubscription, delivery.subscription_id)
        endpoint = session.exec(select(WebhookEndpoint).where(WebhookEndpoint.subscription_id == sub.id)).first()
        webhook_id, payload = delivery.webhook_id, event.payload
    if delivery.channel == "webhook":
        if endpoint is None or endpoint.status != "active":
            return AttemptOutcome("failure", error="webhook endpoint is disabled"), True
        return send_webhook(endpoint.url, endpoint.secret, webhook_id, payload, settings), False
    if sub.email_status != "confirmed" or not sub.email:
        return AttemptOutcome("failure", error="e-mail address is not confirmed (or unsubscribed)"), True
    try:
        mail.send(settings, mail.alert_message(settings, sub.email, payload, webhook_id, sub.email_unsubscribe_token))
    except (smtplib.SMTPException, OSError, mail.EmailError) as exc:
        return AttemptOutcome("error", error=f"SMTP: {type(exc).__name__}: {exc}"[:500]), False
    return AttemptOutcome("success"), False


def disable_endpoint(session: Session, settings: Settings, endpoint: WebhookEndpoint, reason: str,
                     now: datetime) -> SubscriptionNotice | None:
    if endpoint.status == "disabled":
        return None
    endpoint.status = "disabled"
    endpoint.disabled_reason = reason[:500]
    endpoint.disabled_at = now
    session.execute(
        sa.update(AlertDelivery)
        .where(AlertDelivery.subscription_id == endpoint.subscription_id, AlertDelivery.channel == "webhook",
               AlertDelivery.status == "pending")
        .values(status="failed", last_error="webhook endpoint disabled")
    )
    sub = session.get(AlertSubscription, endpoint.subscription_id)
    emailed = sub.email_status == "confirmed" and mail.smtp_configured(settings)
    notice = SubscriptionNotice(
        public_id=new_id("ntc"), subscription_id=sub.id, kind="endpoint_disabled", created_at=now,
        message=(f"The webhook endpoint of subscription {sub.public_id} ({sub.name}) was disabled: {reason}. "
                 f"Nothing more is sent to {endpoint.url} until you re-enable it "
                 f"(POST /api/v1/subscriptions/{sub.public_id}/webhook/enable).")[:1000],
        email_status="pending" if emailed else "none",
    )
    session.add(notice)
    session.flush()
    return notice


def record(engine: Engine, settings: Settings, claim: Claim, outcome: AttemptOutcome,
           terminal: bool) -> tuple[str, str | None]:
    """Store one attempt's outcome; returns (succeeded | retrying | failed | logged, disabled URL)."""
    now = utcnow()
    with session_scope(engine) as session:
        delivery = session.get(AlertDelivery, claim.delivery_id)
        attempt = session.get(DeliveryAttempt, claim.attempt_id)
        if delivery is None or attempt is None:  # the subscription was deleted meanwhile
            return "logged", None
        attempt.outcome = outcome.outcome
        attempt.status_code = outcome.status_code
        attempt.error = outcome.error
        attempt.response_excerpt = outcome.response_excerpt
        attempt.retry_after_s = outcome.retry_after_s
        attempt.target_ip = outcome.target_ip
        attempt.duration_ms = outcome.duration_ms if outcome.duration_ms is not None else \
            int((now - attempt.started_at).total_seconds() * 1000)
        delivery.last_status_code = outcome.status_code
        delivery.last_error = outcome.error
        endpoint = None
        if delivery.channel == "webhook":
            endpoint = session.exec(
                select(WebhookEndpoint).where(WebhookEndpoint.subscription_id == delivery.subscription_id)).first()
        if delivery.status != "pending":  # failed meanwhile (endpoint disabled by another attempt)
            return "logged", None
        if outcome.ok:
            delivery.status, delivery.delivered_at = "succeeded", now
            if endpoint is not None:
                endpoint.consecutive_failures, endpoint.last_success_at = 0, now
            return "succeeded", None
        if outcome.outcome == "interrupted" and not claim.manual:
            delivery.next_attempt_at = now  # our stop, not the receiver's fault: due again at once
            return "retrying", None
        if endpoint is not None and not terminal and outcome.outcome != "interrupted":
            endpoint.consecutive_failures += 1
            endpoint.last_failure_at = now
        if outcome.outcome == "gone" and endpoint is not None:
            delivery.status = "failed"
            disabled = disable_endpoint(session, settings, endpoint, "the receiver answered 410 Gone", now)
            return "failed", endpoint.url if disabled else None
        if claim.manual and claim.previous_status != "pending":
            delivery.status = claim.previous_status  # a failed manual retry changes nothing but the log
            return "logged", None
        delay = None if terminal else retry_delay(claim.number, settings, outcome.retry_after_s, _rng)
        if delay is not None:
            delivery.next_attempt_at = retry_at(now, delay)
            return "retrying", None
        delivery.status = "failed"
        never_worked = endpoint is not None and (endpoint.last_success_at is None
                                                 or endpoint.last_success_at < delivery.created_at)
        if terminal or not never_worked:
            return "failed", None
        reason = (f"{claim.number} attempts over the whole retry schedule failed "
                  f"(last: {outcome.error or outcome.outcome})")
        disabled = disable_endpoint(session, settings, endpoint, reason, now)
        return "failed", endpoint.url if disabled else None


def send_pending_notices(engine: Engine, settings: Settings) -> int:
    """E-mail owners the notices that are waiting (one try each; the notice stays visible anyway)."""
    with Session(engine) as session:
        pending = session.exec(select(SubscriptionNotice).where(SubscriptionNotice.email_status == "pending")).all()
        jobs = [(n.id, n.public_id, n.message, session.get(AlertSubscription, n.subscription_id)) for n in pending]
    sent = 0
    for notice_id, public_id, message, sub in jobs:
        try:
            mail.send(settings, mail.notice_message(settings, sub.email, message, public_id,
                                                    sub.email_unsubscribe_token))
            status = "sent"
            sent += 1
        except (smtplib.SMTPException, OSError, mail.EmailError):
            status = "failed"
        with session_scope(engine) as session:
            notice = session.get(SubscriptionNotice, notice_id)
            if notice is not None:
                notice.email_status = status
    return sent


def _run(engine: Engine, settings: Settings, claims: list[Claim], report: DeliveryReport,
         until: float | None = None) -> None:
    """Subscriptions in parallel; each subscription's deliveries one after another, oldest first,
    so a receiver that answers promptly sees events in the order they happened. No attempt
    starts after ``until`` (monotonic); what is left is due again at once, for the next pass."""
    queues: dict[int, list[Claim]] = {}
    for claim in claims:
        queues.setdefault(claim.subscription_id, []).append(claim)

    def drain(queue: list[Claim]) -> None:
        for claim in queue:
            if guarded.stop_requested():
                _not_sent(engine, claim, "interrupted", "not sent: shutting down", due_now=True)
                continue
            if until is not None and time.monotonic() >= until:
                _not_sent(engine, claim, "deferred", "not sent in this pass: its time budget was spent; "
                          "the next pass sends it", due_now=True)
                continue
            if not renew(engine, settings, claim):
                _not_sent(engine, claim, "superseded",
                          "not sent by this pass: its lease ran out while it waited, and a later pass claimed it",
                          due_now=False)
                continue
            outcome, terminal = _send(engine, settings, claim)
            result, disabled = record(engine, settings, claim, outcome, terminal)
            with report.lock:
                report.attempted += 1
                report.outcomes[outcome.outcome] = report.outcomes.get(outcome.outcome, 0) + 1
                if result != "logged":
                    setattr(report, result, getattr(report, result) + 1)
                if disabled:
                    report.disabled_endpoints.append(disabled)

    if len(queues) <= 1:
        for queue in queues.values():
            drain(queue)
        return
    # Each task runs in a copy of this thread's context, so a stop request set around the pass
    # (hub.transport.cancellable) reaches the sends on the pool's threads too.
    with ThreadPoolExecutor(max_workers=max(1, settings.webhook_workers)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, drain, queue) for queue in queues.values()]
        for future in futures:
            future.result()


def deliver_pending(engine: Engine, settings: Settings, *, now: datetime | None = None,
                    limit: int = 500, budget_s: float | None = None) -> DeliveryReport:
    """One pass: send every delivery that is due (up to ``limit``), then waiting notices.

    With ``budget_s`` no attempt starts after that many seconds, so the pass ends within
    ``budget_s`` plus one attempt (``webhooks.attempt_budget_s``); the rest wait for the next.
    """
    report = DeliveryReport()
    until = None if budget_s is None else time.monotonic() + budget_s
    _run(engine, settings, claim_due(engine, settings, now or utcnow(), limit), report, until)
    report.notices_emailed = send_pending_notices(engine, settings)
    return report


def scheduled_delivery(engine: Engine, settings: Settings) -> None:
    """The scheduler job (``observatory.scheduler.JOBS``): one delivery pass."""
    deliver_pending(engine, settings)


class RedeliveryRefused(Exception):
    pass


def redeliver(engine: Engine, settings: Settings, delivery_id: int) -> DeliveryAttempt:
    """Send one delivery again now, with its original ``webhook-id``; returns the attempt."""
    with session_scope(engine) as session:
        delivery = session.get(AlertDelivery, delivery_id)
        if delivery.channel == "webhook":
            endpoint = session.exec(
                select(WebhookEndpoint).where(WebhookEndpoint.subscription_id == delivery.subscription_id)).first()
            if endpoint is None or endpoint.status != "active":
                raise RedeliveryRefused("the webhook endpoint is disabled; re-enable it first")
        claim = _start_attempt(session, delivery, utcnow(), settings, manual=True)
    report = DeliveryReport()
    _run(engine, settings, [claim], report)
    with Session(engine) as session:
        return session.get(DeliveryAttempt, claim.attempt_id)
