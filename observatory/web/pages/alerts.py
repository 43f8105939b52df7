"""Alert pages: the public alert list with a subscription form, the owner's management page, and
the e-mail confirmation / unsubscribe pages. ``/alerts.json`` is the list page's JSON twin.

Forms work without JavaScript (the Content-Security-Policy forbids inline script anyway). Form
posts are refused unless they come from this site (``Sec-Fetch-Site``, else ``Origin`` vs
``Host``, as Datasette does); the one-click unsubscribe POST is exempt because mail providers
send it and its token is the authority. Pages that show a secret are ``Cache-Control: no-store``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import select
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from observatory.alerts import limits
from observatory.alerts import rules as R
from observatory.alerts import subscriptions as S
from observatory.alerts.delivery import RedeliveryRefused, redeliver
from observatory.alerts.feeds import public_events
from observatory.alerts.tables import Alert, AlertRule
from observatory.web.api.alerts import alert_dict, event_dict
from observatory.web.deps import request_reader
from observatory.web.rendering import error_page, json_response, render, request_base

router = APIRouter(include_in_schema=False)

NO_STORE = {"Cache-Control": "no-store"}

# Form field → rule parameter, per rule kind (fields left empty take the rule's default).
FORM_PARAMS = {
    "median_g_shift": {"delta": "delta", "compare": "compare", "period": "period"},
    "kind_share": {"attention_kind": "kind", "direction": "direction", "threshold_pct": "threshold",
                   "period": "period"},
    "g_over_16_share": {"direction": "direction", "threshold_pct": "threshold", "period": "period"},
    "tp8_fill_share": {"direction": "direction", "threshold_pct": "threshold", "period": "period"},
    "release_changed": {"group_by": "group_by"},
    "new_dialect": {"watch": "watch"},
}


def same_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser, or a browser that sends neither: no ambient-credential risk
    return urlsplit(origin).netloc == request.headers.get("host")


async def posted_form(request: Request, max_chars: int) -> dict[str, str]:
    """The form of a post from this site, each value cut to ``max_chars``; a cross-site post is
    a 403 (the error page for a browser)."""
    if not same_origin(request):
        raise HTTPException(403, "cross-site form posts are refused")
    return {k: str(v)[:max_chars] for k, v in (await request.form()).items()}


def _engine(request: Request):
    return request.app.state.engine


def _settings(request: Request):
    return request.app.state.settings


def list_data(request: Request) -> dict:
    with request_reader(request) as session:
        built_in = select(AlertRule.id).where(AlertRule.built_in.is_(True))
        firing = session.exec(select(Alert).where(Alert.status == "firing", Alert.rule_id.in_(built_in))
                              .order_by(Alert.started_at.desc())).all()
        events = public_events(session, 30)
        fingerprints = {a.id: a.fingerprint for a in session.exec(
            select(Alert).where(Alert.id.in_([e.alert_id for e in events]))).all()}
        rules = session.exec(select(AlertRule).where(AlertRule.built_in.is_(True)).order_by(AlertRule.id)).all()
        return {
            "firing": [alert_dict(session, a) for a in firing],
            "events": [event_dict(e, fingerprints[e.alert_id]) for e in events],
            "built_in_rules": [S.rule_dict(r) for r in rules],
            "rule_kinds": [{"name": k.name, "title": k.title, "description": k.description} for k in
                           R.RULE_KINDS.values()],
            "feed_url": request_base(request, _settings(request)) + "/alerts/feed.atom",
        }


def _form_context(values: dict | None = None, errors: list[str] | None = None) -> dict:
    return {
        "form": values or {"kind": "kind_share", "attention_kind": "MLA", "direction": "above",
                           "threshold_pct": "20", "period": "month", "send_resolved": "on"},
        "form_errors": errors or [],
        "choices": {
            "kinds": [(k.name, k.title) for k in R.RULE_KINDS.values()],
            "attention_kinds": list(R.SHARE_KEYS),
            "periods": list(R.PERIODS),
        },
    }


def _list_page(request: Request, *, values=None, errors=None, status: int = 200) -> HTMLResponse:
    data = list_data(request)
    return render(request, "alerts.html", data, title="Alerts", nav="/alerts", formats=("json",),
                  status=status, **_form_context(values, errors))


@router.get("/alerts", response_class=HTMLResponse)
async def alerts_page(request: Request) -> Response:
    return await run_in_threadpool(_list_page, request)


@router.get("/alerts.json")
async def alerts_json(request: Request) -> Response:
    return json_response(await run_in_threadpool(list_data, request))


def rule_from_form(form: dict) -> tuple[dict, list[str]]:
    kind = form.get("kind", "")
    if kind not in FORM_PARAMS:
        return {}, [f"kind: choose one of {', '.join(FORM_PARAMS)}"]
    params, errors = {}, []
    for field, param in FORM_PARAMS[kind].items():
        value = (form.get(field) or "").strip()
        if not value:
            continue
        if field == "threshold_pct":
            try:
                params[param] = float(value) / 100
            except ValueError:
                errors.append("threshold: a percentage such as 20")
            continue
        params[param] = value
    population = {"min_downloads": 0}
    raw = (form.get("min_downloads") or "").strip()
    if raw:
        if raw.isdigit() and len(raw) <= 13:
            population["min_downloads"] = int(raw)
        else:
            errors.append("min_downloads: a whole number")
    for key in ("author", "model_type"):
        if (form.get(key) or "").strip():
            population[key] = form[key].strip()
    return {"kind": kind, "params": params, "population": population}, errors


def _create_from_form(request: Request, form: dict) -> HTMLResponse:
    rule, errors = rule_from_form(form)
    if errors:
        return _list_page(request, values=form, errors=errors, status=422)
    settings = _settings(request)
    try:
        created = S.create(
            _engine(request), settings, name=form.get("name", ""), rules=[rule],
            webhook_url=(form.get("webhook_url") or "").strip() or None,
            email=(form.get("email") or "").strip() or None,
            send_resolved=form.get("send_resolved") == "on",
            client=request.client.host if request.client else None,
        )
    except limits.LimitExceeded as exc:
        return _list_page(request, values=form, errors=[str(exc)], status=exc.status)
    except S.SubscriptionError as exc:
        return _list_page(request, values=form, errors=exc.errors, status=422)
    confirmation = None
    if created.email_token:
        error = S.send_confirmation(settings, created.subscription, created.email_token)
        confirmation = "sent" if error is None else f"failed: {error}"
    with request_reader(request) as session:
        sub = S.subscription_dict(session, created.subscription, request_base(request, settings))
    return render(request, "alerts_created.html",
                  {"subscription": sub, "owner_token": created.owner_token,
                   "webhook_secret": created.webhook_secret, "email_confirmation": confirmation},
                  title="Subscription created", nav="/alerts", formats=(), status=201, headers=NO_STORE)


@router.post("/alerts/subscribe", response_class=HTMLResponse)
async def subscribe(request: Request) -> Response:
    return await run_in_threadpool(_create_from_form, request, await posted_form(request, 2000))


def _manage(request: Request, token: str, message: str | None = None, status: int = 200) -> HTMLResponse:
    with request_reader(request) as session:
        subs = S.list_owned(session, token) if token else []
        base = request_base(request, _settings(request))
        data = []
        for sub in subs:
            entry = S.subscription_dict(session, sub, base)
            rows, _ = S.deliveries_of(session, sub, status=None, limit=10, before=None)
            entry["deliveries"] = [S.delivery_dict(session, d) for d in rows]
            data.append(entry)
    if token and not subs:
        message, status = "No subscription belongs to this token.", 404
    return render(request, "alerts_manage.html", {"subscriptions": data, "token": token, "message": message},
                  title="Manage alert subscriptions", nav="/alerts", formats=(), status=status, headers=NO_STORE)


@router.get("/alerts/manage", response_class=HTMLResponse)
async def manage_page(request: Request) -> Response:
    return await run_in_threadpool(_manage, request, "")


ACTIONS = ("show", "pause", "resume", "delete", "enable_webhook", "redeliver")


def _act(request: Request, form: dict) -> HTMLResponse:
    token, action, sub_id = form.get("token", "").strip(), form.get("action", "show"), form.get("subscription", "")
    if action not in ACTIONS:
        return error_page(request, 422, [f"action: one of {', '.join(ACTIONS)}"])
    if not token:
        return _manage(request, "", "Paste the owner token you were given.", 422)
    engine = _engine(request)
    try:
        if action in ("pause", "resume"):
            S.set_status(engine, token, sub_id, "paused" if action == "pause" else "active")
            message = f"Subscription {sub_id} {'paused' if action == 'pause' else 'resumed'}."
        elif action == "delete":
            S.delete(engine, token, sub_id)
            message = f"Subscription {sub_id} deleted."
        elif action == "enable_webhook":
            S.enable_webhook(engine, token, sub_id)
            message = "Webhook endpoint enabled again."
        elif action == "redeliver":
            with request_reader(request) as session:
                delivery_pk = S.delivery_owned(session, S.owned(session, token, sub_id), form.get("delivery", "")).id
            attempt = redeliver(engine, _settings(request), delivery_pk)
            code = f" (HTTP {attempt.status_code})" if attempt.status_code else ""
            message = f"Redelivered: {attempt.outcome}{code}"
        else:
            message = None
    except S.NotFound as exc:
        return _manage(request, token, str(exc), 404)
    except RedeliveryRefused as exc:
        return _manage(request, token, str(exc), 409)
    return _manage(request, token, message)


@router.post("/alerts/manage", response_class=HTMLResponse)
async def manage_action(request: Request) -> Response:
    return await run_in_threadpool(_act, request, await posted_form(request, 300))


def _email_page(request: Request, *, action: str, token: str, done: str | None, status: int = 200) -> HTMLResponse:
    return render(request, "alerts_email.html", {"action": action, "token": token, "done": done},
                  title="Confirm e-mail alerts" if action == "confirm" else "Unsubscribe from e-mail alerts",
                  nav="/alerts", formats=(), status=status, headers=NO_STORE)


@router.get("/alerts/email/confirm", response_class=HTMLResponse)
async def confirm_page(request: Request, token: str = "") -> Response:
    # GET only shows a button: link scanners that fetch URLs must not confirm anything.
    return _email_page(request, action="confirm", token=token[:100], done=None)


@router.post("/alerts/email/confirm", response_class=HTMLResponse)
async def confirm(request: Request) -> Response:
    token = (await posted_form(request, 100)).get("token", "")
    sub = await run_in_threadpool(S.confirm_email, _engine(request), token) if token else None
    if sub is None:
        return _email_page(request, action="confirm", token="", done="This confirmation link is not valid.",
                           status=404)
    return _email_page(request, action="confirm", token="", done=f"Confirmed: alerts for “{sub.name}” will be "
                       f"e-mailed to {sub.email}.")


@router.get("/alerts/email/unsubscribe", response_class=HTMLResponse)
async def unsubscribe_page(request: Request, token: str = "") -> Response:
    return _email_page(request, action="unsubscribe", token=token[:100], done=None)


@router.post("/alerts/email/unsubscribe", response_class=HTMLResponse)
async def unsubscribe(request: Request, token: str = "") -> Response:
    """RFC 8058 one-click (token in the URL, body ``List-Unsubscribe=One-Click``) or the page's form."""
    token = token or str((await request.form()).get("token", ""))
    sub = await run_in_threadpool(S.unsubscribe_email, _engine(request), token[:100]) if token else None
    if sub is None:
        return _email_page(request, action="unsubscribe", token="", done="This unsubscribe link is not valid.",
                           status=404)
    return _email_page(request, action="unsubscribe", token="",
                       done=f"Unsubscribed: no more alert e-mail for “{sub.name}”.")
