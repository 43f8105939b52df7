"""Re-deriving stored geometry after a parser change (``PARSER_VERSION`` went up).

Every config is kept verbatim, so a better parser can redo what an older one derived. This runs
at start-up and after ``observatory db upgrade``, in short write transactions of ``BATCH``
revisions, so crawls and readers are not held up. Revisions that failed to parse are tried again
(a new rule may read them); one that still fails for the same reason counts as unchanged.
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine

from observatory.store.db import read_session, session_scope
from observatory.store.ingest import rederive, stale_revision_ids

BATCH = 500
log = logging.getLogger(__name__)


def rederive_stale(engine: Engine, batch: int = BATCH) -> int:
    """Bring every stored geometry to the current parser; returns how many revisions changed."""
    with read_session(engine) as session:  # the scan reads every revision: never under the write lock
        pending = stale_revision_ids(session)
    done = 0
    for start in range(0, len(pending), batch):
        with session_scope(engine) as session:
            done += rederive(session, pending[start:start + batch])
    if done:
        log.info("re-derived the geometry of %d stored config revision(s) with the current parser", done)
    return done
