"""How many exports run at once: a cap per client network and one over all clients.

Issue 21: twenty concurrent CSV exports held every connection of the pool, and the site then
answered plain-text 500s and 30 s JSON pages. Exports are bounded pages now (or a prebuilt
file), and on top of that at most ``per_client`` of them run at once per client network
(``alerts.limits.client_network``: an IPv4 address, an IPv6 /64) and ``overall`` in this
process; past either cap the answer is a 429 with ``Retry-After`` in the error shape, before
any query runs. Counted per process: each web worker has its own share of connections too.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from starlette.exceptions import HTTPException as StarletteHTTPException

from observatory.alerts.limits import client_network

RETRY_AFTER_S = 2  # an export page takes well under a second when the machine is not overloaded


class ExportSlots:
    def __init__(self, *, per_client: int, overall: int) -> None:
        self.per_client, self.overall = max(1, per_client), max(1, overall)
        self._lock = threading.Lock()
        self._running: Counter[str] = Counter()
        self._total = 0

    def take(self, client: str | None) -> str:
        """Take a slot for ``client`` or raise the 429; returns the key to ``give_back``."""
        key = client_network(client or "unknown")
        with self._lock:
            if self._total >= self.overall:
                raise _busy(f"too many exports running ({self.overall} at once over all clients); "
                            f"try again in {RETRY_AFTER_S} s")
            if self._running[key] >= self.per_client:
                raise _busy(f"too many exports running from this address ({self.per_client} at once); "
                            f"try again in {RETRY_AFTER_S} s")
            self._running[key] += 1
            self._total += 1
        return key

    def give_back(self, key: str) -> None:
        with self._lock:
            self._running[key] -= 1
            if self._running[key] <= 0:
                del self._running[key]
            self._total -= 1

    @contextmanager
    def hold(self, client: str | None) -> Iterator[None]:
        key = self.take(client)
        try:
            yield
        finally:
            self.give_back(key)

    @property
    def running(self) -> int:
        return self._total


def _busy(message: str) -> StarletteHTTPException:
    return StarletteHTTPException(429, message, headers={"Retry-After": str(RETRY_AFTER_S)})


def export_slots(app) -> ExportSlots:
    """The app's slots, made on first use from its settings."""
    slots = getattr(app.state, "export_slots", None)
    if slots is None:
        settings = app.state.settings
        slots = app.state.export_slots = ExportSlots(per_client=settings.api_export_per_client,
                                                     overall=settings.api_export_concurrency)
    return slots
