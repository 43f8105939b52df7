"""/api/v1/docs: the vendored Swagger UI, loaded by ``src`` so the CSP (script-src 'self') holds.

FastAPI's own docs page pulls Swagger UI from a CDN and starts it with an inline script: blank
under this site's policy, and offline there is no CDN anyway.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from observatory.web.rendering import environment

router = APIRouter(include_in_schema=False)

OPENAPI_URL = "/api/v1/openapi.json"


@router.get("/api/v1/docs", response_class=HTMLResponse)
async def api_docs() -> HTMLResponse:
    return HTMLResponse(environment().get_template("api_docs.html").render(openapi_url=OPENAPI_URL))
