"""Evaluation after each crawl: rules → alert state → events → deliveries, in one transaction.

The outbox: the alert's new state, the event it causes and one delivery row per subscriber and
channel (each with its ``webhook_id``) commit together, or not at all. A crash after the commit
leaves pending deliveries that the next ``deliver`` run sends; a crash before it leaves nothing,
and the next evaluation decides again from the same data.

Idempotent: the state machine in ``rules.transition`` depends only on the data and the stored
state, an alert is identified by its fingerprint (unique), and an event by (alert, sequence), so
running evaluation twice on the same data records nothing the second time. The one thing time
alone produces is a repeat notification of a still-firing alert after ``alert_repeat_interval_s``.

Subscribers who arrive (or resume) while an alert is firing receive its latest firing event on
the next evaluation; resolutions go only to those who want them (``send_resolved``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from urllib.parse import quote, urlencode

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from observatory.alerts import email as mail
from observatory.alerts import rules as R
from observatory.alerts.tables import (
    Alert,
    AlertDelivery,
    AlertEvent,
    AlertRule,
    AlertSubscription,
    AlertSubscriptionRule,
    WebhookEndpoint,
    new_id,
)
from observatory.alerts.webhooks import event_payload
from observatory.core.trends import TrendRow, next_period, trend_series
from observatory.settings import Settings
from observatory.store.db import batches, read_session, session_scope
from observatory.store.oracle_tables import OracleCheck
from observatory.store.queries.trends import read_trends
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel, utcnow
from observatory.store.trends import (
    Population,
    changed_since,
    last_refresh,
    load_trend_columns,
    load_trend_rows,
    trend_rows_query,
)

TREND_KINDS = ("median_g_shift", "kind_share", "g_over_16_share", "tp8_fill_share")
log = logging.getLogger(__name__)


@dataclass
class EvaluationReport:
    rules: int = 0
    fired: list[dict] = field(default_factory=list)
    repeated: list[dict] = field(default_factory=list)
    resolved: list[dict] = field(default_factory=list)
    absorbed: int = 0  # history taken in silently by one-shot rules on their first evaluation
    deliveries: int = 0

    def as_dict(self) -> dict:
        return {"rules": self.rules, "fired": self.fired, "repeated": self.repeated,
                "resolved": self.resolved, "absorbed": self.absorbed, "deliveries": self.deliveries}


def rule_row(session: Session, spec: R.RuleSpec, *, built_in: bool = False) -> AlertRule:
    """The stored rule for ``spec`` (created if new): one row per distinct definition."""
    row = session.exec(select(AlertRule).where(AlertRule.rule_key == spec.key)).first()
    if row is None:
        row = AlertRule(rule_key=spec.key, kind=spec.kind, params=spec.params,
                        population=R.population_dict(spec.population), title=spec.title, built_in=built_in)
        session.add(row)
        session.flush()
    elif built_in and not row.built_in:
        row.built_in = True
    return row


def spec_of(rule: AlertRule) -> R.RuleSpec:
    return R.make_rule(rule.kind, rule.params, rule.population)


def load_dialect_rows(session: Session, since: datetime | None = None) -> list[R.DialectRow]:
    """Every model's current config as the dialect rule sees it (parse failures included); with
    ``since``, only the models that changed after it (``store.trends.changed_since``)."""
    if since is not None:
        changed = sorted(set(changed_since(session, since)))
        return [row for batch in batches(changed) for row in _dialect_rows(session, HubModel.id.in_(batch))]
    return _dialect_rows(session, sa.true())


def _dialect_rows(session: Session, where) -> list[R.DialectRow]:
    m, r, g = HubModel.__table__.c, ConfigRevision.__table__.c, GeometryRow.__table__.c
    o = OracleCheck.__table__.c
    query = (
        sa.select(m.id, m.author, g.model_type, m.downloads, g.attention_kind, g.is_hybrid, g.warnings,
                  r.parse_error, o.reason, o.transformers_version)
        .select_from(HubModel.__table__)
        .join(ConfigRevision.__table__, r.id == m.current_revision_id)
        .outerjoin(GeometryRow.__table__, g.revision_id == r.id)
        .outerjoin(OracleCheck.__table__, sa.and_(o.revision_id == r.id, o.status == "disagree"))
        .where(where)
    )
    return [
        R.DialectRow(model_id=row[0], author=row[1], model_type=row[2], downloads=row[3],
                     attention_kind=row[4], is_hybrid=bool(row[5]), warnings=tuple(row[6] or ()),
                     parse_error=row[7] if row[4] is None else None,
                     oracle_disagreement=row[8],  # None unless the oracle disagrees
                     oracle_version=row[9])
        for row in session.execute(query)
    ]


class _PeriodRows:
    """One population's models of one period at a time, read from the store when a trend rule
    asks for them (``groups`` of ``rules.judge_trend_points``): only the judged period's."""

    def __init__(self, session: Session, population: Population, period: str):
        self.session, self.population, self.period = session, population, period
        self._rows: dict[date, list[TrendRow]] = {}

    def get(self, start: date, default=None) -> list[TrendRow]:
        if start not in self._rows:
            created = HubModel.__table__.c.created_at
            lo, hi = (datetime(d.year, d.month, d.day, tzinfo=UTC) for d in (start, next_period(start, self.period)))
            query = trend_rows_query(self.population).where(created >= lo, created < hi)
            self._rows[start] = [TrendRow(*row) for row in self.session.execute(query)]
        return self._rows[start] or (default if default is not None else [])


class _Inputs:
    """What the rules read, loaded once per evaluation and shared by the rules that need it.

    Trend rules read their series, not the models: the precomputed points when the trends are
    up to date (the crawl refreshes them before evaluating), else the series aggregated from the
    population's columns; and the models of the one period they judge. Memory follows the
    number of periods, not of models."""

    def __init__(self, session: Session):
        self.session = session
        self._trend: dict[str, list[TrendRow]] = {}
        self._series: dict[tuple[str, str, str], list] = {}
        self._dialect: list[R.DialectRow] | None = None
        self._dialect_since: dict[datetime, list[R.DialectRow]] = {}
        self._release: dict[tuple[str, datetime], list[TrendRow]] = {}
        refreshed, changed = last_refresh(session.connection())
        self.fresh = refreshed is not None and (changed is None or changed <= refreshed)

    def trend_points(self, spec: R.RuleSpec) -> list:
        population, period, weighting = spec.population, spec.params["period"], spec.params["weighting"]
        key = (population.key, period, weighting)
        if key not in self._series:
            if self.fresh and population.precomputed:
                points = read_trends(self.session, population, period, weighting).points
            else:
                points = trend_series(load_trend_columns(self.session, population), period, (weighting,))[weighting]
            self._series[key] = points
        return self._series[key]

    def release_rows(self, spec: R.RuleSpec, since: datetime | None) -> list[TrendRow]:
        """The release rule's rows; with ``since`` (its last evaluation), only those of the groups
        (organisations or families) with a model that changed after it. The rule is one-shot and
        judges each group on its own: an unchanged group's findings are alerts already, so this
        fires exactly what reading every model would (a model whose family changes leaves its
        old family unread)."""
        if since is None:
            return self.trend_rows(spec.population)
        if (spec.key, since) not in self._release:
            self._release[spec.key, since] = self._release_rows(spec, since)
        return self._release[spec.key, since]

    def _release_rows(self, spec: R.RuleSpec, since: datetime) -> list[TrendRow]:
        changed = sorted(set(changed_since(self.session, since)))
        by_author = spec.params["group_by"] == "author"
        m, g = HubModel.__table__.c, GeometryRow.__table__.c
        group = m.author_key if by_author else g.model_type
        keys = {key for batch in batches(changed) for key in self.session.execute(
            trend_rows_query(spec.population, (group,)).where(m.id.in_(batch))).scalars() if key is not None}
        return [TrendRow(*row) for batch in batches(sorted(keys))
                for row in self.session.execute(trend_rows_query(spec.population).where(group.in_(batch)))]

    def period_rows(self, spec: R.RuleSpec) -> _PeriodRows:
        return _PeriodRows(self.session, spec.population, spec.params["period"])

    def trend_rows(self, population: Population) -> list[TrendRow]:
        if population.key not in self._trend:
            self._trend[population.key] = load_trend_rows(self.session, population)
        return self._trend[population.key]

    def dialect_rows(self, population: Population, since: datetime | None = None) -> list[R.DialectRow]:
        """The population's dialect rows; with ``since`` (the rule's last evaluation), only those
        of models that changed after it. The rule is one-shot: a finding it made before is
        already an alert, and a new one (a kind, a layer type, a failure first seen) can only
        come from a model that changed, so judging those alone fires exactly what judging every
        model would."""
        if since is not None:
            if since not in self._dialect_since:
                self._dialect_since[since] = load_dialect_rows(self.session, since)
            return R.population_filter(population, self._dialect_since[since])
        if self._dialect is None:
            self._dialect = load_dialect_rows(self.session)
        return R.population_filter(population, self._dialect)


def has_data(spec: R.RuleSpec, inputs: _Inputs, since: datetime | None = None) -> bool:
    """Whether the rule saw any model (a series has a point exactly when a model is dated)."""
    if spec.kind == "new_dialect":
        return bool(inputs.dialect_rows(spec.population, since))
    if spec.kind in TREND_KINDS:
        return bool(inputs.trend_points(spec))
    return bool(inputs.release_rows(spec, since))


def judge(spec: R.RuleSpec, inputs: _Inputs, since: datetime | None = None) -> R.RuleResult:
    """``since``: the rule's last evaluation, for the dialect rule's incremental reading."""
    if spec.kind in TREND_KINDS:
        return R.judge_trend_points(spec, inputs.trend_points(spec), inputs.period_rows(spec))
    if spec.kind == "release_changed":
        return R.evaluate_release_rule(spec, inputs.release_rows(spec, since))
    return R.evaluate_dialect_rule(spec, inputs.dialect_rows(spec.population, since))


# ---- links and payloads -----------------------------------------------------------------------


def trend_url(settings: Settings, spec: R.RuleSpec) -> str:
    params = {k: spec.params[k] for k in ("period", "weighting") if k in spec.params}
    pop = spec.population
    if pop.min_downloads:
        params["min_downloads"] = pop.min_downloads
    if pop.author:
        params["author"] = pop.author
    if pop.model_type:
        params["model_type"] = pop.model_type
    return f"{mail.base_url(settings)}/trends" + (f"?{urlencode(params)}" if params else "")


def alert_links(settings: Settings, spec: R.RuleSpec, alert: Alert) -> dict[str, str]:
    base = mail.base_url(settings)
    links = {"alert": f"{base}/api/v1/alerts/{alert.fingerprint}", "trend": trend_url(settings, spec)}
    models = (alert.details or {}).get("models") or []
    if models and spec.kind in ("release_changed", "new_dialect"):
        links["model"] = f"{base}/models/{quote(models[0]['id'], safe='/')}"
    return links


def event_data(settings: Settings, rule: AlertRule, spec: R.RuleSpec, alert: Alert, reason: str) -> dict:
    return {
        "summary": alert.summary,
        "notification_reason": reason,
        "alert": {
            "fingerprint": alert.fingerprint,
            "status": alert.status,
            "labels": alert.labels,
            "value": alert.value,
            "started_at": alert.started_at.isoformat(),
            "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
        },
        "rule": {"id": rule.rule_key, "kind": rule.kind, "title": rule.title, "params": rule.params,
                 "population": rule.population},
        "details": alert.details,
        "links": alert_links(settings, spec, alert),
    }


# ---- events and deliveries ----------------------------------------------------------------------


def channels_of(session: Session, settings: Settings, sub: AlertSubscription) -> list[str]:
    out = []
    endpoint = session.exec(select(WebhookEndpoint).where(WebhookEndpoint.subscription_id == sub.id)).first()
    if endpoint is not None and endpoint.status == "active":
        out.append("webhook")
    if sub.email_status == "confirmed" and mail.smtp_configured(settings):
        out.append("email")
    return out


def fan_out(session: Session, settings: Settings, event: AlertEvent, rule_id: int, now: datetime) -> int:
    """Create the missing deliveries of ``event`` for the rule's active subscribers."""
    subs = session.exec(
        select(AlertSubscription)
        .join(AlertSubscriptionRule, AlertSubscriptionRule.subscription_id == AlertSubscription.id)
        .where(AlertSubscriptionRule.rule_id == rule_id, AlertSubscription.status == "active")
    ).all()
    created = 0
    for sub in subs:
        if event.type == "alert.resolved" and not sub.send_resolved:
            continue
        for channel in channels_of(session, settings, sub):
            exists = session.exec(
                select(AlertDelivery.id).where(AlertDelivery.event_id == event.id,
                                               AlertDelivery.subscription_id == sub.id,
                                               AlertDelivery.channel == channel)
            ).first()
            if exists is None:
                session.add(AlertDelivery(event_id=event.id, subscription_id=sub.id, channel=channel,
                                          webhook_id=new_id("msg"), next_attempt_at=now, created_at=now))
                created += 1
    session.flush()
    return created


def record_event(session: Session, settings: Settings, rule: AlertRule, spec: R.RuleSpec, alert: Alert,
                 reason: str, now: datetime, crawl_run_id: int | None) -> tuple[AlertEvent, int]:
    event_type = "alert.resolved" if reason == "resolved" else "alert.firing"
    alert.notifications += 1
    alert.last_notified_at = now
    session.flush()
    payload = event_payload(event_type, now, event_data(settings, rule, spec, alert, reason))
    event = AlertEvent(public_id=new_id("evt"), alert_id=alert.id, sequence=alert.notifications,
                       type=event_type, reason=reason, summary=alert.summary[:500], payload=payload,
                       created_at=now, crawl_run_id=crawl_run_id)
    session.add(event)
    session.flush()
    return event, fan_out(session, settings, event, rule.id, now)


def _apply(alert: Alert, finding: R.Finding, now: datetime) -> None:
    alert.value = finding.value
    alert.summary = finding.summary[:500]
    alert.details = finding.details
    alert.last_evaluated_at = now


def _note(alert: Alert, rule: AlertRule) -> dict:
    return {"fingerprint": alert.fingerprint, "rule": rule.title, "kind": rule.kind, "labels": alert.labels,
            "summary": alert.summary}


def evaluate(engine: Engine, settings: Settings, *, now: datetime | None = None,
             crawl_run_id: int | None = None) -> EvaluationReport:
    """Evaluate every rule in use; commit state, events and deliveries in one transaction."""
    now = now or utcnow()
    report = EvaluationReport()
    with session_scope(engine) as session:  # BEGIN IMMEDIATE: one evaluator at a time
        if settings.alert_builtin_rules:
            for kind, params in R.BUILT_IN_RULES:
                rule_row(session, R.make_rule(kind, params), built_in=True)
        in_use = [AlertRule.id.in_(sa.select(AlertSubscriptionRule.rule_id))]
        if settings.alert_builtin_rules:
            in_use.append(AlertRule.built_in.is_(True))
        rules = session.exec(select(AlertRule).where(sa.or_(*in_use)).order_by(AlertRule.id)).all()
        inputs = _Inputs(session)
        for rule in rules:
            report.rules += 1
            since = rule.last_evaluated_at
            _evaluate_rule(session, settings, rule, inputs, now, crawl_run_id, report, since)
            # A rule counts as evaluated once it has seen data: one-shot rules absorb the first
            # data they see as history, even if an evaluation on an empty store came before.
            if has_data(spec_of(rule), inputs, since):
                rule.last_evaluated_at = now
        report.deliveries += _catch_up(session, settings, now)
    return report


def _evaluate_rule(session, settings, rule, inputs, now, crawl_run_id, report, since=None) -> None:
    spec = spec_of(rule)
    result = judge(spec, inputs, since)
    first_time = rule.last_evaluated_at is None
    existing = {a.fingerprint: a for a in session.exec(select(Alert).where(Alert.rule_id == rule.id))}
    findings = {R.fingerprint(rule.rule_key, f.labels): f for f in result.findings}
    firing = [fp for fp, a in existing.items() if a.status == "firing"]
    for fp in [*findings, *(fp for fp in firing if fp not in findings)]:
        alert, finding = existing.get(fp), findings.get(fp)
        step = R.transition(alert.status if alert else None, finding, stateful=spec.stateful,
                            judged=result.judged)
        if step == "none":
            continue
        if step == "keep":
            if finding is not None:
                _apply(alert, finding, now)
            interval = settings.alert_repeat_interval_s
            if interval and alert.last_notified_at is not None and \
                    (now - alert.last_notified_at).total_seconds() >= interval:
                _, n = record_event(session, settings, rule, spec, alert, "repeat", now, crawl_run_id)
                report.deliveries += n
                report.repeated.append(_note(alert, rule))
            continue
        if step == "resolve":
            alert.status = "resolved"
            alert.resolved_at = now
            if finding is not None:
                _apply(alert, finding, now)
                alert.summary = f"Resolved: {finding.summary}"[:500]
            else:
                alert.summary = f"Resolved (no longer reported): {alert.summary}"[:500]
                alert.last_evaluated_at = now
            _, n = record_event(session, settings, rule, spec, alert, "resolved", now, crawl_run_id)
            report.deliveries += n
            report.resolved.append(_note(alert, rule))
            continue
        # step == "fire"
        if alert is None:
            alert = Alert(fingerprint=fp, rule_id=rule.id, labels=finding.labels, status="firing",
                          stateful=spec.stateful, summary=finding.summary[:500], started_at=now,
                          last_evaluated_at=now)
            session.add(alert)
        alert.status = "firing" if spec.stateful else "event"
        alert.started_at, alert.resolved_at = now, None
        _apply(alert, finding, now)
        if not spec.stateful and first_time:
            alert.baseline = True  # history, not news
            report.absorbed += 1
            session.flush()
            continue
        session.flush()
        _, n = record_event(session, settings, rule, spec, alert, "new", now, crawl_run_id)
        report.deliveries += n
        report.fired.append(_note(alert, rule))


def _catch_up(session: Session, settings: Settings, now: datetime) -> int:
    """Deliver each still-firing alert's latest firing event to subscribers who lack it."""
    created = 0
    for alert in session.exec(select(Alert).where(Alert.status == "firing")).all():
        event = session.exec(
            select(AlertEvent).where(AlertEvent.alert_id == alert.id, AlertEvent.type == "alert.firing")
            .order_by(AlertEvent.sequence.desc())
        ).first()
        if event is not None:
            created += fan_out(session, settings, event, alert.rule_id, now)
    return created


def never_evaluated(engine: Engine) -> bool:
    """No rule has been evaluated on this store yet (one indexed read, no write lock)."""
    with read_session(engine) as session:
        return session.exec(select(AlertRule.id).where(AlertRule.last_evaluated_at.is_not(None)).limit(1)).first() is None


def evaluate_at_start(engine: Engine, settings: Settings) -> EvaluationReport | None:
    """On a store never evaluated (a fresh install on the bundled snapshot), evaluate once at
    start-up, so the alerts page shows every rule's state before any crawl; later starts leave it
    to the evaluation after each crawl. One-shot rules take this data in as history; nothing is
    sent unless a subscriber's rule fires on it. A failure is logged in one line and never stops
    the site from starting."""
    try:
        if not never_evaluated(engine):
            return None
        return evaluate(engine, settings)
    except Exception as exc:  # noqa: BLE001 - start-up must go on; the next evaluation retries
        log.warning("alert evaluation at start-up failed: %s: %s", type(exc).__name__, exc)
        return None


def after_crawl(engine: Engine, settings: Settings, run) -> None:
    """The post-crawl step: evaluate on the new data, then send what is due within
    ``crawl_delivery_budget_s`` (issue 21: one slow receiver made ``observatory crawl`` take
    4 minutes). What is left is sent by the delivery job (``observatory worker``) or the next
    crawl; 0 leaves all of it to them."""
    from observatory.alerts.delivery import deliver_pending

    evaluate(engine, settings, crawl_run_id=getattr(run, "id", None))
    if settings.crawl_delivery_budget_s > 0:
        deliver_pending(engine, settings, budget_s=settings.crawl_delivery_budget_s)
