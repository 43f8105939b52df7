"""A parser bump re-derives the stored geometry at start-up behind the first page: the site answers
while another writer holds the store's write lock (so re-derivation cannot have run), and the
geometry and the trends follow once the lock is released."""

from __future__ import annotations

import json
import sqlite3

from fastapi.testclient import TestClient
from sqlmodel import select

from observatory.core.geometry import PARSER_VERSION
from observatory.store.db import read_session, session_scope
from observatory.store.ingest import record_config, upsert_model
from observatory.store.tables import GeometryRow
from observatory.store.trends import ensure_trends

LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "num_hidden_layers": 32}
BOUND_S = 60  # the longest the test waits for the background work; a bound, not a timing assertion


def _versions(engine) -> set[int]:
    with read_session(engine) as s:  # a reader: never waits for the write lock
        return {r.parser_version for r in s.exec(select(GeometryRow))}


def test_first_page_is_served_before_rederivation_and_the_store_follows(settings, engine):
    from observatory.web.app import create_app

    settings = settings.model_copy(update={"autoload_snapshot": True, "scheduler_enabled": False})
    app = create_app(settings)
    with TestClient(app):  # a first start: migrations, the snapshot, trends, the alert rules evaluated once
        pass
    with session_scope(engine) as s:  # three revisions as an older parser left them: stale, with a wrong K
        rows = s.exec(select(GeometryRow).where(GeometryRow.attention_kind == "GQA").limit(3)).all()
        kv_heads = {r.revision_id: r.num_kv_heads for r in rows}
        for row in rows:
            row.parser_version, row.num_kv_heads = PARSER_VERSION - 1, 999
    assert len(kv_heads) == 3 and not ensure_trends(engine)  # nothing else is due at the next start

    # Another writer holds the write lock for the whole start: nothing can be re-derived meanwhile.
    path = settings.resolved_database_url.removeprefix("sqlite:///")
    blocker = sqlite3.connect(path, isolation_level=None, timeout=1)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        # As `observatory serve` runs its workers: start-up work beside serving, not before it.
        app = create_app(settings.model_copy(update={"startup_blocking": False}))
        with TestClient(app) as client:
            assert client.get("/").status_code == 200  # the first page does not wait for the parser
            background = app.state.startup
            assert background.results is None and PARSER_VERSION - 1 in _versions(engine)
            blocker.execute("ROLLBACK")  # the start-up work, waiting for the lock, goes on
            assert background.join(BOUND_S)
            assert background.results["rederive"] == "ok" and background.results["trends"] == "ok"
            assert _versions(engine) == {PARSER_VERSION}
            with read_session(engine) as s:
                assert {r.revision_id: r.num_kv_heads for r in s.exec(select(GeometryRow).where(
                    GeometryRow.revision_id.in_(kv_heads)))} == kv_heads  # the parser's K again, not the stale 999
            from observatory.store.trends import trends_stale

            assert not trends_stale(engine)  # the trends were refreshed after the new figures
    finally:
        if blocker.in_transaction:
            blocker.execute("ROLLBACK")
        blocker.close()


def test_stop_is_honoured_between_batches(engine):
    from observatory.store.rederive import rederive_stale

    with session_scope(engine) as s:
        for i in range(3):
            upsert_model(s, f"org/m{i}")
            record_config(s, f"org/m{i}", json.dumps(LLAMA), str(i) * 40)
        for row in s.exec(select(GeometryRow)):
            row.parser_version = 0
    asked = []

    def stop_after_one_batch() -> bool:
        asked.append(1)
        return len(asked) > 1

    assert rederive_stale(engine, batch=1, should_stop=stop_after_one_batch) == 1
    assert sorted(_versions(engine)) == [0, PARSER_VERSION]
    assert rederive_stale(engine, batch=1) == 2  # the next start finishes the rest

