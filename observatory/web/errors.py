"""One error shape everywhere: {"ok": false, "error": "...", "errors": [...], "status": N}.

Declared in OpenAPI through ``ERROR_RESPONSES`` so clients (and schemathesis) know every
error a route can return. A 405 names in ``Allow`` every method the app serves at that path.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import get_route_path

from observatory.web.rendering import error_page, wants_html

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    ok: bool = False
    error: str
    errors: list[str]
    status: int


def _describe(err: dict) -> str:
    loc_raw = tuple(err.get("loc", ()))
    parts = [p for p in loc_raw if p not in ("query", "path", "body")]
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")  # pydantic's validator prefix
    if loc_raw[:1] != ("body",) and any(isinstance(p, int) for p in parts):
        # A repeated query parameter: name the bad value, not its position in an internal list
        # (a JSON body keeps its indexes: they say which rule of a list is wrong).
        parts = [p for p in parts if not isinstance(p, int)]
        msg = f"{str(err.get('input'))[:40]!r}: {msg}"
    loc = ".".join(str(p) for p in parts)
    return f"{loc}: {msg}" if loc else msg


ERROR_RESPONSES: dict[int | str, dict] = {
    400: {"model": ErrorBody, "description": "Bad parameter"},
    404: {"model": ErrorBody, "description": "Not found"},
    422: {"model": ErrorBody, "description": "Invalid parameter"},
    503: {"model": ErrorBody, "description": "Busy: no database connection came free in time "
                                             "(Retry-After says when to try again)"},
}
# Routes that count against the export caps (observatory.web.export_limits) add this.
EXPORT_BUSY: dict[int | str, dict] = {
    429: {"model": ErrorBody, "description": "Too many exports running, from this address or over all "
                                             "clients (Retry-After says when to try again)"},
}
# A request that found every pooled connection taken for this long answers 503 (issue 21: the
# pool's timeout surfaced as a plain-text 500); soon is when one is likely to be free again.
POOL_RETRY_AFTER_S = 2


class ApiError(Exception):
    """Raise from a route to answer with the error shape."""

    def __init__(self, status: int, *errors: str):
        self.status = status
        self.errors = list(errors) or ["error"]
        super().__init__("; ".join(self.errors))


def error_response(status: int, errors: list[str], headers: dict | None = None) -> JSONResponse:
    body = ErrorBody(error="; ".join(errors), errors=errors, status=status)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError):
        return error_response(exc.status, exc.errors)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError):
        return error_response(422, [_describe(e) for e in exc.errors()])

    @app.exception_handler(PoolTimeout)
    async def _pool_exhausted(request: Request, exc: PoolTimeout):
        message = "the service is busy (no database connection came free in time); try again shortly"
        headers = {"Retry-After": str(POOL_RETRY_AFTER_S)}
        if wants_html(request):
            return error_page(request, 503, [message], headers=headers)
        return error_response(503, [message], headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        # Starlette's own answer is plain text; ours keeps the shape (the traceback is logged).
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, ["internal error (logged on the server)"])

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":  # no route matched: say what exists
            detail = unmatched_message(request)
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405 and (methods := allowed_methods(request)):
            headers = {**(headers or {}), "Allow": ", ".join(methods)}
        if wants_html(request):  # a browser on a page URL gets the error page, same status
            return error_page(request, exc.status_code, [detail], headers=headers)
        return error_response(exc.status_code, [detail], headers=headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app serves at this request's path. Starlette's own 405
    lists only the methods of the first route matching the path, and GET and POST of one path
    are often two routes (``/api/v1/subscriptions``)."""
    path = get_route_path(request.scope)
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        if route.methods and route.path_regex.match(path):
            methods |= route.methods
    return sorted(methods)


def unmatched_message(request: Request) -> str:
    """A 404 for a path no route serves, naming where to look: under /api/v1 the OpenAPI
    document, and for a ``.csv`` every CSV twin the API has."""
    path = get_route_path(request.scope)
    if not path.startswith("/api/v1/"):
        return f"no page at {path[:120]}"
    if path.endswith(".csv"):
        twins = sorted({route.path for route in iter_route_contexts(request.app.routes)
                        if route.path.startswith("/api/v1/") and route.path.endswith(".csv")})
        return f"no CSV twin at {path[:120]}; the API's CSV twins: {', '.join(twins)}"
    return f"no API route at {path[:120]}; every route is listed in /api/v1/openapi.json"
