"""/api/v1/exports: every stored model at once, as a prebuilt data package (zip).

The model list's CSV and JSON answers are bounded keyset pages; this is the whole table,
built in the background at most once per ``api_export_package_max_age_s``
(``observatory.web.export_package``) and sent from disk, holding no database connection.
Looking the package up counts against the export caps (``observatory.web.export_limits``).
"""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from observatory.web.errors import ERROR_RESPONSES, EXPORT_BUSY, ErrorBody
from observatory.web.export_limits import export_slots
from observatory.web.export_package import FILENAME, package_builder
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1", tags=["exports"], responses=ERROR_RESPONSES, route_class=StrictQueryRoute)

FIRST_BUILD_RETRY_S = 30


@router.get(
    f"/exports/{FILENAME}", response_class=Response, response_model=None,
    responses={200: {"content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
                     "description": "models.csv (every stored model, the model list's columns, id order) and "
                                    "its Frictionless datapackage.json; X-Built-At and X-Row-Count say what it "
                                    "holds"},
               503: {"model": ErrorBody, "description": "The first package is being built (Retry-After)"},
               **EXPORT_BUSY},
    summary="Every stored model as a data package (zip, rebuilt hourly)",
)
def models_package(request: Request) -> Response:
    # The slot covers looking the package up (and starting a build); the file is then sent from
    # disk holding no slot and no database connection.
    with export_slots(request.app).hold(request.client.host if request.client else None):
        builder = package_builder(request.app)
        package = builder.current()
    if package is None:
        why = f" (the last build failed: {builder.last_error})" if builder.last_error else ""
        raise StarletteHTTPException(
            503, f"the data package is being built{why}; try again in {FIRST_BUILD_RETRY_S} s",
            headers={"Retry-After": str(FIRST_BUILD_RETRY_S)})
    # Fresh until the rebuild is due: an absolute Expires, so every answer about one build (a GET,
    # its HEAD) carries the same headers, where a max-age counted down from the request would not.
    expires = package.built_at + timedelta(seconds=builder.max_age_s)
    return FileResponse(
        package.path, media_type="application/zip", filename=FILENAME,
        headers={"X-Built-At": package.built_at.isoformat(), "X-Row-Count": str(package.rows),
                 "Cache-Control": "public", "Expires": format_datetime(expires, usegmt=True)},
    )
