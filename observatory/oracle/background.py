"""The oracle off the crawl's path: one background thread per process, started after a crawl.

``start`` returns at once. The thread reads due revisions in the pool (``check.check``), up to
``oracle_batch`` at a time, until none is due, then calls ``after`` with its report (the pipeline
refreshes trends and evaluates alerts when a verdict changed). A second ``start`` while one runs
does nothing but ask it to look again once it is done, so a crawl never waits for the oracle
however slow or stuck a config is: the slowest a config can be is its time limit, and that is
spent on this thread. ``stop`` asks the thread to stop (its children are killed) and waits a bounded time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.engine import Engine

from observatory.oracle.check import CheckReport, OracleUnavailable, check
from observatory.settings import Settings

log = logging.getLogger(__name__)

_lock = threading.Lock()
_thread: threading.Thread | None = None
_again = threading.Event()
_stop = threading.Event()


def running() -> bool:
    return _thread is not None and _thread.is_alive()


def start(engine: Engine, settings: Settings, after: Callable[[CheckReport], None] | None = None) -> bool:
    """Start the background oracle unless it runs already; True when this call started it."""
    global _thread
    with _lock:
        if running():
            _again.set()
            return False
        _stop.clear()
        _again.clear()
        _thread = threading.Thread(target=_run, args=(engine, settings, after), name="oracle", daemon=True)
        _thread.start()
        return True


def stop(timeout_s: float = 30.0) -> bool:
    """Ask the background oracle to stop; True when it is gone within ``timeout_s``."""
    _stop.set()
    thread = _thread
    if thread is not None:
        thread.join(timeout_s)
        return not thread.is_alive()
    return True


def _run(engine: Engine, settings: Settings, after: Callable[[CheckReport], None] | None) -> None:
    while not _stop.is_set():
        _again.clear()
        try:
            report = check(engine, settings, limit=settings.oracle_batch, should_stop=_stop.is_set)
        except OracleUnavailable as exc:
            log.info("oracle skipped: %s", exc)
            return
        except Exception:  # the oracle must never take the process down with it
            log.exception("the background oracle failed")
            return
        if report.checked or report.rejudged:
            log.info("%s", report.line())
            if after is not None:
                try:
                    after(report)
                except Exception:
                    log.exception("after the oracle: a follow-up step failed")
        more = report.due >= settings.oracle_batch and report.checked == report.due
        if not (more or _again.is_set()) or report.stopped:
            return
