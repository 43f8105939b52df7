"""The trends page (/trends): attention kinds, G and KV per token by period, for any population."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from observatory.core.trends import (
    G_TIPPING_POINT,
    PERIODS,
    POPULATIONS,
    SIZE_CLASSES,
    THIN_N,
    WEIGHTINGS,
)
from observatory.store.queries.counts import snapshot_end
from observatory.store.queries.trends import (
    choose_period,
    plotted_trend_rows,
    read_trends,
)
from observatory.store.trends import STANDARD_THRESHOLDS
from observatory.web import chart_specs
from observatory.web.api.trends import (
    TREND_CSV_COLUMNS,
    TrendParams,
    point_record,
    population_of,
    trend_csv_row,
)
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator, validated
from observatory.web.rendering import (
    csv_response,
    json_response,
    jsonable,
    page_url,
    render,
)

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


MAX_PLOTTED_MODELS = 3000  # points in the G chart; the most downloaded first


def trend_params(request: Request) -> TrendParams:
    return validated(TrendParams, request)


def trends_data(session: Session, params: TrendParams) -> tuple[dict, dict]:
    """(data for the JSON twin, chart specs for the template) of one trends query."""
    population = population_of(params)
    period = params.period or choose_period(session, population)
    p = {**params.model_dump(), "period": period}
    series = read_trends(session, population, period, params.weighting, params.since, params.until)
    plotted, total = plotted_trend_rows(session, population, MAX_PLOTTED_MODELS, params.since, params.until)
    points = series.points
    data = {
        "params": p,
        "period_chosen": params.period is None,
        "population": population.key,
        "population_floor": population.params_floor,
        "precomputed": series.precomputed,
        "computed_at": series.computed_at,
        "g_tipping_point": G_TIPPING_POINT,
        "thin_n": THIN_N,
        "snapshot_end": snapshot_end(session),
        "left_out": {"encoder_only": sum(pt.encoder_only for pt in points),
                     "uncertain": sum(pt.uncertain for pt in points),
                     "weight_unknown": sum(pt.weight_unknown for pt in points) if params.weighting != "count" else 0},
        "points": [point_record(pt) for pt in points],
        "plotted_models": {
            "shown": len(plotted),
            "total": total,
            "rows": [{"model_id": r.model_id, "created_at": r.created_at, "attention_kind": r.attention_kind,
                      "is_hybrid": r.is_hybrid, "group_size": r.group_size, "downloads": r.downloads}
                     for r in plotted],
        },
    }
    charts = {
        "kind_share": chart_specs.kind_share(points, period),
        "stack_share": chart_specs.stack_share(points, period),
        "g_distribution": chart_specs.g_distribution(points, plotted),
        "g_over": chart_specs.share_g_over(points),
        "kv": chart_specs.kv_per_token(points),
        "tp8": chart_specs.tp8_fill(points),
    }
    return data, charts


@page("/trends", formats=("json", "csv"))
def trends_page(request: Request, fmt: str | None) -> Response:
    p = trend_params(request)
    with request_reader(request) as session:
        data, charts = trends_data(session, p)
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        rows = (trend_csv_row(jsonable(r)) for r in data["points"])
        return csv_response(TREND_CSV_COLUMNS, rows, "trends.csv")
    return render(request, "trends.html", data, title="Trends", nav="/trends", formats=("json", "csv"),
                  specs=charts, charts=True, size_classes=SIZE_CLASSES,
                  plotted_note=plotted_note(data["plotted_models"]["shown"], data["plotted_models"]["total"],
                                            sum(1 for r in data["plotted_models"]["rows"] if r["group_size"] is not None)),
                  choices={"period": PERIODS, "weighting": WEIGHTINGS, "thresholds": STANDARD_THRESHOLDS,
                           "population": POPULATIONS},
                  count_url=page_url(request, None, weighting="count"))


def plotted_note(shown: int, total: int, with_g: int) -> str:
    """Which models the per-model points are: those with a G among the models the series count
    (``total``, the sum of the points' counts; the most downloaded first, up to a cap)."""
    if shown >= total:
        return f"the {with_g:,} with a G of the {total:,} counted models"
    return f"the {with_g:,} with a G among the {shown:,} most downloaded of the {total:,} counted models"
