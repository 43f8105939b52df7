"""``observatory worker``: run the schedule (crawl, stats refresh, ...) in a process of its own."""

from __future__ import annotations

import logging
import signal
import threading

import click

from observatory.settings import get_settings


@click.command("worker")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info", show_default=True)
def worker(log_level: str) -> None:
    """Run the scheduled jobs until SIGINT or SIGTERM.

    Several workers (or web servers) may run against one store: only the holder of the
    scheduler lease runs jobs, the others stand by and take over if it stops.
    """
    from observatory.scheduler import SchedulerHandle
    from observatory.store.db import get_engine, upgrade
    from observatory.store.integrity import check_writable

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    upgrade(settings.resolved_database_url)
    # A store it could not write to would fail every job, one log line each, until someone looked.
    check_writable(get_engine(settings), (), budget_s=settings.store_check_budget_s)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    handle = SchedulerHandle(get_engine(settings), settings).start()
    click.echo(f"worker {handle.holder}: jobs {', '.join(handle.job_ids)}; "
               "runs them while it holds the scheduler lease", err=True)
    leader = False
    while not stop.wait(0.5):
        if handle.is_leader != leader:
            leader = handle.is_leader
            click.echo("worker: now running the schedule" if leader else "worker: standing by", err=True)
    handle.shutdown(wait=True)
    click.echo("worker: stopped", err=True)
