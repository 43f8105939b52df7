"""/api/v1/trends: one trend series (JSON or CSV) for a period, population and weighting.

Definitions of every number are in ``observatory.core.trends``; standard populations (each
lineage population at the download thresholds in ``store.trends.STANDARD_THRESHOLDS``) are read
precomputed, others are computed for the request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict
from datetime import date, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from observatory.core.deployment import NODE_TP
from observatory.core.trends import (
    ATTENTION_KINDS,
    G_TIPPING_POINT,
    ORIGINALS_MIN_PARAMS,
    SIZE_CLASSES,
    STACKS,
    THIN_N,
    TrendPoint,
)
from observatory.store.queries.models import IsoDate
from observatory.store.queries.trends import choose_period, read_trends
from observatory.store.trends import STANDARD_THRESHOLDS, Population
from observatory.web import chart_specs
from observatory.web.api.common import CSV_RESPONSE
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES
from observatory.web.rendering import csv_response, jsonable
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1", tags=["trends"], responses=ERROR_RESPONSES,
                   route_class=StrictQueryRoute)


class TrendParams(BaseModel):
    population: Literal["originals", "all", "derivatives"] = Field("originals", description=(
        "originals: relation original, not a test repo, at least min_params parameters (known or estimated); "
        "derivatives: finetunes, quantizations, adapters and merges; all: every model"))
    min_params: float | None = Field(None, ge=0, le=1e15, description=(
        f"Smallest parameter count; default {ORIGINALS_MIN_PARAMS:.0e} for originals and none otherwise "
        "(the defaults are precomputed, other values are computed per request)"))
    period: Literal["month", "week", "quarter"] | None = Field(None, description=(
        f"Period length; default: month when the population's median month holds at least {THIN_N} models, "
        "else quarter"))
    weighting: Literal["count", "downloads", "family_downloads"] = Field("count", description=(
        "count: every model weighs 1; downloads: its 30-day Hub downloads; family_downloads: its own plus its "
        "derivatives' downloads. Unknown download counts weigh nothing (weight_unknown says how many)"))
    min_downloads: int = Field(0, ge=0, le=10**15, description=(
        f"Only models with at least this many downloads; {', '.join(map(str, STANDARD_THRESHOLDS))} "
        "are precomputed, other values are computed per request"))
    author: str | None = Field(None, min_length=1, max_length=100, description="One organisation")
    model_type: str | None = Field(None, min_length=1, max_length=100, description="One architecture family")
    since: IsoDate | None = Field(None, description="First day of interest (its whole period is included)")
    until: IsoDate | None = Field(None, description="Last day of interest")

    @model_validator(mode="after")
    def _range(self) -> TrendParams:
        if self.since and self.until and self.since > self.until:
            raise ValueError(f"since ({self.since}) is after until ({self.until})")
        return self


class SizeClassOut(BaseModel):
    count: int
    kv_median: float | None


class TrendPointOut(BaseModel):
    period_start: date
    count: int = Field(description="Decoder models created in the period that the statistics describe "
                                   "(encoder-only models and uncertain geometries are counted apart)")
    thin: bool = Field(description=f"count < {THIN_N}: too few models to headline or alert on")
    weight_total: float = Field(description="Sum of weights (= count when weighting by count)")
    weight_unknown: int = Field(description="Counted models whose weight is unknown, left out of weighted statistics")
    attn_count: int = Field(description="Models with attention layers (pure attention and hybrids)")
    shares: dict[str, float | None] = Field(
        description="Attention kind of the attention layers among attn_count models, hybrids included: "
                    + ", ".join(ATTENTION_KINDS))
    stack_shares: dict[str, float | None] = Field(description="Stack type among count models: " + ", ".join(STACKS))
    encoder_only: int = Field(description="Encoder-only models of the period (no decode cache; not in count)")
    uncertain: int = Field(description="Models whose geometry is uncertain (an unknown layer type, or transformers"
                                       " reads the config otherwise; not in count)")
    g_count: int = Field(description="Models with a group size (MHA, MQA, GQA, hybrids)")
    g_p25: float | None
    g_median: float | None
    g_p75: float | None
    share_g_over_16: float | None = Field(description=f"Share of models with a G whose G > {G_TIPPING_POINT}")
    kv_count: int
    kv_median: float | None = Field(description="Median KV bytes per token (bf16)")
    kv_by_size: dict[str, SizeClassOut] = Field(description="By parameter class: " + ", ".join(SIZE_CLASSES))
    tp8_count: int = Field(description="Models with attention layers whose KV heads are known (MLA included): "
                                       "the denominator of the two TP = 8 shares")
    tp8_thin: bool = Field(description=f"tp8_count < {THIN_N}")
    share_tp8_fill: float | None = Field(description=(
        f"Share whose KV heads fill a TP = {NODE_TP} node without replication: every KV layer's K divisible by "
        f"{NODE_TP}, or MLA served with data-parallel attention"))
    share_tp8_mla: float | None = Field(description="The MLA part of share_tp8_fill")


class PopulationOut(BaseModel):
    key: str
    lineage: str
    min_params: float | None = Field(description="The parameter floor applied (null: none)")
    min_downloads: int
    author: str | None
    model_type: str | None


class TrendsResponse(BaseModel):
    ok: bool = True
    period: str
    period_chosen: bool = Field(description="True when no period was asked for and the default rule chose it")
    weighting: str
    population: PopulationOut
    precomputed: bool = Field(description="Read from the aggregates refreshed after each crawl")
    computed_at: datetime | None
    points: list[TrendPointOut]


def point_record(point: TrendPoint) -> dict:
    """One trend point as the trends page's JSON twin and every trend CSV give it."""
    record = asdict(point)
    record["label"] = chart_specs.period_label(point.period_start, point.period)
    record["thin"] = point.thin
    record["tp8_thin"] = point.tp8_thin
    return record


TREND_CSV_COLUMNS = (
    ["period", "period_start", "label", "weighting", "count", "thin", "weight_total", "weight_unknown",
     "encoder_only", "uncertain", "attn_count"]
    + [f"share_{k}" for k in ATTENTION_KINDS] + [f"stack_{s}" for s in STACKS]
    + ["g_count", "g_p25", "g_median", "g_p75", "share_g_over_16", "kv_count", "kv_median"]
    + [f"kv_median_{c}" for c in SIZE_CLASSES]
    + ["tp8_count", "tp8_thin", "share_tp8_fill", "share_tp8_mla"]
)


def trend_csv_row(record: dict) -> dict:
    """A ``point_record`` (made JSON-safe) flattened to TREND_CSV_COLUMNS."""
    row = {k: v for k, v in record.items() if not isinstance(v, dict)}
    row.update({f"share_{k}": v for k, v in record["shares"].items()})
    row.update({f"stack_{k}": v for k, v in record["stack_shares"].items()})
    row.update({f"kv_median_{c}": s["kv_median"] for c, s in record["kv_by_size"].items()})
    return row


def population_of(params: TrendParams) -> Population:
    return Population(params.population, min_params=params.min_params, min_downloads=params.min_downloads,
                      author=params.author, model_type=params.model_type)


def _series(session, params: TrendParams):
    population = population_of(params)
    period = params.period or choose_period(session, population)
    return read_trends(session, population, period, params.weighting, params.since, params.until)


def _csv(series, params: TrendParams) -> Response:
    """The same columns as the trends page's CSV twin."""
    name = f"trends-{series.period}-{params.weighting}.csv"
    rows = [trend_csv_row(jsonable(point_record(p))) for p in series.points]
    return csv_response(TREND_CSV_COLUMNS, rows, name,
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})


# Precomputed series change only when a refresh rewrites them (new computed_at), so their JSON
# is kept per (query, computed_at): a repeated trend request costs one indexed probe.
_JSON_CACHE: OrderedDict[tuple, bytes] = OrderedDict()
_JSON_CACHE_SIZE = 128
_json_lock = threading.Lock()


def _trends_json(series, params: TrendParams, store: str) -> bytes:
    key = (store, params.model_dump_json(), series.computed_at)
    if series.computed_at is not None:
        with _json_lock:
            if key in _JSON_CACHE:
                _JSON_CACHE.move_to_end(key)
                return _JSON_CACHE[key]
    p = series.population
    body = TrendsResponse(
        period=series.period, period_chosen=params.period is None, weighting=series.weighting,
        population=PopulationOut(key=p.key, lineage=p.lineage, min_params=p.params_floor,
                                 min_downloads=p.min_downloads, author=p.author, model_type=p.model_type),
        precomputed=series.precomputed, computed_at=series.computed_at,
        points=[TrendPointOut.model_validate(pt, from_attributes=True) for pt in series.points],
    ).model_dump_json().encode()
    if series.computed_at is not None:
        with _json_lock:
            _JSON_CACHE[key] = body
            while len(_JSON_CACHE) > _JSON_CACHE_SIZE:
                _JSON_CACHE.popitem(last=False)
    return body


@router.get("/trends", response_model=TrendsResponse, responses=CSV_RESPONSE, summary="A trend series")
def trends(session: ReadSessionDep, params: Annotated[TrendParams, Query()],
           format: Annotated[Literal["json", "csv"], Query(description="csv: one row per period")] = "json"):
    """Per period: model count (and who was left out), share of each attention kind among models
    with attention layers (hybrids by the kind of their attention layers), share of each stack
    type (pure attention, hybrid, attention-free), quartiles of G = H/K, share with G > 16,
    median KV bytes per token overall and per parameter-size class, share whose KV heads fill a
    TP = 8 node without replication; weighted by count, by
    downloads or by downloads including derivatives'. Points with fewer than 5 models are
    marked thin."""
    series = _series(session, params)
    if format == "csv":
        return _csv(series, params)
    return Response(_trends_json(series, params, str(session.get_bind().url)), media_type="application/json")


@router.get("/trends.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="A trend series as CSV")
def trends_csv(session: ReadSessionDep, params: Annotated[TrendParams, Query()]) -> Response:
    return _csv(_series(session, params), params)
