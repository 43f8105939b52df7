"""/api/v1/exports: every stored model at once, as a prebuilt data package (zip).

The model list's CSV and JSON answers are bounded keyset pages; this is the whole table,
built in the background at most once per ``api_export_package_max_age_s``
(``observatory.web.export_package``) and sent from disk, holding no database connection.
Looking the package up counts against the export caps (``observatory.web.export_limits``).
"""

from __future__ import annotations

import math

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
    age = max(0, math.floor(package.age_s()))
    return FileResponse(
        package.path, media_type="application/zip", filename=FILENAME,
        headers={"X-Built-At": package.built_at.isoformat(), "X-Row-Count": str(package.rows),
                 "Cache-Control": f"public, max-age={max(0, int(builder.max_age_s) - age)}"},
    )
