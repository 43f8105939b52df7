"""Models side by side (/compare?models=A,B,...): geometry, KV per token and at common contexts,
one chart of KV against context, capacity by device and TP degree, measured spot-benchmarks."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.core.deployment import NODE_TP
from observatory.web import chart_specs
from observatory.web.api.compare import CSV_COLUMNS, MAX_MODELS, MIN_MODELS, CompareParams, compare_data, csv_rows
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator, validated
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


@page("/compare", formats=("json", "csv"))
def compare_page(request: Request, fmt: str | None) -> Response:
    params = validated(CompareParams, request, lists=("models",))
    with request_reader(request) as session:
        data = compare_data(session, params)
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(CSV_COLUMNS, csv_rows(data), "compare.csv")
    return render(request, "compare.html", data, title="Compare: " + ", ".join(m["id"] for m in data["models"]),
                  nav="/models", formats=("json", "csv"), charts=True,
                  specs={"kv": chart_specs.kv_against_context(data["models"])},
                  node_tp=NODE_TP, min_models=MIN_MODELS, max_models=MAX_MODELS,
                  ids=",".join(m["id"] for m in data["models"]))
