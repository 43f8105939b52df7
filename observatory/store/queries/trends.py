"""Reading trend series: a range read of ``trend_point`` for a standard population, else the same
aggregation run on the population's rows (``store.trends`` writes the precomputed ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

import sqlalchemy as sa
from sqlmodel import Session

from observatory.core.trends import (
    PERIODS,
    WEIGHTINGS,
    TrendPoint,
    TrendRow,
    default_period,
    period_start,
    trend_series,
)
from observatory.store.tables import GeometryRow, HubModel
from observatory.store.trend_tables import TrendPointRow
from observatory.store.trends import (
    UNCERTAIN,
    Population,
    from_record,
    load_trend_columns,
    trend_rows_query,
)


@dataclass
class TrendSeries:
    population: Population
    period: str
    weighting: str
    precomputed: bool  # read from trend_point (else aggregated for this request)
    computed_at: datetime | None  # when the precomputed rows were written
    points: list[TrendPoint] = field(default_factory=list)



def choose_period(session: Session, population: Population) -> str:
    """The default period of a population's charts (``core.trends.default_period``)."""
    months = read_trends(session, population, "month", "count").points
    return default_period([p.count for p in months])


def read_trends(
    session: Session,
    population: Population = Population(),
    period: str = "month",
    weighting: str = "count",
    since: date | None = None,
    until: date | None = None,
) -> TrendSeries:
    """One series, oldest period first, limited to periods overlapping ``since``..``until``.

    Standard populations read the precomputed points; any other population (an organisation,
    an architecture family, another download threshold) is aggregated for this call from its
    rows, which the indexes on author, model_type and downloads keep proportional to its size.
    If a standard series has never been refreshed it is computed the same way.
    """
    if period not in PERIODS:
        raise ValueError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {weighting!r}; expected one of {', '.join(WEIGHTINGS)}")
    if population.precomputed:
        stored = _stored_series(session, population.key, period, weighting)
        if stored is not None:
            computed_at, points = stored
            return TrendSeries(population, period, weighting, True, computed_at, _between(points, period, since, until))
    points = trend_series(load_trend_columns(session, population), period, (weighting,))[weighting]
    return TrendSeries(population, period, weighting, False, None, _between(points, period, since, until))


# (population key, period, weighting) -> (computed_at, points). A refresh rewrites every row with
# a new computed_at, so one indexed probe of it tells whether a cached series is still current,
# in this process or after a refresh by another (the crawler's).
_SERIES_CACHE: OrderedDict[tuple[str, str, str], tuple[datetime, list[TrendPoint]]] = OrderedDict()
_SERIES_CACHE_SIZE = 64
_cache_lock = threading.Lock()


def _stored_series(session: Session, key: str, period: str, weighting: str) -> tuple[datetime, list[TrendPoint]] | None:
    t = TrendPointRow.__table__.c
    where = (t.period_kind == period, t.population == key, t.weighting == weighting)
    computed_at = session.execute(sa.select(t.computed_at).where(*where).limit(1)).scalar()
    if computed_at is None:
        # A refresh writes every standard series that has a model; one without rows after a
        # refresh is an empty population, not a series still to compute.
        refreshed = session.execute(sa.select(t.computed_at).limit(1)).scalar()
        return None if refreshed is None else (refreshed, [])
    cache_key = (key, period, weighting)
    with _cache_lock:
        cached = _SERIES_CACHE.get(cache_key)
        if cached is not None and cached[0] == computed_at:
            _SERIES_CACHE.move_to_end(cache_key)
            return cached
    # plain rows: a few times cheaper than ORM objects
    rows = session.execute(sa.select(*TrendPointRow.__table__.columns).where(*where).order_by(t.period_start)).all()
    if not rows:
        return None
    entry = (max(r.computed_at for r in rows), [from_record(r) for r in rows])
    with _cache_lock:
        _SERIES_CACHE[cache_key] = entry
        _SERIES_CACHE.move_to_end(cache_key)
        while len(_SERIES_CACHE) > _SERIES_CACHE_SIZE:
            _SERIES_CACHE.popitem(last=False)
    return entry


def _between(points: list[TrendPoint], period: str, since: date | None, until: date | None) -> list[TrendPoint]:
    """Points whose period overlaps [since, until]."""
    first = period_start(since, period) if since is not None else None
    return [p for p in points
            if (first is None or p.period_start >= first) and (until is None or p.period_start <= until)]


def plotted_trend_rows(
    session: Session,
    population: Population = Population(),
    limit: int = 3000,
    since: date | None = None,
    until: date | None = None,
) -> tuple[list[TrendRow], int]:
    """Up to ``limit`` of the population's dated models for a per-model chart, most downloaded
    first, and how many there are in all. ``since``/``until`` are inclusive UTC days.

    The total comes from the precomputed monthly counts when no date bound is given (exact:
    every dated model is in one month), else from a count query.
    """
    query = trend_rows_query(population)
    m, g = HubModel.__table__.c, GeometryRow.__table__.c
    # The models the series count: encoder-only and uncertain geometries are counted apart there
    # (core.trends), so they are no points here either, and the total equals the series' counts.
    query = query.where(g.encoder_only.is_not(sa.true()), UNCERTAIN.is_not(sa.true()))
    if since is not None:
        query = query.where(m.created_at >= datetime.combine(since, datetime.min.time(), tzinfo=timezone.utc))
    if until is not None and until < date.max:  # the calendar's last day bounds nothing (no day after)
        query = query.where(m.created_at < datetime.combine(until + timedelta(days=1), datetime.min.time(),
                                                            tzinfo=timezone.utc))
    rows = [TrendRow(*row) for row in session.execute(query.order_by(m.downloads.desc().nulls_last(), m.id).limit(limit))]
    if len(rows) < limit:
        return rows, len(rows)
    total = None
    if since is None and until is None and population.precomputed:
        series = read_trends(session, population, "month", "count")
        if series.precomputed:
            total = sum(p.count for p in series.points)
    if total is None:
        total = session.execute(sa.select(sa.func.count()).select_from(query.order_by(None).subquery())).scalar_one()
    return rows, total
