"""Crawler state: per-scope marks and per-model failures (leases live in ``observatory.store.tables``).

Alembic revision ``0002_crawler`` creates these; keep the two in step.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.store.tables import utcnow


class CrawlScope(SQLModel, table=True):
    """One crawl scope: which models count, and how far back everything has been read."""

    __tablename__ = "crawl_scope"

    name: str = Field(primary_key=True, max_length=100)
    # The scope's filters as first used; a run with other filters under this name is refused,
    # because the marks below only mean something for one definition.
    definition: dict = Field(default_factory=dict, sa_type=sa.JSON)
    # Every in-scope model created in [floor, created_mark] has been stored (or its failure recorded).
    created_mark: datetime | None = None
    floor: datetime | None = None
    # Changes to tracked models up to this lastModified have been read.
    modified_mark: datetime | None = None
    last_run_id: int | None = None
    updated_at: datetime = Field(default_factory=utcnow)


class CrawlFailure(SQLModel, table=True):
    """The latest failure to fetch one model's config.json, with what to do about it."""

    __tablename__ = "crawl_failure"
    __table_args__ = (sa.Index("ix_crawl_failure_due", "transient", "resolved_at", "next_attempt_at"),)

    # Not a foreign key: an invalid id from the listing is recorded too and never becomes a model.
    model_id: str = Field(primary_key=True, max_length=200)
    sha: str | None = Field(default=None, max_length=64)  # the commit that failed
    reason: str = Field(max_length=40, index=True)  # gated, missing_config, not_json, http_503, ...
    transient: bool = False  # retried on later runs with backoff; permanent ones wait for a new sha
    attempts: int = 1
    detail: str | None = Field(default=None, max_length=500)
    first_failed_at: datetime = Field(default_factory=utcnow)
    last_failed_at: datetime = Field(default_factory=utcnow)
    next_attempt_at: datetime | None = None
    resolved_at: datetime | None = None  # set when a later fetch of the model succeeded
    run_id: int | None = None
