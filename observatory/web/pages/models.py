"""The model list (/models): filters, sorting, keyset pages, their CSV twin, and a link to the
prebuilt data package of every stored model (``/api/v1/exports``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from observatory.store.queries.models import (
    ATTENTION_KINDS,
    SUMMARY_FIELDS,
    InvalidPageToken,
    ModelListParams,
    list_models,
)
from observatory.web.deps import request_reader
from observatory.web.errors import ApiError
from observatory.web.export_limits import export_slots
from observatory.web.export_package import FILENAME as PACKAGE_FILENAME
from observatory.web.pages.base import link_header, page_decorator, validated
from observatory.web.rendering import csv_response, json_response, page_url, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


def list_params(request: Request) -> ModelListParams:
    return validated(ModelListParams, request, lists=("kind",), hidden=("_stream",))


def models_page_data(request: Request, session: Session, params: ModelListParams, fmt: str | None) -> dict:
    try:
        page_ = list_models(session, params)
    except InvalidPageToken as exc:
        raise ApiError(400, f"next: {exc}") from None
    rows = [row.model_dump() for row in page_.rows]
    return {
        "params": params.model_dump(),
        "rows": rows,
        "next": page_.next,
        "next_url": page_url(request, fmt, next=page_.next) if page_.next else None,
    }


@page("/models", formats=("json", "csv"))
def models_page(request: Request, fmt: str | None) -> Response:
    params = list_params(request)  # "_stream" (the old "all rows" link) is accepted: a page like any other
    if fmt == "csv":  # counts against the export caps, as the API's CSV does
        with export_slots(request.app).hold(request.client.host if request.client else None), \
                request_reader(request) as session:
            data = models_page_data(request, session, params, fmt)
    else:
        with request_reader(request) as session:
            data = models_page_data(request, session, params, fmt)
    if fmt == "json":
        return json_response(data, headers=link_header(data["next_url"]))
    if fmt == "csv":
        return csv_response(list(SUMMARY_FIELDS), data["rows"], "models.csv", headers=link_header(data["next_url"]))
    return render(
        request, "models.html", data, title="Models", nav="/models", formats=("json", "csv"),
        kinds=ATTENTION_KINDS, sorts=SORTABLE, sort_url=lambda key: _sort_url(request, params, key),
        package_url=f"/api/v1/exports/{PACKAGE_FILENAME}",
        first_url=page_url(request, None, next=None) if params.next else None,
    )


# Column headers that sort, with the direction a first click gives.
SORTABLE = {"created_at": "desc", "downloads": "desc", "group_size": "desc", "kv_bytes_per_token": "desc", "id": "asc"}


def _sort_url(request: Request, params: ModelListParams, key: str) -> str:
    if params.sort == key:
        order = "asc" if params.order == "desc" else "desc"
    else:
        order = SORTABLE[key]
    return page_url(request, None, sort=key, order=order, next=None)
