"""Annotated dependencies shared by every route."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlmodel import Session

from observatory.db import read_only
from observatory.settings import Settings


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_app_engine(request: Request) -> Engine:
    return request.app.state.engine


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine, expire_on_commit=False) as session:
        yield session


def get_read_session(request: Request) -> Iterator[Session]:
    """A session that only reads: it never takes SQLite's write lock, so it neither waits for a
    crawl's write transaction nor holds up another request."""
    with Session(read_only(request.app.state.engine), expire_on_commit=False) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
EngineDep = Annotated[Engine, Depends(get_app_engine)]
SessionDep = Annotated[Session, Depends(get_session)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
