"""/api/v1/compare: two to six models side by side: geometry, KV per token and at 4k/32k/128k, the
sequences each holds on every catalogued device by TP degree (``core.deployment``), and their
measured spot-benchmarks. The /compare page and its twins answer the same data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, BeforeValidator, Field, StringConstraints, field_validator
from sqlmodel import Session

from observatory.bench.store import results_for_model
from observatory.catalog.hardware import load_catalog
from observatory.core import kvcache
from observatory.core.repo_ids import InvalidRepoId, validate_repo_id
from observatory.store.queries.models import comma_list, current_derived, model_parameters, not_found_message
from observatory.store.tables import HubModel
from observatory.web.api.common import CSV_RESPONSE, REPO_ID_PATTERN, model_response
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES, ApiError
from observatory.web.estimates import KV_CONTEXTS, deployment_table
from observatory.web.rendering import csv_response
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1", tags=["models"], responses=ERROR_RESPONSES, route_class=StrictQueryRoute)

MIN_MODELS, MAX_MODELS = 2, 6
MAX_CONTEXT = 1 << 24
# The KV-against-context chart: powers of two from 1k to 1M tokens.
CHART_CONTEXTS = tuple(1 << n for n in range(10, 21))

# The pattern is published for clients; the check itself is validate_repo_id's, whose messages say why.
RepoId = Annotated[str, StringConstraints(max_length=193), Field(json_schema_extra={"pattern": REPO_ID_PATTERN})]


class CompareParams(BaseModel):
    models: Annotated[list[RepoId], BeforeValidator(comma_list)] = Field(
        ..., min_length=MIN_MODELS, max_length=MAX_MODELS,
        description=f"{MIN_MODELS} to {MAX_MODELS} Hub repo ids (repeat the parameter or separate with commas)")
    context: int = Field(32768, ge=1, le=MAX_CONTEXT, description="Tokens per sequence for the capacity table")

    @field_validator("models")
    @classmethod
    def _distinct(cls, models: list[str]) -> list[str]:
        for model_id in models:
            try:
                validate_repo_id(model_id)
            except InvalidRepoId as exc:
                raise ValueError(f"{model_id[:80]!r} is not a Hub repo id: {exc}") from None
        twice = sorted({m for m in models if models.count(m) > 1})
        if twice:
            raise ValueError(f"each model once: {', '.join(twice)} listed more than once")
        return models


class KVAt(BaseModel):
    context: int
    bytes: int = Field(description="bf16 KV cache of one sequence of this many tokens")
    beyond_max_context: bool = Field(description="Longer than the model's max_position_embeddings")


class CompareGeometry(BaseModel):
    attention_kind: str
    is_hybrid: bool
    num_query_heads: int | None
    num_kv_heads: int | None = Field(description="K; for MLA the declared (logical) count")
    group_size: float | None
    head_dim: int | None
    num_layers: int
    kv_layers: int
    sliding_window: int | None
    sliding_layers: int
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    max_position_embeddings: int | None
    kv_tp_max: int | None = Field(description="Largest power-of-two TP degree that shards every KV layer's heads "
                                              "without replication; null for MLA")


class LayoutOut(BaseModel):
    tp: int
    mode: Literal["tp", "dp_attention"]
    kv_heads_per_rank: int | None
    replicas: int | None
    copies: float | None = Field(description="KV bytes the TP group stores per token / the model's own")
    rank_bytes_per_token: int | None
    vllm_refusal: str | None
    megatron_divisible: bool | None


class CellOut(BaseModel):
    tp: int
    mode: Literal["tp", "dp_attention"]
    weights_per_rank: int | None = Field(description="bf16 weight bytes on each device")
    max_sequences: int | None = Field(description="Concurrent sequences the group holds beside the weights; 0: the "
                                                  "weights alone do not fit; null: unknown or refused by vLLM")
    vllm_refusal: str | None


class DeviceCapacity(BaseModel):
    hardware_id: str
    name: str
    memory_bytes: int
    cells: list[CellOut] = Field(description="One per (mode, TP degree), in the order of modes then degrees")


class Capacity(BaseModel):
    context: int
    kv_dtype: str
    degrees: list[int]
    modes: list[Literal["tp", "dp_attention"]]
    sentence: str = Field(description="Where replication starts, for a person")
    replication: dict | None = Field(description="The first TP degree that stores the cache more than once")
    layouts: list[LayoutOut]
    parameters: int | None
    attention_parameters: int | None = Field(description="Attention weights (MLA: what data-parallel attention "
                                                         "replicates), estimated from the config")
    rows: list[DeviceCapacity]


class BenchRow(BaseModel):
    created_at: datetime
    device: str
    backend: str
    kernel: str | None
    dtype: str
    batch: int
    context: int
    median_s: float | None
    runs: int | None
    bytes_per_s: float | None
    fraction_of_ceiling: float | None
    predicted_s: float | None
    measured_speedup: float | None = Field(description="MHA counterfactual time / this model's time, measured")
    predicted_speedup: float | None


class ComparedModel(BaseModel):
    id: str
    created_at: datetime | None
    parameters: int | None = Field(description="Disclosed, else estimated from the config")
    geometry: CompareGeometry | None = Field(description="Null when the current config does not parse")
    kv_bytes_per_token: int | None = Field(description="bf16, all KV layers at full context")
    mha_bytes_per_token: int | None = Field(description="The same for the MHA counterfactual (K = H)")
    kv: list[KVAt] = Field(description="At 4k, 32k and 128k tokens")
    curve: list[KVAt] = Field(description="At powers of two from 1k to 1M tokens (the chart)")
    capacity: Capacity | None = Field(description="Null for a model without a per-token cache")
    bench: list[BenchRow] = Field(description="Measured spot-benchmarks (status ok), newest first")


class CompareResponse(BaseModel):
    ok: bool = True
    context: int
    models: list[ComparedModel]


def _kv(geom, contexts) -> list[dict]:
    return [{"context": c, "bytes": kvcache.cache_bytes(geom, c),
             "beyond_max_context": bool(geom.max_position_embeddings and c > geom.max_position_embeddings)}
            for c in contexts]


def _model(session: Session, model: HubModel, context: int) -> dict:
    georow, derived = current_derived(session, model)
    geom = derived.geometry if derived is not None else None
    params, _ = model_parameters(model, georow)
    bench = [r for r in results_for_model(session, model.id) if r["status"] == "ok"]
    out = {"id": model.id, "created_at": model.created_at, "parameters": params, "geometry": None,
           "kv_bytes_per_token": None, "mha_bytes_per_token": None, "kv": [], "curve": [], "capacity": None,
           "bench": bench}
    if geom is None:
        return out
    out["geometry"] = {
        "attention_kind": geom.attention_kind, "is_hybrid": geom.is_hybrid, "num_query_heads": geom.num_query_heads,
        "num_kv_heads": geom.num_kv_heads, "group_size": geom.group_size, "head_dim": geom.head_dim,
        "num_layers": geom.num_layers, "kv_layers": geom.kv_layers, "sliding_window": geom.sliding_window,
        "sliding_layers": geom.sliding_layers, "kv_lora_rank": geom.mla.kv_lora_rank if geom.mla else None,
        "qk_rope_head_dim": geom.mla.qk_rope_head_dim if geom.mla else None,
        "max_position_embeddings": geom.max_position_embeddings,
        "kv_tp_max": georow.kv_tp_max if georow is not None else None}
    if geom.kv_elements_per_token:
        out["kv_bytes_per_token"] = kvcache.bytes_per_token(geom)
        out["mha_bytes_per_token"] = kvcache.bytes_per_token(kvcache.mha_counterfactual(geom))
        out["kv"], out["curve"] = _kv(geom, KV_CONTEXTS), _kv(geom, CHART_CONTEXTS)
        out["capacity"] = deployment_table(geom, load_catalog(), context, "bf16", params, derived.config)
    return out


def compare_data(session: Session, params: CompareParams) -> dict:
    """The comparison of ``params.models``, in the order given; an unknown id is a 404 naming the
    closest stored ids, as the model page's."""
    found, missing = [], []
    for model_id in params.models:
        model = session.get(HubModel, model_id)
        if model is None:
            missing.append(not_found_message(session, model_id))
        else:
            found.append(model)
    if missing:
        raise ApiError(404, *missing)
    return {"context": params.context, "models": [_model(session, m, params.context) for m in found]}


CSV_COLUMNS = ["model_id", "attention_kind", "num_query_heads", "num_kv_heads", "group_size", "head_dim",
               "kv_layers", "parameters", "kv_bytes_per_token", "kv_4k", "kv_32k", "kv_128k", "hardware_id",
               "memory_bytes", "context", "tp", "mode", "copies", "weights_per_rank", "max_sequences", "vllm_refusal"]


def csv_rows(data: dict) -> list[dict]:
    """One row per (model, device, mode, TP degree); a model without a per-token cache, one row."""
    rows = []
    for m in data["models"]:
        g = m["geometry"] or {}
        base = {"model_id": m["id"], "parameters": m["parameters"], "kv_bytes_per_token": m["kv_bytes_per_token"],
                **{k: g.get(k) for k in ("attention_kind", "num_query_heads", "num_kv_heads", "group_size",
                                         "head_dim", "kv_layers")},
                **{f"kv_{p['context'] // 1024}k": p["bytes"] for p in m["kv"]}, "context": data["context"]}
        cap = m["capacity"]
        if cap is None:
            rows.append(base)
            continue
        copies = {(lay["mode"], lay["tp"]): lay["copies"] for lay in cap["layouts"]}
        for device in cap["rows"]:
            for cell in device["cells"]:
                rows.append({**base, "hardware_id": device["hardware_id"], "memory_bytes": device["memory_bytes"],
                             "tp": cell["tp"], "mode": cell["mode"], "copies": copies[(cell["mode"], cell["tp"])],
                             "weights_per_rank": cell["weights_per_rank"], "max_sequences": cell["max_sequences"],
                             "vllm_refusal": cell["vllm_refusal"]})
    return rows


@router.get("/compare", response_model=CompareResponse, responses=CSV_RESPONSE, summary="Compare 2 to 6 models")
def compare(session: ReadSessionDep, params: Annotated[CompareParams, Query()],
            format: Annotated[Literal["json", "csv"], Query(description="csv: one row per model, device, "
                                                            "attention mode and TP degree")] = "json"):
    """Geometry, KV per token and at 4k/32k/128k, the concurrent sequences on every catalogued
    device at TP 1-16 (plain TP; MLA also with data-parallel attention), and measured
    spot-benchmarks, for each model in the order given."""
    data = compare_data(session, params)
    if format == "csv":
        return csv_response(CSV_COLUMNS, csv_rows(data), "compare.csv")
    return model_response(CompareResponse(**data))


@router.get("/compare.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="Compare 2 to 6 models, as CSV")
def compare_csv(session: ReadSessionDep, params: Annotated[CompareParams, Query()]) -> Response:
    return compare(session, params, "csv")
