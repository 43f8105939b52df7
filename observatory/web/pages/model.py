"""One model (/models/{id}): geometry with provenance, the KV calculator, the roofline on every
catalogued device, capacity by tensor-parallel degree, config history, lineage and spot-benchmarks."""

from __future__ import annotations

import json
from typing import Literal
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field
from sqlmodel import Session

from observatory.bench.store import results_for_model
from observatory.catalog.hardware import catalog_version, load_catalog
from observatory.core import kvcache, roofline
from observatory.core.geometry import Geometry
from observatory.core.repo_ids import InvalidRepoId, validate_repo_id
from observatory.store.memo import BoundedCache
from observatory.store.queries.models import (
    StoredModel,
    current_derived,
    not_found_message,
    oracle_warning,
)
from observatory.web import chart_specs
from observatory.web.api.models import detail_versions, model_detail_parts
from observatory.web.deps import request_reader
from observatory.web.errors import ApiError
from observatory.web.estimates import deployment_table, hardware_info, roofline_point
from observatory.web.pages.base import page_decorator, validated
from observatory.web.rendering import (
    FORMATS,
    error_page,
    json_response,
    jsonable,
    render,
)

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


MAX_CONTEXT = 1 << 24  # 16M tokens: beyond any model's window, small enough to stay exact in JS
MAX_BATCH = 4096
# Roofs the model page draws (the table lists every catalogued device): a spread of generations,
# vendors and price points, few enough to tell apart.
ROOFLINE_DRAWN = ("a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x", "l4")


def kv_terms(geom: Geometry) -> list[dict]:
    """The cache as ``Σ elements_per_token × min(context, cap)`` terms (per distinct cap), the
    form kv-calculator.js evaluates; the same per-layer numbers ``kvcache.cache_bytes`` sums."""
    return [{"elements_per_token": e, "cap": cap} for cap, e in geom.cache_terms()]


def calculator(geom: Geometry, context: int, batch: int, dtype: str, source: int | None = None) -> dict:
    """The self-attention cache at each context; for an encoder-decoder also the cross-attention
    cache, which holds every source (encoder) token for the whole generation: per source token
    and at ``source`` tokens (the context when not given)."""
    counter = kvcache.mha_counterfactual(geom)
    cross = geom.cross_kv_elements_per_source_token if geom.is_encoder_decoder else None
    source = (source or context) if cross else None
    rows = []
    for ctx in sorted(set(roofline.CONTEXTS) | {context}):
        actual = kvcache.cache_bytes(geom, ctx, batch, dtype)
        mha = kvcache.cache_bytes(counter, ctx, batch, dtype)
        rows.append({"context": ctx, "batch": batch, "dtype": dtype, "bytes": actual, "mha_bytes": mha,
                     "saving": mha / actual if actual else None, "chosen": ctx == context,
                     "beyond_max_context": bool(geom.max_position_embeddings and ctx > geom.max_position_embeddings)})
    dtype_bytes = kvcache.DTYPE_BYTES[dtype]
    return {
        "params": {"context": context, "batch": batch, "dtype": dtype, "source": source},
        "cross_elements_per_source_token": cross,
        "cross_bytes_per_source_token": cross * dtype_bytes if cross else None,
        "cross_bytes": cross * dtype_bytes * source * batch if cross else None,
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


# The page's own estimates at its (context, batch, dtype): ~40 KB of JSON each; 256 of them
# in ~10 MB per worker.
_PAGE_ESTIMATES: BoundedCache[bytes] = BoundedCache(256)


def page_estimates(session: Session, record: StoredModel, context: int, batch: int, dtype: str,
                   source: int | None = None) -> dict:
    """The calculator, the capacity table and the roofline at this page's context, batch and
    dtype: computed once per (geometry, parameter counts, catalog version, inputs)."""
    def compute() -> bytes:
        geom = record.geom
        params, active = record.parameters
        out = {"calculator": None, "roofline_at": None, "deployment": None}
        if geom is not None and geom.attention_kind != "none":
            # The MLA capacity table reads the attention weights from the config.
            config = current_derived(session, record.model)[1].config if geom.mla is not None else None
            out["calculator"] = calculator(geom, context, batch, dtype, source)
            out["deployment"] = deployment_table(geom, load_catalog(), context, dtype, params, config)
            out["roofline_at"] = {"context": context, "batch": batch, "dtype": dtype,
                                  "per_call_s": roofline.DEFAULT_PER_CALL_S,
                                  "rows": roofline_rows(geom, context, batch, dtype, params, active)}
        return json.dumps(jsonable(out), separators=(",", ":")).encode()
    if record.estimate_key is None:
        return json.loads(compute())
    return json.loads(_PAGE_ESTIMATES.get((record.estimate_key, catalog_version(), context, batch, dtype, source),
                                          compute))


def model_page_data(session: Session, model_id: str, context: int, batch: int, dtype: str,
                    source: int | None = None) -> dict | None:
    parts = model_detail_parts(session, model_id)
    if parts is None:
        return None
    record = parts.record
    data = parts.data()
    params, active = record.parameters
    geometry = data.get("geometry") or {}
    data["parameters"] = {"total": params, "active": active,
                          "source": record.model.parameters_source if record.model.num_parameters is not None
                          else ("config" if params is not None else None),
                          # an estimate that leaves towers out says so ("language model only")
                          "scope": geometry.get("params_scope"), "uncounted": geometry.get("params_uncounted", [])}
    # "roofline" (batch 1 at 4k/32k/128k) comes with the detail; "roofline_at" is at this page's
    # context, batch and dtype.
    data.update(page_estimates(session, record, context, batch, dtype, source))
    kinds: dict[str, int] = {}
    for kind in record.geom.layer_kinds if record.geom is not None else ():
        kinds[kind] = kinds.get(kind, 0) + 1
    data["layer_summary"] = kinds
    data["bench_results"] = results_for_model(session, model_id)
    # The oracle's warning (there for the API) is the page's own notice, not a parser warning.
    oracle = record.geometry.oracle if record.geometry is not None else None
    data["parser_warnings"] = [w for w in (record.geometry.warnings if record.geometry is not None else [])
                               if oracle is None or w != oracle_warning(oracle)]
    return data


class KVForm(BaseModel):
    """The model page's calculator inputs (also the roofline's context, batch and cache dtype)."""

    context: int = Field(32768, ge=1, le=MAX_CONTEXT, description="Tokens per sequence")
    batch: int = Field(1, ge=1, le=MAX_BATCH, description="Sequences")
    dtype: Literal[tuple(kvcache.DTYPE_BYTES)] = Field("bf16", description="KV-cache element type")
    source: int | None = Field(None, ge=1, le=MAX_CONTEXT,
                               description="Encoder-decoders: source (encoder) tokens the cross-attention caches; "
                                           "the context when not given")


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
    with request_reader(request) as session:
        key = detail_versions(session, model_id)
        if key is None:
            raise ApiError(404, not_found_message(session, model_id))
        # The page is a function of the stored data (the key) and the request's URL.
        body, media_type = _PAGES.get((key, str(request.url), fmt), lambda: _page_body(request, session, model_id,
                                                                                         fmt, form))
    return Response(body, media_type=media_type)


# Rendered pages (~35 KB of HTML; JSON twins ~80 KB): 256 of them in at most ~20 MB per worker.
_PAGES: BoundedCache[tuple[bytes, str]] = BoundedCache(256)


def _page_body(request: Request, session: Session, model_id: str, fmt: str | None, form: KVForm) -> tuple[bytes, str]:
    data = model_page_data(session, model_id, form.context, form.batch, form.dtype, form.source)
    if data is None:
        raise ApiError(404, not_found_message(session, model_id))
    response = _page_response(request, model_id, fmt, data)
    return response.body, response.media_type


def _page_response(request: Request, model_id: str, fmt: str | None, data: dict) -> Response:
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
