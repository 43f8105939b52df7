"""E-mail alerts through a real SMTP server (aiosmtpd) on 127.0.0.1: opt-in, alert mail, unsubscribe."""

from __future__ import annotations

import re
from email import message_from_bytes, policy
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from alert_support import (  # noqa: F401  (alert_settings is a fixture)
    Receiver,
    alert_settings,
    deliveries,
    seed_mla_month,
)
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from observatory.alerts.delivery import deliver_pending
from observatory.alerts.evaluate import evaluate
from observatory.alerts.tables import AlertSubscription, SubscriptionNotice
from observatory.testing.server import free_port
from observatory.web.app import create_app


class Sink:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.messages.append(message_from_bytes(envelope.original_content or envelope.content, policy=policy.default))
        return "250 OK"


@pytest.fixture
def smtp():
    sink = Sink()
    controller = Controller(sink, hostname="127.0.0.1", port=free_port(), ready_timeout=10)
    controller.start()
    try:
        yield sink, controller.port
    finally:
        controller.stop()


@pytest.fixture
def mail_settings(alert_settings, smtp):
    return alert_settings.model_copy(update={"smtp_host": "127.0.0.1", "smtp_port": smtp[1]})


@pytest.fixture
def client(mail_settings, engine):
    with TestClient(create_app(mail_settings), base_url="http://observatory.test") as c:
        yield c


def _link(text: str, path: str) -> str:
    (url,) = re.findall(rf"http://observatory\.test{path}\?token=\S+", text)
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def _subscribe(client, email, webhook_url=None):
    body = {"name": "mail me", "rules": [{"kind": "kind_share", "params": {"kind": "MLA", "threshold": 0.2}}],
            "email": email, "webhook_url": webhook_url}
    response = client.post("/api/v1/subscriptions", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def _status(engine, sub_id):
    with Session(engine) as session:
        return session.exec(select(AlertSubscription).where(AlertSubscription.public_id == sub_id)).one().email_status


def test_double_opt_in_alert_mail_and_one_click_unsubscribe(client, smtp, engine, mail_settings):
    sink, _ = smtp
    created = _subscribe(client, "analyst@example.org")
    sub_id = created["subscription"]["id"]
    assert created["email_confirmation"] == "sent" and created["subscription"]["email"]["status"] == "unconfirmed"
    (confirmation,) = sink.messages
    assert confirmation["To"] == "analyst@example.org"
    text = confirmation.get_body(("plain",)).get_content()
    confirm = _link(text, "/alerts/email/confirm")

    # Opening the link (or a scanner fetching it) confirms nothing; the button does.
    page = client.get(confirm)
    assert page.status_code == 200 and "<button" in page.text
    assert _status(engine, sub_id) == "unconfirmed"
    seed_mla_month(engine)
    assert evaluate(engine, mail_settings).deliveries == 0  # an unconfirmed address gets no alert

    token = confirm.split("token=")[1]
    done = client.post("/alerts/email/confirm", data={"token": token})
    assert done.status_code == 200 and "Confirmed" in done.text
    assert _status(engine, sub_id) == "confirmed"
    assert client.post("/alerts/email/confirm", data={"token": "forged-token-0123456789"}).status_code == 404

    assert evaluate(engine, mail_settings).deliveries == 1  # the firing alert reaches the new subscriber
    assert deliver_pending(engine, mail_settings).succeeded == 1
    alert_mail = sink.messages[-1]
    (d,) = deliveries(engine)
    assert d.channel == "email" and alert_mail["Message-ID"] == f"<{d.webhook_id}@gqa-observatory>"
    assert alert_mail["Subject"].startswith("[FIRING] The share of MLA is 20.0%")
    assert alert_mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert alert_mail.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in alert_mail.iter_parts()] == ["text/plain", "text/html"]
    plain = alert_mail.get_body(("plain",)).get_content()
    assert "deepx/mla-2025-1-0" in plain and "http://observatory.test/trends" in plain

    unsubscribe = alert_mail["List-Unsubscribe"].strip("<>")
    assert unsubscribe.startswith("http://observatory.test/alerts/email/unsubscribe?token=")
    parts = urlsplit(unsubscribe)
    one_click = client.post(f"{parts.path}?{parts.query}", content=b"List-Unsubscribe=One-Click",
                            headers={"content-type": "application/x-www-form-urlencoded",
                                     "origin": "https://mail.example.net"})  # mail providers post cross-site
    assert one_click.status_code == 200 and "Unsubscribed" in one_click.text
    assert _status(engine, sub_id) == "unsubscribed"

    seed_mla_month(engine, month=2, mla=0, gqa=10)
    assert evaluate(engine, mail_settings).deliveries == 0  # the resolution is not mailed any more
    assert len(sink.messages) == 2


def test_disabled_endpoint_is_reported_to_the_owner_by_mail(client, smtp, engine, mail_settings):
    sink, _ = smtp
    with Receiver(default=(410, {}, 0)) as rx:
        created = _subscribe(client, "ops@example.org", rx.url)
        token = _link(sink.messages[0].get_body(("plain",)).get_content(), "/alerts/email/confirm").split("=")[1]
        client.post("/alerts/email/confirm", data={"token": token})
        seed_mla_month(engine)
        evaluate(engine, mail_settings)
        report = deliver_pending(engine, mail_settings)
        assert report.disabled_endpoints == [rx.url] and report.notices_emailed == 1
    notice_mail = sink.messages[-1]
    assert "endpoint was disabled" in notice_mail["Subject"]
    assert "410 Gone" in notice_mail.get_body(("plain",)).get_content()
    with Session(engine) as session:
        (notice,) = session.exec(select(SubscriptionNotice)).all()
    assert notice.email_status == "sent"
    sub = client.get(f"/api/v1/subscriptions/{created['subscription']['id']}",
                     headers={"Authorization": f"Bearer {created['owner_token']}"}).json()["subscription"]
    assert sub["webhook"]["status"] == "disabled" and sub["notices"][0]["kind"] == "endpoint_disabled"


def test_email_needs_smtp_and_a_valid_address(engine, alert_settings, smtp):
    with TestClient(create_app(alert_settings)) as no_smtp:  # no SMTP host configured
        body = {"name": "x", "rules": [{"kind": "new_dialect"}], "email": "a@example.org"}
        response = no_smtp.post("/api/v1/subscriptions", json=body)
        assert response.status_code == 422 and "SMTP" in response.json()["error"]
    settings = alert_settings.model_copy(update={"smtp_host": "127.0.0.1", "smtp_port": smtp[1]})
    with TestClient(create_app(settings)) as c:
        for bad in ("not-an-address", "a@b", "x@example.org\r\nBcc: victim@example.org", "<a@example.org>"):
            response = c.post("/api/v1/subscriptions", json={"name": "x", "rules": [{"kind": "new_dialect"}],
                                                              "email": bad})
            assert response.status_code == 422 and "email" in response.json()["error"], bad
    assert smtp[0].messages == []
