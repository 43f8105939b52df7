"""Deadlines and stop requests that reach every socket the Hub client opens.

httpx2 bounds each socket operation (connect, one read, one write) but not a whole request: a
server that drips a byte every half second keeps a 2 s read timeout happy forever. And a thread
blocked in a read cannot see a shutdown. So the client's connection pool gets a network backend
(``GuardedBackend``) whose streams

- give every connect, read and write at most what is left of the request's **deadline**
  (``deadline(seconds)`` around the request: connect, headers and body together), and
- read in slices of at most ``POLL_S``, checking between slices whether the caller asked to
  **stop** (``cancellable(should_stop)``): a stop request ends any read within ``POLL_S``.

Both are context variables, read in the thread that makes the request; the crawler's fetch
threads inherit them with ``contextvars.copy_context``. ``wait(seconds)`` is the matching sleep:
it ends early, raising ``Cancelled``, when a stop is requested.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpcore2
import httpx2

POLL_S = 0.1  # longest a blocked read or a wait goes without looking at the stop request


class Cancelled(Exception):
    """A Hub request or wait ended early because the caller asked to stop."""


_cancel: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar("hub_cancel", default=None)
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("hub_deadline", default=None)


@contextmanager
def cancellable(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Requests and waits in this context (and threads started with it) end once ``should_stop()``."""
    token = _cancel.set(should_stop)
    try:
        yield
    finally:
        _cancel.reset(token)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every socket operation in this context must finish within ``seconds`` from now, in all."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def stop_requested() -> bool:
    should_stop = _cancel.get()
    return should_stop is not None and should_stop()


def check_cancel(what: str = "request") -> None:
    if stop_requested():
        raise Cancelled(f"{what} not finished: stopping")


def wait(seconds: float) -> None:
    """Sleep ``seconds``, raising ``Cancelled`` as soon as a stop is requested."""
    end = time.monotonic() + max(0.0, seconds)
    while (left := end - time.monotonic()) > 0:
        check_cancel("wait")
        time.sleep(min(POLL_S, left))
    check_cancel("wait")


def _until(timeout: float | None) -> float | None:
    """The monotonic time one operation with ``timeout`` must end by, the deadline included."""
    ends = [t for t in (_deadline.get(), None if timeout is None else time.monotonic() + timeout) if t is not None]
    return min(ends) if ends else None


def _left(until: float | None, error: type[Exception], what: str) -> float | None:
    if until is None:
        return None
    left = until - time.monotonic()
    if left <= 0:
        raise error(f"{what} timed out" + (" (the request's deadline passed)" if until == _deadline.get() else ""))
    return left


class GuardedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        until = _until(timeout)
        while True:
            check_cancel("read")
            left = _left(until, httpcore2.ReadTimeout, "read")
            try:
                return self._inner.read(max_bytes, timeout=POLL_S if left is None else min(POLL_S, left))
            except httpcore2.ReadTimeout:
                continue  # one slice passed with no data: look at the stop request and the clock again

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        check_cancel("write")
        self._inner.write(buffer, timeout=_left(_until(timeout), httpcore2.WriteTimeout, "write"))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        left = _left(_until(timeout), httpcore2.ConnectTimeout, "TLS handshake")
        return GuardedStream(self._inner.start_tls(ssl_context, server_hostname, timeout=left))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore2.NetworkStream:
        check_cancel("connect")
        left = _left(_until(timeout), httpcore2.ConnectTimeout, "connect")
        return GuardedStream(self._inner.connect_tcp(host, port, timeout=left, local_address=local_address,
                                                     socket_options=socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options=None) -> httpcore2.NetworkStream:
        check_cancel("connect")
        left = _left(_until(timeout), httpcore2.ConnectTimeout, "connect")
        return GuardedStream(self._inner.connect_unix_socket(path, timeout=left, socket_options=socket_options))

    def sleep(self, seconds: float) -> None:
        wait(seconds)


def guarded_transport(*, limits: httpx2.Limits, proxy: str | None, trust_env: bool = True) -> httpx2.HTTPTransport:
    """httpx2's own transport (connection pool, proxy, TLS from the environment) on guarded sockets.

    ``trust_env=False`` (webhook delivery, which connects to a vetted address itself) ignores
    proxy and TLS settings from the environment.

    httpx2 offers no public way to choose the pool's network backend; ``_pool._network_backend``
    is where httpcore2's pool (direct or through a proxy) keeps it (httpx2 2.16, httpcore2 2.16).
    ``tests/integration/test_hub_deadlines.py`` fails if that ever stops taking effect.
    """
    transport = httpx2.HTTPTransport(limits=limits, proxy=proxy, trust_env=trust_env)
    pool = transport._pool
    pool._network_backend = GuardedBackend(pool._network_backend)
    return transport
