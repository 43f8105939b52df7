"""The overview (/): the newest quarter that is not thin, beside the same quarter a year before."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.core.trends import (
    THIN_N,
    TrendPoint,
)
from observatory.crawler.health import crawler_health
from observatory.store.queries.counts import store_counts
from observatory.store.queries.trends import plotted_trend_rows, read_trends
from observatory.store.trends import Population
from observatory.web import chart_specs
from observatory.web.api.trends import point_record
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.pages.trends import MAX_PLOTTED_MODELS, plotted_note
from observatory.web.rendering import json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


def _latest(points: list[TrendPoint]) -> TrendPoint | None:
    """The newest period that is not thin: a headline never quotes a handful of models."""
    return next((p for p in reversed(points) if not p.thin), None)


def _year_before(points: list[TrendPoint], point: TrendPoint) -> TrendPoint | None:
    start = point.period_start
    target = start.replace(year=start.year - 1)
    return next((p for p in points if p.period_start == target and not p.thin), None)


def headlines(quarters: list[TrendPoint]) -> dict:
    """The overview's numbers: the newest quarter that is not thin, beside the same quarter a
    year before (when that one is not thin either)."""
    latest = _latest(quarters)
    if latest is None:
        return {"quarter": None}
    before = _year_before(quarters, latest)

    def pick(point: TrendPoint | None) -> dict | None:
        if point is None:
            return None
        gqa, mla = point.shares.get("GQA"), point.shares.get("MLA")
        return {
            "quarter": chart_specs.period_label(point.period_start, "quarter"),
            "period_start": point.period_start,
            "count": point.count,
            "attn_count": point.attn_count,
            "share_gqa": gqa,
            "share_mla": mla,
            "share_gqa_or_mla": None if gqa is None else gqa + (mla or 0.0),
            "share_hybrid": point.stack_shares.get("hybrid"),
            "share_attention_free": point.stack_shares.get("attention-free"),
            "g_count": point.g_count,
            "g_median": point.g_median,
            "share_g_over_16": point.share_g_over_16,
            "kv_count": point.kv_count,
            "kv_median": point.kv_median,
        }

    return {"quarter": pick(latest), "year_before": pick(before)}


HOME_POPULATION = Population("originals")  # new architecture decisions, not upload volume


@page("/")
def home_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        quarters = read_trends(session, HOME_POPULATION, "quarter", "count").points
        plotted, total = plotted_trend_rows(session, HOME_POPULATION, MAX_PLOTTED_MODELS)
        counts = store_counts(session)
        health = crawler_health(session)
    data = {
        "population": HOME_POPULATION.key,
        "thin_n": THIN_N,
        "headlines": headlines(quarters),
        "models_tracked": counts,
        "last_crawl": health["last_run"],
        "quarters": [point_record(p) for p in quarters],
    }
    if fmt == "json":
        return json_response(data)
    charts = {
        "kind_share": chart_specs.kind_share(quarters, "quarter"),
        "stack_share": chart_specs.stack_share(quarters, "quarter"),
        "g_distribution": chart_specs.g_distribution(quarters, plotted),
        "kv": chart_specs.kv_per_token(quarters, by_size=False),
    }
    return render(request, "index.html", data, title="Overview", nav="/", specs=charts, charts=True,
                  plotted_note=plotted_note(len(plotted), total))
