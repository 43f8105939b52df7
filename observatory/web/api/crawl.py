"""/api/v1/crawl: every crawl run (newest first, keyset pages) and the crawler's health."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from observatory.crawler.health import crawler_health, run_to_dict
from observatory.store.tables import CrawlRun
from observatory.web.api.common import Cursor
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1/crawl", tags=["crawl"], responses=ERROR_RESPONSES,
                   route_class=StrictQueryRoute)


class CrawlRunOut(BaseModel):
    id: int
    scope: str
    status: str = Field(description="running | ok | failed | interrupted | timed_out | rate_limited | unreachable")
    started_at: datetime
    finished_at: datetime | None
    seen: int
    new: int
    changed: int
    skipped: int
    failed: int
    failures_by_reason: dict[str, int]
    requests: int
    error: str | None
    stats: dict


class CrawlRunList(BaseModel):
    ok: bool = True
    rows: list[CrawlRunOut]
    next: str | None
    next_url: str | None


class LastRun(BaseModel):
    id: int
    status: str
    started_at: datetime
    finished_at: datetime | None
    error: str | None
    summary: str = Field(description="How the run ended, in words (an offline machine is not a failure)")


class CrawlHealth(BaseModel):
    ok: bool = True
    last_run: LastRun | None
    last_success_at: datetime | None
    running: bool
    newest_created_at: datetime | None = Field(description="Newest Hub createdAt every scope has read up to")
    lag_seconds: float | None = Field(description="How far the store is behind the Hub")
    failures_by_reason: dict[str, int] = Field(description="Open (unresolved) fetch failures by reason")
    failures_retrying: int


@router.get("/runs", response_model=CrawlRunList, summary="Crawl runs, newest first")
def runs(request: Request, response: Response, session: ReadSessionDep,
         size: Annotated[int, Query(ge=1, le=500, description="Rows per page")] = 50,
         next: Cursor = None):
    query = sa.select(CrawlRun).order_by(CrawlRun.id.desc()).limit(size + 1)
    if next is not None:
        query = query.where(CrawlRun.id < int(next))
    found = list(session.execute(query).scalars())
    rows, more = found[:size], len(found) > size
    token = str(rows[-1].id) if more else None
    next_url = str(request.url.include_query_params(next=token)) if token else None
    if next_url:
        response.headers["Link"] = f'<{next_url}>; rel="next"'
    return CrawlRunList(rows=[CrawlRunOut(**run_to_dict(r)) for r in rows], next=token, next_url=next_url)


@router.get("/health", response_model=CrawlHealth, summary="Last success, lag behind the Hub, failures")
def health(session: ReadSessionDep):
    return CrawlHealth(**crawler_health(session))
