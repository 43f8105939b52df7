"""The incremental trend refresh writes exactly the points a full refresh does.

Each step below is one "crawl" on a real SQLite store: ``ensure_trends`` brings the trends up to
date incrementally (only the periods the crawl touched), then the stored points are compared,
row for row, with those a full ``refresh_trends`` writes over the same store.
"""

from __future__ import annotations

from dataclasses import replace

import sqlalchemy as sa
from api_testdata import SPECS, Spec, add_model, build

from observatory.crawler.store import update_facts
from observatory.store.db import session_scope
from observatory.store.ingest import upsert_model
from observatory.store.trend_tables import DerivativeStats, TrendPointRow
from observatory.store.trends import ensure_trends, refresh_trends, trends_stale

B = 1_000_000_000
SPEC = {s.id: s for s in SPECS}


def stored_points(engine) -> list[tuple]:
    """Every trend point, without its id and when it was computed, in one order."""
    table = TrendPointRow.__table__
    columns = [c for c in table.c if c.name not in ("id", "computed_at")]
    with engine.connect() as conn:
        rows = conn.execute(sa.select(*columns)).all()
    return sorted(tuple(repr(v) for v in row) for row in rows)


def derivative_stats(engine) -> list[tuple]:
    table = DerivativeStats.__table__
    with engine.connect() as conn:
        return sorted(conn.execute(sa.select(*(c for c in table.c if c.name != "computed_at"))).all())


def incremental_matches_full(engine) -> None:
    """Refresh incrementally and check it against a full refresh."""
    assert trends_stale(engine)
    report = ensure_trends(engine)
    assert report is not None and report.incremental
    assert not trends_stale(engine)  # the next crawl starts from here
    incremental, stats = stored_points(engine), derivative_stats(engine)
    refresh_trends(engine)
    assert stored_points(engine) == incremental
    assert derivative_stats(engine) == stats


def set_downloads(engine, model_id: str, downloads: int | None) -> None:
    with session_scope(engine) as session:
        upsert_model(session, model_id, downloads=downloads)


def test_incremental_refresh_equals_full_refresh_crawl_after_crawl(engine):
    build(engine)
    first = ensure_trends(engine)
    assert first is not None and not first.incremental  # nothing stored yet: the whole of it
    assert ensure_trends(engine) is None

    # A crawl adding models to old periods (one before the first, leaving empty months between)
    # and to new ones (after the last, the same), a derivative of an old base (its family downloads).
    for spec in (Spec("omega/old-mqa", "mqa", (2022, 8, 30), 2_000, 2 * B),
                 Spec("omega/feb-g4", "g4", (2023, 2, 14), 150_000, 9 * B),
                 Spec("omega/new-mla", "mla", (2026, 3, 2), 5_000, 20 * B),
                 Spec("fans/llama-7b-ft", "g4", (2025, 6, 1), 400_000, 7 * B, "finetune", ("alpha/llama-7b",))):
        add_model(engine, spec, sha="c1")
    incremental_matches_full(engine)

    # A crawl that changes a geometry (a new config revision) and crosses download thresholds.
    add_model(engine, replace(SPEC["alpha/tiny"], config="mha"), sha="rev2")
    set_downloads(engine, "beta/coder-1b", 200_000)
    set_downloads(engine, "fans/llama-70b-awq", 7)  # unknown -> known: the base's family downloads
    with session_scope(engine) as session:  # the listing's lineage facts: an original becomes a finetune
        assert update_facts(session, {"alpha/Llama_Chat": (["alpha/llama-7b"], None)}) == 1
    incremental_matches_full(engine)

    # A crawl after which the last model of a series' last period leaves it (its downloads fall
    # under the threshold): the series ends earlier, as a full refresh would have it.
    set_downloads(engine, "omega/new-mla", 10)
    set_downloads(engine, "gamma/next-hybrid", 0)
    incremental_matches_full(engine)

    # ... and the first one of a series' first period.
    set_downloads(engine, "omega/old-mqa", 0)
    incremental_matches_full(engine)


def test_an_untouched_store_is_not_refreshed(engine):
    build(engine)
    refresh_trends(engine)
    before = stored_points(engine)
    add_model(engine, Spec("omega/undated", "g4", None, 10, B), sha="u")  # undated: in no period
    report = ensure_trends(engine)
    assert report.incremental and report.points == 0 and report.models == 0
    assert stored_points(engine) == before and not trends_stale(engine)


def test_a_crawl_into_one_month_reads_only_that_months_models(engine):
    build(engine)
    full = refresh_trends(engine)
    add_model(engine, Spec("omega/sep", "g4", (2025, 9, 10), 10, B), sha="s")  # beside gamma/next-hybrid alone
    report = ensure_trends(engine)
    # Its month, week and quarter each hold the two of them; a full refresh reads every dated model.
    assert report.incremental and report.models == 3 * 2 and full.models == 19
    incremental = stored_points(engine)
    refresh_trends(engine)
    assert stored_points(engine) == incremental
