"""The schedule: crawl, stats refresh and other domains' periodic jobs, run by one process only.

APScheduler 3.x (the stable line) runs the jobs; every job has an explicit id, ``coalesce``
(runs missed while busy collapse into one), ``max_instances=1`` and a ``misfire_grace_time`` of
half its interval (a run that is later than that is dropped; the next one comes soon enough).

Only one process may run the schedule, however many web workers or ``observatory worker``
processes share the store: each starts a small elector thread that takes the ``scheduler``
lease in the store, and only the holder starts an APScheduler. The holder renews the lease
every third of its TTL; if it dies, a standby takes over within one TTL. The crawl job also
takes the ``crawl`` lease, so even a leadership hand-over never runs two crawls at once.

Stopping is prompt whatever the jobs are doing: ``shutdown`` asks them to stop (every Hub wait
and socket read sees it within a fraction of a second, ``observatory.hub.transport``) and gives
them ``scheduler_shutdown_grace_s`` to finish. Jobs run on daemon threads, so one that ignores
the request (a benchmark in the middle of a kernel) cannot keep the process alive after that.

Offline, the first job that finds the Hub unreachable logs one line saying so and what to set;
later ones log at INFO. No job prints a traceback for a Hub that is down or rate limiting.

Other domains add a ``JobSpec`` to ``JOBS`` (target ``"module:function"`` called with
``(engine, settings)``, imported only when the job runs). Steps that must follow every crawl
belong in ``observatory.pipeline.after_crawl`` instead.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.util
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from apscheduler.executors.base import BaseExecutor, run_job
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.engine import Engine

from observatory.hub import transport
from observatory.hub.policy import HubUnreachable, RateLimited
from observatory.settings import Settings
from observatory.store import lease

log = logging.getLogger(__name__)

LEASE_NAME = "scheduler"
_stopping: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("scheduler_stopping", default=None)


def stop_requested() -> bool:
    """For long jobs to poll: True once the scheduler running this job is shutting down."""
    event = _stopping.get()
    return event is not None and event.is_set()


@dataclass(frozen=True)
class JobSpec:
    id: str
    target: str | Callable  # "module:function" (imported when it runs) or a callable; gets (engine, settings)
    interval: Callable[[Settings], float]  # seconds; 0 or less disables the job
    first_delay_s: float = 10.0  # the first run comes this soon after leadership (at most one interval)
    optional: bool = False  # skipped when its module is not installed


JOBS: list[JobSpec] = [
    JobSpec("crawl", "observatory.pipeline:scheduled_crawl", lambda s: s.crawl_interval_s, first_delay_s=5),
    JobSpec("stats-refresh", "observatory.crawler.stats:refresh_popular", lambda s: s.stats_refresh_interval_s,
            first_delay_s=120),
    # Spot-benchmarks of newly crawled models, when the bench domain is installed.
    # Off unless bench_schedule_enabled: a fresh install should not spend its CPUs on benchmarks.
    JobSpec("bench-new-models", "observatory.bench.jobs:bench_new_models",
            lambda s: s.bench_interval_s if s.bench_schedule_enabled else 0, first_delay_s=300, optional=True),
    # transformers' second opinion on configs never read, or read by another transformers version.
    JobSpec("oracle", "observatory.pipeline:scheduled_oracle",
            lambda s: s.oracle_interval_s if s.oracle_enabled and s.oracle_workers > 0 else 0, first_delay_s=60),
    # Webhook/e-mail retries that come due between crawls (each crawl also evaluates and delivers).
    JobSpec("alert-delivery", "observatory.alerts.delivery:scheduled_delivery", lambda s: s.alert_delivery_interval_s,
            first_delay_s=15),
]


OFFLINE_HINT = (
    "{error}. Showing the data already stored (on a fresh install, the bundled "
    "snapshot). To crawl, make {endpoint} reachable: set HF_ENDPOINT to a Hub or mirror this machine "
    "can reach, or a proxy (HTTPS_PROXY); `observatory crawl` runs one crawl now. The schedule tries "
    "again every {interval:.0f} s."
)


class DaemonExecutor(BaseExecutor):
    """Runs each job on a daemon thread of its own; ``shutdown(wait=True)`` waits at most ``grace_s``.

    APScheduler's thread pool uses ``concurrent.futures`` threads, which the interpreter joins at
    exit: one stuck job would keep a SIGTERMed process alive.
    """

    def __init__(self, grace_s: float) -> None:
        super().__init__()
        self.grace_s = grace_s
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def _do_submit_job(self, job, run_times) -> None:
        def target() -> None:
            try:
                events = run_job(job, job._jobstore_alias, run_times, self._logger.name)
            except BaseException as exc:
                self._run_job_error(job.id, exc, exc.__traceback__)
            else:
                self._run_job_success(job.id, events)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=target, name=f"job-{job.id}", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def shutdown(self, wait: bool = True) -> None:
        if not wait:
            return
        end = time.monotonic() + self.grace_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        if left := [t.name for t in threads if t.is_alive()]:
            log.warning("shutting down without waiting for %s (still running after %.0f s)",
                        ", ".join(left), self.grace_s)


def _available(spec: JobSpec) -> bool:
    if callable(spec.target):
        return True
    module = spec.target.partition(":")[0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


class SchedulerHandle:
    """Runs ``jobs`` while this process holds the scheduler lease; ``shutdown()`` stops everything."""

    def __init__(self, engine: Engine, settings: Settings, jobs: list[JobSpec] | None = None) -> None:
        self.engine, self.settings = engine, settings
        self.jobs = [j for j in (JOBS if jobs is None else jobs)
                     if j.interval(settings) > 0 and (not j.optional or _available(j))]
        self.holder = lease.new_holder()
        self._ttl = settings.scheduler_lease_ttl_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None
        self._thread: threading.Thread | None = None
        self._said_offline = False

    @property
    def is_leader(self) -> bool:
        return self._scheduler is not None

    @property
    def job_ids(self) -> list[str]:
        return [j.id for j in self.jobs]

    def start(self) -> SchedulerHandle:
        self._thread = threading.Thread(target=self._elect, name="scheduler-elector", daemon=True)
        self._thread.start()
        return self

    def shutdown(self, wait: bool = True) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=min(self._ttl, self.settings.scheduler_shutdown_grace_s))
        self._stop_scheduler(wait=wait)

    # -- leadership ---------------------------------------------------------------------------

    def _elect(self) -> None:
        while not self._stop.is_set():
            try:
                if self._scheduler is None:
                    if lease.acquire(self.engine, LEASE_NAME, self.holder, self._ttl):
                        self._start_scheduler()
                elif not lease.renew(self.engine, LEASE_NAME, self.holder, self._ttl):
                    log.warning("scheduler lease lost; stopping this process's schedule")
                    self._stop_scheduler(wait=False, release=False)
            except Exception:  # the store may be briefly unavailable; try again next tick
                log.exception("scheduler election failed")
            self._stop.wait(self._ttl / 3)

    def _start_scheduler(self) -> None:
        scheduler = BackgroundScheduler(
            timezone=timezone.utc, executors={"default": DaemonExecutor(self.settings.scheduler_shutdown_grace_s)})
        now = datetime.now(timezone.utc)
        for spec in self.jobs:
            interval = float(spec.interval(self.settings))
            scheduler.add_job(
                self._run, "interval", seconds=interval, args=[spec], id=spec.id, name=spec.id,
                coalesce=True, max_instances=1, misfire_grace_time=max(1, int(interval / 2)),
                next_run_time=now + timedelta(seconds=min(spec.first_delay_s, interval)),
                replace_existing=True,
            )
        with self._lock:
            self._scheduler = scheduler  # before start(): a job due at once checks is_leader
            scheduler.start()
        log.info("scheduler started (leader %s): %s", self.holder, ", ".join(self.job_ids))

    def _stop_scheduler(self, wait: bool, release: bool = True) -> None:
        with self._lock:
            scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=wait)
            if release:
                lease.release(self.engine, LEASE_NAME, self.holder)

    def _run(self, spec: JobSpec) -> None:
        if not self.is_leader:  # leadership lapsed between the trigger and now
            return
        token = _stopping.set(self._stop)
        try:
            with transport.cancellable(self._stop.is_set):
                _resolve(spec.target)(self.engine, self.settings)
        except HubUnreachable as exc:  # offline: say so once, with what to do; tried again next time
            self._note_offline(spec, exc)
        except RateLimited as exc:
            log.info("scheduled job %s stopped: %s", spec.id, exc)
        except transport.Cancelled:
            log.info("scheduled job %s stopped: shutting down", spec.id)
        except Exception:  # a failing job must not take the schedule down; it runs again next time
            log.exception("scheduled job %s failed", spec.id)
        finally:
            _stopping.reset(token)

    def _note_offline(self, spec: JobSpec, exc: HubUnreachable) -> None:
        if self._said_offline:
            log.info("scheduled job %s: %s", spec.id, exc)
            return
        self._said_offline = True
        log.warning(OFFLINE_HINT.format(error=exc, endpoint=self.settings.hf_endpoint,
                                        interval=self.settings.crawl_interval_s))


def _resolve(target: str | Callable) -> Callable:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class _Disabled:
    is_leader = False
    job_ids: list[str] = []

    def shutdown(self, wait: bool = True) -> None:
        pass


def start_in_process(engine: Engine, settings: Settings) -> SchedulerHandle | _Disabled:
    """For ``observatory serve``: run the schedule in this process if it wins the lease.

    Every web worker may call this; only one becomes leader, the others stand by and take over
    if the leader stops. With ``scheduler_enabled`` off (a dedicated ``observatory worker``
    runs the schedule) it returns a handle that does nothing.
    """
    if not settings.scheduler_enabled:
        return _Disabled()
    return SchedulerHandle(engine, settings).start()
