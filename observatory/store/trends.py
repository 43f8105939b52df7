"""Trend precomputation: the standard series written to ``trend_point``, and the populations they count.

``refresh_trends(engine)`` recomputes every standard series from the current geometry of every
model (``hub_model.current_revision_id``), so a config that changes moves its model to its new
kind/G at the next refresh and never counts twice. ``ensure_trends`` runs after each crawl
(``pipeline.after_crawl``) and at start-up when the store changed since the last refresh: the
first time it is a full refresh, afterwards ``refresh_trends_since`` recomputes only the periods
of the models that changed (``touched_days``) and writes the same points a full refresh would. Reading a series is ``store.queries.trends.read_trends``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from observatory.core.trends import (
    ATTENTION_KINDS,
    DERIVED_RELATIONS,
    ORIGINALS_MIN_PARAMS,
    PERIODS,
    POPULATIONS,
    SIZE_CLASSES,
    STACKS,
    WEIGHTINGS,
    SizeClassStat,
    TrendColumns,
    TrendPoint,
    TrendRow,
    code_start,
    day_ordinals,
    next_period,
    period_codes,
    period_points,
    population_mask,
    trend_series,
)
from observatory.store.db import batches, read_only, session_scope
from observatory.store.oracle_tables import OracleCheck, disagrees
from observatory.store.tables import GeometryRow, HubModel, utcnow
from observatory.store.trend_tables import DerivativeStats, TrendPointRow

# Download thresholds whose series are precomputed; other thresholds are computed on demand.
STANDARD_THRESHOLDS = (0, 1000, 100_000)


@dataclass(frozen=True)
class Population:
    """Which models a series counts: a lineage population (``originals``, ``all`` or
    ``derivatives``; see ``core.trends``) with at least ``min_params`` parameters (None: the
    lineage's default, 1e9 for originals and no floor otherwise), at least ``min_downloads``
    downloads, optionally one organisation (``author``, any case) and/or one architecture family
    (``model_type``)."""

    lineage: str = "originals"
    min_params: float | None = None
    min_downloads: int = 0
    author: str | None = None
    model_type: str | None = None

    def __post_init__(self) -> None:
        if self.lineage not in POPULATIONS:
            raise ValueError(f"unknown population {self.lineage!r}; expected one of {', '.join(POPULATIONS)}")

    @property
    def params_floor(self) -> float | None:
        if self.min_params is not None:
            return self.min_params or None
        return ORIGINALS_MIN_PARAMS if self.lineage == "originals" else None

    @property
    def key(self) -> str:
        parts = [self.lineage]
        if self.min_params is not None:
            parts.append(f"min_params={self.min_params:g}")
        if self.min_downloads:
            parts.append(f"min_downloads={self.min_downloads}")
        if self.author is not None:
            parts.append(f"author={self.author}")
        if self.model_type is not None:
            parts.append(f"model_type={self.model_type}")
        return ";".join(parts)

    @property
    def precomputed(self) -> bool:
        return (self.author is None and self.model_type is None and self.min_params is None
                and self.min_downloads in STANDARD_THRESHOLDS)


@dataclass(frozen=True)
class RefreshReport:
    models: int  # models read to compute the points (all dated models on a full refresh)
    points: int  # trend points written
    seconds: float
    incremental: bool = False


_M, _G = HubModel.__table__.c, GeometryRow.__table__.c
_D = DerivativeStats.__table__.c
# Parameters as disclosed (safetensors total, published figure), else the config estimate.
PARAMS = sa.func.coalesce(_M.num_parameters, _G.params_estimate)
# Uncertain geometry: an unknown layer type counted as a full layer, or the oracle disagrees with it.
UNCERTAIN = sa.or_(_G.uncertain, disagrees(_G.revision_id))
# Own downloads plus the derivatives'; unknown when the model's own count is unknown.
FAMILY_DOWNLOADS = _M.downloads + sa.func.coalesce(_D.downloads, 0)
_ROW_COLUMNS = (_M.id, _M.author, _G.model_type, _M.created_at, _G.attention_kind, _G.is_hybrid, _G.group_size,
                _G.kv_bytes_per_token_bf16, PARAMS, _M.downloads, _G.encoder_only, UNCERTAIN, _M.relation,
                _M.is_test_repo, FAMILY_DOWNLOADS, _G.kv_tp_max)  # TrendRow's fields, in order
# date(): "YYYY-MM-DD" text from SQLite, a date from PostgreSQL
_COLUMN_COLUMNS = (sa.func.date(_M.created_at), *_ROW_COLUMNS[4:])


def dated_so_far(created_at) -> sa.ColumnElement[bool]:
    """Models that count in a period: dated, and not after now. A period that has not happened has
    no trend, and a listing can date a repo in the future (it is stored as listed)."""
    return sa.and_(created_at.is_not(None), created_at <= utcnow())


def trend_rows_query(population: Population, columns=_ROW_COLUMNS) -> sa.Select:
    m, g = _M, _G
    query = (
        sa.select(*columns)
        .select_from(HubModel.__table__)
        .join(GeometryRow.__table__, g.revision_id == m.current_revision_id)
        .outerjoin(DerivativeStats.__table__, _D.model_id == m.id)
        .where(dated_so_far(m.created_at))
    )
    if population.min_downloads:
        query = query.where(m.downloads >= population.min_downloads)
    if population.author is not None:
        query = query.where(m.author_key == population.author.lower())  # any case, as on the Hub
    if population.model_type is not None:
        query = query.where(g.model_type == population.model_type)
    if population.lineage == "originals":
        query = query.where(m.relation == "original", m.is_test_repo.is_(sa.false()))
    elif population.lineage == "derivatives":
        query = query.where(m.relation.in_(DERIVED_RELATIONS))
    if population.params_floor:
        query = query.where(PARAMS >= population.params_floor)
    return query


def load_trend_rows(conn: Connection | Session, population: Population = Population()) -> list[TrendRow]:
    """The population's models with their current geometry, as plain rows."""
    result = conn.execute(trend_rows_query(population))
    return [TrendRow(*row) for row in result]


def load_trend_columns(conn: Connection | Session, population: Population = Population(lineage="all")) -> TrendColumns:
    """The population's dated models as columns, read without building a Python object per
    model (the refresh reads every model)."""
    return _columns(conn.execute(trend_rows_query(population, _COLUMN_COLUMNS)).all())


_STACK_COLUMNS = {"attention": "stack_attention", "hybrid": "stack_hybrid", "attention-free": "stack_free"}


def _to_record(point: TrendPoint, population_key: str, computed_at: datetime) -> dict:
    return {
        "period_kind": point.period, "population": population_key, "weighting": point.weighting,
        "period_start": point.period_start, "count": point.count, "weight_total": point.weight_total,
        **{f"share_{kind.lower()}": point.shares[kind] for kind in ATTENTION_KINDS},
        "attn_count": point.attn_count,
        **{_STACK_COLUMNS[stack]: point.stack_shares[stack] for stack in STACKS},
        "weight_unknown": point.weight_unknown, "encoder_only": point.encoder_only, "uncertain": point.uncertain,
        "g_count": point.g_count, "g_p25": point.g_p25, "g_median": point.g_median, "g_p75": point.g_p75,
        "share_g_over_16": point.share_g_over_16, "kv_count": point.kv_count, "kv_median": point.kv_median,
        "kv_by_size": {cls: {"count": s.count, "kv_median": s.kv_median} for cls, s in point.kv_by_size.items()},
        "tp8_count": point.tp8_count, "share_tp8_fill": point.share_tp8_fill, "share_tp8_mla": point.share_tp8_mla,
        "computed_at": computed_at,
    }


def from_record(row: sa.Row) -> TrendPoint:
    by_size = row.kv_by_size or {}
    return TrendPoint(
        period=row.period_kind, period_start=row.period_start, weighting=row.weighting, count=row.count,
        weight_total=row.weight_total,
        shares={kind: getattr(row, f"share_{kind.lower()}") for kind in ATTENTION_KINDS},
        attn_count=row.attn_count,
        stack_shares={stack: getattr(row, _STACK_COLUMNS[stack]) for stack in STACKS},
        weight_unknown=row.weight_unknown, encoder_only=row.encoder_only, uncertain=row.uncertain,
        g_count=row.g_count, g_p25=row.g_p25, g_median=row.g_median, g_p75=row.g_p75,
        share_g_over_16=row.share_g_over_16, kv_count=row.kv_count, kv_median=row.kv_median,
        kv_by_size={
            cls: SizeClassStat(int(by_size.get(cls, {}).get("count", 0)), by_size.get(cls, {}).get("kv_median"))
            for cls in SIZE_CLASSES
        },
        tp8_count=row.tp8_count, share_tp8_fill=row.share_tp8_fill, share_tp8_mla=row.share_tp8_mla,
    )


def refresh_trends(engine: Engine) -> RefreshReport:
    """Recompute the derivative counts and every standard series (lineages x thresholds x
    periods x weightings) and replace the stored rows in one transaction; readers keep seeing
    the old ones until it commits."""
    started = time.perf_counter()
    computed_at = utcnow()  # taken before reading, so a write during the refresh marks it stale
    with session_scope(engine) as session:  # short: only derivative rows are read
        refresh_derivative_stats(session, computed_at)
    with engine.connect() as conn:  # the long part holds no write lock
        columns = load_trend_columns(conn)
    records = []
    for population, subset in _standard_populations(columns):
        for period in PERIODS:
            for points in trend_series(subset, period, WEIGHTINGS).values():
                records.extend(_to_record(p, population.key, computed_at) for p in points)
    table = TrendPointRow.__table__
    with session_scope(engine) as session:
        session.execute(sa.delete(table))
        if records:
            session.execute(sa.insert(table), records)
    return RefreshReport(models=len(columns), points=len(records), seconds=time.perf_counter() - started)


def refresh_derivative_stats(session: Session, computed_at: datetime) -> set[str]:
    """Bring ``derivative_stats`` up to date: per base model, its derivatives by relation and
    their summed downloads. Only the rows that differ are written. Returns the base models whose
    figures changed (appeared, moved or vanished): their family downloads, hence their trend
    periods, changed with them."""
    stats: dict[str, dict] = {}
    rows = session.execute(sa.select(_M.base_models, _M.relation, _M.downloads)
                           .where(_M.relation.in_(DERIVED_RELATIONS), _M.base_models.is_not(None)))
    for bases, relation, downloads in rows:
        for base in set(bases or ()):
            if not isinstance(base, str):
                continue
            entry = stats.setdefault(base, {"model_id": base, **dict.fromkeys(DERIVED_RELATIONS, 0),
                                            "downloads": 0, "downloads_unknown": 0})
            entry[relation] += 1
            if downloads is None:
                entry["downloads_unknown"] += 1
            else:
                entry["downloads"] += downloads
    known = {model_id for batch in batches(stats)
             for model_id in session.execute(sa.select(_M.id).where(_M.id.in_(batch))).scalars()}
    fresh = {base: entry for base, entry in stats.items() if base in known}  # bases we hold a record of
    table = DerivativeStats.__table__
    figures = ("model_id", *DERIVED_RELATIONS, "downloads", "downloads_unknown")
    stored = {row.model_id: dict(row._mapping) for row in session.execute(sa.select(*(table.c[f] for f in figures)))}
    changed = {base for base in fresh.keys() | stored.keys() if fresh.get(base) != stored.get(base)}
    for batch in batches(changed):
        session.execute(sa.delete(table).where(table.c.model_id.in_(batch)))
    records = [{**fresh[base], "computed_at": computed_at} for base in changed if base in fresh]
    if records:
        session.execute(sa.insert(table), records)
    return changed


def last_refresh(conn: Connection) -> tuple[datetime | None, datetime | None]:
    """(when the trends were last computed, when the store last changed); None where never."""
    refreshed = conn.execute(sa.select(sa.func.max(TrendPointRow.__table__.c.computed_at))).scalar()
    changed = [
        conn.execute(sa.select(sa.func.max(HubModel.__table__.c.updated_at))).scalar(),
        conn.execute(sa.select(sa.func.max(GeometryRow.__table__.c.derived_at))).scalar(),
        conn.execute(sa.select(sa.func.max(OracleCheck.__table__.c.checked_at))).scalar(),  # a verdict changed
    ]
    changed = [c for c in changed if c is not None]
    return refreshed, max(changed) if changed else None


def trends_stale(engine: Engine) -> bool:
    """True when a model or geometry changed after the last refresh (or none ran yet)."""
    with read_only(engine).connect() as conn:  # every worker asks at start-up: never take the write lock
        refreshed, changed = last_refresh(conn)
    if changed is None:
        return False  # empty store: nothing to aggregate
    return refreshed is None or changed > refreshed


def ensure_trends(engine: Engine) -> RefreshReport | None:
    """Bring the precomputed series up to date if the store changed since they were written:
    the whole of them the first time, afterwards only the periods that changed."""
    with read_only(engine).connect() as conn:
        refreshed, changed = last_refresh(conn)
    if changed is None or (refreshed is not None and changed <= refreshed):
        return None
    return refresh_trends(engine) if refreshed is None else refresh_trends_since(engine, refreshed)


# A batch of the incremental refresh reads the models of at most this many days of periods at
# once (or of one period, if longer), so its memory follows the periods, never the store.
BATCH_DAYS = 184
_T = TrendPointRow.__table__.c


def _as_datetime(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def touched_days(conn: Connection, since: datetime, bases: Iterable[str] = ()) -> set[int]:
    """Day ordinals of the dated models whose trend figures may have changed after ``since``: the
    model written, its current geometry derived or its verdict given since then, and the base
    models in ``bases`` (their family downloads changed). A model whose ``created_at`` itself
    moved leaves its old period to the next full refresh (the Hub's createdAt does not move)."""
    now = utcnow()
    days = {_utc(when).date() for when in changed_since(conn, since, _M.created_at, bases)
            if when is not None and _utc(when) <= now}  # dated so far, as the trends count them
    return set(day_ordinals(sorted(days)).tolist()) if days else set()


def changed_since(conn: Connection | Session, since: datetime, column=_M.id, ids: Iterable[str] = ()) -> Iterator:
    """``column`` of each model written, whose current geometry was derived or whose verdict was
    given after ``since``, and of the models in ``ids`` (repeats possible). Each read starts from
    its change stamp's index and reaches the model by primary key: a filter on created_at here
    would lead SQLite to walk every model by the created_at index."""
    o = OracleCheck.__table__.c
    select = sa.select(column).select_from(HubModel.__table__)
    queries = [
        select.where(_M.updated_at > since),
        select.join(GeometryRow.__table__, sa.and_(_M.id == _G.model_id, _M.current_revision_id == _G.revision_id))
        .where(_G.derived_at > since),
        select.join(OracleCheck.__table__, sa.and_(_M.id == o.model_id, _M.current_revision_id == o.revision_id))
        .where(o.checked_at > since),
        *(select.where(_M.id.in_(batch)) for batch in batches(ids)),
    ]
    for query in queries:
        yield from conn.execute(query).scalars()


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)  # SQLite drops the offset


def _period_batches(codes: Iterable[int], period: str) -> Iterator[list[int]]:
    """Sorted period codes in runs whose periods span at most ``BATCH_DAYS`` days."""
    batch: list[int] = []
    for code in sorted(codes):
        if batch and (next_period(code_start(code, period), period) - code_start(batch[0], period)).days > BATCH_DAYS:
            yield batch
            batch = []
        batch.append(code)
    if batch:
        yield batch


def _columns_of_periods(conn: Connection, codes: list[int], period: str) -> TrendColumns:
    """Every dated model (population ``all``) created in the given periods, as columns."""
    created = _M.created_at
    ranges: list[list[date]] = []  # adjacent periods merged: one range test each
    for code in codes:
        start = code_start(code, period)
        if ranges and ranges[-1][1] == start:
            ranges[-1][1] = next_period(start, period)
        else:
            ranges.append([start, next_period(start, period)])
    query = trend_rows_query(Population(lineage="all"), _COLUMN_COLUMNS).where(sa.or_(*(
        sa.and_(created >= _as_datetime(lo), created < _as_datetime(hi)) for lo, hi in ranges)))
    rows = conn.execute(query).all()
    return _columns(rows)


def _columns(rows) -> TrendColumns:
    if not rows:
        return TrendColumns.from_values(days=[], kinds=[], hybrids=[], group_sizes=[], kv=[], num_parameters=[],
                                        downloads=[])
    (days, kinds, hybrids, group_sizes, kv, params, downloads, encoder, uncertain, relations, tests,
     family, tp_max) = zip(*rows)
    return TrendColumns.from_values(days=day_ordinals(days), kinds=kinds, hybrids=hybrids, group_sizes=group_sizes,
                                    kv=kv, num_parameters=params, downloads=downloads, family_downloads=family,
                                    relations=relations, test_repos=tests, encoder_only=encoder,
                                    uncertain=uncertain, kv_tp_max=tp_max)


def _standard_populations(columns: TrendColumns) -> Iterator[tuple[Population, TrendColumns]]:
    """Each precomputed population with its models among ``columns`` (one rule for both refreshes)."""
    for lineage in POPULATIONS:
        in_lineage = columns.take(np.flatnonzero(population_mask(columns, lineage, Population(lineage).params_floor)))
        for threshold in STANDARD_THRESHOLDS:
            yield Population(lineage, min_downloads=threshold), (in_lineage if not threshold else in_lineage.take(
                np.flatnonzero(in_lineage.downloads >= threshold)))  # NaN (unknown) is not >= anything


def _code(day: date | str, period: str) -> int:
    return int(period_codes(day_ordinals([day]), period)[0])


def _series_range(conn: Connection, population: Population, period: str, stored: set[int],
                  touched: set[int], occupied: set[int]) -> tuple[int, int] | None:
    """The first and last period of a series after the touched periods were recomputed
    (``occupied``: those of them that hold a model of the population). Only when a touched
    period at an end of the stored range lost its last model is the store asked for the new ends."""
    if stored and (min(stored) in touched - occupied or max(stored) in touched - occupied):
        day = sa.func.date(_M.created_at)
        lo, hi = conn.execute(trend_rows_query(population, (sa.func.min(day), sa.func.max(day)))).one()
        return None if lo is None else (_code(lo, period), _code(hi, period))
    ends = stored | occupied
    return (min(ends), max(ends)) if ends else None


def refresh_trends_since(engine: Engine, since: datetime) -> RefreshReport:
    """Recompute only the trend points of the periods that changed after ``since`` (the last
    refresh), in batches of periods, and write the same points a full refresh would: empty
    periods that a series' new range takes in are added, and those it leaves are removed. One
    transaction replaces them; readers keep seeing the old ones until it commits."""
    started = time.perf_counter()
    computed_at = utcnow()  # taken before reading, so a write during the refresh marks it stale
    with session_scope(engine) as session:
        bases = refresh_derivative_stats(session, computed_at)
    records: list[dict] = []
    deletes: list[sa.ColumnElement[bool]] = []
    models = 0
    with engine.connect() as conn:  # the long part holds no write lock
        days = touched_days(conn, since, bases)
        for period in PERIODS:
            touched = set(period_codes(np.fromiter(days, dtype=np.int64), period).tolist()) if days else set()
            new: dict[str, dict[int, list[dict]]] = {}
            occupied: dict[str, set[int]] = {}
            for batch in _period_batches(touched, period):
                columns = _columns_of_periods(conn, batch, period)
                models += len(columns)
                for population, subset in _standard_populations(columns):
                    points = period_points(subset, period, batch, WEIGHTINGS)
                    series = new.setdefault(population.key, {})
                    for code in batch:
                        series[code] = [_to_record(points[w][code], population.key, computed_at) for w in WEIGHTINGS]
                    occupied.setdefault(population.key, set()).update(
                        period_codes(subset.day, period).tolist() if len(subset) else ())
            for population, _ in _standard_populations(_columns([])):
                key = population.key
                stored = {_code(d, period) for d in conn.execute(sa.select(_T.period_start).where(
                    _T.period_kind == period, _T.population == key, _T.weighting == WEIGHTINGS[0])).scalars()}
                ends = _series_range(conn, population, period, stored, touched, occupied.get(key, set()))
                series = _T.period_kind == period, _T.population == key
                if ends is None:
                    deletes.append(sa.and_(*series))
                    continue
                lo, hi = ends
                outside = sa.or_(_T.period_start < code_start(lo, period), _T.period_start > code_start(hi, period))
                redone = [code_start(code, period) for code in touched]
                deletes.extend(sa.and_(*series, clause) for clause in (
                    outside, *(_T.period_start.in_(batch) for batch in batches(redone))))
                gaps = [code for code in range(lo, hi + 1) if code not in stored and code not in touched]
                empty = period_points(_columns([]), period, gaps, WEIGHTINGS)
                records.extend(_to_record(empty[w][code], key, computed_at) for code in gaps for w in WEIGHTINGS)
                records.extend(r for code, rows in new.get(key, {}).items() if lo <= code <= hi for r in rows)
    table = TrendPointRow.__table__
    with session_scope(engine) as session:
        for clause in deletes:
            session.execute(sa.delete(table).where(clause))
        if records:
            session.execute(sa.insert(table), records)
        # every point is now as of this refresh: the next one starts from here
        session.execute(sa.update(table).values(computed_at=computed_at))
    return RefreshReport(models=models, points=len(records), seconds=time.perf_counter() - started, incremental=True)
