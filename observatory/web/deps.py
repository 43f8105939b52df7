"""Annotated dependencies shared by every route.

The cheap ones are ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, and
a hop there and back per dependency was a measurable share of a fast request on 2 cores.
Creating or closing a session does no I/O worth a thread (SQLite's close is a rollback in memory).
Routes only read through these; writes go through the service modules' own write transactions
(``db.session_scope``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlmodel import Session

from observatory.settings import Settings
from observatory.store.db import read_session


async def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_app_engine(request: Request) -> Engine:
    return request.app.state.engine


def request_reader(request: Request) -> Session:
    """A session that only reads: it never takes SQLite's write lock, so it neither waits for a
    crawl's write transaction nor holds up another request. For handlers that open their own
    session (pages run in a thread pool, CSV streams outlive the handler); routes take
    ``ReadSessionDep``."""
    return read_session(request.app.state.engine)


async def get_read_session(request: Request) -> AsyncIterator[Session]:
    session = request_reader(request)
    try:
        yield session
    finally:
        session.close()


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
EngineDep = Annotated[Engine, Depends(get_app_engine)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
