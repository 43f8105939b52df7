"""Re-deriving stored geometry after a parser change (``PARSER_VERSION`` went up).

Every config is kept verbatim, so a better parser can redo what an older one derived. This runs
after ``observatory db upgrade`` and, at start-up, in the background (``web.startup``, under the start-up lease) so
the first page is served at once, from the figures stored so far; the precomputed trends follow
when it ends. It writes in short transactions of ``BATCH`` revisions, so crawls and readers are not
held up, and a stop request is honoured between batches. Revisions that failed to parse are tried
again (a new rule may read them); one that still fails for the same reason counts as unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from observatory.store.db import read_session, session_scope
from observatory.store.ingest import rederive, stale_revision_ids

BATCH = 500
LOCKED_RETRIES = 8  # each waits the store's busy timeout (15 s on SQLite) for the write lock
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
