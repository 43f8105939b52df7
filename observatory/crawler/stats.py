"""Refreshing downloads and likes of popular models, on a slower schedule than the crawl.

Download-weighted trends need current counts, but re-reading every stored model would cost one
API request each. The Hub lists models by downloads, most first, so one listing of the
top ``stats_refresh_top_n`` (a few pages) refreshes every popular model we track at once;
models outside the top keep the counts they were crawled with.
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from observatory.core.repo_ids import is_valid_repo_id
from observatory.crawler import store
from observatory.hub import session as hub_session
from observatory.hub.listing import LISTING_FAILURES, list_newest
from observatory.settings import Settings
from observatory.store.db import session_scope
from observatory.store.tables import HubModel, utcnow

log = logging.getLogger(__name__)
CHUNK = 500


def refresh_popular(engine: Engine, settings: Settings) -> dict:
    """Update downloads/likes of stored models among the most downloaded; returns counts.

    An unreachable Hub, a rate limit and a stop request raise (the scheduler reports them in
    one line); other Hub failures end the refresh with what was read so far and an ``error``.
    """
    hub_session.configure(settings)
    listed = updated = 0
    now = utcnow()
    error = None
    with hub_session.counting() as counter:
        # No limit= (it would also be sent as the page size); the lazy listing stops when we do.
        items = list_newest(settings, "downloads", expand=["downloads", "likes", "baseModels", "safetensors"])
        chunk = []
        try:
            for item in items:
                chunk.append(item)
                listed += 1
                if len(chunk) >= CHUNK or listed >= settings.stats_refresh_top_n:
                    updated += _apply(engine, chunk, now)
                    chunk = []
                if listed >= settings.stats_refresh_top_n:
                    break
        except LISTING_FAILURES as exc:  # what was read is kept; the next refresh reads it all again
            error = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
            log.warning("stats refresh stopped: %s", error)
        updated += _apply(engine, chunk, now)
    result = {"listed": listed, "updated": updated, "requests": counter.total, "error": error}
    log.info("stats refresh: %s", result)
    return result


def _apply(engine: Engine, chunk: list, now) -> int:
    ids = [item.id for item in chunk if is_valid_repo_id(item.id)]
    if not ids:
        return 0
    with session_scope(engine) as session:
        models = {m.id: m for m in session.exec(select(HubModel).where(col(HubModel.id).in_(ids)))}
        for item in chunk:
            model = models.get(item.id)
            if model is not None:
                model.downloads, model.likes, model.stats_refreshed_at = item.downloads, item.likes, now
        session.flush()
        # Popular models stored before the listing carried lineage get it here, with no config fetched.
        store.update_facts(session, {item.id: item.facts for item in chunk if item.id in models})
    return len(models)
