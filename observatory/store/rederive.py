"""Re-deriving stored geometry after a parser change (``PARSER_VERSION`` went up).

Every config is kept verbatim, so a better parser can redo what an older one derived. This runs
after ``observatory db upgrade`` and, at start-up, in the background (``BackgroundRederive``) so
the first page is served at once, from the figures stored so far; the precomputed trends follow
when it ends. It writes in short transactions of ``BATCH`` revisions, so crawls and readers are not
held up, and a stop request is honoured between batches. Revisions that failed to parse are tried
again (a new rule may read them); one that still fails for the same reason counts as unchanged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from observatory.store.db import read_session, session_scope
from observatory.store.ingest import rederive, stale_revision_ids

BATCH = 500
LOCKED_RETRIES = 8  # each waits the store's busy timeout (15 s on SQLite) for the write lock
STOP_WAIT_S = 30.0  # at shutdown, the longest we wait for the batch in hand to commit
log = logging.getLogger(__name__)


def rederive_stale(engine: Engine, batch: int = BATCH, should_stop: Callable[[], bool] = lambda: False) -> int:
    """Bring every stored geometry to the current parser; returns how many revisions changed.

    ``should_stop`` is asked between batches: what is committed stays, the rest waits for the next start."""
    with read_session(engine) as session:  # the scan reads every revision: never under the write lock
        pending = stale_revision_ids(session)
    done = 0
    for start in range(0, len(pending), batch):
        for attempt in range(LOCKED_RETRIES + 1):
            if should_stop():
                log.info("re-derivation stopped with %d of %d revision(s) left", len(pending) - start, len(pending))
                return _logged(done)
            try:
                with session_scope(engine) as session:
                    done += rederive(session, pending[start:start + batch])
                break
            except OperationalError as exc:
                # Another writer (a crawl) held the lock past the busy timeout: its turn, then ours.
                if "locked" not in str(exc).lower() or attempt == LOCKED_RETRIES:
                    raise
                log.info("re-derivation waits for the write lock (attempt %d of %d)", attempt + 1, LOCKED_RETRIES)
    return _logged(done)


def _logged(done: int) -> int:
    if done:
        log.info("re-derived the geometry of %d stored config revision(s) with the current parser", done)
    return done


class BackgroundRederive:
    """``rederive_stale`` then, when anything changed, a refresh of the precomputed trends, in a daemon
    thread started at start-up. ``done`` is set when it ends; ``changed`` and ``error`` say how."""

    def __init__(self, engine: Engine, batch: int = BATCH):
        self.engine, self.batch = engine, batch
        self.done = threading.Event()
        self.changed: int | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="observatory-rederive", daemon=True)

    def start(self) -> BackgroundRederive:
        self._thread.start()
        return self

    def _run(self) -> None:
        from observatory.store.trends import ensure_trends

        try:
            self.changed = rederive_stale(self.engine, self.batch, self._stop.is_set)
            if self.changed and not self._stop.is_set():
                ensure_trends(self.engine)  # the trend pages and headlines follow the new figures
        except Exception as exc:  # noqa: BLE001 - the site keeps serving; the next start tries again
            self.error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("background re-derivation failed: %s", self.error)
        finally:
            self.done.set()

    def stop(self, timeout: float = STOP_WAIT_S) -> bool:
        """Ask it to stop after the batch in hand and wait at most ``timeout``; True when it ended."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()
