"""Webhooks per the Standard Webhooks spec: secrets, payloads, signing, one attempt, its outcome.

- A secret per endpoint: ``whsec_`` + base64 of 32 random bytes, shown to the owner once.
- Payload ``{"type", "timestamp", "data"}``, serialised once when the event is recorded and kept
  under 20 KB; every attempt sends exactly those bytes (the signature covers the bytes sent).
- Headers: ``webhook-id`` (the delivery's id, the same on every attempt: receivers dedupe on
  it), ``webhook-timestamp`` (this attempt, unix seconds), ``webhook-signature`` (``v1,<b64>``
  HMAC-SHA256 of ``id.timestamp.body``, signed with the ``standardwebhooks`` library).
- Outcome of an answer: 2xx success; 3xx failure (redirects are never followed); 410 disables
  the endpoint; 429 and 5xx are throttling, honouring ``Retry-After``; other 4xx failure.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import httpx2
from standardwebhooks import Webhook

from observatory.alerts import ssrf
from observatory.hub import transport as guarded
from observatory.hub.ratelimit import retry_after_seconds
from observatory.settings import Settings

MAX_PAYLOAD_BYTES = 20_000
USER_AGENT = "GQA-Observatory-Webhooks/1"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def secret_hint(secret: str) -> str:
    """Enough of a secret to tell two apart, not enough to use it."""
    return secret[:10] + "…"


def _dump(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def event_payload(event_type: str, timestamp: datetime, data: dict) -> str:
    """The webhook body, shrunk to fit ``MAX_PAYLOAD_BYTES``: model lists are cut first (the
    payload says how many were left out), then the details, never the summary or the links."""
    stamp = timestamp.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    data = json.loads(json.dumps(data))  # a private copy we may trim
    body = _dump({"type": event_type, "timestamp": stamp, "data": data})
    details = data.get("details") or {}
    lists = [d for d in (details, details.get("before"), details.get("after")) if isinstance(d, dict)
             and isinstance(d.get("models"), list)]
    while len(body.encode()) > MAX_PAYLOAD_BYTES and any(d["models"] for d in lists):
        for d in lists:
            if d["models"]:
                keep = len(d["models"]) // 2
                d["models_not_listed"] = d.get("models_not_listed", 0) + len(d["models"]) - keep
                d["models"] = d["models"][:keep]
        body = _dump({"type": event_type, "timestamp": stamp, "data": data})
    if len(body.encode()) > MAX_PAYLOAD_BYTES:
        data["details"] = {"truncated": True}
        body = _dump({"type": event_type, "timestamp": stamp, "data": data})
    return body


def sign_headers(secret: str, webhook_id: str, body: str, at: datetime) -> dict[str, str]:
    at = at.astimezone(timezone.utc)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(webhook_id, at, body),
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


@dataclass(frozen=True)
class AttemptOutcome:
    # success | failure | redirect | gone | throttled | timeout | blocked | error, or
    # interrupted (a stop request ended it: not the receiver's fault, sent again soon)
    outcome: str
    status_code: int | None = None
    error: str | None = None
    response_excerpt: str | None = None
    retry_after_s: float | None = None
    target_ip: str | None = None
    duration_ms: int | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "success"


def classify(status: int, headers: httpx2.Headers, now: datetime) -> tuple[str, str | None, float | None]:
    """(outcome, error, retry_after_s) for an HTTP answer."""
    if 200 <= status < 300:
        return "success", None, None
    if 300 <= status < 400:
        location = headers.get("location", "")[:200]
        return "redirect", f"HTTP {status}: redirects are not followed (Location: {location or '-'}); " \
                           "update the webhook URL", None
    if status == 410:
        return "gone", "HTTP 410 Gone: the receiver asked us to stop; endpoint disabled", None
    if status == 429 or status >= 500:
        retry_after = retry_after_seconds(headers, now)
        return "throttled", f"HTTP {status}", retry_after
    return "failure", f"HTTP {status}", None


def send_webhook(url: str, secret: str, webhook_id: str, body: str, settings: Settings,
                 now: datetime | None = None) -> AttemptOutcome:
    """One signed POST to ``url``, vetted against SSRF at send time and pinned to the vetted IP."""
    now = now or datetime.now(timezone.utc)
    try:
        vetted = vet(url, settings)
    except ssrf.UnsafeURL as exc:
        return AttemptOutcome("blocked", error=str(exc)[:500])
    headers = sign_headers(secret, webhook_id, body, now)
    try:
        response = ssrf.send_pinned(
            vetted,
            content=body.encode(),
            headers=headers,
            timeout_s=settings.webhook_timeout_s,
            connect_timeout_s=settings.webhook_connect_timeout_s,
            max_response_bytes=settings.webhook_max_response_bytes,
        )
    except httpx2.TimeoutException as exc:
        return AttemptOutcome("timeout", error=f"no complete answer within {settings.webhook_timeout_s:g} s "
                                               f"({type(exc).__name__})")
    except guarded.Cancelled:
        return AttemptOutcome("interrupted", error="stopped mid-attempt (shutting down); sent again soon")
    except httpx2.HTTPError as exc:
        return AttemptOutcome("error", error=f"{type(exc).__name__}: {exc}"[:500])
    outcome, error, retry_after = classify(response.status_code, response.headers, now)
    return AttemptOutcome(
        outcome,
        status_code=response.status_code,
        error=error,
        response_excerpt=response.body[:500].decode("utf-8", "replace") or None,
        retry_after_s=retry_after,
        target_ip=response.address,
        duration_ms=int(response.elapsed_s * 1000),
    )


def attempt_budget_s(settings: Settings) -> float:
    """The longest one attempt can take: resolving the host, then the whole exchange."""
    return settings.webhook_dns_timeout_s + settings.webhook_timeout_s


def lease_s(settings: Settings) -> float:
    """How long a claimed delivery stays claimed. It is renewed just before each attempt, and
    outlasts any one attempt by design, so it never runs out while its attempt is under way
    (issue 21: it did, and two ids went out twice at once)."""
    return max(settings.webhook_lease_s, 2 * attempt_budget_s(settings) + 10.0)


def vet(url: str, settings: Settings) -> ssrf.VettedURL:
    """``ssrf.vet_url`` with this deployment's switches."""
    return ssrf.vet_url(
        url,
        allow_loopback=settings.allow_loopback_webhooks,
        allow_http=settings.allow_http_webhooks,
        allowed_ports=settings.webhook_allowed_ports,
        resolver=ssrf.shared_resolver(settings.webhook_dns_timeout_s, settings.webhook_dns_concurrency,
                                      settings.webhook_dns_cache_s),
    )


def retry_delay(attempt: int, settings: Settings, retry_after_s: float | None, rng) -> float | None:
    """Seconds until the attempt after failed attempt number ``attempt`` (1-based), or None to
    give up. Exponential schedule with +/- jitter; a receiver's Retry-After, capped, wins when
    it asks for longer."""
    schedule = settings.webhook_retry_schedule_s
    if attempt > len(schedule):
        return None
    base = schedule[attempt - 1]
    jitter = settings.webhook_retry_jitter
    delay = base * (1 + rng.uniform(-jitter, jitter)) if jitter else base
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, settings.webhook_max_retry_after_s))
    return max(0.0, delay)


def retry_at(now: datetime, delay_s: float) -> datetime:
    return now + timedelta(seconds=delay_s)
