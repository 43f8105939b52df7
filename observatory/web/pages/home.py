"""The overview (/): each headline from the newest quarter whose value rests on enough models,
beside the same quarter a year before; where the bundled snapshot ends, when it is all the store holds."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.core.trends import (
    THIN_N,
    TrendPoint,
)
from observatory.crawler.health import crawler_health
from observatory.store.queries.counts import snapshot_end, store_counts
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


# Each headline quotes one value, and the floor applies to the models that value rests on: the
# share of GQA/MLA to the models with attention layers, the median G to those with a G, the KV
# median to those with a KV cache. A quarter can hold five models and only three with a G.
HEADLINES = {
    "kinds": ("attn_count", lambda p: {"share_gqa": p.shares.get("GQA"), "share_mla": p.shares.get("MLA"),
                                       "share_gqa_or_mla": _sum_or_none(p.shares.get("GQA"), p.shares.get("MLA")),
                                       "share_hybrid": p.stack_shares.get("hybrid"), "count": p.count}),
    "g": ("g_count", lambda p: {"g_median": p.g_median, "share_g_over_16": p.share_g_over_16}),
    "kv": ("kv_count", lambda p: {"kv_median": p.kv_median}),
}


def _sum_or_none(first: float | None, second: float | None) -> float | None:
    return None if first is None else first + (second or 0.0)


def _n(point: TrendPoint, field: str) -> int:
    return getattr(point, field) or 0


def _latest(points: list[TrendPoint], field: str) -> TrendPoint | None:
    """The newest quarter whose value rests on at least THIN_N models, not a thin last one."""
    return next((p for p in reversed(points) if _n(p, field) >= THIN_N), None)


def _year_before(points: list[TrendPoint], point: TrendPoint, field: str) -> TrendPoint | None:
    target = point.period_start.replace(year=point.period_start.year - 1)
    return next((p for p in points if p.period_start == target and _n(p, field) >= THIN_N), None)


def _pick(point: TrendPoint | None, field: str, values) -> dict | None:
    if point is None:
        return None
    return {"quarter": chart_specs.period_label(point.period_start, "quarter"), "period_start": point.period_start,
            "n": _n(point, field), **values(point)}


def headlines(quarters: list[TrendPoint]) -> dict:
    """The overview's numbers, one entry per headline: the newest quarter that meets the floor for
    that value, beside the same quarter a year before (when it meets the floor too), and the newer
    quarter passed over as thin, if any. A headline with no quarter that meets its floor is None."""
    out: dict[str, dict | None] = {}
    for name, (field, values) in HEADLINES.items():
        latest = _latest(quarters, field)
        if latest is None:
            out[name] = None
            continue
        newest = quarters[-1]
        out[name] = {**_pick(latest, field, values), "year_before": _pick(_year_before(quarters, latest, field),
                                                                          field, values),
                     "skipped_thin": None if newest is latest else chart_specs.period_label(newest.period_start,
                                                                                             "quarter")}
    return out


HOME_POPULATION = Population("originals")  # new architecture decisions, not upload volume


@page("/")
def home_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        quarters = read_trends(session, HOME_POPULATION, "quarter", "count").points
        plotted, total = plotted_trend_rows(session, HOME_POPULATION, MAX_PLOTTED_MODELS)
        counts = store_counts(session)
        ends = snapshot_end(session)
        health = crawler_health(session)
    data = {
        "population": HOME_POPULATION.key,
        "thin_n": THIN_N,
        "headlines": headlines(quarters),
        "models_tracked": counts,
        "snapshot_end": ends,
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
                  plotted_note=plotted_note(len(plotted), total, sum(1 for r in plotted if r.group_size is not None)))
