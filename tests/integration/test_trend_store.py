"""Precomputed trends on a real store: refresh, staleness, config changes, plotted rows."""

from __future__ import annotations

from datetime import date

from api_testdata import SPECS, Spec, add_model, build
from sqlmodel import Session

from observatory.store.queries.trends import plotted_trend_rows, read_trends
from observatory.store.trends import (
    Population,
    ensure_trends,
    refresh_trends,
    trends_stale,
)

ALL = Population("all")


def month(engine, when: date, weighting="count", population=ALL):
    with Session(engine) as session:
        series = read_trends(session, population, "month", weighting)
    return next(p for p in series.points if p.period_start == when)


def test_refresh_writes_every_standard_series(engine):
    build(engine)
    report = refresh_trends(engine)
    dated_with_geometry = [s for s in SPECS if s.created and s.config != "broken"]
    assert report.models == len(dated_with_geometry)
    with Session(engine) as session:
        for population in (ALL, Population("all", min_downloads=1000), Population("all", min_downloads=100_000),
                           Population(), Population("derivatives")):
            for period in ("month", "week", "quarter"):
                series = read_trends(session, population, period, "downloads")
                assert series.precomputed and series.points, population
        total = sum(p.count for p in read_trends(session, ALL, "quarter", "count").points)
        big = sum(p.count for p in read_trends(session, Population("all", min_downloads=100_000), "quarter").points)
    assert total == len(dated_with_geometry)
    assert big == sum(1 for s in dated_with_geometry if (s.downloads or 0) >= 100_000)


def test_a_changed_config_moves_its_model_and_counts_once(engine):
    build(engine)
    refresh_trends(engine)
    sept = date(2024, 9, 1)
    before = month(engine, sept)  # alpha/tiny (G 8), gamma/qwen-72b (G 8), solo-model (G 8)
    assert before.count == 3 and before.shares["GQA"] == 1 and before.g_median == 8
    add_model(engine, Spec("alpha/tiny", "mha", (2024, 9, 25), 0, 10**9), sha="rev2")
    assert trends_stale(engine)
    refresh_trends(engine)
    after = month(engine, sept)
    assert after.count == 3  # the old revision is not counted as well
    assert after.shares["MHA"] == 1 / 3 and after.shares["GQA"] == 2 / 3
    assert after.g_p25 == 1  # G = [1, 8, 8]: q=.25 target .75 -> 1


def test_staleness(engine):
    assert not trends_stale(engine)  # empty store: nothing to do
    assert ensure_trends(engine) is None
    build(engine)
    assert trends_stale(engine)
    assert ensure_trends(engine).models > 0
    assert not trends_stale(engine) and ensure_trends(engine) is None
    add_model(engine, Spec("omega/new", "g4", (2025, 10, 1), 5), sha="r")
    assert trends_stale(engine)


def test_readers_see_old_points_until_refresh_commits(engine):
    build(engine)
    refresh_trends(engine)
    add_model(engine, Spec("omega/late", "g4", (2023, 2, 3), 5), sha="r")
    assert month(engine, date(2023, 2, 1)).count == 2  # precomputed: not yet refreshed
    refresh_trends(engine)
    assert month(engine, date(2023, 2, 1)).count == 3


def test_plotted_rows_most_downloaded_first(engine):
    build(engine)
    refresh_trends(engine)
    with Session(engine) as session:
        rows, total = plotted_trend_rows(session, ALL, limit=3)
        assert [r.model_id for r in rows] == ["gamma/latent-v3", "alpha/llama-70b", "alpha/Llama_Chat"]
        assert total == 19  # dated models with a geometry
        rows, total = plotted_trend_rows(session, Population("all", author="alpha"), limit=2,
                                         since=date(2023, 2, 1), until=date(2023, 12, 31))
        assert [r.model_id for r in rows] == ["alpha/Llama_Chat", "alpha/llama-13b"] and total == 3
        rows, total = plotted_trend_rows(session, Population("all", author="Gamma"), limit=100)  # any case
        assert total == len(rows) == 5


def test_derivative_stats_of_more_bases_than_sqlite_binds_in_one_statement(engine):
    """A million-model store names hundreds of thousands of bases, more than SQLite binds in one
    statement (999 before 3.32, 32,766 by default since, 250,000 as Debian builds it): the lookup of
    which bases we hold goes in batches. Here the connection is held to the old limit of 999."""
    import sqlite3

    import sqlalchemy as sa

    from observatory.store.tables import HubModel, utcnow
    from observatory.store.trend_tables import DerivativeStats
    from observatory.store.trends import refresh_derivative_stats

    n, now = 2_500, utcnow()
    common = {"source": "hub", "first_seen_at": now, "updated_at": now, "tags": [], "is_test_repo": False}
    bases = [{"id": f"lab/base-{i}", "relation": "original", **common} for i in range(n)]
    tunes = [{"id": f"fan/tune-{i}", "relation": "finetune", "base_models": [f"lab/base-{i}"], "downloads": i,
              **common} for i in range(n)]
    orphan = {"id": "fan/tune-of-unknown", "relation": "quantized", "base_models": ["gone/base"], **common}
    with Session(engine) as session:
        session.connection().connection.dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        for rows in (bases, tunes, [orphan]):
            session.execute(sa.insert(HubModel), rows)
        assert len(refresh_derivative_stats(session, now)) == n  # the base we do not hold is left out
        session.commit()
        stats = {s.model_id: s for s in session.exec(sa.select(DerivativeStats)).scalars()}
    assert len(stats) == n and "gone/base" not in stats
    assert (stats["lab/base-7"].finetune, stats["lab/base-7"].downloads, stats["lab/base-7"].downloads_unknown) == (1, 7, 0)
