"""The prices page (/prices): hosted inference prices beside the median new model's KV per token."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.web import chart_specs
from observatory.web.api.claims import (
    PRICE_CSV_COLUMNS,
    prices_data,
)
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


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
