"""/api/v1/models: the model list (JSON pages, CSV export), one model, raw config downloads.

Path layout keeps model ids unambiguous: an id may contain "/" and ".", so it is always the
whole rest of ``/api/v1/models/``, never followed by a sub-resource or stripped of a
``.json``/``.csv`` suffix (``org/name.json`` is a legal Hub id). The list's CSV twin is the
separate path ``/api/v1/models.csv``; config revisions have their own numeric paths.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Annotated, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlmodel import Session

from observatory.bench.store import results_for_model
from observatory.bench.tables import BenchResult
from observatory.catalog.hardware import catalog_version
from observatory.store.memo import BoundedCache
from observatory.store.oracle_tables import OracleCheck
from observatory.store.queries.models import (
    MAX_PAGE_SIZE,
    SUMMARY_FIELDS,
    ArchitectureInfo,
    DerivativeCounts,
    GeometryDetail,
    InvalidPageToken,
    ModelInfo,
    ModelListParams,
    ModelSummary,
    Page,
    RevisionInfo,
    StoredModel,
    get_revision,
    list_models,
    not_found_message,
    read_model,
)
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel
from observatory.store.trend_tables import DerivativeStats
from observatory.web.api.common import (
    CSV_RESPONSE,
    REPO_ID_PATTERN,
    checked_model_id,
    model_response,
)
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES, EXPORT_BUSY, ApiError
from observatory.web.estimates import DeviceRoofline, KVCacheSummary, estimates_json
from observatory.web.export_limits import export_slots
from observatory.web.rendering import csv_response
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1", tags=["models"], responses=ERROR_RESPONSES,
                   route_class=StrictQueryRoute)


class BenchResultInfo(BaseModel):
    """One spot-benchmark of the model's attention shape (see ``observatory.bench``)."""

    created_at: datetime
    status: str = Field(description="ok | skipped | failed")
    reason: str | None
    device: str
    backend: str | None
    dtype: str
    batch: int
    num_heads: int | None
    num_kv_heads: int | None
    head_dim: int | None
    context: int
    median_s: float | None
    bytes_per_s: float | None
    fraction_of_ceiling: float | None
    ceiling_bytes_per_s: float | None
    predicted_s: float | None
    prediction_basis: str | None
    peer_times_s: dict[str, float]
    speedups: dict[str, float]
    peer_errors: dict[str, str]
    kernel: str | None = Field(None, description="gqa | mla (absorbed: one latent shared by all H heads)")
    head_dim_v: int | None = Field(None, description="Value head dim (MLA: kv_lora_rank; head_dim is rank + rope)")
    flops_per_s: float | None = None
    fraction_of_matmul: float | None = Field(None, description="FLOP/s ÷ a large matmul's, same device and run")
    predicted_bound: str | None = Field(None, description="memory | compute")
    mha_median_s: float | None = Field(None, description="The MHA counterfactual (K = H), timed in the same rounds")
    mha_predicted_s: float | None = None
    mha_error: str | None = Field(None, description="Why the counterfactual did not run")
    measured_speedup: float | None = Field(None, description="mha_median_s ÷ median_s")
    predicted_speedup: float | None = Field(None, description="The roofline's ratio")


class ModelDetail(BaseModel):
    """Everything known about one model: Hub facts, current geometry with provenance, every
    stored config revision, KV cache at common contexts with the MHA counterfactual, the
    decode-attention roofline on every catalogued device, the latest spot-benchmarks."""

    model: ModelInfo
    geometry: GeometryDetail | None
    revisions: list[RevisionInfo]
    kv_cache: KVCacheSummary | None
    roofline: list[DeviceRoofline] = Field(description="Batch 1 at 4k/32k/128k tokens, bf16 cache")
    bench: list[BenchResultInfo] = Field(description="Latest spot-benchmarks, newest first")
    architecture: ArchitectureInfo | None = Field(description="Other stored models with the same architecture")
    derivatives: DerivativeCounts | None = Field(
        description="Stored repositories that name this model as a base, by relation, with their downloads")


@dataclass(frozen=True)
class DetailParts:
    """One model's detail in two parts: ``rest`` (everything but the estimates, which it holds
    empty) and ``estimates``, the ``kv_cache`` and ``roofline`` members as JSON, kept per
    geometry, parameter counts and catalog (``estimates.estimates_json``)."""

    record: StoredModel
    rest: ModelDetailResponse
    estimates: bytes

    def json(self) -> bytes:
        rest = self.rest.model_dump_json(exclude={"kv_cache", "roofline"}).encode()
        return b"{" + self.estimates + b"," + rest[1:]

    def data(self) -> dict:
        """The detail as plain values (dates stay dates), for the page's template."""
        return {**self.rest.model_dump(exclude={"ok", "kv_cache", "roofline"}), **json.loads(b"{" + self.estimates + b"}")}


def model_detail_parts(session: Session, model_id: str) -> DetailParts | None:
    """The model page's data, or None when the store has no such model: the stored record, the
    estimates derived from its geometry, its latest spot-benchmarks. ``model_id`` must be
    validated by the caller (``repo_ids.validate_repo_id``)."""
    record = read_model(session, model_id)
    if record is None:
        return None
    params, active = record.parameters
    rest = ModelDetailResponse.model_construct(
        model=record.info, geometry=record.geometry, revisions=record.revisions, kv_cache=None, roofline=[],
        bench=[BenchResultInfo.model_validate(r) for r in results_for_model(session, model_id, 10)],
        architecture=record.architecture, derivatives=record.derivatives, ok=True,
    )
    return DetailParts(record, rest, estimates_json(record.estimate_key, record.geom, params, active))


# The whole answer, kept per everything it is read from: the model's row as stored, its current
# geometry row, derivative counts, revision count, newest spot-benchmark, the newest geometry in
# the store (a new sibling of the same architecture) and the hardware catalog. ~30 KB each.
_DETAIL_JSON: BoundedCache[bytes | None] = BoundedCache(1024)


@lru_cache(maxsize=1)
def _versions_query() -> sa.Select:
    """One indexed row: what ``model_detail_json`` keys its cache on."""
    m, g = HubModel.__table__, GeometryRow.__table__
    d, c, b = DerivativeStats.__table__, ConfigRevision.__table__, BenchResult.__table__
    o = OracleCheck.__table__  # the oracle's verdict is written apart from the geometry row
    verdict = sa.select(o.c.status, o.c.checked_at).where(o.c.revision_id == m.c.current_revision_id)
    return (
        sa.select(*m.c, g.c.id, g.c.derived_at, d.c.computed_at,
                  verdict.with_only_columns(o.c.status).scalar_subquery(),
                  verdict.with_only_columns(o.c.checked_at).scalar_subquery(),
                  sa.select(sa.func.count()).where(c.c.model_id == m.c.id).scalar_subquery(),
                  sa.select(sa.func.max(b.c.id)).where(b.c.model_id == m.c.id).scalar_subquery(),
                  sa.select(sa.func.max(g.c.id)).scalar_subquery().label("newest_geometry"))
        .select_from(m.outerjoin(g, g.c.revision_id == m.c.current_revision_id)
                     .outerjoin(d, d.c.model_id == m.c.id))
        .where(m.c.id == sa.bindparam("model_id"))
    )


def detail_versions(session: Session, model_id: str) -> tuple | None:
    """What a model's detail is read from, as one hashable key (one indexed query); None when
    the store has no such model. Equal keys, equal answers."""
    versions = session.execute(_versions_query(), {"model_id": model_id}).first()
    if versions is None:
        return None
    # repr: the row holds JSON lists (tags, base models), which do not hash
    return str(session.get_bind().url), repr(tuple(versions)), catalog_version()


def model_detail_json(session: Session, model_id: str) -> bytes | None:
    """``/api/v1/models/{id}``'s body, or None when the store has no such model: an unchanged
    answer (``detail_versions``) is served as it was."""
    key = detail_versions(session, model_id)
    if key is None:
        return None

    def compute() -> bytes | None:
        parts = model_detail_parts(session, model_id)
        return None if parts is None else parts.json()
    return _DETAIL_JSON.get(key, compute)


def get_model_detail(session: Session, model_id: str) -> ModelDetail | None:
    """``model_detail_parts`` as one validated ``ModelDetail``."""
    parts = model_detail_parts(session, model_id)
    return None if parts is None else ModelDetail.model_validate_json(parts.json())


class ModelListResponse(BaseModel):
    ok: bool = True
    rows: list[ModelSummary]
    next: str | None = Field(description="Token for the next page; pass it back as ?next=")
    next_url: str | None = Field(description="This query's next page; null on the last page")


class ModelDetailResponse(ModelDetail):
    ok: bool = True


def _list_page(session: Session, params: ModelListParams) -> Page:
    try:
        return list_models(session, params)
    except InvalidPageToken as exc:
        raise ApiError(400, f"next: {exc}") from None


def models_csv_page(request: Request, session: Session, params: ModelListParams,
                    headers: dict | None = None) -> Response:
    """One page of the query as CSV: ``size`` rows (at most ``MAX_PAGE_SIZE``) from ``next`` on,
    with the JSON page's keyset links (``Link: <...>; rel="next"`` and ``X-Next-URL``). The page
    is read before the answer starts, so a 200 is always a whole page, and no connection is held
    while it is sent; at most ``api_export_per_client`` / ``api_export_concurrency`` run at once
    (a 429 past that). Every stored model at once is the data package (``/api/v1/exports``).
    Shared by the API's export and the models page's CSV."""
    with export_slots(request.app).hold(request.client.host if request.client else None):
        page = _list_page(session, params)
    next_url = str(request.url.include_query_params(next=page.next)) if page.next else None
    links = {"Link": f'<{next_url}>; rel="next"', "X-Next-URL": next_url} if next_url else {}
    return csv_response(list(SUMMARY_FIELDS), [row.model_dump() for row in page.rows], "models.csv",
                        headers={"X-Max-Size": str(MAX_PAGE_SIZE), **links, **(headers or {})})


_ATTACHMENT = {"Content-Disposition": 'attachment; filename="models.csv"'}


@router.get("/models", response_model=ModelListResponse, responses={**CSV_RESPONSE, **EXPORT_BUSY},
            summary="List models (filter, sort, keyset pages)")
def models(request: Request, session: ReadSessionDep, params: Annotated[ModelListParams, Query()],
           format: Annotated[Literal["json", "csv"], Query(description="csv: the same page as CSV")] = "json"):
    """Models with their current geometry. Pages follow ``next`` (also in ``next_url`` and a
    ``Link: <...>; rel="next"`` header); ``format=csv`` answers the same page as CSV, with the
    same links in its headers. ``size`` is at most 500 either way; every stored model at once
    is the data package ``/api/v1/exports/gqa-observatory-models.zip``."""
    if format == "csv":
        return models_csv_page(request, session, params, _ATTACHMENT)
    page = _list_page(session, params)
    next_url = str(request.url.include_query_params(next=page.next)) if page.next else None
    headers = {"Link": f'<{next_url}>; rel="next"'} if next_url else None
    return model_response(ModelListResponse(rows=page.rows, next=page.next, next_url=next_url), headers)


@router.get("/models.csv", response_class=Response, response_model=None, responses={**CSV_RESPONSE, **EXPORT_BUSY},
            summary="The model list as CSV (keyset pages, size at most 500)")
def models_csv(request: Request, session: ReadSessionDep, params: Annotated[ModelListParams, Query()]) -> Response:
    """The same query and page as ``/api/v1/models``, as CSV; the next page is in the ``Link``
    and ``X-Next-URL`` headers. Every stored model at once: ``/api/v1/exports/gqa-observatory-models.zip``."""
    return models_csv_page(request, session, params, _ATTACHMENT)


@router.get("/models/{model_id:path}", response_model=ModelDetailResponse, summary="One model")
def model(session: ReadSessionDep,
          model_id: Annotated[str, Path(description="Hub repo id, e.g. meta-llama/Llama-3.1-8B",
                                        json_schema_extra={"pattern": REPO_ID_PATTERN, "maxLength": 193})]):
    """Hub facts, current geometry with the provenance of every value (config key, disclosed
    or derived), every stored config revision (raw text at ``config_url``), KV cache at
    4k/32k/128k tokens with its MHA counterfactual, the decode-attention roofline on every
    catalogued device, and the latest spot-benchmarks. The id is the whole rest of the path."""
    body = model_detail_json(session, checked_model_id(model_id))
    if body is None:
        raise ApiError(404, not_found_message(session, model_id))
    return Response(body, media_type="application/json")


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@router.get(
    "/revisions/{revision_id}/config.json", response_class=Response, response_model=None,
    responses={200: {"content": {"application/json": {"schema": {}}, "text/plain": {"schema": {"type": "string"}}},
                     "description": "The config.json text exactly as fetched (an attachment); text/plain "
                                    "when what the repository holds is not JSON"}},
    summary="Download one stored config.json verbatim",
)
def revision_config(session: ReadSessionDep, revision_id: Annotated[int, Path(ge=1, le=2**62)]) -> Response:
    revision = get_revision(session, revision_id)
    if revision is None:
        raise ApiError(404, f"no config revision {revision_id}")
    name = _UNSAFE_FILENAME.sub("_", f"{revision.model_id.replace('/', '__')}.{revision.sha[:24]}.config.json")
    return Response(
        revision.raw_text.encode("utf-8", "surrogatepass"),
        media_type="application/json" if _is_json(revision.raw_text) else "text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"',
                 "X-Config-Provenance": revision.provenance},
    )
