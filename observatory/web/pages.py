"""HTML pages, each with a JSON twin (``.json``) and, for lists, a CSV export (``.csv``).

Datasette's convention: the JSON twin returns exactly the data the template renders, so a
reader can cite a page and a script can fetch the same numbers. Every handler builds one
JSON-safe ``data`` dict; ``respond`` renders it as HTML, JSON or CSV. Query logic lives in
``observatory.queries`` / ``observatory.trends`` (shared with the /api/v1 routers); this module
only shapes their answers for people.

Untrusted strings (model ids, config values, query parameters) reach the templates only
through Jinja2 autoescaping; chart data is embedded with ``|tojson`` inside
``<script type="application/json">``, which the Content-Security-Policy does not execute.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections.abc import Callable, Iterable
from datetime import date, datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from dataclasses import asdict

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from pydantic import BaseModel, ValidationError
from sqlmodel import Session

from observatory.db import PROJECT_ROOT, read_only
from observatory.queries import (
    ATTENTION_KINDS,
    MAX_PAGE_SIZE,
    SUMMARY_FIELDS,
    InvalidPageToken,
    ModelListParams,
    list_models,
)
from observatory.trend_store import STANDARD_THRESHOLDS, Population, plotted_trend_rows, read_trends
from observatory.trends import G_TIPPING_POINT, KIND_BUCKETS, PERIODS, SIZE_CLASSES, WEIGHTINGS, TrendPoint
from observatory.web import chart_specs
from observatory.web.errors import ApiError

TEMPLATES_DIR = PROJECT_ROOT / "templates"
STATIC_DIR = Path(__file__).resolve().parent / "static"

NAV = (
    ("/", "Overview"),
    ("/trends", "Trends"),
    ("/models", "Models"),
    ("/hardware", "Hardware"),
    ("/crawl", "Crawl"),
    ("/methodology", "Methodology"),
)

FORMATS = {
    "json": ("application/json", "JSON"),
    "csv": ("text/csv", "CSV"),
}

router = APIRouter(include_in_schema=False)


# ---- formatting (the same rules as the scripts in static/, so both views agree) -----------

DASH = "—"


def fmt_num(value: Any, digits: int = 3) -> str:
    """Whole numbers with thousands separators; others to ``digits`` significant figures."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{round(value):,}"
    return f"{float(f'{value:.{digits}g}'):g}"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value * 100:.{digits}f}%"


def _scaled(value: float, base: int, units: tuple[str, ...]) -> str:
    i = 0
    while i < len(units) - 1 and abs(value) >= base:
        value /= base
        i += 1
    digits = 0 if value >= 100 or i == 0 else 1 if value >= 10 else 2
    return f"{value:,.{digits}f} {units[i]}"


def fmt_bytes(value: float | None) -> str:
    """Decimal units (kB = 1000 B, GB = 10**9 B), as kv-calculator.js prints them."""
    return DASH if value is None else _scaled(value, 1000, ("B", "kB", "MB", "GB", "TB", "PB"))


def fmt_bytes_binary(value: float | None) -> str:
    """Binary units (KiB = 1024 B, GiB = 2**30 B)."""
    return DASH if value is None else _scaled(value, 1024, ("B", "KiB", "MiB", "GiB", "TiB", "PiB"))


def fmt_flops(value: float | None) -> str:
    if value is None:
        return DASH
    for bound, suffix in ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s")):
        if abs(value) >= bound:
            return f"{fmt_num(value / bound)} {suffix}"
    return f"{fmt_num(value)} FLOP/s"


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return DASH
    if value >= 1:
        return f"{fmt_num(value)} s"
    if value >= 1e-3:
        return f"{fmt_num(value * 1e3)} ms"
    return f"{fmt_num(value * 1e6)} µs"


def fmt_date(value: Any) -> str:
    if value is None:
        return DASH
    if isinstance(value, str):
        return value[:10]
    return value.strftime("%Y-%m-%d")


def fmt_datetime(value: Any) -> str:
    if value is None:
        return DASH
    if isinstance(value, str):
        return value.replace("T", " ")[:16] + " UTC"
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def jsonable(value: Any) -> Any:
    """Dates as ISO strings, tuples as lists, non-finite floats as null (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---- the template environment -------------------------------------------------------------


@lru_cache(maxsize=64)
def _static_version(name: str) -> str:
    path = STATIC_DIR / name
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    except OSError:
        return "0"


def static_url(name: str) -> str:
    """A /static URL with a content hash, so a changed file is never served from a stale cache."""
    return f"/static/{name}?v={_static_version(name)}"


def model_url(model_id: str, suffix: str = "") -> str:
    # Repo ids are validated ("org/name" of [A-Za-z0-9_.-]); quote anyway so a URL is always a URL.
    return "/models/" + quote(model_id, safe="/") + suffix


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=fmt_num, pct=fmt_pct, bytes=fmt_bytes, gib=fmt_bytes_binary, flops=fmt_flops,
        seconds=fmt_seconds, date=fmt_date, datetime=fmt_datetime,
    )
    env.globals.update(static=static_url, model_url=model_url, nav=NAV)
    return env


# ---- responding in three formats ------------------------------------------------------------


def page_url(request: Request, fmt: str | None = None, **changes: Any) -> str:
    """This page's URL in another format and/or with some query parameters changed."""
    params = dict(request.query_params)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    path = request.url.path
    for ext in FORMATS:
        if path.endswith("." + ext):
            path = path[: -len(ext) - 1]
    if fmt:
        path = ("/index" if path == "/" else path) + "." + fmt
    query = urlencode(params)
    return path + ("?" + query if query else "")


def format_links(request: Request, formats: Iterable[str]) -> list[dict]:
    return [
        {"url": page_url(request, fmt), "media_type": FORMATS[fmt][0], "label": FORMATS[fmt][1]}
        for fmt in formats
    ]


def csv_cell(value: Any) -> Any:
    """One CSV cell. Strings that a spreadsheet would run as a formula get a leading quote
    (OWASP's CSV-injection advice): config strings are untrusted."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        value = "; ".join(str(v) for v in value)
    if isinstance(value, (datetime, date)):
        return jsonable(value)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def csv_response(columns: list[str], rows: Iterable[dict], filename: str, headers: dict | None = None) -> Response:
    def generate() -> Iterable[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(columns)
        for i, row in enumerate(rows):
            writer.writerow([csv_cell(row.get(c)) for c in columns])
            if i % 200 == 0:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()

    all_headers = {"Content-Disposition": f'inline; filename="{filename}"'}
    all_headers.update(headers or {})
    return StreamingResponse(generate(), media_type="text/csv; charset=utf-8", headers=all_headers)


def render(
    request: Request,
    template: str,
    data: dict,
    *,
    title: str,
    nav: str | None = None,
    formats: Iterable[str] = ("json",),
    status: int = 200,
    headers: dict | None = None,
    **extra: Any,
) -> HTMLResponse:
    context = {
        "request": request,
        "title": title,
        "nav_current": nav,
        "formats": format_links(request, formats),
        "charts": False,
        **data,
        **extra,
    }
    html = environment().get_template(template).render(context)
    return HTMLResponse(html, status_code=status, headers=headers)


def json_response(data: dict, status: int = 200, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"ok": True, **jsonable(data)}, status_code=status, headers=headers)


def error_page(request: Request, status: int, errors: list[str]) -> HTMLResponse:
    titles = {400: "Bad request", 404: "Not found", 422: "Invalid parameter", 500: "Server error"}
    return render(
        request, "error.html", {"status": status, "errors": errors},
        title=titles.get(status, "Error"), formats=(), status=status,
    )


def wants_html(request: Request) -> bool:
    """Whether an error on this request should be a page rather than the JSON error shape."""
    path = request.url.path
    if path.startswith(("/api/", "/static/")) or path.endswith((".json", ".csv")):
        return False
    accept = request.headers.get("accept", "")
    return "text/html" in accept or not accept or accept == "*/*"


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
        return handler

    return decorate


# ---- trends: home and /trends -----------------------------------------------------------------

MAX_PLOTTED_MODELS = 3000  # points in the G chart; the most downloaded first


def _session(request: Request) -> Session:
    # Pages only read: a deferred transaction never waits for (or blocks) a crawl's writes.
    return Session(read_only(request.app.state.engine), expire_on_commit=False)


def point_record(point: TrendPoint) -> dict:
    """One trend point as the JSON twins and CSV give it."""
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
    row = {k: v for k, v in record.items() if not isinstance(v, dict)}
    row.update({f"share_{k}": v for k, v in record["shares"].items()})
    row.update({f"kv_median_{c}": s["kv_median"] for c, s in record["kv_by_size"].items()})
    return row


def trend_params(request: Request) -> dict:
    from observatory.web.api_trends import TrendParams  # api_trends imports this module

    return validated(TrendParams, request).model_dump()


def trends_data(session: Session, p: dict) -> tuple[dict, dict]:
    """(data for the JSON twin, chart specs for the template) of one trends query."""
    population = Population(min_downloads=p["min_downloads"], author=p["author"], model_type=p["model_type"])
    series = read_trends(session, population, p["period"], p["weighting"], p["since"], p["until"])
    plotted, total = plotted_trend_rows(session, population, MAX_PLOTTED_MODELS, p["since"], p["until"])
    points = series.points
    data = {
        "params": p,
        "population": population.key,
        "precomputed": series.precomputed,
        "computed_at": series.computed_at,
        "g_tipping_point": G_TIPPING_POINT,
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
        "kind_share": chart_specs.kind_share(points, p["period"]),
        "g_distribution": chart_specs.g_distribution(points, plotted),
        "g_over": chart_specs.share_g_over(points),
        "kv": chart_specs.kv_per_token(points),
    }
    return data, charts


@page("/trends", formats=("json", "csv"))
def trends_page(request: Request, fmt: str | None) -> Response:
    p = trend_params(request)
    with _session(request) as session:
        data, charts = trends_data(session, p)
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        rows = (trend_csv_row(jsonable(r)) for r in data["points"])
        return csv_response(TREND_CSV_COLUMNS, rows, "trends.csv")
    return render(request, "trends.html", data, title="Trends", nav="/trends", formats=("json", "csv"),
                  specs=charts, charts=True, size_classes=SIZE_CLASSES,
                  plotted_note=plotted_note(data["plotted_models"]["shown"], data["plotted_models"]["total"]),
                  choices={"period": PERIODS, "weighting": WEIGHTINGS, "thresholds": STANDARD_THRESHOLDS})


# The overview quotes the newest quarter holding at least this many models (a quarter with
# two models says little), or the newest holding any.
HEADLINE_MIN_MODELS = 5


def _latest(points: list[TrendPoint]) -> TrendPoint | None:
    return next((p for p in reversed(points) if p.count >= HEADLINE_MIN_MODELS),
                next((p for p in reversed(points) if p.count), None))


def plotted_note(shown: int, total: int) -> str:
    if shown >= total:
        return f"all {total:,} models"
    return f"the {shown:,} most downloaded of {total:,} models"


def _year_before(points: list[TrendPoint], point: TrendPoint) -> TrendPoint | None:
    start = point.period_start
    target = start.replace(year=start.year - 1)
    return next((p for p in points if p.period_start == target and p.count), None)


def headlines(quarters: list[TrendPoint]) -> dict:
    """The overview's numbers: the newest quarter holding models, beside the same quarter a year before."""
    latest = _latest(quarters)
    if latest is None:
        return {"quarter": None}
    before = _year_before(quarters, latest)

    def pick(point: TrendPoint | None) -> dict | None:
        if point is None:
            return None
        gqa, mla = point.shares.get("GQA") or 0.0, point.shares.get("MLA") or 0.0
        return {
            "quarter": chart_specs.period_label(point.period_start, "quarter"),
            "period_start": point.period_start,
            "count": point.count,
            "share_gqa": gqa,
            "share_mla": mla,
            "share_gqa_or_mla": gqa + mla,
            "g_median": point.g_median,
            "share_g_over_16": point.share_g_over_16,
            "kv_median": point.kv_median,
        }

    return {"quarter": pick(latest), "year_before": pick(before)}


@page("/")
def home_page(request: Request, fmt: str | None) -> Response:
    with _session(request) as session:
        quarters = read_trends(session, Population(), "quarter", "count").points
        plotted, total = plotted_trend_rows(session, Population(), MAX_PLOTTED_MODELS)
        status = crawl_summary(session)
    data = {
        "headlines": headlines(quarters),
        "models_tracked": status["models"],
        "last_crawl": status["last_run"],
        "quarters": [point_record(p) for p in quarters],
    }
    if fmt == "json":
        return json_response(data)
    charts = {
        "kind_share": chart_specs.kind_share(quarters, "quarter"),
        "g_distribution": chart_specs.g_distribution(quarters, plotted),
        "kv": chart_specs.kv_per_token(quarters, by_size=False),
    }
    return render(request, "index.html", data, title="Overview", nav="/", specs=charts, charts=True,
                  plotted_note=plotted_note(len(plotted), total))


# ---- the model list -------------------------------------------------------------------------


def validated(model: type[BaseModel], request: Request, lists: tuple[str, ...] = ()):
    """The API's parameter model filled from a page's query string, so a page and its API
    accept exactly the same parameters. Empty form fields count as absent."""
    raw: dict[str, Any] = {}
    for name in model.model_fields:
        values = [v.strip() for v in request.query_params.getlist(name) if v.strip()]
        if values:
            raw[name] = values if name in lists else values[-1]
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ApiError(400, *[_describe_error(e) for e in exc.errors()]) from None


def list_params(request: Request) -> ModelListParams:
    return validated(ModelListParams, request, lists=("kind",))


def _describe_error(err: dict) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ()) if not isinstance(p, int))
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


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


def _stream_all(session: Session, params: ModelListParams) -> Iterable[dict]:
    """Every row of the query, following the keyset pages (CSV ``?_stream=on``)."""
    params = params.model_copy(update={"size": MAX_PAGE_SIZE, "next": None})
    while True:
        page_ = list_models(session, params)
        for row in page_.rows:
            yield row.model_dump()
        if not page_.next:
            return
        params = params.model_copy(update={"next": page_.next})


@page("/models", formats=("json", "csv"))
def models_page(request: Request, fmt: str | None) -> Response:
    params = list_params(request)
    stream = fmt == "csv" and request.query_params.get("_stream") in ("on", "1", "true")
    if stream:
        session = _session(request)

        def rows() -> Iterable[dict]:
            try:
                yield from _stream_all(session, params)
            finally:
                session.close()

        return csv_response(list(SUMMARY_FIELDS), rows(), "models.csv")
    with _session(request) as session:
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


def crawl_summary(session):  # TEMP until the API's crawl status function exists
    return {"models": 0, "last_run": None}


# ---- one model ------------------------------------------------------------------------------

KV_CONTEXTS = (4096, 32768, 131072)
MAX_CONTEXT = 1 << 24  # 16M tokens: beyond any model's window, small enough to stay exact in JS
MAX_BATCH = 4096
ROOFLINE_SHOWN = ("h100-sxm", "h200-sxm", "b200", "mi300x")  # roofs drawn at first; the legend adds others


def kv_terms(geom: Geometry) -> list[dict]:
    """The cache as ``Σ elements_per_token × min(context, cap)`` terms (per distinct cap), the
    form kv-calculator.js evaluates; the same per-layer numbers ``kvcache.cache_bytes`` sums."""
    terms: dict[int | None, int] = {}
    for elements, cap in zip(geom.layer_kv_elements(), geom.layer_windows()):
        if elements:
            terms[cap] = terms.get(cap, 0) + elements
    return [{"elements_per_token": e, "cap": cap} for cap, e in sorted(terms.items(), key=lambda t: t[0] or 0)]


def kv_params(request: Request) -> dict:
    from observatory.web.api_models import KVParams  # noqa: F401  (defined there when the API grows it)

    raise NotImplementedError


def calculator(geom: Geometry, context: int, batch: int, dtype: str) -> dict:
    counter = kvcache.mha_counterfactual(geom)
    rows = []
    for ctx in sorted(set(KV_CONTEXTS) | {context}):
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


def roofline_rows(geom: Geometry, context: int, batch: int, dtype: str) -> list[dict]:
    """Decode attention of this model (and its MHA counterfactual) on every catalogued device."""
    counter = kvcache.mha_counterfactual(geom)
    rows = []
    for device in load_catalog():
        est = roofline.decode_estimate(geom, device, context, batch, dtype)
        mha = roofline.decode_estimate(counter, device, context, batch, dtype)
        rows.append({
            "device_id": device.id, "device": device.name, "memory_bytes": device.memory_bytes,
            "bandwidth_bytes_per_s": device.bandwidth_bytes_per_s,
            "peak_flops": device.peak_flops(dtype if dtype == "fp8" else "bf16"),
            "ridge": roofline.ridge_point(device, "fp8" if dtype == "fp8" else "bf16"),
            "estimate": est.to_dict(), "mha": mha.to_dict(),
            "speedup": mha.time_s / est.time_s if est.time_s else None,
            "max_batch": roofline.max_batch(geom, device, context, dtype),
            "mha_max_batch": roofline.max_batch(counter, device, context, dtype),
        })
    return rows


def _revision_link(revision: dict) -> dict:
    return revision


@lru_cache(maxsize=1)
def _bench_available() -> bool:
    try:
        importlib.import_module("observatory.bench.tables")
    except ImportError:
        return False
    return True


def model_page_data(session: Session, model_id: str, context: int, batch: int, dtype: str) -> dict | None:
    detail = get_model_detail(session, model_id)
    if detail is None:
        return None
    data = detail.model_dump()
    model = session.get(HubModel, model_id)
    _, geom = current_geometry(session, model)
    data["calculator"] = None
    data["roofline"] = None
    if geom is not None and geom.attention_kind != "none":
        data["calculator"] = calculator(geom, context, batch, dtype)
        data["roofline"] = {"context": context, "batch": batch, "dtype": dtype,
                            "per_call_s": roofline.DEFAULT_PER_CALL_S,
                            "rows": roofline_rows(geom, context, batch, dtype)}
    if geom is not None:
        kinds: dict[str, int] = {}
        for kind in geom.layer_kinds:
            kinds[kind] = kinds.get(kind, 0) + 1
        data["layer_summary"] = kinds
    else:
        data["layer_summary"] = {}
    data["bench_results"] = bench_results(session, model_id)
    return data
