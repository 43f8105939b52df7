"""The claims page (/claims): published claims about GQA and MLA, checked on the stored geometry."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from observatory.core.claims import VERDICTS
from observatory.web.api.claims import (
    CLAIM_CSV_COLUMNS,
    claim_csv_rows,
    claims_data,
)
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


@page("/claims", formats=("json", "csv"))
def claims_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {"claims": claims_data(session)}
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(CLAIM_CSV_COLUMNS, claim_csv_rows(data["claims"]), "claims.csv")
    counts = {verdict: sum(1 for c in data["claims"] if c["verdict"] == verdict) for verdict in VERDICTS}
    return render(request, "claims.html", data, title="Claims", nav="/claims", formats=("json", "csv"),
                  verdict_counts=counts)
