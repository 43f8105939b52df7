"""Annotated dependencies shared by every route."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlmodel import Session

from observatory.settings import Settings


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_app_engine(request: Request) -> Engine:
    return request.app.state.engine


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine, expire_on_commit=False) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
EngineDep = Annotated[Engine, Depends(get_app_engine)]
SessionDep = Annotated[Session, Depends(get_session)]
