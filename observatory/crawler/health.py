"""How the crawler is doing, for the CLI and the API's health endpoint (reads only)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from observatory.crawler.tables import CrawlFailure, CrawlScope
from observatory.store import lease
from observatory.store.tables import CrawlRun, utcnow


def run_to_dict(run: CrawlRun) -> dict:
    return {
        "id": run.id, "scope": run.scope, "status": run.status,
        "started_at": _iso(run.started_at), "finished_at": _iso(run.finished_at),
        "seen": run.seen, "new": run.new, "changed": run.changed, "skipped": run.skipped,
        "failed": run.failed, "failures_by_reason": run.failures_by_reason, "requests": run.requests,
        "error": run.error, "stats": run.stats,
    }


def run_summary(run: CrawlRun, *, ever_succeeded: bool) -> str:
    """How a run ended, in words for the pages: an offline machine is not a failure."""
    if run.status == "unreachable":
        shown = "the data stored so far" if ever_succeeded else "the bundled snapshot"
        return f"Hub not reachable — showing {shown}"
    if run.status == "rate_limited":
        retry_at = (run.stats or {}).get("retry_at")
        return "rate limited by the Hub" + (f" — next try after {retry_at[:16].replace('T', ' ')} UTC" if retry_at else "")
    if run.status == "interrupted":
        return "interrupted — the next run resumes"
    if run.status == "timed_out":
        return "stopped at its time budget — the next run resumes"
    return run.status


def recent_runs(session: Session, limit: int = 20) -> list[CrawlRun]:
    return list(session.exec(select(CrawlRun).order_by(col(CrawlRun.id).desc()).limit(limit)))


def open_failures(session: Session, limit: int = 100) -> list[CrawlFailure]:
    return list(session.exec(
        select(CrawlFailure).where(col(CrawlFailure.resolved_at).is_(None))
        .order_by(col(CrawlFailure.last_failed_at).desc()).limit(limit)
    ))


def crawler_health(session: Session, now: datetime | None = None) -> dict:
    """Last run, last success, lag behind the Hub and open failures by reason.

    ``lag_seconds`` is now minus the newest ``createdAt`` any scope has read up to: how far
    behind the Hub the store is, assuming the Hub gets new models continuously.
    """
    now = now or utcnow()
    last = session.exec(select(CrawlRun).order_by(col(CrawlRun.id).desc()).limit(1)).first()
    last_ok = session.exec(
        select(CrawlRun).where(CrawlRun.status == "ok").order_by(col(CrawlRun.id).desc()).limit(1)
    ).first()
    top_scope = session.exec(
        select(CrawlScope).where(col(CrawlScope.created_mark).is_not(None))
        .order_by(col(CrawlScope.created_mark).desc()).limit(1)
    ).first()
    newest = top_scope.created_mark if top_scope else None
    reasons = dict(session.exec(
        select(CrawlFailure.reason, func.count()).where(col(CrawlFailure.resolved_at).is_(None))
        .group_by(CrawlFailure.reason)
    ).all())
    retrying = session.exec(
        select(func.count()).select_from(CrawlFailure)
        .where(col(CrawlFailure.resolved_at).is_(None), col(CrawlFailure.transient).is_(True))
    ).one()
    return {
        "last_run": None if last is None else {
            "id": last.id, "status": last.status, "started_at": _iso(last.started_at),
            "finished_at": _iso(last.finished_at), "error": last.error,
            "summary": run_summary(last, ever_succeeded=last_ok is not None),
        },
        "last_success_at": _iso(last_ok.finished_at) if last_ok else None,
        "running": lease.current(session, "crawl") is not None,
        "newest_created_at": _iso(newest),
        "lag_seconds": None if newest is None else max(0.0, round((now - newest).total_seconds(), 1)),
        "failures_by_reason": dict(sorted(reasons.items())),
        "failures_retrying": retrying,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
