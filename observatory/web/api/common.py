"""Pieces every /api/v1 router shares: the repo-id path rule, the keyset cursor of id-ordered
lists, the CSV response declaration, and a JSON response that skips FastAPI's second validation
of an already-built model."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel

from observatory.core.repo_ids import InvalidRepoId, validate_repo_id
from observatory.web.errors import ApiError

# The Hub's repo-id grammar as a JSON-schema pattern, a little stricter than validate_repo_id
# (no "-" or "." before another "-" or ".") so every id a client builds from it is accepted.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_]|[-.][A-Za-z0-9_]){0,47}"
REPO_ID_PATTERN = rf"^(?:{_PART}/)?{_PART}$"

# Lists ordered by row id, newest first (crawl runs, alerts, events, deliveries), continue after
# the id of the last row shown. Every value of this form is valid (the rows before it, perhaps
# none), so the schema states exactly what is accepted; 18 digits stay inside SQLite's integers.
Cursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$",
                                     description="The previous page's `next`: rows older than it")]

CSV_RESPONSE = {200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                      "description": "The same rows as CSV when format=csv"}}


def checked_model_id(model_id: str) -> str:
    """The id if it is a well-formed Hub repo id, else a 400 in the error shape."""
    try:
        return validate_repo_id(model_id)
    except InvalidRepoId as exc:
        raise ApiError(400, f"model_id: {exc}") from None


def model_response(model: BaseModel, headers: dict | None = None) -> Response:
    """``model`` as JSON. The route still declares it as ``response_model`` for OpenAPI; the
    model was validated when built, so FastAPI's re-validation (costly on long series) is skipped."""
    return Response(model.model_dump_json(), media_type="application/json", headers=headers)
