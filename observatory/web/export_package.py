"""The whole model list as a prebuilt data package: one query per build, not one per request.

Issue 21: ``/api/v1/models.csv`` streamed up to 100,000 rows per request (15 MB, 8.6 s, one
pooled connection held throughout), so twenty downloads drained the pool. The list's exports
are bounded pages now; whoever wants every row downloads this file instead: a zip holding
``models.csv`` (the list's columns, every stored model, id order) and a Frictionless
``datapackage.json`` describing it, built at most once per ``api_export_package_max_age_s``
by one background thread per process, written beside the store and swapped in atomically,
then served from disk with no connection held. While the first build runs, the download
answers 503 with ``Retry-After`` in the error shape; a stale package is served while its
successor builds (``X-Built-At`` and ``X-Row-Count`` say what it holds).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import threading
import time
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy.engine import Engine

from observatory.settings import Settings
from observatory.store.db import read_session
from observatory.store.queries.models import (
    SUMMARY_FIELDS,
    ModelListParams,
    ModelSummary,
    iter_models,
)
from observatory.web.rendering import csv_cell

log = logging.getLogger(__name__)

FILENAME = "gqa-observatory-models.zip"
NAME = "gqa-observatory-models"


@dataclass(frozen=True)
class Package:
    path: Path
    built_at: datetime
    rows: int

    def age_s(self) -> float:
        return (datetime.now(timezone.utc) - self.built_at).total_seconds()


def _field(name: str, schema: dict) -> dict:
    """A Frictionless field from the JSON schema pydantic gives for one column."""
    kinds = {t.get("type") for t in schema.get("anyOf", [schema])} - {"null", None}
    kind = {"integer": "integer", "number": "number", "boolean": "boolean", "array": "string"}.get(
        next(iter(kinds)) if len(kinds) == 1 else "", "string")
    if schema.get("format") == "date-time" or any(t.get("format") == "date-time" for t in schema.get("anyOf", [])):
        kind = "datetime"
    field = {"name": name, "type": kind}
    if description := schema.get("description"):
        field["description"] = description
    return field


def descriptor(rows: int, built_at: datetime) -> dict:
    properties = ModelSummary.model_json_schema()["properties"]
    return {
        "profile": "tabular-data-package",
        "name": NAME,
        "title": "GQA Observatory: every stored model with its attention geometry",
        "created": built_at.isoformat(),
        "resources": [{
            "name": "models", "path": "models.csv", "profile": "tabular-data-resource", "format": "csv",
            "encoding": "utf-8", "rows": rows,
            "schema": {"fields": [_field(name, properties[name]) for name in SUMMARY_FIELDS],
                       "missingValues": [""], "primaryKey": ["id"]},
        }],
    }


def build(engine: Engine, target: Path) -> Package:
    """Write the package to ``target`` (through a temporary file, then an atomic rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    built_at = datetime.now(timezone.utc)
    rows = 0
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            with archive.open(f"{NAME}/models.csv", "w") as raw, \
                    io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
                writer = csv.writer(text, lineterminator="\r\n")
                writer.writerow(SUMMARY_FIELDS)
                with read_session(engine) as session:
                    for summary in iter_models(session, ModelListParams(sort="id", order="asc")):
                        row = summary.model_dump()
                        writer.writerow([csv_cell(row.get(c)) for c in SUMMARY_FIELDS])
                        rows += 1
            archive.writestr(f"{NAME}/datapackage.json", json.dumps(descriptor(rows, built_at), indent=1) + "\n")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return Package(target, built_at, rows)


def read(target: Path) -> Package | None:
    """The package at ``target``, described by its own ``datapackage.json`` (so what is said of
    it can never belong to another build: the file is swapped in whole)."""
    try:
        with zipfile.ZipFile(target) as archive:
            meta = json.loads(archive.read(f"{NAME}/datapackage.json"))
        return Package(target, datetime.fromisoformat(meta["created"]), int(meta["resources"][0]["rows"]))
    except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile):
        return None


class PackageBuilder:
    """At most one build at a time in this process, started by a download that finds no
    package or a stale one."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.target = settings.data_dir / "exports" / FILENAME
        self.max_age_s = settings.api_export_package_max_age_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self.last_build_s: float | None = None

    @property
    def building(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def current(self) -> Package | None:
        """The package on disk (possibly stale), starting a rebuild when it is missing or stale."""
        package = read(self.target)
        if package is None or package.age_s() > self.max_age_s:
            self.start()
        return package

    def start(self) -> None:
        with self._lock:
            if self.building:
                return
            self._thread = threading.Thread(target=self._run, name="export-package", daemon=True)
            self._thread.start()

    def wait(self, timeout: float) -> Package | None:
        """For tests and the CLI: wait (bounded) for a build under way, then read the package."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return read(self.target)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            build(self.engine, self.target)
            self.last_error = None
        except Exception as exc:  # noqa: BLE001 - a failed build is reported on the next download
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("building the export package failed: %s", self.last_error)
        finally:
            self.last_build_s = time.monotonic() - started


def package_builder(app) -> PackageBuilder:
    builder = getattr(app.state, "export_package", None)
    if builder is None:
        builder = app.state.export_package = PackageBuilder(app.state.engine, app.state.settings)
    return builder
