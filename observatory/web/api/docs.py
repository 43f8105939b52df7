"""/api/v1/docs: the vendored Swagger UI, loaded by ``src`` so the CSP (script-src 'self') holds.

FastAPI's own docs page pulls Swagger UI from a CDN and starts it with an inline script: blank
under this site's policy, and offline there is no CDN anyway.
"""

from __future__ import annotations

import threading

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse

from observatory.web.rendering import environment

router = APIRouter(include_in_schema=False)

OPENAPI_URL = "/api/v1/openapi.json"


def warm_openapi(app: FastAPI) -> None:
    """Build the OpenAPI document in the background once the site is up: building it takes
    seconds on a busy machine, which the reference page showed as "LOADING". FastAPI keeps the
    result; a request that comes first builds it itself, as it always did."""
    threading.Thread(target=app.openapi, name="openapi-warm", daemon=True).start()


@router.get("/api/v1/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    # The document travels in the page (inert JSON; the CSP allows no inline script), so Swagger
    # UI renders at once instead of fetching it after its own 1 MB bundle.
    return HTMLResponse(environment().get_template("api_docs.html").render(
        openapi_url=OPENAPI_URL, spec=request.app.openapi()))
