"""/api/v1/trends: one trend series (JSON or CSV) for a period, population and weighting.

Definitions of every number are in ``observatory.core.trends``; standard populations (download
thresholds in ``trend_store.STANDARD_THRESHOLDS``) are read precomputed, others are computed
for the request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict
from datetime import date, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field, model_validator

from observatory.queries import IsoDate
from observatory.trend_store import STANDARD_THRESHOLDS, Population, read_trends
from observatory.core.trends import G_TIPPING_POINT, KIND_BUCKETS, SIZE_CLASSES, TrendPoint
from observatory.web import chart_specs
from observatory.web.api_common import CSV_RESPONSE
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES
from observatory.web.rendering import csv_response, jsonable

router = APIRouter(prefix="/api/v1", tags=["trends"], responses=ERROR_RESPONSES)


class TrendParams(BaseModel):
    period: Literal["month", "week", "quarter"] = Field("month", description="Period length")
    weighting: Literal["count", "downloads"] = Field("count", description="Weigh models equally or by downloads")
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
    count: int = Field(description="Models created in the period")
    weight_total: float = Field(description="Sum of weights (= count when weighting by count)")
    shares: dict[str, float | None] = Field(description="Share of each kind bucket: " + ", ".join(KIND_BUCKETS))
    g_count: int = Field(description="Models with a group size (MHA, MQA, GQA, hybrids)")
    g_p25: float | None
    g_median: float | None
    g_p75: float | None
    share_g_over_16: float | None = Field(description=f"Share of models with a G whose G > {G_TIPPING_POINT}")
    kv_count: int
    kv_median: float | None = Field(description="Median KV bytes per token (bf16)")
    kv_by_size: dict[str, SizeClassOut] = Field(description="By parameter class: " + ", ".join(SIZE_CLASSES))


class PopulationOut(BaseModel):
    key: str
    min_downloads: int
    author: str | None
    model_type: str | None


class TrendsResponse(BaseModel):
    ok: bool = True
    period: str
    weighting: str
    population: PopulationOut
    precomputed: bool = Field(description="Read from the aggregates refreshed after each crawl")
    computed_at: datetime | None
    points: list[TrendPointOut]


def point_record(point: TrendPoint) -> dict:
    """One trend point as the trends page's JSON twin and every trend CSV give it."""
    record = asdict(point)
    record["label"] = chart_specs.period_label(point.period_start, point.period)
    return record


TREND_CSV_COLUMNS = (
    ["period", "period_start", "label", "weighting", "count", "weight_total"]
    + [f"share_{k}" for k in KIND_BUCKETS]
    + ["g_count", "g_p25", "g_median", "g_p75", "share_g_over_16", "kv_count", "kv_median"]
    + [f"kv_median_{c}" for c in SIZE_CLASSES]
)


def trend_csv_row(record: dict) -> dict:
    """A ``point_record`` (made JSON-safe) flattened to TREND_CSV_COLUMNS."""
    row = {k: v for k, v in record.items() if not isinstance(v, dict)}
    row.update({f"share_{k}": v for k, v in record["shares"].items()})
    row.update({f"kv_median_{c}": s["kv_median"] for c, s in record["kv_by_size"].items()})
    return row


def _series(session, params: TrendParams):
    population = Population(min_downloads=params.min_downloads, author=params.author, model_type=params.model_type)
    return read_trends(session, population, params.period, params.weighting, params.since, params.until)


def _csv(series, params: TrendParams) -> Response:
    """The same columns as the trends page's CSV twin."""
    name = f"trends-{params.period}-{params.weighting}.csv"
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
        period=series.period, weighting=series.weighting,
        population=PopulationOut(key=p.key, min_downloads=p.min_downloads, author=p.author, model_type=p.model_type),
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
    """Per period: model count, share of each attention kind (hybrids and attention-free models
    in their own buckets), quartiles of G = H/K, share with G > 16, median KV bytes per token
    overall and per parameter-size class; weighted by count or by downloads."""
    series = _series(session, params)
    if format == "csv":
        return _csv(series, params)
    return Response(_trends_json(series, params, str(session.get_bind().url)), media_type="application/json")


@router.get("/trends.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="A trend series as CSV")
def trends_csv(session: ReadSessionDep, params: Annotated[TrendParams, Query()]) -> Response:
    return _csv(_series(session, params), params)
