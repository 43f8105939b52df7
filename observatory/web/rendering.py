"""How pages are rendered: number formatting, the Jinja2 environment, and answering in three
formats (HTML, the JSON twin, CSV). Shared by every page module (``web.pages``).

Autoescaping is on for every template; ``StrictUndefined`` turns a missing variable into an
error instead of an empty string. Formatting rules match ``static/kv-calculator.js`` so the
server-rendered numbers and the live ones agree to the character.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections.abc import Iterable
from datetime import date, datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from observatory.store.db import PROJECT_ROOT

TEMPLATES_DIR = PROJECT_ROOT / "templates"
STATIC_DIR = Path(__file__).resolve().parent / "static"

NAV = (
    ("/", "Overview"),
    ("/trends", "Trends"),
    ("/models", "Models"),
    ("/hardware", "Hardware"),
    ("/benchmarks", "Benchmarks"),
    ("/claims", "Claims"),
    ("/research", "Research"),
    ("/prices", "Prices"),
    ("/crawl", "Crawl"),
    ("/alerts", "Alerts"),
    ("/methodology", "Methodology"),
)

FORMATS = {
    "json": ("application/json", "JSON"),
    "csv": ("text/csv", "CSV"),
}

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
    # Halves round away from zero, as Intl.NumberFormat does in the scripts: Python's format
    # rounds them to even, and a page said 153 GiB above a table saying 152 GiB (152.5 GiB).
    rounded = Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{rounded:,.{digits}f} {units[i]}"


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


def fmt_schedule(kinds: Any) -> str:
    """A per-layer list for people: runs and repeats folded, e.g. 48 Qwen3-Next layers read
    "(linear ×3, full) ×12"; a list that does not repeat reads "sliding ×5, full, sliding ×4"."""
    if not kinds:
        return DASH
    if not isinstance(kinds, (list, tuple)):
        return str(kinds)
    runs: list[tuple[Any, int]] = []
    for kind in kinds:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + 1)
        else:
            runs.append((kind, 1))

    def show(chunk: list[tuple[Any, int]]) -> str:
        return ", ".join(f"{k} ×{n}" if n > 1 else str(k) for k, n in chunk)

    for size in range(1, len(runs) // 2 + 1):  # the shortest block of runs that tiles the list
        if len(runs) % size == 0 and runs == runs[:size] * (len(runs) // size):
            block = show(runs[:size])
            return f"({block}) ×{len(runs) // size}" if size > 1 else f"{block} ×{len(runs) // size}"
    # A block repeated with a different tail (Gemma 3: five sliding and one full, then sliding ×2)
    for size in range(2, len(runs) // 2 + 1):
        times = 1
        while runs[times * size:(times + 1) * size] == runs[:size]:
            times += 1
        if times > 1:
            rest = runs[times * size:]
            return f"({show(runs[:size])}) ×{times}" + (f", {show(rest)}" if rest else "")
    return show(runs)


def jsonable(value: Any) -> Any:
    """Dates as ISO strings, tuples as lists, non-finite floats as null (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        # UTC as "Z", as pydantic writes it in the /api/v1 answers, so twins and API agree
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
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
        seconds=fmt_seconds, date=fmt_date, datetime=fmt_datetime, schedule=fmt_schedule,
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


def error_page(request: Request, status: int, errors: list[str], headers: dict | None = None) -> HTMLResponse:
    titles = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 422: "Invalid parameter",
              500: "Server error"}
    return render(
        request, "error.html", {"status": status, "errors": errors},
        title=titles.get(status, "Error"), formats=(), status=status, headers=headers,
    )


def wants_html(request: Request) -> bool:
    """Whether an error on this request should be a page rather than the JSON error shape:
    a browser (it asks for text/html) on anything but the API, static files and .json/.csv twins."""
    path = request.url.path
    if path.startswith(("/api/", "/static/")) or path.endswith((".json", ".csv", ".xml", ".atom")):
        return False
    return "text/html" in request.headers.get("accept", "")


def request_base(request: Request, settings) -> str:
    """The site's base URL for links that leave the page (feeds, alert links): the setting, else the request's."""
    return settings.base_url.rstrip("/") if settings.base_url else str(request.base_url).rstrip("/")
