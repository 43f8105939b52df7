"""The crawl status page (/crawl): health, recent runs, open failures."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.crawler.health import (
    crawler_health,
    open_failures,
    recent_runs,
    run_to_dict,
)
from observatory.store.queries.counts import geometry_flags, store_counts
from observatory.store.queries.oracle import status_counts
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


RUN_CSV_COLUMNS = ["id", "scope", "status", "started_at", "finished_at", "seen", "new", "changed", "skipped",
                   "failed", "requests", "error"]


@page("/crawl", formats=("json", "csv"))
def crawl_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {
            "health": crawler_health(session),
            "models": store_counts(session),
            "geometry_flags": geometry_flags(session),
            "oracle": status_counts(session),  # transformers' verdicts on the current configs
            "runs": [run_to_dict(r) for r in recent_runs(session, 50)],
            "open_failures": [
                {"model_id": f.model_id, "reason": f.reason, "transient": f.transient, "attempts": f.attempts,
                 "detail": f.detail, "last_failed_at": f.last_failed_at, "next_attempt_at": f.next_attempt_at}
                for f in open_failures(session, 100)
            ],
        }
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(RUN_CSV_COLUMNS, data["runs"], "crawl-runs.csv")
    return render(request, "crawl.html", data, title="Crawl status", nav="/crawl", formats=("json", "csv"))
