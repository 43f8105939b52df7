"""A worker's start-up work on its store, once per store rather than once per worker.

The steps (the bundled snapshot into an empty store, re-derivation after a parser change, the
precomputed trends, the alert evaluation a never-evaluated store gets) run under the ``startup``
lease (``store.lease``): of several workers starting together, one does them and the others
serve at once. A lock held by another writer (a crawl, the other worker) is never an error: taking
the lease waits for it a bounded number of times (``LOCKED_RETRIES``), then the work is skipped with
one log line and the next start, or the next crawl, does it. Steps check a stop event between them,
re-derivation between its batches too, so a SIGTERM during start-up is honoured within one batch.
Whether a step is due is asked again just before it runs: re-derivation makes the trends due.

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
from observatory.store.rederive import LOCKED_RETRIES

LEASE_NAME = "startup"
STOP_WAIT_S = 30.0  # at shutdown, the longest we wait for the batch in hand to commit
LEASE_TTL_S = 600.0  # renewed between steps; a holder that dies frees it (dead pid, or one TTL)
log = logging.getLogger(__name__)


def _snapshot(engine: Engine, settings: Settings, stop: threading.Event) -> None:
    from observatory.catalog.snapshot import ensure_snapshot

    ensure_snapshot(engine, settings)


def _snapshot_due(engine: Engine, settings: Settings) -> bool:
    from observatory.catalog.snapshot import has_models

    return settings.autoload_snapshot and not has_models(engine)


def _rederive(engine: Engine, settings: Settings, stop: threading.Event) -> None:
    from observatory.store.rederive import rederive_stale

    rederive_stale(engine, should_stop=stop.is_set)  # a newer parser re-derives what an older one stored


def _rederive_due(engine: Engine, settings: Settings) -> bool:
    from observatory.store.db import read_session
    from observatory.store.ingest import stale_revision_ids

    with read_session(engine) as session:
        return bool(stale_revision_ids(session))


def _trends(engine: Engine, settings: Settings, stop: threading.Event) -> None:
    from observatory.store.trends import ensure_trends

    ensure_trends(engine)  # recompute the precomputed trends if the store changed since


def _trends_due(engine: Engine, settings: Settings) -> bool:
    from observatory.store.trends import trends_stale

    return trends_stale(engine)


def _alerts(engine: Engine, settings: Settings, stop: threading.Event) -> None:
    from observatory.alerts.evaluate import evaluate_at_start

    evaluate_at_start(engine, settings)  # /alerts shows the rules and their state from the first view


def _alerts_due(engine: Engine, settings: Settings) -> bool:
    from observatory.alerts.evaluate import never_evaluated

    return never_evaluated(engine)


Check = Callable[[Engine, Settings], bool]
Step = Callable[[Engine, Settings, threading.Event], object]
# (name, is there work? (reads only, indexed), the work), in the order they must run.
STEPS: tuple[tuple[str, Check, Step], ...] = (
    ("snapshot", _snapshot_due, _snapshot), ("rederive", _rederive_due, _rederive),
    ("trends", _trends_due, _trends), ("alerts", _alerts_due, _alerts))


def run_startup(engine: Engine, settings: Settings, stop: threading.Event | None = None,
                locked_retries: int = LOCKED_RETRIES) -> dict[str, str]:
    """Run the steps that have work under the start-up lease; returns {step: "ok" | "skipped: …" |
    error text}, {} when none has work, or {"lease": …} when another process holds the lease or
    the store is write-locked."""
    stop = stop or threading.Event()
    # Reads alone find the work: a store that is up to date is never written to at start-up (not
    # even the lease), so a worker starting beside a crawl's write transaction never waits for it.
    due = []
    for name, is_due, _ in STEPS:
        try:
            if is_due(engine, settings):
                due.append(name)
        except OperationalError as exc:
            log.info("start-up check %s skipped: the store is busy (%s)", name, exc.orig)
    if not due:
        return {}
    holder = lease.new_holder()
    for attempt in range(locked_retries + 1):
        try:
            if not lease.acquire(engine, LEASE_NAME, holder, LEASE_TTL_S):
                log.info("start-up work: another worker holds the %s lease and does it", LEASE_NAME)
                return {"lease": "held by another worker"}
            break
        except OperationalError as exc:  # the store is write-locked for longer than the busy timeout
            if stop.is_set() or attempt == locked_retries:
                log.info("start-up work skipped: the store is busy (%s); the next start or crawl does it", exc.orig)
                return {"lease": f"skipped: {exc.orig}"}
            log.info("start-up work waits for the write lock (attempt %d of %d)", attempt + 1, locked_retries)
    results: dict[str, str] = {}
    try:
        for name, is_due, step in STEPS:
            if stop.is_set():
                results[name] = "skipped: stopping"
                continue
            try:
                if name not in due and not is_due(engine, settings):
                    continue
                step(engine, settings, stop)
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

    def stop(self, timeout: float = STOP_WAIT_S) -> bool:
        """Ask it to finish after the step (or re-derivation batch) in hand; wait at most ``timeout``."""
        self._stop.set()
        return self.join(timeout)
