"""The median new model, read from the store: its KV bytes per token per quarter (the price page's
second panel) and the 32k-token sequences it fits beside its weights per device generation (the
hardware page), with the arithmetic in ``observatory.core.capacity``.

Which models count is decided in ``population_rows`` alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa
from sqlmodel import Session

from observatory.core import capacity
from observatory.core.kvcache import cache_bytes
from observatory.core.trends import ORIGINALS_MIN_PARAMS
from observatory.store.ingest import derive
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel
from observatory.store.trends import PARAMS, UNCERTAIN, dated_so_far

POPULATION = (f"originals: models whose relation is original, not test repositories, with at least "
              f"{ORIGINALS_MIN_PARAMS / 1e9:g}B parameters (disclosed, else estimated from the config), whose current "
              f"geometry has attention layers; dated by creation (or release) date")


@dataclass(frozen=True)
class PopulationRow:
    model_id: str
    created: date
    revision_id: int
    num_parameters: int  # as the floor counts them: disclosed, else estimated from the config
    parameters_estimated: bool
    kv_bytes_per_token: int | None  # bf16, all KV layers at full context
    windowed: bool  # sliding or chunked layers: the cache at a context needs the per-layer geometry


def population_rows(session: Session) -> list[PopulationRow]:
    """The models the "median new model" is taken over: the trends' ``originals`` population
    (relation original, not a test repo, at least ``ORIGINALS_MIN_PARAMS`` parameters counted as
    the trends count them), dated, with attention layers, and neither encoder-only nor uncertain
    (the trends count those apart, in no statistic). Change it here and only here."""
    m, g = HubModel.__table__.c, GeometryRow.__table__.c
    query = (sa.select(m.id, m.created_at, m.current_revision_id, PARAMS.label("params"), m.num_parameters,
                       g.kv_bytes_per_token_bf16, g.sliding_layers, g.chunked)
             .join(GeometryRow.__table__, g.revision_id == m.current_revision_id)
             .where(g.attention_kind != "none", dated_so_far(m.created_at),
                    g.encoder_only.is_not(sa.true()), UNCERTAIN.is_not(sa.true()),
                    m.relation == "original", m.is_test_repo.is_(sa.false()), PARAMS >= ORIGINALS_MIN_PARAMS)
             .order_by(m.created_at, m.id))
    return [PopulationRow(model_id=r.id, created=_day(r.created_at), revision_id=r.current_revision_id,
                          num_parameters=r.params, parameters_estimated=r.num_parameters is None,
                          kv_bytes_per_token=r.kv_bytes_per_token_bf16,
                          windowed=bool(r.sliding_layers) or bool(r.chunked))
            for r in session.execute(query)]


def _day(value: datetime | date) -> date:
    return value.date() if isinstance(value, datetime) else value


def kv_by_quarter(session: Session) -> dict:
    """Median bf16 KV bytes per token of the population's new models, per quarter, with n."""
    rows = [r for r in population_rows(session) if r.kv_bytes_per_token]
    return {"population": POPULATION, "models": len(rows), "period": "quarter",
            "points": capacity.median_by_period(((r.created, r.kv_bytes_per_token) for r in rows), "quarter")}


# Windowed models need their config parsed for the cache at a context; revisions never change,
# so the answer is kept per (revision, context).
_SEQUENCE_BYTES: OrderedDict[tuple[int, int], int | None] = OrderedDict()
_SEQUENCE_BYTES_MAX = 50_000


def _sequence_bytes(session: Session, row: PopulationRow, context: int) -> int | None:
    """bf16 cache of one ``context``-token sequence. Without sliding or chunked layers every KV
    layer keeps every token, so it is bytes per token x context; otherwise the per-layer
    windows of the parsed config cap it (``kvcache.cache_bytes``)."""
    if not row.windowed:
        return row.kv_bytes_per_token * context if row.kv_bytes_per_token else None
    key = (row.revision_id, context)
    if key not in _SEQUENCE_BYTES:
        raw = session.execute(sa.select(ConfigRevision.raw_text).where(ConfigRevision.id == row.revision_id)).scalar()
        geom = derive(raw).geometry if raw is not None else None
        _SEQUENCE_BYTES[key] = cache_bytes(geom, context) if geom is not None else None
        while len(_SEQUENCE_BYTES) > _SEQUENCE_BYTES_MAX:
            _SEQUENCE_BYTES.popitem(last=False)
    return _SEQUENCE_BYTES[key] or None


def capacity_trend(session: Session, devices: Iterable[capacity.DeviceMemory], context: int = capacity.CONTEXT) -> dict:
    """Per device of ``devices`` (the hardware catalog's memories): median sequences of ``context`` tokens beside the bf16 weights, over
    the models new at its release and over the newest models. Weights come from the parameter
    count the population's floor used (disclosed, else estimated from the config: how many are
    estimated is reported), so every model the population admits is sized."""
    rows = [r for r in population_rows(session) if r.kv_bytes_per_token]
    sized, no_cache = [], 0
    for row in rows:
        sequence = _sequence_bytes(session, row, context)
        if not sequence:
            no_cache += 1  # a windowed config that no longer parses
            continue
        sized.append(capacity.ModelSize(row.model_id, row.created, row.num_parameters, sequence))
    trend = capacity.capacity_trend(list(devices), sized)
    estimated = {r.model_id for r in rows if r.parameters_estimated}
    return {**trend, "context": context, "population": POPULATION, "models": len(sized),
            "parameters_estimated": sum(1 for m in sized if m.model_id in estimated),
            "skipped_without_cache": no_cache,
            "weights_bytes_per_parameter": capacity.WEIGHT_BYTES_PER_PARAMETER}
