"""A crawl and what runs after it: the place where other domains hook in.

``crawl`` runs one crawl (``crawler.run.crawl``) and hands it ``after_crawl``, which the crawler
calls once a run is stored (whatever its status, so a step can decide for itself;
``run.new + run.changed`` says whether anything arrived). ``scheduled_crawl`` is the schedule's
crawl job. Each step is one line of ``after_crawl`` below, imported inside its function so that
importing the pipeline costs nothing, and isolated so one failing step never stops the others
(its error is logged and returned).
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine

from observatory.settings import Settings
from observatory.store.tables import CrawlRun

log = logging.getLogger(__name__)


def _trends(engine: Engine, settings: Settings, run: CrawlRun) -> None:
    from observatory.store.trends import ensure_trends

    ensure_trends(engine)  # a no-op when the run stored nothing new


def _alerts(engine: Engine, settings: Settings, run: CrawlRun) -> None:
    from observatory.alerts.evaluate import after_crawl as evaluate_and_deliver

    evaluate_and_deliver(engine, settings, run)


def _oracle(engine: Engine, settings: Settings, run: CrawlRun) -> None:
    """Start transformers' second opinion on what arrived, on a thread of its own: the crawl
    returns at once, however long (up to its time limit) any config takes."""
    if settings.oracle_enabled and settings.oracle_workers > 0 and (run.new or run.changed):
        from observatory.oracle import background

        background.start(engine, settings, after=lambda report: after_oracle(engine, settings, report))


def after_oracle(engine: Engine, settings: Settings, report) -> None:
    """A verdict changed: the trends leave out (or take back) the models it concerns, and the
    alert rules see new disagreements."""
    if not (report.checked or report.rejudged):
        return
    from observatory.alerts.delivery import deliver_pending
    from observatory.alerts.evaluate import evaluate
    from observatory.store.trends import ensure_trends

    ensure_trends(engine)
    if report.new_disagreements:
        evaluate(engine, settings)
        deliver_pending(engine, settings)


def scheduled_oracle(engine: Engine, settings: Settings) -> None:
    """The schedule's oracle job: revisions never read, or read by another transformers version
    (a new version re-checks everything, ``oracle_batch`` at a time)."""
    from observatory.oracle.check import OracleUnavailable, check
    from observatory.scheduler import stop_requested

    if not settings.oracle_enabled:
        return
    while not stop_requested():  # a batch at a time, so the trends catch up between batches
        try:
            report = check(engine, settings, limit=settings.oracle_batch, should_stop=stop_requested)
        except OracleUnavailable as exc:
            log.info("oracle skipped: %s", exc)
            return
        if report.checked or report.rejudged:
            log.info("%s", report.line())
            after_oracle(engine, settings, report)
        if report.stopped or report.due < settings.oracle_batch:
            return


def after_crawl(engine: Engine, settings: Settings, run: CrawlRun) -> dict[str, str]:
    """Run every post-crawl step in order; returns {step: "ok" | error text}."""
    steps: list[tuple[str, object]] = [
        # (name, callable(engine, settings, run)), in the order they must run.
        ("trends", _trends),  # before alerts: their rules read the trend points
        ("alerts", _alerts),
        ("oracle", _oracle),  # starts a thread and returns: never delays the crawl
    ]
    results: dict[str, str] = {}
    for name, step in steps:
        try:
            step(engine, settings, run)
            results[name] = "ok"
        except Exception as exc:  # one step's failure must not keep the others from running
            log.exception("after-crawl step %s failed", name)
            results[name] = f"{type(exc).__name__}: {exc}"
    return results


def crawl(engine: Engine, settings: Settings, **options) -> CrawlRun:
    """One crawl (``crawler.run.crawl`` and its ``options``), then the after-crawl steps."""
    from observatory.crawler.run import crawl as run_crawl

    return run_crawl(engine, settings, after=after_crawl, **options)


def scheduled_crawl(engine: Engine, settings: Settings) -> CrawlRun | None:
    """The scheduler's crawl job: the default scope, bounded by ``crawl_max_models``.

    Skipped while the Hub's last "come back later" (a ``rate_limited`` run) has not passed. An
    ``unreachable`` run is stored, then raised as ``HubUnreachable`` for the scheduler to report.
    """
    from observatory.crawler import store
    from observatory.crawler.run import CrawlBusy
    from observatory.hub.policy import HubUnreachable
    from observatory.scheduler import stop_requested
    from observatory.store.db import session_scope
    from observatory.store.tables import utcnow

    with session_scope(engine) as session:
        retry_at = store.retry_at(session)
    if retry_at is not None and retry_at > utcnow():
        log.info("scheduled crawl skipped: the Hub asked us to wait until %s", retry_at.isoformat())
        return None
    try:
        run = crawl(engine, settings, max_models=settings.crawl_max_models, should_stop=stop_requested)
    except CrawlBusy:
        log.info("scheduled crawl skipped: another crawl is running")
        return None
    if run.status == "unreachable":
        raise HubUnreachable(run.error)
    return run
