"""The oracle over the store: which revisions need a reading, reading them in the pool, recording verdicts.

A model's current config revision (verbatim files only: a reconstructed entry is not a file
transformers would ever load) that parsed is *due* when it has no ``oracle_check`` row, or its row
was read by another transformers version than the one installed (a new version re-checks
everything, in the background). A row whose reading is current but whose verdict was judged against
an older parser is re-judged from the stored reading, without a child (``rejudge_stale``).
``--all`` re-reads every current revision.

Nothing here writes geometry or touches the crawl's tables: each verdict is one ``oracle_check``
row, written in short transactions of a few rows, so the crawl's writer is never held up, and the
configs come from the store (the child never fetches).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from observatory.core.config_dialects import ConfigError
from observatory.core.geometry import (
    PARSER_VERSION,
    Geometry,
    parse_config_text,
    parse_geometry,
)
from observatory.oracle.compare import (
    PROBE_LIMITS,
    Verdict,
    comparable_estimate,
    judge,
)
from observatory.oracle.pool import Outcome, read_configs
from observatory.oracle.reading import Reading
from observatory.settings import Settings
from observatory.store.db import read_session, session_scope
from observatory.store.oracle_tables import OracleCheck
from observatory.store.tables import ConfigRevision, HubModel, utcnow

log = logging.getLogger(__name__)
WRITE_EVERY = 10  # verdicts per write transaction

_M, _R, _O = HubModel.__table__.c, ConfigRevision.__table__.c, OracleCheck.__table__.c


class OracleUnavailable(RuntimeError):
    """transformers is not installed: the oracle cannot read anything."""


def installed_transformers() -> str:
    """The installed transformers version, read without importing it (the parent never does)."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        raise OracleUnavailable("transformers is not installed: pip install -e . installs the pinned version"
                                ) from None


@dataclass
class CheckReport:
    checked: int = 0
    by_status: Counter = field(default_factory=Counter)
    new_disagreements: list[str] = field(default_factory=list)  # model ids whose verdict became disagree
    rejudged: int = 0
    due: int = 0
    stopped: bool = False

    def line(self) -> str:
        parts = ", ".join(f"{n} {status}" for status, n in sorted(self.by_status.items())) or "nothing due"
        tail = f"; {self.rejudged} re-judged against parser {PARSER_VERSION}" if self.rejudged else ""
        left = f"; stopped with {self.due - self.checked} left" if self.stopped else ""
        return f"oracle checked {self.checked} of {self.due} config revision(s): {parts}{tail}{left}"


def _current_revisions() -> sa.Select:
    return (sa.select(_R.id, _R.model_id, _R.raw_text)
            .join(HubModel.__table__, _M.current_revision_id == _R.id)
            .where(_R.parse_status == "ok", _R.provenance == "verbatim"))


def due_revisions(session, version: str, *, every: bool = False, limit: int | None = None) -> list[int]:
    """Revision ids to read, oldest first: unread ones, then ones read by another transformers version."""
    query = (sa.select(_R.id).join(HubModel.__table__, _M.current_revision_id == _R.id)
             .outerjoin(OracleCheck.__table__, _O.revision_id == _R.id)
             .where(_R.parse_status == "ok", _R.provenance == "verbatim"))
    if not every:
        query = query.where(sa.or_(_O.id.is_(None), _O.transformers_version.is_(None),
                                   _O.transformers_version != version))
    query = query.order_by(_O.id.is_not(None), _R.id)
    if limit is not None:
        query = query.limit(limit)
    return list(session.execute(query).scalars())


def verdict_for(raw: dict, geom: Geometry, outcome: Outcome) -> Verdict:
    if outcome.status == "read":
        return judge(raw, geom, outcome.reading)
    reason = outcome.reason
    limit = PROBE_LIMITS.get(raw.get("model_type"))
    if outcome.status == "failed" and limit:
        reason = f"{limit} ({reason})"
    return Verdict(outcome.status, reason=reason)


def row_values(revision_id: int, model_id: str, raw: dict, verdict: Verdict, outcome: Outcome) -> dict:
    reading = outcome.reading
    values = dict(
        revision_id=revision_id, model_id=model_id, status=verdict.status,
        reason=(verdict.reason or None) and verdict.reason[:2000], transformers_version=outcome.transformers,
        parser_version=PARSER_VERSION, model_type=raw.get("model_type") if isinstance(raw.get("model_type"), str)
        else None, differences=list(verdict.differences), mismatches=list(verdict.mismatches),
        our_parameters=comparable_estimate(raw), checked_at=utcnow(),
        query_heads=None, layers=None, cross_layers=None, elements_per_token=None,
        cross_elements_per_source_token=None, parameters=None,
    )
    if reading is not None:
        data = reading.to_dict()
        values.update(query_heads=reading.query_heads, layers=data["self_attention"],
                      cross_layers=data["cross_attention"] or None, parameters=reading.parameters or None,
                      elements_per_token=None if reading.attention_free else reading.elements_per_token,
                      cross_elements_per_source_token=reading.cross_elements_per_source_token or None)
    if values["model_type"]:
        values["model_type"] = values["model_type"][:100]
    return values


def _store(engine: Engine, rows: list[dict]) -> list[str]:
    """Replace the verdicts of these revisions; returns the model ids newly in disagreement."""
    ids = [r["revision_id"] for r in rows]
    with session_scope(engine) as session:
        before = dict(session.execute(sa.select(_O.revision_id, _O.status).where(_O.revision_id.in_(ids))).all())
        session.execute(sa.delete(OracleCheck.__table__).where(_O.revision_id.in_(ids)))
        session.execute(sa.insert(OracleCheck.__table__), rows)
    return [r["model_id"] for r in rows if r["status"] == "disagree" and before.get(r["revision_id"]) != "disagree"]


def _configs(engine: Engine, ids: list[int], parsed: dict) -> Iterator[tuple[int, dict]]:
    """(revision id, config dict) for each id, parsing ours on the way (read in small batches)."""
    for start in range(0, len(ids), 100):
        with read_session(engine) as session:
            rows = session.execute(_current_revisions().where(_R.id.in_(ids[start:start + 100]))).all()
        for revision_id, model_id, text in rows:
            try:
                raw = json.loads(text)
                geom = parse_geometry(parse_config_text(text))
            except (ValueError, ConfigError):
                continue  # the store says it parsed; a parser change may disagree: rederive handles it
            if not isinstance(raw, dict):
                continue
            parsed[revision_id] = (model_id, raw, geom)
            yield revision_id, raw


def check(engine: Engine, settings: Settings, *, every: bool = False, limit: int | None = None,
          should_stop: Callable[[], bool] = lambda: False,
          progress: Callable[[Outcome], None] | None = None) -> CheckReport:
    """Read due revisions (all current ones with ``every``) in the pool and record each verdict."""
    version = installed_transformers()
    report = CheckReport()
    report.rejudged = rejudge_stale(engine)
    with read_session(engine) as session:
        ids = due_revisions(session, version, every=every, limit=limit)
    report.due = len(ids)
    if not ids or settings.oracle_workers <= 0:
        return report
    parsed: dict[int, tuple[str, dict, Geometry]] = {}
    pending: list[dict] = []
    outcomes = read_configs(_configs(engine, ids, parsed), workers=settings.oracle_workers,
                            time_limit_s=settings.oracle_time_limit_s,
                            memory_limit_bytes=settings.oracle_memory_limit_mb << 20, should_stop=should_stop)
    try:
        for outcome in outcomes:
            model_id, raw, geom = parsed[outcome.key]
            verdict = verdict_for(raw, geom, outcome)
            pending.append(row_values(outcome.key, model_id, raw, verdict, outcome))
            report.checked += 1
            report.by_status[verdict.status] += 1
            if progress is not None:
                progress(outcome)
            if len(pending) >= WRITE_EVERY:
                report.new_disagreements += _store(engine, pending)
                pending = []
    finally:
        outcomes.close()
        if pending:
            report.new_disagreements += _store(engine, pending)
    report.stopped = report.checked < report.due
    return report


def rejudge_stale(engine: Engine) -> int:
    """Re-judge stored readings against the current parser (no child: the reading is kept)."""
    with read_session(engine) as session:
        stale = session.execute(
            sa.select(OracleCheck, _R.raw_text).join(ConfigRevision.__table__, _R.id == _O.revision_id)
            .where(_O.status.in_(("agree", "disagree")), sa.or_(_O.parser_version.is_(None),
                                                                _O.parser_version != PARSER_VERSION))).all()
    rows = []
    for row, text in stale:
        try:
            raw, geom = json.loads(text), parse_geometry(parse_config_text(text))
        except (ValueError, ConfigError):
            continue
        reading = Reading.from_dict({"query_heads": row.query_heads, "parameters": row.parameters,
                                     "attention_free": row.elements_per_token is None and not row.layers,
                                     "self_attention": row.layers, "cross_attention": row.cross_layers})
        outcome = Outcome(row.revision_id, "read", reading=reading, transformers=row.transformers_version)
        rows.append(row_values(row.revision_id, row.model_id, raw, judge(raw, geom, reading), outcome))
    for start in range(0, len(rows), 100):
        _store(engine, rows[start:start + 100])
    return len(rows)


def check_files(paths: list, settings: Settings, *, should_stop: Callable[[], bool] = lambda: False,
                progress: Callable[[Outcome], None] | None = None) -> list[dict]:
    """The oracle over config files, without the store (the bundled configs, for instance): one
    {file, model_type, status, reason, differences} per file, in file order. A file our parser
    refuses is reported with status ``failed`` and our error, since there is nothing to compare."""
    parsed: dict[int, tuple[str, dict, Geometry]] = {}
    results: dict[int, dict] = {}
    jobs = []
    for i, path in enumerate(paths):
        text = path.read_bytes()
        try:
            raw = json.loads(text)
            geom = parse_geometry(parse_config_text(text))
        except (ValueError, ConfigError) as exc:
            results[i] = {"file": path.name, "model_type": None, "status": "failed",
                          "reason": f"our parser: {exc}", "differences": []}
            continue
        parsed[i] = (path.name, raw, geom)
        jobs.append((i, raw))
    for outcome in read_configs(jobs, workers=max(1, settings.oracle_workers),
                                time_limit_s=settings.oracle_time_limit_s,
                                memory_limit_bytes=settings.oracle_memory_limit_mb << 20, should_stop=should_stop):
        name, raw, geom = parsed[outcome.key]
        verdict = verdict_for(raw, geom, outcome)
        model_type = raw.get("model_type") if isinstance(raw.get("model_type"), str) else None
        results[outcome.key] = {"file": name, "model_type": model_type, "status": verdict.status,
                                "reason": verdict.reason, "differences": list(verdict.differences)}
        if progress is not None:
            progress(outcome)
    return [results[i] for i in sorted(results)]


def table_of(results: list[dict]) -> list[dict]:
    """Per model_type: configs and verdict counts (the shape of ``store.queries.oracle.status_table``)."""
    table: dict[str | None, Counter] = {}
    for r in results:
        table.setdefault(r["model_type"], Counter())[r["status"]] += 1
    return [{"model_type": t, "configs": sum(c.values()), **{s: c[s] for s in ("agree", "disagree", "unsupported",
                                                                              "failed")}}
            for t, c in sorted(table.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))]
