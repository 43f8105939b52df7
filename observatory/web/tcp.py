"""uvicorn's HTTP protocols with TCP_NODELAY set on every connection.

With ``--workers 2`` (uvicorn 0.54, h11, Linux) the worker processes' connections were left
with Nagle's algorithm on, and every response waited ~40 ms for the client's delayed ACK
(measured: 44 ms p50 for a 1 ms endpoint; 0.8 ms with this protocol). A single worker was not
affected. ``observatory serve`` uses it for any number of workers; elsewhere, run uvicorn with
``--http observatory.web.tcp:NoDelayHttpToolsProtocol`` (httptools' C parser; it saves a few
milliseconds a request over the pure-Python h11, which matters on a 2-core machine).
"""

from __future__ import annotations

import socket

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _no_delay(transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # not a TCP socket after all; nothing to tune
            pass


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport) -> None:  # type: ignore[override]
        _no_delay(transport)
        super().connection_made(transport)
