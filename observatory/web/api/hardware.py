"""/api/v1/hardware and /api/v1/roofline: the accelerator catalog with its sources, and the
decode roofline of one model on one device (arithmetic in ``observatory.core.roofline``)."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from observatory.catalog import hardware
from observatory.core import kvcache, roofline
from observatory.store.queries import population
from observatory.store.queries.models import (
    current_geometry,
    model_parameters,
    not_found_message,
)
from observatory.store.tables import HubModel
from observatory.web.api.common import (
    CSV_RESPONSE,
    REPO_ID_PATTERN,
    checked_model_id,
    model_response,
)
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES, ApiError
from observatory.web.estimates import (
    HardwareInfo,
    RooflinePoint,
    hardware_info,
    roofline_point,
)
from observatory.web.rendering import csv_response
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1", tags=["hardware"], responses=ERROR_RESPONSES,
                   route_class=StrictQueryRoute)

KvDtype = Literal["bf16", "fp16", "fp8", "int8", "fp32"]
assert set(KvDtype.__args__) == set(kvcache.DTYPE_BYTES), "KvDtype must list kvcache.DTYPE_BYTES"


class HardwareList(BaseModel):
    ok: bool = True
    rows: list[HardwareInfo]
    ridge_points: list[dict] = Field(description="Per device: dense FLOP/s over bandwidth (FLOP per byte) "
                                     "for bf16 and fp8, by release date")


class HardwareResponse(HardwareInfo):
    ok: bool = True


class Estimate(BaseModel):
    """One roofline estimate (see ``observatory.core.roofline``)."""

    kv_bytes: int
    attention_flops: float
    weight_bytes: int
    weight_flops: float
    bytes: int
    flops: float
    intensity: float
    bound: str
    calls: int
    memory_s: float
    compute_s: float
    time_s: float
    tokens_per_s: float
    devices: int = Field(description="Devices the step is spread over (ideal tensor parallelism)")
    cache_fits: bool | None = Field(description="The KV cache alone fits in the devices' memory")
    fits: bool | None = Field(description="Weights and KV cache fit in the devices' memory; null when "
                                          "no weights are counted (attention alone)")
    bytes_by_tier: dict[str, int] | None = Field(description="Bytes read from each memory tier, fastest first "
                                                 "(filled fastest first; tiers read concurrently)")


class RooflineResponse(BaseModel):
    ok: bool = True
    model_id: str
    hardware: HardwareInfo
    context: int
    batch: int
    dtype: str
    summary: RooflinePoint
    attention: Estimate = Field(description="Decode attention alone")
    mha_attention: Estimate = Field(description="The same for the MHA counterfactual (K = H)")
    whole_step: Estimate | None = Field(description="Attention plus reading every weight once (bf16) on one "
                                        "device; null when the parameter count is unknown")
    whole_step_on_enough_devices: Estimate | None = Field(
        description="The same spread over summary.devices_needed devices, when one is not enough")
    assumptions: list[str]


def _device(hardware_id: str) -> hardware.Device:
    for device in hardware.load_catalog():
        if device.id == hardware_id:
            return device
    known = ", ".join(d.id for d in hardware.load_catalog())
    raise ApiError(404, f"no hardware {hardware_id[:80]!r} in the catalog; known: {known}")


@router.get("/hardware", response_model=HardwareList, summary="The hardware catalog")
def hardware_list():
    devices = hardware.load_catalog()
    return HardwareList(rows=[hardware_info(d) for d in devices], ridge_points=roofline.ridge_points(devices))


@router.get("/hardware/{hardware_id}", response_model=HardwareResponse, summary="One catalogued device")
def hardware_one(hardware_id: Annotated[str, Path(max_length=100)]):
    return HardwareResponse(**hardware_info(_device(hardware_id)).model_dump())


@router.get("/roofline", response_model=RooflineResponse, summary="Decode roofline of a model on a device")
def roofline_one(
    session: ReadSessionDep,
    model: Annotated[str, Query(description="Hub repo id", max_length=193,
                                json_schema_extra={"pattern": REPO_ID_PATTERN})],
    hardware_id: Annotated[str, Query(alias="hardware", max_length=100, description="Catalog id, e.g. h100-sxm")],
    context: Annotated[int, Query(ge=1, le=16_777_216, description="Tokens cached per sequence")] = 32768,
    batch: Annotated[int, Query(ge=1, le=65_536, description="Concurrent sequences")] = 1,
    dtype: Annotated[KvDtype, Query(description="KV-cache element type")] = "bf16",
):
    """The roofline floor of one decode step's attention (and of the whole step when the
    parameter count is known) for ``batch`` sequences of ``context`` tokens."""
    device = _device(hardware_id)
    row = session.get(HubModel, checked_model_id(model))
    if row is None:
        raise ApiError(404, not_found_message(session, model))
    georow, geom = current_geometry(session, row)
    if geom is None or geom.kv_layers == 0 or geom.kv_elements_per_token == 0:
        raise ApiError(404, f"model {model!r} has no attention geometry with a per-token KV cache")
    params, active = model_parameters(row, georow)
    attention = roofline.decode_estimate(geom, device, context, batch, dtype)
    mha = roofline.decode_estimate(kvcache.mha_counterfactual(geom), device, context, batch, dtype)
    whole = (roofline.decode_estimate(geom, device, context, batch, dtype, params=params, active_params=active)
             if params else None)
    needed = roofline.devices_for_weights(device, params)
    spread = (roofline.decode_estimate(geom, device, context, batch, dtype, params=params, active_params=active,
                                       devices=needed) if needed and needed > 1 else None)
    return RooflineResponse(
        model_id=row.id, hardware=hardware_info(device), context=context, batch=batch, dtype=dtype,
        summary=roofline_point(geom, device, context, batch, dtype, params, active_parameters=active),
        attention=Estimate(**attention.to_dict()), mha_attention=Estimate(**mha.to_dict()),
        whole_step=Estimate(**whole.to_dict()) if whole else None,
        whole_step_on_enough_devices=Estimate(**spread.to_dict()) if spread else None,
        assumptions=[
            f"time = {attention.calls} calls x {roofline.DEFAULT_PER_CALL_S * 1e6:g} us + "
            "max(bytes / bandwidth, flops / dense peak), at 100% of spec bandwidth",
            "bytes: the KV cache read once per step (sliding/chunked layers capped at their window)",
            "whole step: every weight read once in bf16; FLOPs from the active parameters (MoE) or all of them; "
            "parameters are the disclosed count, else the estimate from the config",
            "several devices: ideal tensor parallelism (memory and bandwidth add up, no communication cost)",
        ],
    )


# ---- the median new model on each device generation (issue 15) --------------------------------

class CapacitySummary(BaseModel):
    median: float | None = Field(description="Median sequences that fit beside the bf16 weights")
    n: int = Field(description="Models behind the median")
    weights_do_not_fit: int = Field(description="Of those, models whose weights alone exceed the memory")


class ChipsSummary(BaseModel):
    median: float | None = Field(description="Median chips a model needs for its bf16 weights plus one sequence")
    n: int = Field(description="Models behind the median")
    max: int | None = Field(description="The most any of them needs")


class CapacityRow(BaseModel):
    id: str
    name: str
    released: date
    memory_bytes: int
    on_chip_bytes: int = Field(description="On-chip SRAM; 0 for a device without an SRAM tier")
    at_release: CapacitySummary = Field(description="Models created in the window before the device's release")
    today: CapacitySummary = Field(description="Models created in the window before the newest model in the store")
    chips_today: ChipsSummary = Field(description="Chips today's new models need for weights plus one sequence, "
                                                  "every memory tier counted, no replication")
    chips_today_on_chip: ChipsSummary | None = Field(description="The same keeping everything in on-chip SRAM; "
                                                                 "null unless the chip also has off-chip memory")


class CapacityResponse(BaseModel):
    ok: bool = True
    context: int = Field(description="Tokens per sequence")
    window_days: int
    today: date | None = Field(description="Creation day of the newest model in the population")
    population: str
    models: int = Field(description="Models of the population with a per-token cache, all sized")
    parameters_estimated: int = Field(description="Of them, models whose parameters are estimated from the config "
                                                  "(no disclosed count), as the population's 1B floor counts them")
    skipped_without_cache: int
    weights_bytes_per_parameter: int
    rows: list[CapacityRow]


CAPACITY_CSV_COLUMNS = ["id", "name", "released", "memory_bytes", "on_chip_bytes", "context", "at_release_median",
                        "at_release_n", "at_release_weights_do_not_fit", "today_median", "today_n",
                        "today_weights_do_not_fit", "chips_today_median", "chips_today_n", "chips_today_max",
                        "chips_today_on_chip_median", "chips_today_on_chip_n", "chips_today_on_chip_max"]


def capacity_csv_rows(data: dict) -> list[dict]:
    return [{**r, "context": data["context"],
             **{f"{when}_{k}": v for when in ("at_release", "today", "chips_today", "chips_today_on_chip")
                for k, v in (r[when] or {"median": None, "n": None, "max": None}).items()}}
            for r in data["rows"]]


@router.get("/hardware-capacity", response_model=CapacityResponse, responses=CSV_RESPONSE,
            summary="32k-token sequences of the median new model beside its weights, and the chips it needs, per device")
def hardware_capacity(session: ReadSessionDep,
                      format: Annotated[Literal["json", "csv"], Query(description="csv: one row per device")] = "json"):
    """Per catalogued device: how many 32k-token sequences of the median new model fit beside its
    bf16 weights, over the models new at the device's release and over today's new models; and how
    many chips today's new models need for their weights plus one 32k sequence (SRAM-first chips:
    also keeping everything on chip)."""
    data = population.capacity_trend(session, hardware.device_memories())
    if format == "csv":
        return csv_response(CAPACITY_CSV_COLUMNS, capacity_csv_rows(data), "hardware-capacity.csv")
    return model_response(CapacityResponse(**data))


@router.get("/hardware-capacity.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="Sequences and chips per device, as CSV")
def hardware_capacity_csv(session: ReadSessionDep) -> Response:
    return hardware_capacity(session, "csv")
