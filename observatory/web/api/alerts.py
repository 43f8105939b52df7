"""/api/v1 for alerts: rule catalogue, alerts, events, and subscriptions managed by their owner.

Authentication is the owner token returned once by ``POST /api/v1/subscriptions``, sent as
``Authorization: Bearer obs_…``. A subscription, its deliveries and the alerts of its custom
rules are visible only to that token; without a token the alert lists show the built-in rules.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model
from sqlmodel import Session, select
from starlette.exceptions import HTTPException as StarletteHTTPException

from observatory.alerts import limits
from observatory.alerts import rules as R
from observatory.alerts import subscriptions as S
from observatory.alerts.delivery import RedeliveryRefused, redeliver
from observatory.alerts.email import ADDRESS_PATTERN, VISIBLE_CHAR
from observatory.alerts.tables import (
    Alert,
    AlertDelivery,
    AlertEvent,
    AlertRule,
    AlertSubscription,
    AlertSubscriptionRule,
)
from observatory.store.db import read_session
from observatory.web.api.common import Cursor
from observatory.web.deps import EngineDep, ReadSessionDep, SettingsDep
from observatory.web.errors import ERROR_RESPONSES, ApiError, ErrorBody
from observatory.web.rendering import request_base
from observatory.web.strict_params import StrictQueryRoute

RESPONSES: dict[int | str, dict] = {
    **ERROR_RESPONSES,
    401: {"model": ErrorBody, "description": "Missing, malformed or unknown owner token"},
    409: {"model": ErrorBody, "description": "Not possible in the current state"},
}

router = APIRouter(prefix="/api/v1", tags=["alerts"], responses=RESPONSES, route_class=StrictQueryRoute)

_bearer = HTTPBearer(auto_error=False, description="The owner token returned when the subscription was created")
PublicId = Annotated[str, Path(min_length=4, max_length=40, pattern=r"^[A-Za-z0-9_\-]+$")]


def optional_token(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                   session: ReadSessionDep) -> str | None:
    """The caller's owner token, or None for an anonymous call. A token that is sent must own a
    subscription: a mistyped or revoked token is a 401, never quietly treated as anonymous."""
    if creds is None:
        return None
    token = creds.credentials
    if not 8 <= len(token) <= 200:
        _unauthorized("malformed owner token")
    if not S.owner_exists(session, token):
        _unauthorized("unknown owner token (send none to act anonymously or to become a new owner)")
    return token


def _unauthorized(message: str):
    raise StarletteHTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def owner_token(token: Annotated[str | None, Depends(optional_token)]) -> str:
    """A token that owns at least one subscription (401 otherwise; 404 for another owner's ids)."""
    if token is None:
        _unauthorized("send the owner token: Authorization: Bearer <token>")
    return token


OptionalToken = Annotated[str | None, Depends(optional_token)]
# Routes where the token is optional say so in OpenAPI (an empty requirement = anonymous allowed).
OPTIONAL_AUTH = {"security": [{}, {"HTTPBearer": []}]}
OwnerToken = Annotated[str, Depends(owner_token)]


# ---- schemas ----------------------------------------------------------------------------------


# Request bodies say exactly what ``subscriptions.create`` accepts, so a client (or a generated
# test) that follows the schema is never refused; only what a schema cannot know (an e-mail server
# configured, a webhook host that resolves to a public address) is checked after it.
_STRICT = ConfigDict(extra="forbid", strict=True)


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def json_int(minimum: float | None = None, maximum: float | None = None) -> Any:
    """An integer as JSON Schema counts them (5.0 is one), otherwise as strict as the rest."""
    return Annotated[int, Field(ge=minimum, le=maximum), BeforeValidator(_integral)]


class PopulationIn(BaseModel):
    model_config = _STRICT
    min_downloads: json_int(0, 10**12) = Field(0, description="Only models with at least this many downloads")
    author: str | None = Field(None, max_length=100, pattern=R.NAME_PATTERN, description="One organisation")
    model_type: str | None = Field(None, max_length=100, pattern=R.NAME_PATTERN,
                                   description="One architecture family")


def _rule_model(kind: R.RuleKind) -> type[BaseModel]:
    """The request schema of one rule kind, built from ``rules.RULE_KINDS`` (its one definition):
    each parameter with its type, range or choices and default."""
    params = {}
    for p in kind.params:
        if p.choices:
            annotation = Literal[p.choices]
        elif p.type is int:
            annotation = json_int(p.minimum, p.maximum)
        else:
            annotation = Annotated[p.type, Field(ge=p.minimum, le=p.maximum)]
        params[p.name] = (annotation, Field(p.default, description=p.help))
    name = "".join(word.title() for word in kind.name.split("_"))
    params_model = create_model(f"{name}Params", __config__=_STRICT, **params)
    return create_model(
        f"{name}Rule", __config__=_STRICT, __doc__=kind.description,
        kind=(Literal[kind.name], ...),
        params=(params_model, Field(default_factory=params_model)),
        population=(PopulationIn, Field(default_factory=PopulationIn)),
    )


RuleIn = Annotated[Union[tuple(_rule_model(kind) for kind in R.RULE_KINDS.values())],  # noqa: UP007
                   Field(discriminator="kind")]


class SubscriptionIn(BaseModel):
    model_config = _STRICT
    # Some character that is neither white space nor a control character: ``create`` strips
    # the name, and what it strips (str.isspace) lies inside SPACE_OR_CONTROL.
    name: str = Field(max_length=200, pattern=VISIBLE_CHAR, description="Not blank")
    rules: list[RuleIn] = Field(min_length=1, max_length=S.MAX_RULES)
    webhook_url: str | None = Field(None, min_length=1, max_length=2000, json_schema_extra={"format": "uri"},
                                    description="https URL of a public host; signed per Standard Webhooks")
    email: str | None = Field(None, max_length=254, pattern=ADDRESS_PATTERN,
                              description="Needs confirming (double opt-in); only where SMTP is configured")
    send_resolved: bool = Field(True, description="Also notify when an alert resolves")


class ParamOut(BaseModel):
    name: str
    type: str
    default: Any
    help: str
    minimum: float | None
    maximum: float | None
    choices: list[str] | None


class RuleKindOut(BaseModel):
    name: str
    title: str
    description: str
    one_shot: bool = Field(description="Events notified once (never resolved) rather than states")
    params: list[ParamOut]


class RuleOut(BaseModel):
    id: str
    kind: str
    title: str
    params: dict[str, Any]
    population: dict[str, Any]
    built_in: bool


class RuleCatalogue(BaseModel):
    ok: bool = True
    kinds: list[RuleKindOut]
    built_in: list[RuleOut]


class EndpointOut(BaseModel):
    url: str
    status: str
    disabled_reason: str | None
    disabled_at: datetime | None
    consecutive_failures: int
    last_success_at: datetime | None
    last_failure_at: datetime | None
    secret_hint: str


class EmailOut(BaseModel):
    address: str
    status: str | None
    confirmed_at: datetime | None


class NoticeOut(BaseModel):
    id: str
    kind: str
    message: str
    created_at: datetime
    email_status: str


class SubscriptionOut(BaseModel):
    id: str
    name: str
    status: Literal["active", "paused"]
    send_resolved: bool
    created_at: datetime
    updated_at: datetime
    rules: list[RuleOut]
    webhook: EndpointOut | None
    email: EmailOut | None
    feed_url: str = Field(description="Private Atom feed of this subscription (keep it secret)")
    notices: list[NoticeOut]


class SubscriptionResponse(BaseModel):
    ok: bool = True
    subscription: SubscriptionOut


class SubscriptionCreated(SubscriptionResponse):
    owner_token: str | None = Field(description="Shown once. None when you created this with an existing token")
    webhook_secret: str | None = Field(description="whsec_… signing secret, shown once")
    email_confirmation: str | None = Field(description="sent | failed: <reason>; None without e-mail")


class SubscriptionList(BaseModel):
    ok: bool = True
    subscriptions: list[SubscriptionOut]


class Deleted(BaseModel):
    ok: bool = True
    deleted: str


class AttemptOut(BaseModel):
    number: int
    manual: bool
    started_at: datetime
    duration_ms: int | None
    outcome: str
    status_code: int | None
    error: str | None
    response_excerpt: str | None
    retry_after_s: float | None
    target_ip: str | None


class DeliveryOut(BaseModel):
    id: str = Field(description="The webhook-id, the same on every attempt")
    event_id: str
    event_type: str
    summary: str
    channel: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    next_attempt_at: datetime | None
    created_at: datetime
    delivered_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    attempt_log: list[AttemptOut]


class DeliveryList(BaseModel):
    ok: bool = True
    deliveries: list[DeliveryOut]
    next: str | None = Field(description="Pass as ?before= for the next page")


class RedeliveryOut(BaseModel):
    ok: bool = True
    delivery: DeliveryOut
    attempt: AttemptOut


class AlertOut(BaseModel):
    fingerprint: str
    status: Literal["firing", "resolved", "event"]
    baseline: bool = Field(description="Absorbed as history on the rule's first evaluation (never notified)")
    rule: RuleOut
    labels: dict[str, Any]
    value: float | None
    summary: str
    details: dict[str, Any]
    started_at: datetime
    resolved_at: datetime | None
    last_evaluated_at: datetime
    last_notified_at: datetime | None
    notifications: int


class AlertList(BaseModel):
    ok: bool = True
    alerts: list[AlertOut]
    next: str | None


class EventOut(BaseModel):
    id: str
    type: str
    reason: str
    summary: str
    created_at: datetime
    alert: str = Field(description="Fingerprint of the alert")
    payload: dict[str, Any] = Field(description="The webhook body {type, timestamp, data}")


class AlertDetail(BaseModel):
    ok: bool = True
    alert: AlertOut
    events: list[EventOut]


class EventList(BaseModel):
    ok: bool = True
    events: list[EventOut]
    next: str | None


# ---- helpers ----------------------------------------------------------------------------------


def _owned(session: Session, token: str, sub_id: str) -> AlertSubscription:
    try:
        return S.owned(session, token, sub_id)
    except S.NotFound as exc:
        raise ApiError(404, str(exc)) from None


def _sub_out(session: Session, sub: AlertSubscription, request: Request, settings) -> dict:
    return S.subscription_dict(session, sub, request_base(request, settings))


def visible_rule_ids(session: Session, token: str | None):
    """Built-in rules for everyone; the caller's own rules too when a token is given."""
    query = select(AlertRule.id).where(AlertRule.built_in.is_(True))
    if token is not None:
        mine = (select(AlertSubscriptionRule.rule_id)
                .join(AlertSubscription, AlertSubscription.id == AlertSubscriptionRule.subscription_id)
                .where(AlertSubscription.owner_token_hash == S.token_hash(token)))
        query = select(AlertRule.id).where(AlertRule.built_in.is_(True) | AlertRule.id.in_(mine))
    return query


def alert_dict(session: Session, alert: Alert) -> dict:
    rule = session.get(AlertRule, alert.rule_id)
    return {
        "fingerprint": alert.fingerprint, "status": alert.status, "baseline": alert.baseline,
        "rule": S.rule_dict(rule), "labels": alert.labels, "value": alert.value, "summary": alert.summary,
        "details": alert.details, "started_at": alert.started_at, "resolved_at": alert.resolved_at,
        "last_evaluated_at": alert.last_evaluated_at, "last_notified_at": alert.last_notified_at,
        "notifications": alert.notifications,
    }


def event_dict(event: AlertEvent, fingerprint: str) -> dict:
    return {"id": event.public_id, "type": event.type, "reason": event.reason, "summary": event.summary,
            "created_at": event.created_at, "alert": fingerprint, "payload": json.loads(event.payload)}


# ---- rules and alerts (public, or the caller's own) ---------------------------------------------


@router.get("/alert-rules", response_model=RuleCatalogue, summary="Rule kinds, their parameters, built-in rules")
def rule_catalogue(session: ReadSessionDep) -> dict:
    kinds = [
        {"name": k.name, "title": k.title, "description": k.description, "one_shot": not k.stateful,
         "params": [{"name": p.name, "type": p.type.__name__, "default": p.default, "help": p.help,
                     "minimum": p.minimum, "maximum": p.maximum,
                     "choices": list(p.choices) if p.choices else None} for p in k.params]}
        for k in R.RULE_KINDS.values()
    ]
    built_in = session.exec(select(AlertRule).where(AlertRule.built_in.is_(True)).order_by(AlertRule.id)).all()
    return {"kinds": kinds, "built_in": [S.rule_dict(r) for r in built_in]}


@router.get("/alerts", response_model=AlertList, summary="Alerts of the built-in rules (and yours, with a token)",
            openapi_extra=OPTIONAL_AUTH)
def list_alerts(
    session: ReadSessionDep,
    token: OptionalToken,
    status: Annotated[Literal["firing", "resolved", "event"] | None, Query()] = None,
    kind: Annotated[Literal[tuple(R.RULE_KINDS)] | None, Query()] = None,  # type: ignore[valid-type]
    include_baseline: bool = False,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Cursor = None,
) -> dict:
    query = select(Alert).where(Alert.rule_id.in_(visible_rule_ids(session, token)))
    if status:
        query = query.where(Alert.status == status)
    if kind:
        query = query.where(Alert.rule_id.in_(select(AlertRule.id).where(AlertRule.kind == kind)))
    if not include_baseline:
        query = query.where(Alert.baseline.is_(False))
    if before is not None:
        query = query.where(Alert.id < int(before))
    rows = list(session.exec(query.order_by(Alert.id.desc()).limit(limit + 1)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    return {"alerts": [alert_dict(session, a) for a in rows], "next": str(rows[-1].id) if more and rows else None}


@router.get("/alerts/{fingerprint}", response_model=AlertDetail, summary="One alert with its notifications",
            openapi_extra=OPTIONAL_AUTH)
def get_alert(
    fingerprint: Annotated[str, Path(min_length=8, max_length=64, pattern=r"^[0-9a-f]+$")],
    session: ReadSessionDep,
    token: OptionalToken,
) -> dict:
    alert = session.exec(select(Alert).where(Alert.fingerprint == fingerprint,
                                             Alert.rule_id.in_(visible_rule_ids(session, token)))).first()
    if alert is None:
        raise ApiError(404, f"no alert {fingerprint!r}")
    events = session.exec(select(AlertEvent).where(AlertEvent.alert_id == alert.id)
                          .order_by(AlertEvent.sequence.desc()).limit(100)).all()
    return {"alert": alert_dict(session, alert), "events": [event_dict(e, fingerprint) for e in events]}


@router.get("/alert-events", response_model=EventList, summary="Notifications, newest first (the feed as JSON)",
            openapi_extra=OPTIONAL_AUTH)
def list_events(
    session: ReadSessionDep,
    token: OptionalToken,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Cursor = None,
) -> dict:
    query = (select(AlertEvent, Alert.fingerprint).join(Alert, Alert.id == AlertEvent.alert_id)
             .where(Alert.rule_id.in_(visible_rule_ids(session, token))))
    if before is not None:
        query = query.where(AlertEvent.id < int(before))
    rows = list(session.exec(query.order_by(AlertEvent.id.desc()).limit(limit + 1)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    return {"events": [event_dict(e, fp) for e, fp in rows], "next": str(rows[-1][0].id) if more and rows else None}


# ---- subscriptions (owner only) -----------------------------------------------------------------


@router.post("/subscriptions", response_model=SubscriptionCreated, status_code=201,
             summary="Subscribe; returns the owner token and webhook secret once", openapi_extra=OPTIONAL_AUTH,
             responses={429: {"model": ErrorBody, "description": "Too many new owners from this network (an IPv4 "
                                                                "address or an IPv6 /64; Retry-After says when to "
                                                                "try again)"},
                        503: {"model": ErrorBody, "description": "Too many channels await verification, or too many "
                                                                "new owners from all clients this hour "
                                                                "(Retry-After then says when)"}})
def create_subscription(body: SubscriptionIn, request: Request, engine: EngineDep, settings: SettingsDep,
                        token: OptionalToken) -> dict:
    try:
        created = S.create(
            engine, settings, name=body.name, rules=[r.model_dump() for r in body.rules],
            webhook_url=body.webhook_url, email=body.email, send_resolved=body.send_resolved, owner_token=token,
            client=request.client.host if request.client else None,
        )
    except limits.LimitExceeded as exc:
        raise StarletteHTTPException(exc.status, str(exc), headers=exc.headers) from None
    except S.LimitReached as exc:
        raise ApiError(409, *exc.errors) from None
    except S.SubscriptionError as exc:
        raise ApiError(422, *exc.errors) from None
    confirmation = None
    if created.email_token:
        error = S.send_confirmation(settings, created.subscription, created.email_token)
        confirmation = "sent" if error is None else f"failed: {error}"
    with read_session(engine) as session:
        sub = session.get(AlertSubscription, created.subscription.id)
        return {"subscription": _sub_out(session, sub, request, settings), "owner_token": created.owner_token,
                "webhook_secret": created.webhook_secret, "email_confirmation": confirmation}


@router.get("/subscriptions", response_model=SubscriptionList, summary="Your subscriptions")
def list_subscriptions(request: Request, session: ReadSessionDep, settings: SettingsDep, token: OwnerToken) -> dict:
    return {"subscriptions": [_sub_out(session, s, request, settings) for s in S.list_owned(session, token)]}


@router.get("/subscriptions/{sub_id}", response_model=SubscriptionResponse, summary="One of your subscriptions")
def get_subscription(sub_id: PublicId, request: Request, session: ReadSessionDep, settings: SettingsDep,
                     token: OwnerToken) -> dict:
    return {"subscription": _sub_out(session, _owned(session, token, sub_id), request, settings)}


def _change(sub_id: str, request: Request, engine, settings, token: str, change) -> dict:
    """Apply ``change()`` to one of the caller's subscriptions and answer with its new state."""
    try:
        change()
    except S.NotFound as exc:
        raise ApiError(404, str(exc)) from None
    with read_session(engine) as session:
        return {"subscription": _sub_out(session, _owned(session, token, sub_id), request, settings)}


@router.post("/subscriptions/{sub_id}/pause", response_model=SubscriptionResponse,
             summary="Stop pushing notifications (queued ones wait)")
def pause_subscription(sub_id: PublicId, request: Request, engine: EngineDep, settings: SettingsDep,
                       token: OwnerToken) -> dict:
    return _change(sub_id, request, engine, settings, token, lambda: S.set_status(engine, token, sub_id, "paused"))


@router.post("/subscriptions/{sub_id}/resume", response_model=SubscriptionResponse, summary="Resume notifications")
def resume_subscription(sub_id: PublicId, request: Request, engine: EngineDep, settings: SettingsDep,
                        token: OwnerToken) -> dict:
    return _change(sub_id, request, engine, settings, token, lambda: S.set_status(engine, token, sub_id, "active"))


@router.delete("/subscriptions/{sub_id}", response_model=Deleted, summary="Delete with its delivery log")
def delete_subscription(sub_id: PublicId, engine: EngineDep, token: OwnerToken) -> dict:
    try:
        S.delete(engine, token, sub_id)
    except S.NotFound as exc:
        raise ApiError(404, str(exc)) from None
    return {"deleted": sub_id}


@router.post("/subscriptions/{sub_id}/webhook/enable", response_model=SubscriptionResponse,
             summary="Re-enable a webhook endpoint that was disabled")
def enable_webhook(sub_id: PublicId, request: Request, engine: EngineDep, settings: SettingsDep,
                   token: OwnerToken) -> dict:
    return _change(sub_id, request, engine, settings, token, lambda: S.enable_webhook(engine, token, sub_id))


@router.post("/subscriptions/{sub_id}/email/resend", response_model=SubscriptionCreated,
             summary="Send the confirmation message again")
def resend_confirmation(sub_id: PublicId, request: Request, engine: EngineDep, settings: SettingsDep,
                        token: OwnerToken) -> dict:
    try:
        error = S.resend_confirmation(engine, settings, token, sub_id)
    except S.NotFound as exc:
        raise ApiError(404, str(exc)) from None
    except S.SubscriptionError as exc:
        raise ApiError(409, *exc.errors) from None
    with read_session(engine) as session:
        return {"subscription": _sub_out(session, _owned(session, token, sub_id), request, settings),
                "owner_token": None, "webhook_secret": None,
                "email_confirmation": "sent" if error is None else f"failed: {error}"}


@router.get("/subscriptions/{sub_id}/deliveries", response_model=DeliveryList,
            summary="Delivery log, newest first, with every attempt")
def list_deliveries(
    sub_id: PublicId,
    session: ReadSessionDep,
    token: OwnerToken,
    status: Annotated[Literal["pending", "succeeded", "failed"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Cursor = None,
) -> dict:
    sub = _owned(session, token, sub_id)
    rows, more = S.deliveries_of(session, sub, status=status, limit=limit, before=int(before) if before else None)
    return {"deliveries": [S.delivery_dict(session, d) for d in rows], "next": None if more is None else str(more)}


@router.post("/subscriptions/{sub_id}/deliveries/{delivery_id}/redeliver", response_model=RedeliveryOut,
             summary="Send a delivery again now, with the same webhook-id")
def redeliver_one(sub_id: PublicId, delivery_id: PublicId, engine: EngineDep, settings: SettingsDep,
                  token: OwnerToken) -> dict:
    with read_session(engine) as session:
        sub = _owned(session, token, sub_id)
        try:
            delivery = S.delivery_owned(session, sub, delivery_id)
        except S.NotFound as exc:
            raise ApiError(404, str(exc)) from None
        delivery_pk = delivery.id
    try:
        attempt = redeliver(engine, settings, delivery_pk)
    except RedeliveryRefused as exc:
        raise ApiError(409, str(exc)) from None
    with read_session(engine) as session:
        delivery = session.get(AlertDelivery, delivery_pk)
        return {"delivery": S.delivery_dict(session, delivery), "attempt": S.attempt_dict(attempt)}
