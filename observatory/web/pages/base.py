"""What every page module shares: registering a page with its JSON and CSV twins, and reading
a page's query string through the API's own parameter models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ValidationError

from observatory.web.errors import ApiError, _describe
from observatory.web.rendering import error_page
from observatory.web.strict_params import reject_unknown


def page_decorator(router: APIRouter) -> Callable:
    """``page(path, formats)`` for one module's ``router``; see ``page`` below."""

    def page(path: str, formats: tuple[str, ...] = ("json",)):
        return _page(router, path, formats)

    return page


def _page(router: APIRouter, path: str, formats: tuple[str, ...]):
    """Register ``handler(request, fmt)`` at ``path`` and at ``path.json`` / ``path.csv``.

    Handlers raise ``ApiError`` for bad input; the answer takes the shape of the format asked
    for: the error page for HTML, the one JSON error shape otherwise (CSV included, as Datasette).
    """

    def decorate(handler: Callable) -> Callable:
        def make(fmt: str | None):
            async def endpoint(request: Request) -> Response:
                try:
                    # handlers read the store synchronously; keep the event loop free
                    return await run_in_threadpool(handler, request, fmt)
                except ApiError as exc:
                    if fmt is None:
                        return error_page(request, exc.status, exc.errors)
                    raise

            endpoint.__name__ = f"{handler.__name__}_{fmt or 'html'}"
            return endpoint

        router.add_api_route(path, make(None), methods=["GET"], response_class=HTMLResponse)
        base = "/index" if path == "/" else path
        for fmt in formats:
            router.add_api_route(f"{base}.{fmt}", make(fmt), methods=["GET"])
            if path == "/":  # Datasette spells the home page's twin "/.json"
                router.add_api_route(f"/.{fmt}", make(fmt), methods=["GET"])
        return handler

    return decorate


def validated(model: type[BaseModel], request: Request, lists: tuple[str, ...] = (), hidden: tuple[str, ...] = ()):
    """The API's parameter model filled from a page's query string, so a page and its API
    accept exactly the same parameters and answer alike: any other name is a 400, a value out
    of range a 422, as FastAPI answers on ``/api/v1``. ``hidden`` names are the page's own
    (its links set them): accepted, never listed among the allowed ones. Empty form fields
    count as absent."""
    reject_unknown(request, model.model_fields, hidden=hidden)
    raw: dict[str, Any] = {}
    for name in model.model_fields:
        values = [v.strip() for v in request.query_params.getlist(name) if v.strip()]
        if values:
            raw[name] = values if name in lists else values[-1]
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ApiError(422, *[_describe(e) for e in exc.errors()]) from None


def link_header(url: str | None) -> dict:
    return {"Link": f'<{url}>; rel="next"'} if url else {}
