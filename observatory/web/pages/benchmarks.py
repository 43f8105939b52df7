"""The spot-benchmarks page (/benchmarks): the latest results of every model."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.bench.store import latest_results
from observatory.web import chart_specs
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


BENCH_CSV_COLUMNS = ["created_at", "model_id", "status", "reason", "device", "backend", "kernel", "dtype", "batch",
                     "num_heads", "num_kv_heads", "head_dim", "head_dim_v", "context", "median_s", "runs",
                     "bytes_per_s", "fraction_of_ceiling", "ceiling_bytes_per_s", "flops_per_s", "fraction_of_matmul",
                     "matmul_flops_per_s", "predicted_s", "prediction_basis", "predicted_bound", "mha_head_dim",
                     "mha_head_dim_v", "mha_median_s", "mha_predicted_s", "measured_speedup", "predicted_speedup",
                     "mha_error"]


@page("/benchmarks", formats=("json", "csv"))
def benchmarks_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {"rows": latest_results(session, 200)}
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(BENCH_CSV_COLUMNS, data["rows"], "benchmarks.csv")
    dividend = chart_specs.dividend(data["rows"], by_model=True, batch=1)  # per model; batches on its page
    return render(request, "benchmarks.html", data, title="Spot-benchmarks", nav="/benchmarks",
                  formats=("json", "csv"), bench_results=data["rows"], show_model=True,
                  specs={"dividend": dividend} if dividend["series"] else {}, charts=bool(dividend["series"]),
                  bench_scheduled=request.app.state.settings.bench_schedule_enabled)
