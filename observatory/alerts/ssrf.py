"""Webhook URLs are untrusted: vet them, then connect only to the address that was vetted.

``vet_url`` parses a URL, refuses userinfo, odd schemes and odd ports, resolves the host with
the system resolver (so numeric spellings such as ``0x7f000001``, ``2130706433``, ``0177.0.0.1``
and ``127.1`` mean what the C library says they mean) and refuses the URL if **any** address is
not publicly routable. ``send_pinned`` then connects to a vetted IP itself, sending the original
``Host`` header and TLS server name, so a second DNS answer (rebinding) can never redirect the
request. Redirects are never followed and the response is capped in size, and the whole exchange
in time: on the Hub client's guarded sockets (``observatory.hub.transport``), every connect,
read and write gets only what is left of one deadline, so a receiver that drips its status line
a byte at a time is cut off at the deadline (issue 21: one held an attempt for 75-125 s with a
5 s timeout), and a stop request (SIGTERM) ends a read within a tenth of a second. Name
lookups are bounded in time and number and cached briefly (``BoundedResolver``): the names are
the caller's choice.

Loopback targets pass only when ``allow_loopback`` is set (tests deliver to 127.0.0.1); private,
link-local, metadata, IANA special-purpose and transition addresses never pass (a NAT64 address
passes only when the IPv4 address it embeds would).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import httpx2

from observatory.hub import transport as guarded

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2000

# Checked in order; the first match names the reason. Anything else must also be is_global.
# The IPv4 and IPv6 lists follow IANA's special-purpose address registries
# (https://www.iana.org/assignments/iana-ipv4-special-registry and
# https://www.iana.org/assignments/iana-ipv6-special-registry, as of 2025), written out here
# because Python's ``ipaddress`` knows only the ranges of its release: 3.12 has neither
# 5f00::/16 (SRv6 SIDs, RFC 9602) nor 3fff::/20 (documentation, RFC 9637), and it calls the
# IPv4-translated form ::ffff:0:a.b.c.d global (issue 21). Entries the registry marks globally
# reachable (AS112, PCP/TURN anycast, AMT, ORCHIDv2, DRIP) are not listed: a webhook host there
# is implausible, and is_global decides. Prefixes that embed an IPv4 address (NAT64's
# 64:ff9b::/96) are judged by that address in ``address_problem``.
_NET = ipaddress.ip_network
_BLOCKED: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (_NET("169.254.169.254/32"), "cloud metadata address"),
    (_NET("100.100.100.200/32"), "cloud metadata address"),
    (_NET("fd00:ec2::254/128"), "cloud metadata address"),
    (_NET("0.0.0.0/8"), "'this network' address (0.0.0.0/8)"),
    (_NET("127.0.0.0/8"), "loopback address"),
    (_NET("10.0.0.0/8"), "private address (RFC 1918)"),
    (_NET("172.16.0.0/12"), "private address (RFC 1918)"),
    (_NET("192.168.0.0/16"), "private address (RFC 1918)"),
    (_NET("100.64.0.0/10"), "carrier-grade NAT address (100.64.0.0/10)"),
    (_NET("169.254.0.0/16"), "link-local address"),
    (_NET("192.0.0.0/24"), "IETF protocol assignment (192.0.0.0/24)"),
    (_NET("192.0.2.0/24"), "documentation address (192.0.2.0/24)"),
    (_NET("192.88.99.0/24"), "6to4 relay anycast address (192.88.99.0/24)"),
    (_NET("198.18.0.0/15"), "benchmarking address (198.18.0.0/15)"),
    (_NET("198.51.100.0/24"), "documentation address (198.51.100.0/24)"),
    (_NET("203.0.113.0/24"), "documentation address (203.0.113.0/24)"),
    (_NET("224.0.0.0/4"), "multicast address"),
    (_NET("240.0.0.0/4"), "reserved address (240.0.0.0/4)"),
    (_NET("::1/128"), "loopback address"),
    (_NET("::/128"), "unspecified address"),
    (_NET("::ffff:0:0/96"), "IPv4-mapped IPv6 address"),
    (_NET("::ffff:0:0:0/96"), "IPv4-translated IPv6 address (RFC 2765)"),
    (_NET("::/96"), "IPv4-compatible IPv6 address"),
    (_NET("64:ff9b:1::/48"), "local-use NAT64 address (RFC 8215)"),
    (_NET("::/8"), "reserved IPv6 address (::/8)"),  # after the NAT64 prefixes, which it contains
    (_NET("100::/64"), "discard-only IPv6 address"),
    (_NET("100:0:0:1::/64"), "dummy IPv6 prefix (RFC 9780)"),
    (_NET("2001::/32"), "Teredo address"),
    (_NET("2001:2::/48"), "benchmarking IPv6 address"),
    (_NET("2001:10::/28"), "deprecated ORCHID address"),
    (_NET("2001:db8::/32"), "documentation IPv6 address (2001:db8::/32)"),
    (_NET("2002::/16"), "6to4 address"),
    (_NET("3fff::/20"), "documentation IPv6 address (3fff::/20, RFC 9637)"),
    (_NET("5f00::/16"), "SRv6 segment identifier (5f00::/16, RFC 9602)"),
    (_NET("fc00::/7"), "unique local IPv6 address"),
    (_NET("fe80::/10"), "link-local IPv6 address"),
    (_NET("fec0::/10"), "site-local IPv6 address"),
    (_NET("ff00::/8"), "multicast address"),
)
# NAT64's well-known prefix (RFC 6052) carries an IPv4 address in its last 32 bits: it reaches
# that address through a translator, so it is as safe as that address and no safer.
_NAT64 = _NET("64:ff9b::/96")
_LOOPBACK = (_NET("127.0.0.0/8"), _NET("::1/128"))


class UnsafeURL(ValueError):
    """A webhook URL we will not send to; the message says which rule refused it."""


@dataclass(frozen=True)
class VettedURL:
    url: str
    scheme: str
    host: str  # as written (IDNA-encoded), without brackets
    port: int
    target: str  # path + query, what goes on the request line
    addresses: tuple[str, ...]  # every resolved address, all vetted

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def pinned_url(self, address: str) -> str:
        shown = f"[{address}]" if ":" in address else address
        return f"{self.scheme}://{shown}:{self.port}{self.target}"


def address_problem(address: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``address`` may not be a webhook target, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        return "scoped IPv6 address"
    plain = ipaddress.ip_address(str(address).split("%")[0])
    if allow_loopback and any(plain in net for net in _LOOPBACK):
        return None
    if plain.version == 6 and plain in _NAT64:
        embedded = ipaddress.IPv4Address(int(plain) & 0xFFFFFFFF)
        problem = address_problem(embedded)  # never loopback: the switch is for 127.0.0.1 itself
        return f"NAT64 address mapping to {embedded} ({problem})" if problem else None
    for net, reason in _BLOCKED:
        if plain.version == net.version and plain in net:
            return reason
    if not plain.is_global:
        return "address that is not globally routable"
    return None


Resolver = Callable[[str, int], Iterable[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """All addresses the system resolver gives for ``host`` (numeric forms included)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


class BoundedResolver:
    """``resolve`` (the system resolver) with a time limit, a cap on lookups in flight, and a
    short-lived cache of answers and failures alike.

    A webhook URL names a host of the caller's choosing, and the C library's resolver takes as
    long as the name's servers make it take: each lookup runs on a thread of its own, at most
    ``concurrency`` of them at once (a thread still waiting after the caller gave up keeps its
    slot until the resolver returns), and the caller waits at most ``timeout_s``. Asking again
    for the same name within ``cache_s`` costs no lookup.
    """

    CACHE_ENTRIES = 4096

    def __init__(self, *, timeout_s: float, concurrency: int, cache_s: float,
                 resolve: Resolver = system_resolver, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s, self.cache_s = timeout_s, cache_s
        self._resolve, self._clock = resolve, clock
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._cache: OrderedDict[tuple[str, int], tuple[float, list[str] | OSError]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int) -> list[str]:
        key = (host, port)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return _answer(hit[1])
        result = self._lookup(host, port)
        with self._lock:
            self._cache[key] = (self._clock() + self.cache_s, result)
            self._cache.move_to_end(key)
            while len(self._cache) > self.CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return _answer(result)

    def _lookup(self, host: str, port: int) -> list[str] | OSError:
        if not self._slots.acquire(blocking=False):
            return OSError("too many host name lookups under way; try again shortly")
        outcome: list[list[str] | OSError] = []

        def run() -> None:
            try:
                outcome.append(list(self._resolve(host, port)))
            except (OSError, UnicodeError) as exc:
                outcome.append(OSError(str(exc)))
            finally:
                self._slots.release()

        thread = threading.Thread(target=run, name="webhook-dns", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        return outcome[0] if outcome else OSError(f"no answer within {self.timeout_s:g} s")


def _answer(result: list[str] | OSError) -> list[str]:
    if isinstance(result, OSError):
        raise OSError(str(result))
    return list(result)


@lru_cache(maxsize=8)
def shared_resolver(timeout_s: float, concurrency: int, cache_s: float) -> BoundedResolver:
    """One ``BoundedResolver`` per process and setting values, so its cache and cap are shared."""
    return BoundedResolver(timeout_s=timeout_s, concurrency=concurrency, cache_s=cache_s)


def parse_url(url: str, *, allow_http: bool) -> tuple[str, str, int, str]:
    """(scheme, host, port, target) of a syntactically acceptable URL, without resolving it."""
    if not isinstance(url, str) or not url.strip():
        raise UnsafeURL("URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeURL(f"URL longer than {MAX_URL_LENGTH} characters")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise UnsafeURL("URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"URL cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise UnsafeURL(f"scheme {scheme or '(none)'!r} is not allowed; use https")
    if scheme == "http" and not allow_http:
        raise UnsafeURL("plain http is not allowed; use https")
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise UnsafeURL("URLs with credentials (user@host) are not allowed")
    host = parts.hostname
    if not host:
        raise UnsafeURL("URL has no host")
    if "%" in host:
        raise UnsafeURL("scoped IPv6 addresses are not allowed")
    try:
        host = host.encode("idna").decode("ascii") if not _is_ip_literal(host) else host
    except UnicodeError:
        raise UnsafeURL("host name is not a valid (IDNA) name") from None
    if port is None:
        port = 443 if scheme == "https" else 80
    if not 0 < port < 65536:
        raise UnsafeURL(f"port {port} is out of range")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, host, port, target


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def vet_url(
    url: str,
    *,
    allow_loopback: bool = False,
    allow_http: bool = False,
    allowed_ports: Iterable[int] | None = (443, 80, 8080, 8443),
    resolver: Resolver = system_resolver,
) -> VettedURL:
    """Parse and resolve ``url``; raise ``UnsafeURL`` naming the rule unless every address is public."""
    scheme, host, port, target = parse_url(url, allow_http=allow_http)
    try:
        raw = list(resolver(host, port))
    except (OSError, UnicodeError) as exc:
        raise UnsafeURL(f"host {host!r} does not resolve ({exc})") from None
    if not raw:
        raise UnsafeURL(f"host {host!r} does not resolve")
    addresses = []
    for text in raw:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            raise UnsafeURL(f"host {host!r} resolved to something that is not an IP address") from None
        problem = address_problem(address, allow_loopback=allow_loopback)
        if problem:
            if _is_ip_literal(host) and ipaddress.ip_address(host) == address:
                raise UnsafeURL(f"refused {host}: {problem}")
            raise UnsafeURL(f"refused {host} (resolves to {address}): {problem}")
        addresses.append(str(address))
    all_loopback = all(any(ipaddress.ip_address(a) in net for net in _LOOPBACK) for a in addresses)
    # Loopback targets exist only when the test-only switch is on; they may use any port.
    if allowed_ports is not None and not (allow_loopback and all_loopback):
        allowed = set(allowed_ports)
        if port not in allowed:
            raise UnsafeURL(f"port {port} is not allowed (allowed: {', '.join(map(str, sorted(allowed)))})")
    return VettedURL(url=url, scheme=scheme, host=host, port=port, target=target, addresses=tuple(addresses))


@dataclass(frozen=True)
class PinnedResponse:
    status_code: int
    headers: httpx2.Headers
    body: bytes  # at most max_response_bytes
    address: str
    elapsed_s: float


def send_pinned(
    vetted: VettedURL,
    *,
    content: bytes,
    headers: dict[str, str],
    timeout_s: float,
    connect_timeout_s: float,
    max_response_bytes: int,
) -> PinnedResponse:
    """POST ``content`` to a vetted address (never re-resolving the host); no redirects followed.

    ``timeout_s`` bounds the whole exchange, from the first connect to the last byte read (every
    vetted address tried included); ``connect_timeout_s`` bounds one connect within it. The body
    is read up to ``max_response_bytes`` or the deadline, whichever comes first: the status
    line is what matters, a truncated body is still a response. Raises
    ``httpx2.TimeoutException`` / ``httpx2.TransportError`` on failure and
    ``guarded.Cancelled`` when a stop was requested (``guarded.cancellable``).
    """
    started = time.monotonic()
    timeout = httpx2.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
    last_error: Exception | None = None
    transport = guarded.guarded_transport(limits=httpx2.Limits(max_connections=1), proxy=None, trust_env=False)
    with guarded.deadline(timeout_s), httpx2.Client(
            transport=transport, timeout=timeout, follow_redirects=False, trust_env=False) as client:
        for address in vetted.addresses:
            request = client.build_request(
                "POST",
                vetted.pinned_url(address),
                content=content,
                headers={**headers, "Host": vetted.host_header},
                extensions={"sni_hostname": vetted.host} if vetted.scheme == "https" else {},
            )
            try:
                response = client.send(request, stream=True)
            except httpx2.ConnectError as exc:  # try the next vetted address
                last_error = exc
                continue
            try:
                body = bytearray()
                for chunk in response.iter_raw():
                    body += chunk
                    if len(body) >= max_response_bytes:
                        break
            except httpx2.TransportError:
                pass  # the deadline or the receiver ended the body; the status line is what matters
            finally:
                response.close()
            return PinnedResponse(
                status_code=response.status_code,
                headers=response.headers,
                body=bytes(body[:max_response_bytes]),
                address=address,
                elapsed_s=time.monotonic() - started,
            )
    assert last_error is not None
    raise last_error
