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
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render
from observatory.web.small_scale import pivot

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


@page("/research", formats=("json", "csv"))
def research_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = research_data(session)
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(RESEARCH_CSV_COLUMNS, research_csv_rows(data["rows"] + data["ours_rows"]), "research.csv")
    papers = list(dict.fromkeys(r["paper"] for r in data["rows"]))
    # Ours join the papers' chart at the end of the claim's window: mean pooling, 10% uptraining.
    ours_charted = [r for r in data["ours_rows"] if r["method"] == "mean" and r["fraction"] == 0.10]
    specs = {"research": chart_specs.research_quality(data["rows"] + ours_charted, [*papers, "observatory"])}
    if data["ours_rows"]:
        specs["uptrain"] = chart_specs.uptrain_recovery(data["ours_rows"])
    charted = sum(len(s["points"]) for s in specs["research"]["series"]) - len(ours_charted)
    return render(request, "research.html", data, title="Research", nav="/research", formats=("json", "csv"),
                  specs=specs, charts=True, charted=charted, ours_charted=len(ours_charted), ours_table=pivot(data["ours_rows"]))
