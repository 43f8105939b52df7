"""HTML pages, each with a JSON twin (``.json``) and, for lists, a CSV export (``.csv``).

Datasette's convention: the JSON twin returns exactly the data the template renders, so a
reader can cite a page and a script can fetch the same numbers. Every handler builds one
JSON-safe ``data`` dict and answers it as HTML, JSON or CSV (``rendering``). Query logic lives
in ``observatory.queries``, ``trend_store``, ``crawler.health`` and ``bench.store`` (shared with
the /api/v1 routers); this module only shapes their answers for people.

Untrusted strings (model ids, config values, query parameters) reach the templates only
through Jinja2 autoescaping; chart data is embedded with ``|tojson`` inside
``<script type="application/json">``, which the Content-Security-Policy does not execute.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field, ValidationError
from sqlmodel import Session

from observatory import new_models
from observatory.claims import claims_data
from observatory.core import kvcache, roofline
from observatory.core.claims import VERDICTS
from observatory.bench.store import latest_results, results_for_model
from observatory.crawler.health import crawler_health, open_failures, recent_runs, run_to_dict
from observatory.core.geometry import PARSER_VERSION, Geometry, parse_geometry
from observatory.hardware import load_catalog
from observatory.queries import (
    ATTENTION_KINDS,
    SUMMARY_FIELDS,
    InvalidPageToken,
    ModelListParams,
    current_geometry,
    geometry_flags,
    get_model_detail,
    model_parameters,
    not_found_message,
    hardware_info,
    list_models,
    roofline_point,
    store_counts,
)
from observatory.core.repo_ids import InvalidRepoId, validate_repo_id
from observatory.tables import HubModel
from observatory.trend_store import STANDARD_THRESHOLDS, Population, choose_period, plotted_trend_rows, read_trends
from observatory.core.trends import ATTENTION_KINDS as ATTENTION_KINDS_TREND
from observatory.core.trends import (
    G_TIPPING_POINT,
    ORIGINALS_MIN_PARAMS,
    STACKS,
    PERIODS,
    POPULATIONS,
    SIZE_CLASSES,
    THIN_N,
    WEIGHTINGS,
    TrendPoint,
    describe_kind,
)
from observatory.web import chart_specs
from observatory.web.api_claims import (
    CLAIM_CSV_COLUMNS,
    PRICE_CSV_COLUMNS,
    RESEARCH_CSV_COLUMNS,
    claim_csv_rows,
    prices_data,
    research_csv_rows,
    research_data,
)
from observatory.web.api_models import stream_models_csv
from observatory.web.api_trends import TREND_CSV_COLUMNS, TrendParams, point_record, population_of, trend_csv_row
from observatory.web.deps import request_reader
from observatory.web.errors import ApiError, _describe
from observatory.web.rendering import FORMATS, csv_response, error_page, json_response, jsonable, page_url, render
from observatory.web.strict_params import reject_unknown

router = APIRouter(include_in_schema=False)


def page(path: str, formats: tuple[str, ...] = ("json",)):
    """Register ``handler(request, fmt)`` at ``path`` and at ``path.json`` / ``path.csv``.

    Handlers raise ``ApiError`` for bad input; the answer takes the shape of the format asked
    for: the error page for HTML, the one JSON error shape otherwise (CSV included, as Datasette).
    """

    def decorate(handler: Callable) -> Callable:
        def make(fmt: str | None):
            async def endpoint(request: Request) -> Response:
                try:
                    # handlers read the store synchronously; keep the event loop free
                    return await run_in_threadpool(handler, request, fmt)
                except ApiError as exc:
                    if fmt is None:
                        return error_page(request, exc.status, exc.errors)
                    raise

            endpoint.__name__ = f"{handler.__name__}_{fmt or 'html'}"
            return endpoint

        router.add_api_route(path, make(None), methods=["GET"], response_class=HTMLResponse)
        base = "/index" if path == "/" else path
        for fmt in formats:
            router.add_api_route(f"{base}.{fmt}", make(fmt), methods=["GET"])
            if path == "/":  # Datasette spells the home page's twin "/.json"
                router.add_api_route(f"/.{fmt}", make(fmt), methods=["GET"])
        return handler

    return decorate


# ---- trends: home and /trends -----------------------------------------------------------------

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
                  plotted_note=plotted_note(data["plotted_models"]["shown"], data["plotted_models"]["total"]),
                  choices={"period": PERIODS, "weighting": WEIGHTINGS, "thresholds": STANDARD_THRESHOLDS,
                           "population": POPULATIONS},
                  count_url=page_url(request, None, weighting="count"))


def _latest(points: list[TrendPoint]) -> TrendPoint | None:
    """The newest period that is not thin: a headline never quotes a handful of models."""
    return next((p for p in reversed(points) if not p.thin), None)


def plotted_note(shown: int, total: int) -> str:
    """Which models the per-model points come from (the most downloaded first, up to a cap)."""
    if shown >= total:
        return f"all {total:,} dated models"
    return f"the {shown:,} most downloaded of {total:,} dated models"


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


# ---- the model list -------------------------------------------------------------------------


def validated(model: type[BaseModel], request: Request, lists: tuple[str, ...] = (), extra: tuple[str, ...] = ()):
    """The API's parameter model filled from a page's query string, so a page and its API
    accept exactly the same parameters (and ``extra``, the page's own); any other name is a
    400. Empty form fields count as absent."""
    reject_unknown(request, [*model.model_fields, *extra])
    raw: dict[str, Any] = {}
    for name in model.model_fields:
        values = [v.strip() for v in request.query_params.getlist(name) if v.strip()]
        if values:
            raw[name] = values if name in lists else values[-1]
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ApiError(400, *[_describe(e) for e in exc.errors()]) from None


def list_params(request: Request) -> ModelListParams:
    return validated(ModelListParams, request, lists=("kind",), extra=("_stream",))


def link_header(url: str | None) -> dict:
    return {"Link": f'<{url}>; rel="next"'} if url else {}


def models_page_data(request: Request, session: Session, params: ModelListParams, fmt: str | None) -> dict:
    try:
        page_ = list_models(session, params)
    except InvalidPageToken as exc:
        raise ApiError(400, f"next: {exc}") from None
    rows = [row.model_dump() for row in page_.rows]
    return {
        "params": params.model_dump(),
        "rows": rows,
        "next": page_.next,
        "next_url": page_url(request, fmt, next=page_.next) if page_.next else None,
    }


@page("/models", formats=("json", "csv"))
def models_page(request: Request, fmt: str | None) -> Response:
    params = list_params(request)
    if fmt == "csv" and request.query_params.get("_stream") in ("on", "1", "true"):
        # Every matching row (from the first page on), up to the API's CSV row limit.
        return stream_models_csv(request, params.model_copy(update={"next": None}))
    with request_reader(request) as session:
        data = models_page_data(request, session, params, fmt)
    if fmt == "json":
        return json_response(data, headers=link_header(data["next_url"]))
    if fmt == "csv":
        return csv_response(list(SUMMARY_FIELDS), data["rows"], "models.csv", headers=link_header(data["next_url"]))
    return render(
        request, "models.html", data, title="Models", nav="/models", formats=("json", "csv"),
        kinds=ATTENTION_KINDS, sorts=SORTABLE, sort_url=lambda key: _sort_url(request, params, key),
        stream_csv_url=page_url(request, "csv", next=None, _stream="on"),
        first_url=page_url(request, None, next=None) if params.next else None,
    )


# Column headers that sort, with the direction a first click gives.
SORTABLE = {"created_at": "desc", "downloads": "desc", "group_size": "desc", "kv_bytes_per_token": "desc", "id": "asc"}


def _sort_url(request: Request, params: ModelListParams, key: str) -> str:
    if params.sort == key:
        order = "asc" if params.order == "desc" else "desc"
    else:
        order = SORTABLE[key]
    return page_url(request, None, sort=key, order=order, next=None)


# ---- one model ------------------------------------------------------------------------------

MAX_CONTEXT = 1 << 24  # 16M tokens: beyond any model's window, small enough to stay exact in JS
MAX_BATCH = 4096
# Roofs the model page draws (the table lists every catalogued device): a spread of generations,
# vendors and price points, few enough to tell apart.
ROOFLINE_DRAWN = ("a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x", "l4")


def kv_terms(geom: Geometry) -> list[dict]:
    """The cache as ``Σ elements_per_token × min(context, cap)`` terms (per distinct cap), the
    form kv-calculator.js evaluates; the same per-layer numbers ``kvcache.cache_bytes`` sums."""
    terms: dict[int | None, int] = {}
    for elements, cap in zip(geom.layer_kv_elements(), geom.layer_windows()):
        if elements:
            terms[cap] = terms.get(cap, 0) + elements
    return [{"elements_per_token": e, "cap": cap} for cap, e in sorted(terms.items(), key=lambda t: t[0] or 0)]


def calculator(geom: Geometry, context: int, batch: int, dtype: str) -> dict:
    counter = kvcache.mha_counterfactual(geom)
    rows = []
    for ctx in sorted(set(roofline.CONTEXTS) | {context}):
        actual = kvcache.cache_bytes(geom, ctx, batch, dtype)
        mha = kvcache.cache_bytes(counter, ctx, batch, dtype)
        rows.append({"context": ctx, "batch": batch, "dtype": dtype, "bytes": actual, "mha_bytes": mha,
                     "saving": mha / actual if actual else None, "chosen": ctx == context,
                     "beyond_max_context": bool(geom.max_position_embeddings and ctx > geom.max_position_embeddings)})
    return {
        "params": {"context": context, "batch": batch, "dtype": dtype},
        "bytes_per_token": kvcache.bytes_per_token(geom, dtype),
        "mha_bytes_per_token": kvcache.bytes_per_token(counter, dtype),
        "rows": rows,
        "terms": kv_terms(geom),
        "mha_terms": kv_terms(counter),
        "dtype_bytes": dict(kvcache.DTYPE_BYTES),
        "limits": {"context_min": 1, "context_max": MAX_CONTEXT, "batch_min": 1, "batch_max": MAX_BATCH},
    }


def roofline_rows(geom: Geometry, context: int, batch: int, dtype: str, num_parameters: int | None,
                  active_parameters: int | None = None) -> list[dict]:
    """Decode of this model (attention beside its MHA counterfactual, and the whole step) on every
    catalogued device."""
    compute = "fp8" if dtype == "fp8" else "bf16"
    return [
        {"hardware": hardware_info(device).model_dump(), "peak_flops": device.peak_flops(compute),
         "ridge": roofline.ridge_point(device, compute),
         **roofline_point(geom, device, context, batch, dtype, num_parameters,
                          active_parameters=active_parameters).model_dump()}
        for device in load_catalog()
    ]


def model_page_data(session: Session, model_id: str, context: int, batch: int, dtype: str) -> dict | None:
    detail = get_model_detail(session, model_id)
    if detail is None:
        return None
    data = detail.model_dump()
    model = session.get(HubModel, model_id)
    georow, geom = current_geometry(session, model)
    params, active = model_parameters(model, georow)
    data["parameters"] = {"total": params, "active": active,
                          "source": model.parameters_source if model.num_parameters is not None
                          else ("config" if params is not None else None)}
    # "roofline" (batch 1 at 4k/32k/128k) comes with the detail; "roofline_at" is at this page's
    # context, batch and dtype.
    data["calculator"] = None
    data["roofline_at"] = None
    if geom is not None and geom.attention_kind != "none":
        data["calculator"] = calculator(geom, context, batch, dtype)
        data["roofline_at"] = {"context": context, "batch": batch, "dtype": dtype,
                            "per_call_s": roofline.DEFAULT_PER_CALL_S,
                            "rows": roofline_rows(geom, context, batch, dtype, params, active)}
    if geom is not None:
        kinds: dict[str, int] = {}
        for kind in geom.layer_kinds:
            kinds[kind] = kinds.get(kind, 0) + 1
        data["layer_summary"] = kinds
    else:
        data["layer_summary"] = {}
    data["bench_results"] = results_for_model(session, model_id)
    return data


class KVForm(BaseModel):
    """The model page's calculator inputs (also the roofline's context, batch and cache dtype)."""

    context: int = Field(32768, ge=1, le=MAX_CONTEXT, description="Tokens per sequence")
    batch: int = Field(1, ge=1, le=MAX_BATCH, description="Sequences")
    dtype: Literal[tuple(kvcache.DTYPE_BYTES)] = Field("bf16", description="KV-cache element type")


def split_model_path(path: str) -> tuple[str, str | None]:
    """``org/name.json`` → (``org/name``, ``"json"``). A repo name may itself end in ``.json``;
    the page of such a model is reached with ``?_format=html`` (Datasette's escape hatch)."""
    for fmt in FORMATS:
        if path.endswith("." + fmt):
            return path[: -len(fmt) - 1], fmt
    return path, None


@router.get("/models/{model_path:path}", response_class=HTMLResponse)
async def model_page(request: Request, model_path: str) -> Response:
    model_id, fmt = split_model_path(model_path)
    forced = request.query_params.get("_format")
    if forced in ("html", "json"):
        model_id, fmt = model_path, (None if forced == "html" else "json")
    try:
        if fmt == "csv":
            raise ApiError(404, "a model page has no CSV form; use .json")
        return await run_in_threadpool(_model_page, request, model_id, fmt)
    except ApiError as exc:
        if fmt is None:
            return error_page(request, exc.status, exc.errors)
        raise


def _model_page(request: Request, model_id: str, fmt: str | None) -> Response:
    try:
        validate_repo_id(model_id)
    except InvalidRepoId as exc:
        raise ApiError(400, f"model id: {exc}") from None
    form = validated(KVForm, request)
    context, batch, dtype = form.context, form.batch, form.dtype
    with request_reader(request) as session:
        data = model_page_data(session, model_id, context, batch, dtype)
        if data is None:
            raise ApiError(404, not_found_message(session, model_id))
    if fmt == "json":
        return json_response(data)
    specs = {}
    if data["roofline_at"]:
        specs["roofline"] = roofline_spec(data["roofline_at"], data["geometry"])
    dividend = chart_specs.dividend(data["bench_results"])
    if dividend["series"]:
        specs["dividend"] = dividend
    return render(request, "model.html", data, title=model_id, nav="/models", specs=specs, charts=bool(specs),
                  model_id=model_id, dtypes=list(kvcache.DTYPE_BYTES),
                  hub_url="https://huggingface.co/" + quote(model_id, safe="/"))


def roofline_spec(roof: dict, geometry: dict | None) -> dict:
    with_peak = [r for r in roof["rows"] if r["peak_flops"]]
    drawn = [r for r in with_peak if r["hardware"]["id"] in ROOFLINE_DRAWN] or with_peak[:6]
    devices = [{"name": r["hardware"]["name"], "bandwidth": r["hardware"]["bandwidth_bytes_per_s"],
                "peak_flops": r["peak_flops"]} for r in drawn]
    first = drawn[0] if drawn else None
    label = geometry["attention_kind"] if geometry else "this model"
    marks = []
    if first:
        marks.append({"label": f"this model ({label})", "ai": first["intensity"]})
        marks.append({"label": "MHA counterfactual", "ai": first["mha_intensity"], "counterfactual": True})
    return chart_specs.roofline(devices, marks)


# ---- hardware -------------------------------------------------------------------------------

HARDWARE_CSV_COLUMNS = ["id", "name", "vendor", "kind", "released", "memory_bytes", "bandwidth_bytes_per_s",
                        "bf16_dense_flops", "fp8_dense_flops", "ridge_bf16", "ridge_fp8", "sources"]


@page("/hardware", formats=("json", "csv"))
def hardware_page(request: Request, fmt: str | None) -> Response:
    devices = load_catalog()
    ridges = {r["id"]: r for r in roofline.ridge_points(devices)}
    rows = []
    for device in sorted(devices, key=lambda d: (d.released, d.id)):
        row = hardware_info(device).model_dump()
        row["ridge_bf16"] = ridges[device.id]["ridge_bf16"]
        row["ridge_fp8"] = ridges[device.id]["ridge_fp8"]
        rows.append(row)
    if fmt == "csv":
        flat = ({**r, "sources": [s["url"] for s in r["sources"]]} for r in rows)
        return csv_response(HARDWARE_CSV_COLUMNS, flat, "hardware.csv")
    with request_reader(request) as session:
        data = {"rows": rows, "capacity": new_models.capacity_trend(session)}
    if fmt == "json":
        return json_response(data)
    specs = {"ridge": chart_specs.ridge_points(list(ridges.values())),
             "capacity": chart_specs.sequences_beside_weights(data["capacity"]["rows"], data["capacity"]["context"])}
    return render(request, "hardware.html", data, title="Hardware", nav="/hardware", formats=("json", "csv"),
                  specs=specs, charts=True)


# ---- claims, research and prices (issue 15) -----------------------------------------------------


@page("/claims", formats=("json", "csv"))
def claims_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {"claims": claims_data(session)}
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(CLAIM_CSV_COLUMNS, claim_csv_rows(data["claims"]), "claims.csv")
    counts = {verdict: sum(1 for c in data["claims"] if c["verdict"] == verdict) for verdict in VERDICTS}
    return render(request, "claims.html", data, title="Claims", nav="/claims", formats=("json", "csv"),
                  verdict_counts=counts)


@page("/research", formats=("json", "csv"))
def research_page(request: Request, fmt: str | None) -> Response:
    data = research_data()
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(RESEARCH_CSV_COLUMNS, research_csv_rows(data["rows"]), "research.csv")
    papers = list(dict.fromkeys(r["paper"] for r in data["rows"]))
    specs = {"research": chart_specs.research_quality(data["rows"], papers)}
    charted = sum(len(s["points"]) for s in specs["research"]["series"])
    return render(request, "research.html", data, title="Research", nav="/research", formats=("json", "csv"),
                  specs=specs, charts=True, charted=charted)


@page("/prices", formats=("json", "csv"))
def prices_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = prices_data(session)
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(PRICE_CSV_COLUMNS, data["rows"], "prices.csv")
    axis = chart_specs.price_axis(data["rows"], data["kv_per_token"]["points"])
    specs = {"prices": chart_specs.prices_over_time(data["rows"], axis),
             "kv": chart_specs.kv_over_time(data["kv_per_token"]["points"], axis)}
    return render(request, "prices.html", data, title="Prices", nav="/prices", formats=("json", "csv"),
                  specs=specs, charts=True, kv_shown=chart_specs.kv_points_in_axis(data["kv_per_token"]["points"], axis))


# ---- crawl status -----------------------------------------------------------------------------

RUN_CSV_COLUMNS = ["id", "scope", "status", "started_at", "finished_at", "seen", "new", "changed", "skipped",
                   "failed", "requests", "error"]


@page("/crawl", formats=("json", "csv"))
def crawl_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {
            "health": crawler_health(session),
            "models": store_counts(session),
            "geometry_flags": geometry_flags(session),
            "runs": [run_to_dict(r) for r in recent_runs(session, 50)],
            "open_failures": [
                {"model_id": f.model_id, "reason": f.reason, "transient": f.transient, "attempts": f.attempts,
                 "detail": f.detail, "last_failed_at": f.last_failed_at, "next_attempt_at": f.next_attempt_at}
                for f in open_failures(session, 100)
            ],
        }
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(RUN_CSV_COLUMNS, data["runs"], "crawl-runs.csv")
    return render(request, "crawl.html", data, title="Crawl status", nav="/crawl", formats=("json", "csv"))


# ---- methodology ------------------------------------------------------------------------------

# The worked example every page's numbers can be checked against: Llama 2 70B (H=64, K=8,
# d=128, 80 layers), 2,048 tokens, batch 1, fp16. Computed by the same code as every page.
EXAMPLE_CONFIG = {"model_type": "llama", "num_attention_heads": 64, "num_key_value_heads": 8,
                  "hidden_size": 8192, "num_hidden_layers": 80}


@lru_cache(maxsize=1)
def methodology_data() -> dict:
    geom = parse_geometry(EXAMPLE_CONFIG)
    counter = kvcache.mha_counterfactual(geom)
    gqa, mha = kvcache.cache_bytes(geom, 2048, 1, "fp16"), kvcache.cache_bytes(counter, 2048, 1, "fp16")
    return {
        "parser_version": PARSER_VERSION,
        "dtype_bytes": dict(kvcache.DTYPE_BYTES),
        "units": {"GB": kvcache.GB, "GiB": kvcache.GiB, "kB": 1000, "MB": 10**6},
        "attention_kinds": list(ATTENTION_KINDS_TREND),
        "stacks": list(STACKS),
        "populations": list(POPULATIONS),
        "originals_min_params": ORIGINALS_MIN_PARAMS,
        "thin_n": THIN_N,
        "dataset_url": f"/downloads/{DATASET_FILENAME}",
        "periods": list(PERIODS),
        "weightings": list(WEIGHTINGS),
        "size_classes": list(SIZE_CLASSES),
        "standard_download_thresholds": list(STANDARD_THRESHOLDS),
        "g_tipping_point": G_TIPPING_POINT,
        "roofline": {"per_call_s": roofline.DEFAULT_PER_CALL_S, "contexts": list(roofline.CONTEXTS),
                     "batches": list(roofline.BATCHES)},
        "example": {"config": EXAMPLE_CONFIG, "context": 2048, "batch": 1, "dtype": "fp16",
                    "bytes_per_token": kvcache.bytes_per_token(geom, "fp16"), "gqa_bytes": gqa, "mha_bytes": mha,
                    "elements_gqa": geom.kv_elements_per_token * 2048, "elements_mha": counter.kv_elements_per_token * 2048},
    }


DATASET_FILENAME = "gqa-observatory-snapshot.zip"


@router.get(f"/downloads/{DATASET_FILENAME}", include_in_schema=False)
async def dataset_download() -> Response:
    """The bundled snapshot as a Frictionless data package (zip): models.csv, datapackage.json, configs/."""
    from observatory.snapshot_export import bundled_zip_bytes

    body = await run_in_threadpool(bundled_zip_bytes)
    return Response(body, media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{DATASET_FILENAME}"'})


@page("/methodology")
def methodology_page(request: Request, fmt: str | None) -> Response:
    data = methodology_data()
    if fmt == "json":
        return json_response(data)
    return render(request, "methodology.html", data, title="Methodology", nav="/methodology")


# ---- spot-benchmarks ---------------------------------------------------------------------------

BENCH_CSV_COLUMNS = ["created_at", "model_id", "status", "reason", "device", "backend", "kernel", "dtype", "batch",
                     "num_heads", "num_kv_heads", "head_dim", "head_dim_v", "context", "median_s", "runs",
                     "bytes_per_s", "fraction_of_ceiling", "ceiling_bytes_per_s", "flops_per_s", "fraction_of_matmul",
                     "matmul_flops_per_s", "predicted_s", "prediction_basis", "predicted_bound", "mha_head_dim",
                     "mha_head_dim_v", "mha_median_s", "mha_predicted_s", "measured_speedup", "predicted_speedup",
                     "mha_error"]


@page("/benchmarks", formats=("json", "csv"))
def benchmarks_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {"rows": latest_results(session, 200)}
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(BENCH_CSV_COLUMNS, data["rows"], "benchmarks.csv")
    dividend = chart_specs.dividend(data["rows"], by_model=True, batch=1)  # per model; batches on its page
    return render(request, "benchmarks.html", data, title="Spot-benchmarks", nav="/benchmarks",
                  formats=("json", "csv"), bench_results=data["rows"], show_model=True,
                  specs={"dividend": dividend} if dividend["series"] else {}, charts=bool(dividend["series"]))
