"""The crawler's policy for every Hub request, listing pages and config files alike.

One GET (``send``) with:

- a **deadline** for the whole exchange, connect, headers and body (``hub_deadline_s``), and a
  per-operation timeout (``hub_timeout_s``, ``hub_connect_timeout_s``);
- a **budget** for the request with all its retries and our back-off between them
  (``hub_request_budget_s``; issue 21: a dripping config cost 5 x 60 s plus back-off, holding
  one fetch slot for five minutes). The waits the server asks for are bounded apart, by
  ``hub_max_wait_s``; each attempt's deadline is cut to what is left of the budget, and when
  nothing is left the request ends as a timeout, which the crawler records as transient;
- **retries** of 408/429/5xx answers, timeouts and dropped connections (``hub_max_retries``),
  waiting what the server asks (``RateLimit`` ``t`` when the window is spent, ``Retry-After``)
  or an exponential backoff. The server's waits add up per request and are honoured up to
  ``hub_max_wait_s``; a longer one raises ``RateLimited``, which says when to come back;
- **no retry when the Hub cannot be reached** (refused, unknown host, proxy down, connect
  timeout): ``HubUnreachable`` at once, so an offline machine finds out in one attempt, not
  after huggingface_hub's ~23 s of back-off;
- **redirects** followed only to the Hub's own origin (the 307 to ``/api/resolve-cache/...``)
  or to the CDN hosts named in ``hub_redirect_hosts``; anything else raises ``RedirectRefused``;
- every wait and every socket read ending early, with ``Cancelled``, once a stop is requested
  (``transport.cancellable``).

huggingface_hub's ``list_models`` cannot be used for this: its pages go through ``http_backoff``,
which sleeps ``Retry-After + 1`` seconds with no cap and no way to stop it (hub-api.md §3.3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TypeVar

import httpx2
from huggingface_hub.utils import get_session

from observatory.hub import transport
from observatory.hub.ratelimit import GATE, bucket_of, server_wait
from observatory.settings import Settings
from observatory.store.tables import utcnow

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_REDIRECTS = 5
# Reaching the Hub failed before any HTTP was spoken: retrying within the run does not help.
UNREACHABLE = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.ProxyError)

T = TypeVar("T")


class RateLimited(Exception):
    """The Hub asked us to wait longer than ``hub_max_wait_s``: stop this run, come back later."""

    def __init__(self, seconds: float, now: datetime | None = None) -> None:
        self.seconds = seconds
        self.retry_at = (now or utcnow()) + timedelta(seconds=seconds)
        super().__init__(f"the Hub asked to wait {seconds:.0f}s before the next request, more than "
                         f"hub_max_wait_s; retry after {self.retry_at:%Y-%m-%dT%H:%M:%SZ}")


class HubUnreachable(Exception):
    """The Hub could not be reached at all (DNS, refused connection, proxy, TLS, connect timeout):
    the usual state of an offline machine, logged as one line rather than a traceback."""


class RedirectRefused(Exception):
    """The Hub redirected (or paged) to a host that is neither the Hub nor one of its CDN hosts."""


def allowed_redirect(settings: Settings, url: httpx2.URL) -> bool:
    """The Hub's own origin, or https to a CDN host named in ``hub_redirect_hosts``."""
    hub = httpx2.URL(settings.hf_endpoint)
    if (url.scheme, url.host, url.port) == (hub.scheme, hub.host, hub.port):
        return True
    return url.scheme == "https" and url.host in settings.hub_redirect_hosts


def same_origin(settings: Settings, url: httpx2.URL) -> bool:
    hub = httpx2.URL(settings.hf_endpoint)
    return (url.scheme, url.host, url.port) == (hub.scheme, hub.host, hub.port)


def send(settings: Settings, url: str, read: Callable[[httpx2.Response], T], *, headers: dict[str, str],
         params: dict | None = None) -> T:
    """GET ``url`` under the policy and return ``read(response)`` for the answer that is not retried.

    ``read`` runs inside the request's deadline and may stream the body; a timeout or dropped
    connection while it reads is retried like any other. A 408/429/5xx reaches ``read`` only
    once the retries are spent. Raises ``RateLimited``, ``HubUnreachable``, ``RedirectRefused``,
    ``transport.Cancelled``, or httpx2's timeout/transport error after the last retry.
    """
    bucket = bucket_of(httpx2.URL(url).path)
    waited = 0.0  # what the server made this request wait so far
    spent = 0.0  # attempts and our own back-off: what hub_request_budget_s bounds
    attempts = settings.hub_max_retries + 1
    for attempt in range(attempts):
        final = attempt == attempts - 1
        pending = GATE.remaining(bucket)  # asked for by this or another thread's last answer
        if waited + pending > settings.hub_max_wait_s:
            raise RateLimited(pending)
        waited += pending
        transport.wait(pending)
        left = settings.hub_request_budget_s - spent
        if left <= 0:
            raise _budget_spent(settings, attempt)
        retry_now = False
        started = time.monotonic()
        try:
            with transport.deadline(min(settings.hub_deadline_s, left)), \
                    _open(settings, url, params, headers) as response:
                if final or response.status_code not in RETRY_STATUSES:
                    return read(response)
                # The response hook has paused the bucket if the server named a wait.
                retry_now = server_wait(response.status_code, response.headers)[1] is not None
        except UNREACHABLE as exc:
            raise HubUnreachable(f"Hub not reachable at {settings.hf_endpoint}: {_one_line(exc)}") from exc
        except (httpx2.TimeoutException, httpx2.TransportError):
            if final:
                raise
        finally:
            spent += time.monotonic() - started
        if not retry_now:
            backoff = min(settings.hub_backoff_max_s, settings.hub_backoff_base_s * 2 ** attempt)
            if spent + backoff >= settings.hub_request_budget_s:
                raise _budget_spent(settings, attempt + 1)
            transport.wait(backoff)
            spent += backoff
    raise AssertionError("unreachable: the last attempt returns or raises")


def _budget_spent(settings: Settings, attempts: int) -> httpx2.TimeoutException:
    return httpx2.ReadTimeout(f"no answer within hub_request_budget_s ({settings.hub_request_budget_s:g} s) "
                              f"over {attempts} attempt{'s' if attempts != 1 else ''} and their back-off")


@contextmanager
def _open(settings: Settings, url: str, params: dict | None, headers: dict[str, str]) -> Iterator[httpx2.Response]:
    """The response to a GET (body not read yet), allowed redirects followed."""
    client = get_session()
    timeout = httpx2.Timeout(settings.hub_timeout_s, connect=settings.hub_connect_timeout_s)
    request = client.build_request("GET", url, params=params, headers=headers, timeout=timeout)
    for _hop in range(MAX_REDIRECTS + 1):
        response = client.send(request, stream=True, follow_redirects=False)
        if not response.has_redirect_location:
            break
        response.close()
        request = response.next_request
        if request is None:
            raise RedirectRefused(f"HTTP {response.status_code} with an unusable Location header")
        if not allowed_redirect(settings, request.url):
            raise RedirectRefused(f"HTTP {response.status_code} to {_shown(request.url)} refused: only "
                                  f"{_shown(httpx2.URL(settings.hf_endpoint))} and hub_redirect_hosts are followed")
    else:
        raise RedirectRefused(f"more than {MAX_REDIRECTS} redirects")
    try:
        yield response
    finally:
        response.close()


def _shown(url: httpx2.URL) -> str:
    """scheme://host[:port], short and free of whatever the path carries."""
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"[:200]


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
