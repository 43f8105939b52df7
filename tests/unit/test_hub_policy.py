"""Which redirects the crawler follows, which proxy it uses, and waits that a stop request ends."""

from __future__ import annotations

import threading
import time

import httpx2
import pytest

from observatory.hub import transport
from observatory.hub.policy import allowed_redirect
from observatory.hub.session import proxy_for
from observatory.settings import Settings


@pytest.mark.parametrize(("endpoint", "location", "allowed"), [
    ("https://huggingface.co", "https://huggingface.co/api/resolve-cache/models/a/b/c/config.json", True),
    ("https://huggingface.co", "https://cdn-lfs.hf.co/repos/ab/cd/file", True),
    ("https://huggingface.co", "https://cas-bridge.xethub.hf.co/xet-bridge-us/abc", True),
    ("https://huggingface.co", "http://cdn-lfs.hf.co/repos/ab/cd/file", False),  # CDN hosts only over https
    ("https://huggingface.co", "https://evil.example/config.json", False),
    ("https://huggingface.co", "https://cdn-lfs.hf.co.evil.example/x", False),
    ("https://huggingface.co", "http://127.0.0.1/latest/meta-data", False),
    ("https://huggingface.co", "http://169.254.169.254/latest/meta-data", False),
    ("http://127.0.0.1:8123", "http://127.0.0.1:8123/api/resolve-cache/x", True),  # a stand-in's own origin
    ("http://127.0.0.1:8123", "http://127.0.0.1:9999/secret", False),  # same host, another port
    ("http://127.0.0.1:8123", "http://localhost:8123/x", False),
    ("https://hub.internal:8443", "https://hub.internal:8443/x", True),
    ("https://hub.internal:8443", "https://hub.internal/x", False),
])
def test_redirects_stay_on_the_hub_or_its_cdn_hosts(endpoint, location, allowed):
    settings = Settings(hf_endpoint=endpoint)
    assert allowed_redirect(settings, httpx2.URL(location)) is allowed


def test_cdn_hosts_are_a_setting():
    settings = Settings(hub_redirect_hosts=["mirror-cdn.example"])
    assert allowed_redirect(settings, httpx2.URL("https://mirror-cdn.example/f"))
    assert not allowed_redirect(settings, httpx2.URL("https://cdn-lfs.hf.co/f"))


def test_proxy_from_the_environment_unless_no_proxy_covers_the_host(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert proxy_for("https://huggingface.co") == "http://proxy.example:3128"
    assert proxy_for("http://127.0.0.1:8000") is None
    monkeypatch.delenv("HTTPS_PROXY")
    assert proxy_for("https://huggingface.co") is None


def test_a_wait_ends_with_cancelled_once_a_stop_is_requested():
    stop = threading.Event()
    outcome: list[BaseException] = []

    def sleeper() -> None:
        with transport.cancellable(stop.is_set):
            try:
                transport.wait(300)
            except transport.Cancelled as exc:
                outcome.append(exc)

    thread = threading.Thread(target=sleeper)
    thread.start()
    time.sleep(0.2)
    stop.set()
    thread.join(30)
    assert not thread.is_alive() and isinstance(outcome[0], transport.Cancelled)


def test_a_wait_without_a_stop_request_sleeps_its_time():
    transport.wait(0.0)  # no context: nothing to stop it, nothing raised
    with transport.cancellable(lambda: True), pytest.raises(transport.Cancelled):
        transport.wait(0.0)
