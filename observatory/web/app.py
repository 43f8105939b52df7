"""App factory: ``create_app(settings)`` builds the site on one store.

Start-up (the lifespan) brings the schema up to date and loads the bundled snapshot into
an empty store, so ``observatory serve`` works offline on a fresh machine.
"""

from __future__ import annotations

import asyncio
import importlib
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from observatory.settings import Settings, get_settings
from observatory.store.db import get_engine, upgrade
from observatory.web.errors import install_error_handlers

STATIC_DIR = Path(__file__).resolve().parent / "static"

# Only the site's own scripts and styles; data for charts travels as JSON in <script
# type="application/json">, which the policy does not need to allow.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response that does not set them itself. A plain ASGI
    middleware: Starlette's ``@app.middleware("http")`` costs about 0.4 ms a request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet:
    """HEAD on every GET route: the request goes to the app as a GET and the body is dropped, so
    status and headers (Content-Length included) are the GET's.

    FastAPI routes answer only the methods they declare (Starlette's plain routes add HEAD
    themselves), and declaring HEAD on each would also list it in OpenAPI. The GET runs in full,
    a CSV export included; uptime and link checkers ask for pages, which are cheap.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)


API_MODULES = tuple(f"observatory.web.api.{name}" for name in (
    "docs", "models", "exports", "compare", "trends", "hardware", "crawl", "claims", "alerts"))
PAGE_MODULES = tuple(f"observatory.web.pages.{name}" for name in (
    "home", "trends", "models", "model", "compare", "hardware", "claims", "research", "prices", "crawl", "methodology",
    "benchmarks", "alerts", "feeds"))


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = get_engine(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        upgrade(settings.resolved_database_url)
        from observatory.web.startup import StartupThread

        # Snapshot, re-derivation, trends, first alert evaluation: once per store (a lease), in a
        # thread that stops between steps on shutdown.
        work = app.state.startup = StartupThread(engine, settings).start()
        if settings.startup_blocking:
            await asyncio.to_thread(work.join)
        try:
            yield
        finally:
            work.stop()

    app = FastAPI(
        title="GQA Observatory",
        version="1",
        description="How open language models spend memory on attention state: "
        "attention geometry, KV-cache cost and trends of MHA, MQA, GQA and MLA.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # observatory.web.api.docs serves the vendored Swagger UI instead
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    install_error_handlers(app)

    app.add_middleware(SecurityHeaders)
    app.add_middleware(HeadAsGet)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # Routers: the API's, then the pages' (a page module's order decides nothing; each owns its paths).
    for module in (*API_MODULES, *PAGE_MODULES):
        app.include_router(importlib.import_module(module).router)
    return app
