"""E-mail through SMTP, when configured: double opt-in, one-click unsubscribe, plain text first.

- An address added to a subscription receives only a confirmation message until its owner
  follows the link in it (double opt-in); the link carries a token whose hash alone is stored.
  The confirmation page confirms on POST, so a mail scanner fetching the link confirms nothing.
- Every alert message carries ``List-Unsubscribe`` (an https URL with an unguessable token) and
  ``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (RFC 8058): a POST to that URL stops mail.
- Messages are ``multipart/alternative`` with the plain-text part first; the HTML part is the
  same text, escaped.
- ``Message-ID`` is derived from the delivery's id, so a message re-sent after a crash is
  recognisably the same message.
"""

from __future__ import annotations

import html
import json
import re
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import quote

from observatory.settings import Settings

# Unicode's White_Space, the C0 and C1 controls, DEL and the BOM, spelled out rather than "\s":
# "\s" is a different set in each engine these patterns meet. Python counts \x1c-\x1f,
# pydantic's Rust regex counts U+0085 but not \x1c-\x1f, and the ECMA regex that schema-driven
# clients and tests generate from counts neither, so one pattern accepted in one engine what
# another rejected.
SPACE_OR_CONTROL = r"\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
VISIBLE_CHAR = "[^" + SPACE_OR_CONTROL + "]"

# Deliberately plain: one @, no spaces, control characters or angle brackets, a dot in the
# domain. Also the API's JSON-schema pattern.
ADDRESS_PATTERN = ("^[^@" + SPACE_OR_CONTROL + r"""<>"',;]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}\.)+[A-Za-z]{2,63}$""")
_ADDRESS = re.compile(ADDRESS_PATTERN)


class EmailError(ValueError):
    pass


def smtp_configured(settings: Settings) -> bool:
    return bool(settings.smtp_host)


def validate_address(address: str) -> str:
    address = address.strip()
    if len(address) > 254 or not _ADDRESS.match(address):
        raise EmailError("not a valid e-mail address")
    return address


def base_url(settings: Settings) -> str:
    return (settings.base_url or f"http://{settings.host}:{settings.port}").rstrip("/")


def unsubscribe_url(settings: Settings, token: str) -> str:
    return f"{base_url(settings)}/alerts/email/unsubscribe?token={quote(token)}"


def confirm_url(settings: Settings, token: str) -> str:
    return f"{base_url(settings)}/alerts/email/confirm?token={quote(token)}"


def _message(settings: Settings, to: str, subject: str, text: str, *, message_id: str | None = None,
             unsubscribe_token: str | None = None) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = settings.smtp_from
    msg["To"] = to
    msg["Subject"] = re.sub(r"[\r\n]+", " ", subject)[:200]
    msg["Date"] = formatdate(usegmt=True)
    msg["Message-ID"] = message_id or make_msgid(domain="gqa-observatory")
    msg["Auto-Submitted"] = "auto-generated"
    if unsubscribe_token:
        msg["List-Unsubscribe"] = f"<{unsubscribe_url(settings, unsubscribe_token)}>"
        msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg.set_content(text)
    msg.add_alternative(f"<!doctype html><html><body><pre>{html.escape(text)}</pre></body></html>",
                        subtype="html")
    return msg


def confirmation_message(settings: Settings, to: str, subscription_name: str, token: str) -> EmailMessage:
    text = (
        f"Someone (hopefully you) asked the GQA Observatory to e-mail alerts for the subscription\n"
        f"\"{subscription_name}\" to this address.\n\n"
        f"To confirm, open this link and press the button:\n{confirm_url(settings, token)}\n\n"
        f"If you did not ask for this, ignore this message: nothing will be sent.\n"
    )
    return _message(settings, to, "Confirm GQA Observatory alerts", text)


def alert_message(settings: Settings, to: str, payload: str, delivery_id: str,
                  unsubscribe_token: str) -> EmailMessage:
    """An alert e-mail from the stored webhook payload (the same words on every channel)."""
    body = json.loads(payload)
    data = body["data"]
    status = "RESOLVED" if body["type"] == "alert.resolved" else "FIRING"
    lines = [data["summary"], "", f"Status: {status} ({data.get('notification_reason', '')})",
             f"Rule: {data['rule']['title']}", f"Since: {data['alert']['started_at']}"]
    details = data.get("details") or {}
    for side in ("before", "after"):
        value = details.get(side)
        if isinstance(value, dict) and "value" in value:
            lines.append(f"{side.capitalize()}: {value['value']} ({value.get('period') or value.get('periods')})")
    models = details.get("models") or []
    if models:
        lines += ["", "Models:"] + [f"  - {m['id']}" for m in models]
        if details.get("models_not_listed"):
            lines.append(f"  … and {details['models_not_listed']} more")
    links = data.get("links") or {}
    lines += ["", *[f"{name}: {url}" for name, url in links.items()], "",
              f"Unsubscribe: {unsubscribe_url(settings, unsubscribe_token)}"]
    return _message(settings, to, f"[{status}] {data['summary']}", "\n".join(lines),
                    message_id=f"<{delivery_id}@gqa-observatory>", unsubscribe_token=unsubscribe_token)


def notice_message(settings: Settings, to: str, message: str, notice_id: str,
                   unsubscribe_token: str) -> EmailMessage:
    text = f"{message}\n\nUnsubscribe: {unsubscribe_url(settings, unsubscribe_token)}\n"
    return _message(settings, to, "GQA Observatory: your webhook endpoint was disabled", text,
                    message_id=f"<{notice_id}@gqa-observatory>", unsubscribe_token=unsubscribe_token)


def send(settings: Settings, msg: EmailMessage) -> None:
    """Send one message; raises ``smtplib.SMTPException`` / ``OSError`` on failure."""
    if not smtp_configured(settings):
        raise EmailError("SMTP is not configured (OBSERVATORY_SMTP_HOST)")
    timeout = settings.smtp_timeout_s
    if settings.smtp_ssl:
        client = smtplib.SMTP_SSL(settings.smtp_host, settings.smtp_port, timeout=timeout,
                                  context=ssl.create_default_context())
    else:
        client = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=timeout)
    with client:
        if settings.smtp_starttls and not settings.smtp_ssl:
            client.starttls(context=ssl.create_default_context())
        if settings.smtp_username:
            client.login(settings.smtp_username, settings.smtp_password or "")
        client.send_message(msg)
