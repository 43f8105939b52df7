"""The hardware catalog (/hardware): ridge points, and the sequences the median new model fits per device."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.catalog import hardware
from observatory.catalog.hardware import load_catalog
from observatory.core import roofline
from observatory.store.queries import population
from observatory.web import chart_specs
from observatory.web.deps import request_reader
from observatory.web.estimates import hardware_info
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


HARDWARE_CSV_COLUMNS = ["id", "name", "vendor", "kind", "released", "memory_bytes", "bandwidth_bytes_per_s",
                        "on_chip_bytes", "memory_tiers", "bf16_dense_flops", "fp8_dense_flops", "ridge_bf16",
                        "ridge_fp8", "sources"]


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
        flat = ({**r, "sources": [s["url"] for s in r["sources"]],
                 "memory_tiers": [f"{t['name']}: {t['bytes']} B at {t['bandwidth_bytes_per_s']:g} B/s"
                                  f"{' on chip' if t['on_chip'] else ''}" for t in r["memory_tiers"]]}
                for r in rows)
        return csv_response(HARDWARE_CSV_COLUMNS, flat, "hardware.csv")
    with request_reader(request) as session:
        data = {"rows": rows, "capacity": population.capacity_trend(session, hardware.device_memories())}
    if fmt == "json":
        return json_response(data)
    specs = {"ridge": chart_specs.ridge_points(list(ridges.values())),
             "capacity": chart_specs.sequences_beside_weights(data["capacity"]["rows"], data["capacity"]["context"])}
    return render(request, "hardware.html", data, title="Hardware", nav="/hardware", formats=("json", "csv"),
                  specs=specs, charts=True)
