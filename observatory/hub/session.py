"""The one HTTP session all Hub traffic goes through: huggingface_hub's, with our hooks.

``configure(settings)`` installs a client factory (``set_client_factory``) whose client keeps
huggingface_hub's own request hook (offline mode, request ids) and adds ours:

- guarded sockets (``transport``): each request's deadline and a stop request reach every
  connect and read;
- a rate-limit gate: a request waits while its bucket is paused (``RateGate``), and any response
  that says the window is spent pauses the bucket for every thread;
- the request budget (``ratelimit.QUOTA``): at most the Hub's published quota per bucket in any
  window (``hub_plan``, ``hub_quota``), requests to the Hub's own origin waiting for their slot;
  a slot further off than ``hub_max_wait_s`` raises ``RateLimited``, so the run ends and says
  when to come back instead of drawing the Hub's 429s;
- request counters by kind, so a crawl can report what it cost;
- no redirects followed by the client itself: ``policy`` follows the ones it allows.

Requests are made through ``policy.send``, which adds retries, deadlines and redirect checks.
"""

from __future__ import annotations

import contextvars
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx2
from huggingface_hub.utils import set_client_factory

# Not re-exported publicly, but the default client uses it: it enforces HF_HUB_OFFLINE, adds the
# request id and flags download calls. A custom client must keep it (hub-api.md §3.1).
from huggingface_hub.utils._http import hf_request_event_hook

from observatory.hub import transport
from observatory.hub.policy import RateLimited
from observatory.hub.ratelimit import GATE, QUOTA, bucket_of, plan_limits, server_wait
from observatory.settings import Settings


class RequestCounter:
    """Thread-safe counts of requests by kind: listing, model_info, config, other."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())


_current: contextvars.ContextVar[RequestCounter | None] = contextvars.ContextVar("hub_counter", default=None)
_installed: tuple | None = None
_install_lock = threading.Lock()


@contextmanager
def counting() -> Iterator[RequestCounter]:
    """Count the Hub requests made in this context (and in threads started with its context)."""
    counter = RequestCounter()
    token = _current.set(counter)
    try:
        yield counter
    finally:
        _current.reset(token)


def request_kind(path: str) -> str:
    if path == "/api/models" or path == "/api/models/":
        return "listing"
    if path.startswith("/api/models/"):
        return "model_info"
    if bucket_of(path) == "resolvers":
        return "config"
    return "other"


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``ALL_PROXY``, ... unless
    ``NO_PROXY`` covers its host), as httpx2 would pick with ``trust_env``; None: connect directly."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def configure(settings: Settings) -> None:
    """Install the session factory for these settings (once per distinct setting values)."""
    global _installed
    proxy = proxy_for(settings.hf_endpoint)
    key = (settings.hf_endpoint, settings.hub_timeout_s, settings.hub_connect_timeout_s, settings.hub_max_wait_s,
           settings.crawl_concurrency, proxy)
    QUOTA.configure(plan_limits(settings.hub_plan, bool(settings.hf_token), settings.hub_quota),
                    settings.hub_quota_window_s)
    hub = urlsplit(settings.hf_endpoint)
    with _install_lock:
        if _installed == key:
            return
        timeout = httpx2.Timeout(settings.hub_timeout_s, connect=settings.hub_connect_timeout_s)
        max_wait = settings.hub_max_wait_s

        def apply_timeout(request: httpx2.Request) -> None:
            current = request.extensions.get("timeout") or {}
            if all(value is None for value in current.values()):
                request.extensions["timeout"] = timeout.as_dict()

        def wait_and_count(request: httpx2.Request) -> None:
            transport.check_cancel(f"{request.method} {request.url.path}")
            bucket = bucket_of(request.url.path)
            GATE.wait(bucket, max_wait)
            if (request.url.scheme, request.url.host, request.url.port or None) == (hub.scheme, hub.hostname, hub.port):
                # The request budget counts the Hub's own origin only (CDN hosts are not in its quota).
                wait = QUOTA.reserve(bucket, max_wait)
                if wait > max_wait:
                    raise RateLimited(wait)
                transport.wait(wait)
            counter = _current.get()
            if counter is not None:
                counter.add(request_kind(request.url.path))

        def observe_limits(response: httpx2.Response) -> None:
            bucket, seconds = server_wait(response.status_code, response.headers)
            if seconds:
                GATE.pause(bucket or bucket_of(response.request.url.path), seconds)

        # Enough pooled connections for every worker plus the listing, kept alive between requests.
        limits = httpx2.Limits(max_connections=settings.crawl_concurrency + 4,
                               max_keepalive_connections=settings.crawl_concurrency + 4)

        def factory() -> httpx2.Client:
            return httpx2.Client(
                transport=transport.guarded_transport(limits=limits, proxy=proxy),
                event_hooks={"request": [hf_request_event_hook, apply_timeout, wait_and_count],
                             "response": [observe_limits]},
                follow_redirects=False,
                timeout=timeout,
            )

        set_client_factory(factory)
        _installed = key
