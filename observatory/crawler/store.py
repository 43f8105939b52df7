"""The crawler's reads and writes. Configs go through ``observatory.store.ingest`` (the one write path).

Every write is idempotent on (model, sha): a revision already stored is a no-op in
``record_configs``, a failure row is keyed by model. So a batch written twice (a crash after the
commit but before anything else noticed) changes nothing, and one lost to a crash before its
commit is simply fetched again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from observatory.core.geometry import ConfigError, parse_config_text
from observatory.core.lineage import classify, parse_safetensors
from observatory.core.repo_ids import is_valid_repo_id
from observatory.crawler.failures import RetryPolicy, next_state
from observatory.crawler.scope import Scope, check_definition
from observatory.crawler.tables import CrawlFailure, CrawlScope
from observatory.hub.files import Fetched
from observatory.store.db import batches
from observatory.store.ingest import (
    ConfigItem,
    record_configs,
    update_model_rows,
    upsert_models,
)
from observatory.store.tables import (
    ConfigRevision,
    CrawlRun,
    GeometryRow,
    HubModel,
    utcnow,
)


@dataclass
class Work:
    """One model to store: what the listing said, and what fetching its config gave."""

    model_id: str
    sha: str | None
    fields: dict = field(default_factory=dict)  # HubModel columns from the listing; {} on retries
    had_revision: bool = False
    fetched: Fetched | None = None
    facts: tuple[Any, Any] | None = None  # the listing's (baseModels, safetensors); None on retries


@dataclass(frozen=True)
class Known:
    revisions: dict[str, set[str]]  # model -> shas with a stored config
    failures: dict[str, str | None]  # model -> sha of its unresolved failure

    def done(self, model_id: str, sha: str | None) -> bool:
        return sha in self.revisions.get(model_id, ()) or (
            model_id in self.failures and self.failures[model_id] == sha)


def known(session: Session, ids: Iterable[str]) -> Known:
    ids = list(set(ids))
    revisions: dict[str, set[str]] = {}
    failures: dict[str, str | None] = {}
    if ids:
        for model_id, sha in session.exec(
            select(ConfigRevision.model_id, ConfigRevision.sha).where(col(ConfigRevision.model_id).in_(ids))
        ):
            revisions.setdefault(model_id, set()).add(sha)
        for model_id, sha in session.exec(
            select(CrawlFailure.model_id, CrawlFailure.sha)
            .where(col(CrawlFailure.model_id).in_(ids), col(CrawlFailure.resolved_at).is_(None))
        ):
            failures[model_id] = sha
    return Known(revisions, failures)


def tracked(session: Session, ids: Iterable[str]) -> set[str]:
    ids = list(set(ids))
    if not ids:
        return set()
    return set(session.exec(select(HubModel.id).where(col(HubModel.id).in_(ids))))


def due_failures(session: Session, now: datetime, limit: int) -> list[CrawlFailure]:
    return list(session.exec(
        select(CrawlFailure)
        .where(col(CrawlFailure.transient).is_(True), col(CrawlFailure.resolved_at).is_(None),
               col(CrawlFailure.next_attempt_at) <= now)
        .order_by(CrawlFailure.next_attempt_at)
        .limit(limit)
    ))


def update_facts(session: Session, facts: dict[str, tuple[Any, Any]]) -> int:
    """Lineage and parameter count of stored models from the listing's ``baseModels`` and
    ``safetensors`` values (model id -> (baseModels, safetensors)), with no config fetched.

    The relation also depends on the model's config (a quantization_config with no declared base
    is still a quantization): the one already stored is used. A malformed value is stored as
    unknown, its warning kept in ``lineage_warnings``; a count the listing does not give leaves
    the stored one alone. Returns how many models were updated.
    """
    ids = [i for i in facts if is_valid_repo_id(i)]
    if not ids:
        return 0
    m, g = HubModel.__table__.c, GeometryRow.__table__.c
    stored = [row for batch in batches(ids) for row in session.execute(
        select(m.id, m.quant_method, m.quant_bits, m.num_parameters, m.parameters_source, g.params_estimate,
               m.relation, m.base_models, m.is_test_repo)
        .select_from(HubModel.__table__)
        .outerjoin(GeometryRow.__table__, g.revision_id == m.current_revision_id)
        .where(m.id.in_(batch)))]
    values = {}
    now = utcnow()
    for model_id, method, bits, params, params_source, estimate, *was in stored:
        stored_params = params
        base_models, safetensors = facts[model_id]
        warnings: list[str] = []
        counted = parse_safetensors(safetensors, warnings)
        fields = {}
        if counted is not None:
            params, dtypes = counted
            fields.update(num_parameters=params, parameters_source="safetensors", weight_dtypes=dtypes)
        elif params_source == "safetensors":  # the listing no longer gives one: unknown again
            params = None
            fields.update(num_parameters=None, parameters_source=None, weight_dtypes=None)
        lineage = classify(model_id, base_models, None, params if params is not None else estimate,
                           declared=(method, bits))
        values[model_id] = {**fields, "relation": lineage.relation, "base_models": list(lineage.base_models) or None,
                            "is_test_repo": lineage.is_test_repo,
                            "lineage_warnings": [*warnings, *lineage.warnings] or None}
        trend_facts = [values[model_id][key] for key in ("relation", "base_models", "is_test_repo")]
        if trend_facts != was or fields.get("num_parameters", stored_params) != stored_params:
            # what the trends count changed: the incremental refresh recomputes its periods by this
            values[model_id]["updated_at"] = now
    update_model_rows(session, values)
    return len(values)


UNLISTED = "not seen in the listing when lineage was first read; relation unknown"


def _facts_unread(session: Session):
    """Crawled models whose listing facts were never read: stored before the listing asked for
    ``baseModels`` (NULL relation, no warning saying why it is unknown)."""
    m = HubModel.__table__.c
    for model_id, created_at, warnings in session.execute(
            select(m.id, m.created_at, m.lineage_warnings)
            .where(m.source == "hub", m.relation.is_(None), m.created_at.is_not(None))):
        if not warnings:  # SQL NULL or JSON null
            yield model_id, created_at


def oldest_facts_unread(session: Session) -> datetime | None:
    """How far down the listing must be read for every stored model to get its lineage."""
    return min((created for _id, created in _facts_unread(session)), default=None)


def mark_unlisted(session: Session, since: datetime) -> int:
    """After a complete backfill walk: models created since ``since`` that the listing did not
    show (deleted, made private, outside the scope) keep an unknown relation, saying why, so the
    next crawl does not page down to them again."""
    ids = [model_id for model_id, created in _facts_unread(session) if created >= since]
    update_model_rows(session, {model_id: {"lineage_warnings": [UNLISTED]} for model_id in ids})
    return len(ids)


def write(session: Session, works: Iterable[Work], *, run_id: int, policy: RetryPolicy,
          now: datetime) -> list[str]:
    """Store fetched configs and failures; one label per work: new, changed, or a failure reason."""
    works = list(works)
    # One query for the batch's failure rows instead of one per model (most models have none).
    open_rows = {f.model_id: f for f in session.exec(
        select(CrawlFailure).where(col(CrawlFailure.model_id).in_([w.model_id[:200] for w in works])))}
    valid = [w for w in works if w.fetched is not None and w.fetched.reason != "invalid_id"]
    # The listing's sha becomes the model's only once its config is stored, so a failed
    # fetch is retried against the sha it failed on.
    upsert_models(session, {
        w.model_id: {**w.fields, **({"sha": w.sha} if w.fetched.ok else {})} for w in valid
    })
    fetched_ok = [w for w in valid if w.fetched.ok]
    recorded = dict(zip(
        (id(w) for w in fetched_ok),
        record_configs(session, [ConfigItem(w.model_id, w.fetched.text, w.sha, fetched_at=now) for w in fetched_ok]),
    ))
    # After the configs: the relation reads the quantization the new config declares.
    update_facts(session, {w.model_id: w.facts for w in valid if w.facts is not None})
    labels = []
    for work in works:
        fetched = work.fetched
        assert fetched is not None
        result = recorded.get(id(work))
        if result is None:  # not fetched: an invalid id or an HTTP failure
            _record_failure(session, open_rows, work, fetched, run_id=run_id, policy=policy, now=now)
            labels.append(fetched.reason)
        elif result.parse_status == "error":
            failure = Fetched(reason=parse_failure_reason(fetched.text), detail=result.parse_error)
            _record_failure(session, open_rows, work, failure, run_id=run_id, policy=policy, now=now)
            labels.append(failure.reason)
        else:
            _resolve_failure(open_rows.get(work.model_id), now)
            labels.append("changed" if work.had_revision else "new")
    session.flush()
    return labels


def parse_failure_reason(raw_text: str) -> str:
    """not_json when the text is no JSON object at all, else the geometry did not parse."""
    try:
        parse_config_text(raw_text)
    except ConfigError:
        return "not_json"
    return "unparseable_geometry"


def _record_failure(session: Session, rows: dict[str, CrawlFailure], work: Work, fetched: Fetched, *,
                    run_id: int, policy: RetryPolicy, now: datetime) -> None:
    key = work.model_id[:200]
    row = rows.get(key)
    open_row = row is not None and row.resolved_at is None
    state = next_state(previous_attempts=row.attempts if open_row else 0,
                       same_sha=open_row and row.sha == work.sha,
                       transient=fetched.transient, now=now, policy=policy)
    if row is None:
        row = rows[key] = CrawlFailure(model_id=key, reason=fetched.reason, first_failed_at=now)
        session.add(row)
    elif not (open_row and row.sha == work.sha):
        row.first_failed_at = now
    detail = fetched.detail
    if state.gave_up:
        detail = f"gave up after {state.attempts} attempts: {detail or fetched.reason}"
    row.sha = work.sha
    row.reason = fetched.reason
    row.transient = state.transient
    row.attempts = state.attempts
    row.next_attempt_at = state.next_attempt_at
    row.detail = detail[:500] if detail else None
    row.last_failed_at = now
    row.resolved_at = None
    row.run_id = run_id


def _resolve_failure(row: CrawlFailure | None, now: datetime) -> None:
    if row is not None and row.resolved_at is None:
        row.resolved_at = now
        row.transient = False
        row.next_attempt_at = None


def load_scope(session: Session, scope: Scope) -> CrawlScope:
    """The scope's state row, created on first use; refuses a name reused with other filters."""
    state = session.get(CrawlScope, scope.name)
    if state is None:
        state = CrawlScope(name=scope.name, definition=scope.definition())
        session.add(state)
        session.flush()
    check_definition(scope, state.definition)
    return state


def close_stale_runs(session: Session, now: datetime) -> int:
    """Runs still "running" while we hold the crawl lease died without finishing."""
    result = session.exec(
        update(CrawlRun).where(col(CrawlRun.status) == "running")
        .values(status="interrupted", finished_at=now,
                error="the crawl ended without finishing (process killed or crashed)")
    )
    return result.rowcount or 0


def retry_at(session: Session) -> datetime | None:
    """When the Hub said to come back, if the latest finished run was rate limited; else None."""
    last = session.exec(
        select(CrawlRun).where(col(CrawlRun.status) != "running").order_by(col(CrawlRun.id).desc()).limit(1)
    ).first()
    if last is None or last.status != "rate_limited" or not (last.stats or {}).get("retry_at"):
        return None
    try:
        return datetime.fromisoformat(last.stats["retry_at"])
    except (TypeError, ValueError):
        return None
