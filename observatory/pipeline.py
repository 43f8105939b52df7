"""What runs after every crawl: the place where other domains hook in.

``after_crawl`` is called by the crawler once a run is stored (whatever its status, so a step
can decide for itself; ``run.new + run.changed`` says whether anything arrived). Each step is
one ``_step(...)`` line below, imported inside the function so the crawler does not depend on
the step's module at import time, and isolated so one failing step never stops the others
(its error is logged and returned).

Add a step like this::

    def _refresh_trends(engine, settings, run):
        from observatory.trends_jobs import refresh
        refresh(engine, settings)

    steps = [("trends", _refresh_trends), ...]
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine

from observatory.settings import Settings
from observatory.tables import CrawlRun

log = logging.getLogger(__name__)


def _trends(engine: Engine, settings: Settings, run: CrawlRun) -> None:
    from observatory.trend_store import ensure_trends

    ensure_trends(engine)  # a no-op when the run stored nothing new


def _alerts(engine: Engine, settings: Settings, run: CrawlRun) -> None:
    from observatory.alerts.evaluate import after_crawl as evaluate_and_deliver

    evaluate_and_deliver(engine, settings, run)


def after_crawl(engine: Engine, settings: Settings, run: CrawlRun) -> dict[str, str]:
    """Run every post-crawl step in order; returns {step: "ok" | error text}."""
    steps: list[tuple[str, object]] = [
        # (name, callable(engine, settings, run)), in the order they must run.
        ("trends", _trends),  # before alerts: their rules read the trend points
        ("alerts", _alerts),
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
