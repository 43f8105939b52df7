"""``observatory serve``: the site on the embedded default, the README's run command.

The store is prepared once, in this process, before any worker starts: migrations applied and
the bundled snapshot loaded into an empty store (so several workers never race to create
tables or load the snapshot twice). The crawl schedule then runs inside the web process
(``--no-scheduler`` turns it off, e.g. when ``observatory worker`` runs it elsewhere). With
several workers each one asks for the scheduler, and the scheduler's lease in the store lets
exactly one of them run it (APScheduler 3.x cannot share a job store between processes).
"""

from __future__ import annotations

import errno
import os
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import click

from observatory.commands.errors import describe
from observatory.settings import Settings, get_settings

if TYPE_CHECKING:  # the web stack loads in the worker, not in every CLI command
    from fastapi import FastAPI

# --no-scheduler reaches the worker processes through the environment (uvicorn starts them
# afresh), as the setting it overrides.
SCHEDULER_ENV = "OBSERVATORY_SCHEDULER_ENABLED"
STARTUP_BLOCKING_ENV = "OBSERVATORY_STARTUP_BLOCKING"


def served_app() -> FastAPI:
    """``create_app`` plus what only a served site needs, the factory uvicorn runs in each worker:
    the OpenAPI document built ahead of its first reader (the reference page inlines it), and the
    in-process scheduler. Apps the tests make with ``create_app`` skip both."""
    from observatory.web.api.docs import warm_openapi
    from observatory.web.app import create_app

    settings = get_settings()
    app = create_app(settings)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI):
        async with inner(app_) as state:
            warm_openapi(app_)
            if not settings.scheduler_enabled:
                yield state
                return
            from observatory.scheduler import start_in_process

            handle = start_in_process(app_.state.engine, settings)
            app_.state.scheduler = handle
            try:
                yield state
            finally:
                handle.shutdown()

    app.router.lifespan_context = lifespan
    return app


def prepare_store(settings: Settings) -> None:
    """Schema up to date, on a fresh store the bundled snapshot loaded, trends current; each
    worker's start-up then finds nothing left to do."""
    from observatory.catalog.snapshot import ensure_snapshot
    from observatory.store.db import get_engine, upgrade
    from observatory.store.trends import ensure_trends

    upgrade(settings.resolved_database_url)
    engine = get_engine(settings)
    ensure_snapshot(engine, settings)
    ensure_trends(engine)


def _check_port(host: str, port: int) -> None:
    """One clear line instead of uvicorn's traceback-and-exit when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise click.ClickException(f"{host}:{port} is already in use; choose another --port") from None
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@click.command("serve")
@click.option("--host", default=None, help="Interface to listen on.  [default: OBSERVATORY_HOST or 127.0.0.1]")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="TCP port.  [default: OBSERVATORY_PORT or 8000]")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Web worker processes; only one of them runs the crawl schedule.")
@click.option("--no-scheduler", is_flag=True,
              help="Serve only; do not run the crawl schedule in this process.")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]),
              default="info", show_default=True)
def serve(host: str | None, port: int | None, workers: int, no_scheduler: bool, log_level: str) -> None:
    """Run the web site and JSON API (migrations applied, snapshot loaded on first run).

    Works offline on a fresh data directory: the bundled snapshot of notable open models is
    loaded into an empty store. The crawl schedule runs in-process unless --no-scheduler.
    """
    import uvicorn

    settings = get_settings()
    host = host or settings.host
    port = settings.port if port is None else port
    _check_port(host, port)
    try:
        prepare_store(settings)
    except Exception as exc:  # one line, not a traceback: the store is the usual culprit
        raise click.ClickException(f"cannot prepare the store at {settings.resolved_database_url}: "
                                   f"{describe(exc)}") from None
    # prepare_store did the start-up work that must precede serving; what each worker's start-up
    # still finds (first alert evaluation, re-derivation) runs beside serving, under a lease.
    os.environ[STARTUP_BLOCKING_ENV] = "false"
    if no_scheduler:
        os.environ[SCHEDULER_ENV] = "false"
    get_settings.cache_clear()
    settings = get_settings()
    click.echo(
        f"GQA Observatory on http://{host}:{port}/ (store: {settings.resolved_database_url}; "
        f"scheduler: {'on' if settings.scheduler_enabled else 'off'}; workers: {workers})",
        err=True,
    )
    uvicorn.run(**uvicorn_options(host, port, workers, log_level))


def uvicorn_options(host: str, port: int, workers: int, log_level: str) -> dict:
    """``uvicorn.run``'s arguments, the same for one worker or many. Import strings, not objects:
    with several workers uvicorn starts each one afresh and imports them there."""
    return {
        "app": "observatory.commands.serve:served_app",
        "factory": True,
        "host": host,
        "port": port,
        "workers": workers,
        "log_level": log_level,
        "proxy_headers": False,
        # On SIGTERM, requests still running after this long are cut off, so the process stops
        # within seconds (the schedule's own grace, scheduler_shutdown_grace_s, comes after).
        "timeout_graceful_shutdown": 3,
        # httptools' C parser and uvloop, with TCP_NODELAY on every connection; without it worker
        # processes answer ~40 ms late (tcp.py).
        "http": "observatory.web.tcp:NoDelayHttpToolsProtocol",
        "loop": "uvloop",
    }
