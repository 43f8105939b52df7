"""``observatory alerts``: evaluate the rules, send what is due, list alerts."""

from __future__ import annotations

import json
import time

import click


def _store(writes: bool = True):
    from observatory.settings import get_settings
    from observatory.store.db import get_engine, upgrade
    from observatory.store.integrity import check_writable

    settings = get_settings()
    upgrade(settings.resolved_database_url)
    if writes:  # a damaged or read-only store is refused before anything is written (store/integrity.py)
        check_writable(get_engine(settings), ("alert", "alert_event", "alert_delivery", "alert_rule"),
                       budget_s=settings.store_check_budget_s)
    return get_engine(settings), settings


@click.group()
def alerts() -> None:
    """Alert rules over the trends: evaluation, delivery, listing."""


@alerts.command("evaluate")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def evaluate_command(as_json: bool) -> None:
    """Evaluate every rule in use on the current data (idempotent) and queue the notifications.

    Nothing is sent here: run `observatory alerts deliver` (the scheduler does it too).
    """
    from observatory.alerts.email import base_url
    from observatory.alerts.evaluate import evaluate

    engine, settings = _store()
    report = evaluate(engine, settings).as_dict()
    if not settings.base_url:
        # Links in alerts, feeds and e-mails are built here, away from any request: without a
        # public URL they name the local serve address, which a subscriber elsewhere cannot open.
        click.echo(f"note: alert links point at {base_url(settings)}; set OBSERVATORY_BASE_URL to the site's "
                   "public URL", err=True)
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"evaluated {report['rules']} rules: {len(report['fired'])} fired, {len(report['repeated'])} "
               f"repeated, {len(report['resolved'])} resolved, {report['absorbed']} absorbed as history; "
               f"{report['deliveries']} deliveries queued")
    for action in ("fired", "repeated", "resolved"):
        for note in report[action]:
            click.echo(f"  {action:8} {note['summary']}")


@alerts.command("deliver")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--until-idle", "until_idle", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Keep delivering retries that come due, for at most SECONDS, until none is pending.")
def deliver_command(as_json: bool, until_idle: float | None) -> None:
    """Send the deliveries that are due (webhooks, e-mail); failures are retried later."""
    from sqlmodel import Session, select

    from observatory.alerts.delivery import DeliveryReport, deliver_pending
    from observatory.alerts.tables import AlertDelivery

    engine, settings = _store()
    total = DeliveryReport()
    deadline = time.monotonic() + (until_idle or 0)
    while True:
        report = deliver_pending(engine, settings)
        for name in ("attempted", "succeeded", "retrying", "failed", "notices_emailed"):
            setattr(total, name, getattr(total, name) + getattr(report, name))
        total.disabled_endpoints += report.disabled_endpoints
        for key, n in report.outcomes.items():
            total.outcomes[key] = total.outcomes.get(key, 0) + n
        if until_idle is None or time.monotonic() >= deadline:
            break
        with Session(engine) as session:
            pending = session.exec(select(AlertDelivery.id).where(AlertDelivery.status == "pending")).first()
        if pending is None:
            break
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    result = total.as_dict()
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    click.echo(f"{result['attempted']} attempts: {result['succeeded']} delivered, {result['retrying']} to retry, "
               f"{result['failed']} given up" + (f"; endpoints disabled: {', '.join(result['disabled_endpoints'])}"
                                                 if result["disabled_endpoints"] else ""))


@alerts.command("list")
@click.option("--status", type=click.Choice(["firing", "resolved", "event"]), default=None,
              help="Only alerts in this state.")
@click.option("--all", "include_baseline", is_flag=True, help="Include history absorbed on first evaluation.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object per alert.")
def list_command(status: str | None, include_baseline: bool, limit: int, as_json: bool) -> None:
    """List alerts, newest first (all rules, built-in and subscribed)."""
    from sqlmodel import Session, select

    from observatory.alerts.tables import Alert, AlertRule

    engine, _ = _store(writes=False)
    with Session(engine) as session:
        query = select(Alert, AlertRule).join(AlertRule, AlertRule.id == Alert.rule_id)
        if status:
            query = query.where(Alert.status == status)
        if not include_baseline:
            query = query.where(Alert.baseline.is_(False))
        rows = session.exec(query.order_by(Alert.id.desc()).limit(limit)).all()
        items = [{"fingerprint": a.fingerprint, "status": a.status, "rule": r.title, "kind": r.kind,
                  "labels": a.labels, "value": a.value, "summary": a.summary,
                  "started_at": a.started_at.isoformat(),
                  "resolved_at": a.resolved_at.isoformat() if a.resolved_at else None,
                  "notifications": a.notifications} for a, r in rows]
    if as_json:
        click.echo(json.dumps(items, sort_keys=True))
        return
    if not items:
        click.echo("no alerts")
    for item in items:
        click.echo(f"{item['status']:8} {item['started_at'][:16]}  {item['summary']}")
