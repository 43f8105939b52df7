"""What the pages and the API derive beside a stored geometry: the KV cache at common contexts
with its MHA counterfactual, and the decode roofline on catalogued devices (the arithmetic is
``core.kvcache`` and ``core.roofline``; these are its response shapes).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from pydantic import BaseModel, Field, TypeAdapter

from observatory.catalog.hardware import Device, catalog_version, load_catalog
from observatory.core import deployment, kvcache, roofline
from observatory.core.config_dialects import ConfigError
from observatory.core.geometry import Geometry
from observatory.core.params import estimate_parameters
from observatory.store.memo import BoundedCache

KV_CONTEXTS = roofline.CONTEXTS  # 4k, 32k, 128k



class KVCachePoint(BaseModel):
    context: int
    bytes: int = Field(description="KV cache of one sequence of this many tokens")
    mha_bytes: int = Field(description="The same for the MHA counterfactual (K = H)")
    saving: float | None = Field(description="mha_bytes / bytes")
    beyond_max_context: bool = Field(description="Longer than the model's max_position_embeddings")


class KVCacheSummary(BaseModel):
    dtype: str
    bytes_per_token: int = Field(description="Bytes one token adds at full context, all KV layers")
    mha_bytes_per_token: int
    contexts: list[KVCachePoint]


class HardwareSource(BaseModel):
    url: str
    note: str


class MemoryTierInfo(BaseModel):
    name: str
    bytes: int
    bandwidth_bytes_per_s: float
    on_chip: bool = Field(description="On-chip SRAM (SRAM-first chips), else off-chip DRAM/HBM")
    note: str


class HardwareInfo(BaseModel):
    """One catalogued accelerator (dense throughput only, never sparse figures)."""

    id: str
    name: str
    vendor: str
    kind: str
    memory_bytes: int
    memory_note: str
    bandwidth_bytes_per_s: float
    bf16_dense_flops: float | None
    fp8_dense_flops: float | None
    flops_note: str
    released: date
    released_note: str
    sources: list[HardwareSource]
    memory_tiers: list[MemoryTierInfo] = Field(description="Fastest first; one tier unless the chip keeps weights "
                                               "and cache in on-chip SRAM. memory_bytes is their sum and "
                                               "bandwidth_bytes_per_s the fastest tier's")
    on_chip_bytes: int = Field(description="On-chip SRAM tier bytes; 0 for a device without one")


class RooflinePoint(BaseModel):
    """Decode at one (context, batch) on one device: attention alone beside its MHA
    counterfactual, and the whole step (attention plus every weight read once) where the
    parameter count is known, with what fits in memory."""

    context: int
    batch: int
    kv_bytes: int
    time_s: float = Field(description="Roofline floor of one decode step's attention alone")
    tokens_per_s: float = Field(description="Token-rate ceiling attention alone would allow (weights ignored)")
    bound: str
    intensity: float = Field(description="FLOP per byte")
    mha_time_s: float
    mha_intensity: float = Field(description="FLOP per byte of the MHA counterfactual")
    speedup: float | None = Field(description="mha_time_s / time_s")
    weight_bytes: int | None = Field(description="bf16 weights; null when the parameter count is unknown")
    step_time_s: float | None = Field(description="Whole decode step (attention + weights) on devices_needed devices")
    step_tokens_per_s: float | None = Field(description="Token-rate ceiling of the whole step on devices_needed devices")
    devices_needed: int | None = Field(description="Fewest devices whose memory holds the bf16 weights "
                                       "(ceil(weights / memory)); null when the parameter count is unknown")
    cache_fits: bool | None = Field(description="The KV cache alone fits in one device's memory")
    fits: bool | None = Field(description="Weights and KV cache together fit in one device's memory; "
                                          "null when the parameter count is unknown")
    max_batch: int | None = Field(description="Sequences of this context whose cache fits beside the bf16 "
                                  "weights on one device (0: the weights alone do not fit); without a parameter "
                                  "count, beside nothing")


class DeviceRoofline(BaseModel):
    hardware_id: str
    name: str
    points: list[RooflinePoint]


def kv_summary(geom: Geometry, dtype: str = "bf16") -> KVCacheSummary:
    counter = kvcache.mha_counterfactual(geom)
    points = []
    for context in KV_CONTEXTS:
        actual, mha = kvcache.cache_bytes(geom, context, 1, dtype), kvcache.cache_bytes(counter, context, 1, dtype)
        points.append(KVCachePoint(
            context=context, bytes=actual, mha_bytes=mha, saving=mha / actual if actual else None,
            beyond_max_context=geom.max_position_embeddings is not None and context > geom.max_position_embeddings,
        ))
    return KVCacheSummary(dtype=dtype, bytes_per_token=kvcache.bytes_per_token(geom, dtype),
                          mha_bytes_per_token=kvcache.bytes_per_token(counter, dtype), contexts=points)


def hardware_info(device: Device) -> HardwareInfo:
    return HardwareInfo.model_validate(device.to_dict())


def roofline_point(geom: Geometry, device: Device, context: int, batch: int = 1, dtype: str = "bf16",
                   num_parameters: int | None = None, counterfactual: Geometry | None = None,
                   active_parameters: int | None = None) -> RooflinePoint:
    actual = roofline.decode_estimate(geom, device, context, batch, dtype)
    mha = roofline.decode_estimate(counterfactual or kvcache.mha_counterfactual(geom), device, context, batch, dtype)
    one = roofline.decode_estimate(geom, device, context, batch, dtype, params=num_parameters,
                                   active_params=active_parameters) if num_parameters else None
    needed = roofline.devices_for_weights(device, num_parameters)
    step = roofline.decode_estimate(geom, device, context, batch, dtype, params=num_parameters,
                                    active_params=active_parameters, devices=needed) if needed else None
    return RooflinePoint(
        context=context, batch=batch, kv_bytes=actual.kv_bytes, time_s=actual.time_s,
        tokens_per_s=actual.tokens_per_s, bound=actual.bound, intensity=actual.intensity,
        mha_time_s=mha.time_s, mha_intensity=mha.intensity,
        speedup=mha.time_s / actual.time_s if actual.time_s else None,
        weight_bytes=one.weight_bytes if one else None,
        step_time_s=step.time_s if step else None, step_tokens_per_s=step.tokens_per_s if step else None,
        devices_needed=needed, cache_fits=actual.cache_fits, fits=one.fits if one else None,
        max_batch=roofline.max_batch(geom, device, context, dtype, params=num_parameters),
    )


def roofline_summary(geom: Geometry, devices: Iterable[Device], num_parameters: int | None = None,
                     active_parameters: int | None = None) -> list[DeviceRoofline]:
    """Batch-1 decode at ``KV_CONTEXTS`` on each of ``devices``."""
    counter = kvcache.mha_counterfactual(geom)
    return [
        DeviceRoofline(hardware_id=d.id, name=d.name,
                       points=[roofline_point(geom, d, c, 1, "bf16", num_parameters, counter, active_parameters)
                               for c in KV_CONTEXTS])
        for d in devices
    ]


_ROOFLINES = TypeAdapter(list[DeviceRoofline])
# ~24 KB of JSON per entry (20 devices x 3 contexts): 1,024 models' estimates in ~25 MB per worker.
_ESTIMATES: BoundedCache[bytes] = BoundedCache(1024)


def estimates_json(key: tuple | None, geom: Geometry | None, num_parameters: int | None = None,
                   active_parameters: int | None = None) -> bytes:
    """The members ``"kv_cache": …, "roofline": […]`` of a model's detail as JSON: the KV summary
    and the batch-1 roofline on every catalogued device. They depend only on the geometry, the
    parameter counts and the catalog, so they are computed once per ``key`` (the store's name
    for those: ``StoredModel.estimate_key``) and catalog version; ``key`` None computes afresh."""
    def compute() -> bytes:
        if geom is None or not (geom.kv_layers > 0 and geom.kv_elements_per_token > 0):
            return b'"kv_cache":null,"roofline":[]'
        summary = roofline_summary(geom, load_catalog(), num_parameters, active_parameters)
        return b'"kv_cache":' + kv_summary(geom).model_dump_json().encode() + b',"roofline":' + _ROOFLINES.dump_json(summary)
    if key is None:
        return compute()
    return _ESTIMATES.get((key, catalog_version()), compute)


def attention_parameters(config: dict | None) -> int | None:
    """The attention weights estimated from the config (q/k/v/o, MLA's down and up projections):
    what data-parallel attention keeps whole on every rank. None when the config says too little."""
    if not config:
        return None
    try:
        return estimate_parameters(config).breakdown.get("attention")
    except ConfigError:
        return None


def deployment_table(geom: Geometry, devices: Iterable[Device], context: int, dtype: str = "bf16",
                     num_parameters: int | None = None, config: dict | None = None) -> dict | None:
    """Every device by TP degree (``core.deployment.capacity_table``), bf16 weights; None for a
    model without a per-token cache."""
    if not geom.kv_layers or not geom.kv_elements_per_token:
        return None
    attention = attention_parameters(config) if geom.mla is not None else None
    table = deployment.capacity_table(geom, devices, context, params=num_parameters, attention_params=attention,
                                      kv_dtype=dtype)
    return {**table, "attention_parameters": attention, "parameters": num_parameters}
