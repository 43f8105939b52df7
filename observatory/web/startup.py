"""A worker's start-up work on its store, once per store rather than once per worker.

The steps (the bundled snapshot into an empty store, re-derivation after a parser change, the
precomputed trends, the alert evaluation a never-evaluated store gets) run under the ``startup``
lease (``store.lease``): of several workers starting together, one does them and the others
serve at once. A lock held by another writer (a crawl, the other worker) is never an error: the
step is skipped with one log line and the next start, or the next crawl, does it. Steps check a
stop event between them, and each is a bounded batch job, so a SIGTERM during start-up is
honoured within one step.

``Settings.startup_blocking`` (the default, and what tests and in-process apps get) finishes the
work before the first request; ``observatory serve`` runs it in a background thread so the first
page is served at once and uvicorn's signal handling stays live.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from observatory.settings import Settings
from observatory.store import lease

LEASE_NAME = "startup"
LEASE_TTL_S = 600.0  # renewed between steps; a holder that dies frees it (dead pid, or one TTL)
log = logging.getLogger(__name__)


def _snapshot(engine: Engine, settings: Settings) -> None:
    from observatory.catalog.snapshot import ensure_snapshot

    ensure_snapshot(engine, settings)


def _rederive(engine: Engine, settings: Settings) -> None:
    from observatory.store.rederive import rederive_stale

    rederive_stale(engine)  # a newer parser re-derives what an older one stored


def _trends(engine: Engine, settings: Settings) -> None:
    from observatory.store.trends import ensure_trends

    ensure_trends(engine)  # recompute the precomputed trends if the store changed since


def _alerts(engine: Engine, settings: Settings) -> None:
    from observatory.alerts.evaluate import evaluate_at_start

    evaluate_at_start(engine, settings)  # /alerts shows the rules and their state from the first view


STEPS: tuple[tuple[str, Callable[[Engine, Settings], None]], ...] = (
    ("snapshot", _snapshot), ("rederive", _rederive), ("trends", _trends), ("alerts", _alerts))


def run_startup(engine: Engine, settings: Settings, stop: threading.Event | None = None) -> dict[str, str]:
    """Run the steps under the start-up lease; returns {step: "ok" | "skipped: …" | error text},
    or {"lease": "held by another worker"} when another process is doing them."""
    stop = stop or threading.Event()
    holder = lease.new_holder()
    try:
        if not lease.acquire(engine, LEASE_NAME, holder, LEASE_TTL_S):
            log.info("start-up work: another worker holds the %s lease and does it", LEASE_NAME)
            return {"lease": "held by another worker"}
    except OperationalError as exc:  # the store is write-locked for longer than the busy timeout
        log.info("start-up work skipped: the store is busy (%s); the next start or crawl does it", exc.orig)
        return {"lease": f"skipped: {exc.orig}"}
    results: dict[str, str] = {}
    try:
        for name, step in STEPS:
            if stop.is_set():
                results[name] = "skipped: stopping"
                continue
            try:
                step(engine, settings)
                results[name] = "ok"
            except OperationalError as exc:
                log.info("start-up step %s skipped: the store is busy (%s)", name, exc.orig)
                results[name] = f"skipped: {exc.orig}"
            except Exception as exc:  # noqa: BLE001 - the site starts whatever one step does
                log.warning("start-up step %s failed: %s: %s", name, type(exc).__name__, exc)
                results[name] = f"{type(exc).__name__}: {exc}"
            try:
                lease.renew(engine, LEASE_NAME, holder, LEASE_TTL_S)
            except OperationalError:
                pass  # renewed after the next step, or it lapses after one TTL
    finally:
        try:
            lease.release(engine, LEASE_NAME, holder)
        except OperationalError:
            pass  # it lapses: the holder's pid is gone once this process exits
    return results


class StartupThread:
    """``run_startup`` in a daemon thread; ``stop()`` asks it to finish after the current step."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self._stop = threading.Event()
        self.results: dict[str, str] | None = None
        self._thread = threading.Thread(target=self._run, args=(engine, settings), name="observatory-startup",
                                        daemon=True)

    def _run(self, engine: Engine, settings: Settings) -> None:
        self.results = run_startup(engine, settings, self._stop)

    def start(self) -> StartupThread:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
