"""The research page (/research): quality against KV size from the papers' own tables."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.web import chart_specs
from observatory.web.api.claims import (
    RESEARCH_CSV_COLUMNS,
    research_csv_rows,
    research_data,
)
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


@page("/research", formats=("json", "csv"))
def research_page(request: Request, fmt: str | None) -> Response:
    data = research_data()
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(RESEARCH_CSV_COLUMNS, research_csv_rows(data["rows"]), "research.csv")
    papers = list(dict.fromkeys(r["paper"] for r in data["rows"]))
    specs = {"research": chart_specs.research_quality(data["rows"], papers)}
    charted = sum(len(s["points"]) for s in specs["research"]["series"])
    return render(request, "research.html", data, title="Research", nav="/research", formats=("json", "csv"),
                  specs=specs, charts=True, charted=charted)
