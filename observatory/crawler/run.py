"""One crawl: retry due failures, list new models down to the mark, then changed ones.

Four passes, each cheap when there is nothing to do:

1. **retry** - transient failures whose backoff has elapsed, fetched at their recorded sha;
2. **created** - ``sort=createdAt`` newest-first down to the scope's ``created_mark``: new repos;
3. **modified** - ``sort=lastModified`` newest-first down to ``modified_mark``: repos already
   stored whose sha moved (old models are below the created mark, so only this pass sees them);
4. **lineage** - only while stored models lack the listing's ``baseModels``/``safetensors`` facts
   (stored before the listing asked for them): ``sort=createdAt`` down to the oldest of them,
   listing pages only, no config fetched.

The main thread lists and writes; a bounded pool of threads fetches configs. Results are
committed in small batches as they arrive (the checkpoint: a SIGKILL loses at most the batch in
flight, which the next run fetches again), and a pass's mark moves only after everything it
fetched is committed. A ``crawl`` lease in the store keeps a second process from crawling.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from observatory.core.repo_ids import is_valid_repo_id
from observatory.crawler import marks, store
from observatory.crawler.failures import RetryPolicy
from observatory.crawler.scope import Scope
from observatory.hub import session as hub_session
from observatory.hub import transport
from observatory.hub.files import Fetched, fetch_config
from observatory.hub.listing import LISTING_FAILURES, Listed, SortKey, list_newest
from observatory.hub.policy import HubUnreachable, RateLimited
from observatory.settings import Settings
from observatory.store import integrity, lease
from observatory.store.db import session_scope
from observatory.store.tables import CrawlRun, utcnow

log = logging.getLogger(__name__)

LEASE_NAME = "crawl"
CHUNK = 100  # listing entries looked up in the store at once
BATCH = 64  # results per commit
BATCH_SECONDS = 1.0  # ...or this old, whichever comes first
# What a crawl writes (checked first): models, configs, geometry, runs, marks, failures, its lease.
WRITTEN_TABLES = ("hub_model", "config_revision", "geometry", "crawl_run", "crawl_scope", "crawl_failure", "lease")
FUTURE_DATED_KEPT = 20  # future-dated entries named in a run's stats (the log names every one)


class CrawlBusy(RuntimeError):
    """Another process holds the crawl lease."""


class LeaseLost(RuntimeError):
    """Our crawl lease lapsed and someone else took it: stop at once, writing nothing more."""


class Stopped(RuntimeError):
    """Asked to stop (the scheduler is shutting down): what was fetched is stored, marks stay."""

    def __init__(self, message: str = "stopped on request (shutting down)") -> None:
        super().__init__(message)


Progress = Callable[[dict], None]
AfterCrawl = Callable[[Engine, Settings, CrawlRun], object]


def crawl(engine: Engine, settings: Settings, *, scope: Scope | None = None, since: datetime | None = None,
          max_models: int | None = None, retry: bool = True, progress: Progress | None = None,
          should_stop: Callable[[], bool] | None = None, after: AfterCrawl | None = None) -> CrawlRun:
    """Run one crawl and return its stored ``CrawlRun``. Raises ``CrawlBusy`` if one is running and
    ``integrity.StoreCorrupt``, writing nothing, if the store fails SQLite's checks.
    ``after(engine, settings, run)`` runs once the run is stored, unless it is stopping
    (``pipeline.crawl`` passes the after-crawl steps).

    The run's status says how it ended: ``ok``; ``interrupted`` (``should_stop`` said so, polled
    by every wait and socket read, or the lease was lost); ``timed_out`` (the run reached
    ``crawl_max_run_s``: stopped the same way); ``rate_limited`` (the Hub asked for a
    longer wait than ``hub_max_wait_s``; ``stats["retry_at"]`` says when to come back);
    ``unreachable`` (no connection to the Hub: offline); ``failed`` (the Hub refused or broke the
    listing). Each is stored with its reason, fetched configs kept and marks where they were.
    Anything else is a bug: recorded as ``failed`` and re-raised.
    """
    scope = scope or Scope()
    # Integrity first: a damaged file is refused before the lease or anything else is written.
    integrity.check_writable(engine, WRITTEN_TABLES, budget_s=settings.store_check_budget_s)
    hub_session.configure(settings)
    holder = lease.new_holder()
    if not lease.acquire(engine, LEASE_NAME, holder, settings.crawl_lease_ttl_s):
        raise CrawlBusy("another crawl is running (the crawl lease is held)")
    try:
        with session_scope(engine) as session:
            now = utcnow()
            store.close_stale_runs(session, now)
            store.load_scope(session, scope)
            run = CrawlRun(scope=scope.name, started_at=now, status="running")
            session.add(run)
        asked_to_stop = should_stop or (lambda: False)
        # The run's time budget works as a stop request (every wait and read sees it, fetched
        # results are stored, marks stay where they are), and the run is stored as timed_out.
        budget = settings.crawl_max_run_s
        ends = None if budget is None else time.monotonic() + budget

        def out_of_time() -> bool:
            return ends is not None and time.monotonic() >= ends

        job = _Crawl(engine, settings, scope, run.id, holder, progress, lambda: asked_to_stop() or out_of_time())
        status, error, extra = "ok", None, {}
        started = time.monotonic()
        with hub_session.counting() as counter, transport.cancellable(job.should_stop):
            job.counter = counter
            try:
                if retry:
                    job.retry_pass()
                job.created_pass(since=since, max_models=max_models)
                job.modified_pass()
                job.lineage_pass()
            except RateLimited as exc:
                status, error, extra = "rate_limited", _one_line(exc), {"retry_at": exc.retry_at.isoformat()}
            except (LeaseLost, Stopped) as exc:
                status, error = "interrupted", _one_line(exc)
            except transport.Cancelled:
                status, error = "interrupted", _one_line(Stopped())
            except KeyboardInterrupt:
                status, error = "interrupted", "interrupted by the user"
                raise
            except HubUnreachable as exc:
                status, error = "unreachable", " ".join(str(exc).split())[:2000]
                log.info("crawl #%s: %s", run.id, error)
            except LISTING_FAILURES as exc:  # the Hub refused or broke the listing, after our retries
                status, error = "failed", _one_line(exc)
                log.warning("crawl #%s failed: %s", run.id, error)
            except Exception as exc:  # a bug: recorded on the run, then re-raised for the caller
                log.exception("crawl failed")
                status, error = "failed", _one_line(exc)
                raise
            finally:
                if status == "interrupted" and out_of_time() and not asked_to_stop():
                    status, error = "timed_out", f"stopped at the run's time budget (crawl_max_run_s = {budget:g} s)"
                job.close()
                run = _finish(engine, run.id, job, status, error, counter.snapshot(),
                              time.monotonic() - started, extra)
    finally:
        lease.release(engine, LEASE_NAME, holder)
    if after is not None and not asked_to_stop():  # shutting down: the next start-up brings trends up to date
        after(engine, settings, run)
    return run


def _finish(engine: Engine, run_id: int, job: _Crawl, status: str, error: str | None,
            requests: dict[str, int], duration: float, extra: dict) -> CrawlRun:
    with session_scope(engine) as session:
        run = session.get(CrawlRun, run_id)
        run.finished_at = utcnow()
        run.status = status
        run.error = error
        run.seen = job.seen
        run.new = job.labels["new"]
        run.changed = job.labels["changed"]
        run.skipped = sum(job.skipped.values())
        failures = {k: v for k, v in job.labels.items() if k not in ("new", "changed")}
        run.failed = sum(failures.values())
        run.failures_by_reason = dict(sorted(failures.items()))
        run.requests = sum(requests.values())
        run.stats = {
            "duration_s": round(duration, 3),
            "requests_by_kind": dict(sorted(requests.items())),
            "skipped_by_reason": dict(sorted(job.skipped.items())),
            "retried": job.retried,
            "passes": job.passes,
            **({"future_dated": job.future_dated} if job.future_dated else {}),
            **extra,
        }
    return run


class _Crawl:
    def __init__(self, engine: Engine, settings: Settings, scope: Scope, run_id: int, holder: str,
                 progress: Progress | None, should_stop: Callable[[], bool] | None) -> None:
        self.engine, self.settings, self.scope, self.run_id = engine, settings, scope, run_id
        self.holder, self.progress = holder, progress
        self.should_stop = should_stop or (lambda: False)
        self.policy = RetryPolicy(settings.crawl_retry_base_s, settings.crawl_retry_max_s,
                                  settings.crawl_max_attempts)
        self.pool = ThreadPoolExecutor(max(1, settings.crawl_concurrency), thread_name_prefix="crawl-fetch")
        self.max_inflight = max(1, settings.crawl_concurrency) * 4
        self.pending: dict[Future, store.Work] = {}
        self.ready: list[store.Work] = []
        # Listed models whose config is already stored: their listing facts (lineage, parameter
        # count) are written in the next batch, with no config fetched.
        self.unchanged_facts: dict[str, tuple] = {}
        self.last_flush = self.last_renew = time.monotonic()
        self.last_report = float("-inf")
        self.lease_lost = False
        self.stopping: BaseException | None = None
        self.seen = 0
        self.retried = 0
        self.submitted = 0  # models worked on (fetched or failed), for --max-models
        self.labels: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.passes: dict[str, dict] = {}
        # Listed dates past this are stored but move no mark (marks.trusted); one clock per run.
        self.horizon = utcnow() + timedelta(seconds=settings.crawl_future_tolerance_s)
        self.future_dated: dict[str, str] = {}  # model id -> the date it was listed with
        # Where the listing is, for progress: the pass, its newest and latest dates, its stop.
        self.where: dict = {}
        self.counter: hub_session.RequestCounter | None = None

    # -- passes -------------------------------------------------------------------------------

    def retry_pass(self) -> None:
        with session_scope(self.engine) as session:
            due = store.due_failures(session, utcnow(), self.settings.crawl_retry_batch)
            had = store.known(session, [f.model_id for f in due]).revisions
        for failure in due:
            self.retried += 1
            self._submit(store.Work(failure.model_id, failure.sha, had_revision=bool(had.get(failure.model_id))))
        self._drain_all()
        self.passes["retry"] = {"due": len(due)}

    def created_pass(self, *, since: datetime | None, max_models: int | None) -> None:
        settings = self.settings
        overlap = timedelta(seconds=settings.crawl_overlap_s)
        with session_scope(self.engine) as session:
            state = store.load_scope(session, self.scope)
            first_run = state.created_mark is None
            stop = marks.created_stop(
                mark=state.created_mark, floor=state.floor, since=since, overlap=overlap,
                default_since=utcnow() - timedelta(days=settings.crawl_first_run_days))
            if first_run and state.floor is None:
                state.floor = stop  # a first run that is interrupted resumes with the same bound
            if state.modified_mark is None:
                # Changes from now on are the change pass's job; set before anything is fetched.
                state.modified_mark = utcnow()
        walk = self._walk("created", "created_at", lambda i: i.created_at, stop, budget=max_models)
        walk.info["first_run"] = first_run
        if walk.complete or (first_run and walk.out_of_budget):
            with session_scope(self.engine) as session:
                state = store.load_scope(session, self.scope)
                state.created_mark = marks.advance(state.created_mark, walk.top)
                if first_run:  # a first run cut short by --max-models covers down to its last entry
                    state.floor = stop if walk.complete else walk.last
                else:
                    state.floor = marks.extend_floor(state.floor, stop)
                state.last_run_id = self.run_id
                state.updated_at = utcnow()
                walk.info["mark"] = _iso(state.created_mark)

    def modified_pass(self) -> None:
        overlap = timedelta(seconds=self.settings.crawl_overlap_s)
        with session_scope(self.engine) as session:
            state = store.load_scope(session, self.scope)
            stop = marks.modified_stop(state.modified_mark, overlap)
        if stop is None:  # set by the created pass; without it this pass would read the whole Hub
            return
        walk = self._walk("modified", "last_modified", lambda i: i.last_modified, stop, tracked_only=True)
        if walk.complete:
            with session_scope(self.engine) as session:
                state = store.load_scope(session, self.scope)
                state.modified_mark = marks.advance(state.modified_mark, walk.top)
                state.updated_at = utcnow()

    def lineage_pass(self) -> None:
        """Once, for models stored before the listing carried ``baseModels`` and ``safetensors``:
        list down to the oldest of them and read their facts. Listing pages only, no config."""
        with session_scope(self.engine) as session:
            oldest = store.oldest_facts_unread(session)
        if oldest is None:
            return
        walk = self._walk("lineage", "created_at", lambda i: i.created_at, oldest, tracked_only=True)
        if walk.complete:
            self._flush()
            with session_scope(self.engine) as session:
                walk.info["unlisted"] = store.mark_unlisted(session, oldest)

    def _walk(self, name: str, sort: SortKey, date_of: Callable[[Listed], datetime | None], stop: datetime, *,
              budget: int | None = None, tracked_only: bool = False) -> _Walk:
        """List newest-first by ``sort`` down to ``stop``, fetching what needs it; all stored on return."""
        listing = list_newest(self.settings, sort, author=self.scope.author, hub_filter=list(self.scope.hub_filter))
        walk = _Walk()
        past = lambda item: marks.below(date_of(item), stop)
        self.where = {"pass": name, "stop": stop, "first": None, "at": None}
        for item, knowledge in self._examine(listing, past, tracked_only):
            if past(item):
                walk.complete = True
                break
            if (dated_at := date_of(item)) is not None:
                self.where["at"] = dated_at
                if self.where["first"] is None:  # a pass's first report is not held back
                    self.where["first"] = dated_at
                    self.last_report = float("-inf")
            if budget is not None and self.submitted >= budget:
                walk.out_of_budget = True
                break
            dated = marks.trusted(date_of(item), self.horizon)
            if dated is None and date_of(item) is not None:
                self._future_dated(name, item, date_of(item))
            walk.top = marks.advance(walk.top, dated)
            walk.last = dated or walk.last
            self._consider(item, knowledge)
            if self.stopping:
                break
        else:
            walk.complete = not self.stopping
        self._drain_all()
        walk.info.update(stop=_iso(stop), top=_iso(walk.top), complete=walk.complete)
        self.passes[name] = walk.info
        if self.stopping:
            raise self.stopping
        return walk

    def _future_dated(self, walk: str, item: Listed, value: datetime) -> None:
        if item.id not in self.future_dated:
            log.warning("crawl #%s: %s is listed as %s (%s), after this crawl's clock; stored, but it moves no mark",
                        self.run_id, str(item.id)[:200], walk, value.isoformat())
        if len(self.future_dated) < FUTURE_DATED_KEPT:
            self.future_dated.setdefault(str(item.id)[:200], value.isoformat())

    # -- per entry ----------------------------------------------------------------------------

    def _examine(self, listing: Iterator[Listed], stop: Callable[[Listed], bool], tracked_only: bool = False):
        """Listing entries with what the store knows about them, looked up a chunk at a time.

        A chunk ends at the first entry past the stop, so no page beyond it is ever requested.
        """
        while chunk := _take_until(listing, CHUNK, stop):
            ids = [item.id for item in chunk if is_valid_repo_id(item.id)]
            with session_scope(self.engine) as session:
                knowledge = store.known(session, ids)
                follow = store.tracked(session, ids) if tracked_only else None
            for item in chunk:
                if follow is not None and item.id not in follow and not stop(item):
                    self.seen += 1
                    self.skipped["untracked"] += 1
                    continue
                yield item, knowledge
            self._collect(block=False)
            self._report()
            if self.should_stop():
                self.stopping = self.stopping or Stopped()

    def _consider(self, item: Listed, knowledge: store.Known) -> None:
        self.seen += 1
        if not is_valid_repo_id(item.id):
            self._fail_now(store.Work(item.id[:200], item.sha), "invalid_id", "not a valid Hub repo id")
            return
        if (reason := self.scope.skip_reason(item)) is not None:
            self.skipped[reason] += 1
            return
        if knowledge.done(item.id, item.sha):
            self.skipped["unchanged"] += 1
            self.unchanged_facts[item.id] = item.facts  # lineage for models stored before it was listed
            return
        work = store.Work(item.id, item.sha, item.model_fields(),
                          had_revision=bool(knowledge.revisions.get(item.id)), facts=item.facts)
        if item.sha is None:
            self._fail_now(work, "no_sha", "the listing gave no commit sha")
        elif item.gated != "false" and not self.settings.hf_token:
            # Anonymous requests to a gated repo always get 401: record it without asking.
            self._fail_now(work, "gated", f"gated ({item.gated}); no token configured")
        else:
            self._submit(work)

    def _fail_now(self, work: store.Work, reason: str, detail: str) -> None:
        work.fetched = Fetched(reason=reason, detail=detail)
        self.submitted += 1
        self.ready.append(work)

    def _submit(self, work: store.Work) -> None:
        self.submitted += 1
        ctx = contextvars.copy_context()  # carries the request counter into the worker
        future = self.pool.submit(ctx.run, fetch_config, self.settings, work.model_id, work.sha)
        self.pending[future] = work
        while len(self.pending) >= self.max_inflight:
            self._collect(block=True)

    # -- results ------------------------------------------------------------------------------

    def _collect(self, block: bool) -> None:
        if self.pending:
            done, _ = wait(list(self.pending), timeout=None if block else 0, return_when=FIRST_COMPLETED)
            for future in done:
                work = self.pending.pop(future)
                try:
                    work.fetched = future.result()
                except RateLimited as exc:
                    self.stopping = self.stopping or exc  # not stored: fetched again next run
                    continue
                except transport.Cancelled:
                    self.stopping = self.stopping or Stopped()
                    continue
                except Exception as exc:  # a bug or an unexpected error: keep the model for retry
                    log.exception("fetching %s failed", work.model_id)
                    work.fetched = Fetched(reason="error", transient=True, detail=f"{type(exc).__name__}: {exc}")
                self.ready.append(work)
        due = time.monotonic() - self.last_flush >= BATCH_SECONDS
        if len(self.ready) >= BATCH or (self.ready and due):
            self._flush()

    def _drain_all(self) -> None:
        while self.pending:
            self._collect(block=True)
        self._flush()

    def _flush(self) -> None:
        self._keep_lease()
        if self.ready or self.unchanged_facts:
            batch, self.ready = self.ready, []
            facts, self.unchanged_facts = self.unchanged_facts, {}
            with session_scope(self.engine) as session:
                labels = store.write(session, batch, run_id=self.run_id, policy=self.policy, now=utcnow())
                store.update_facts(session, facts)
            self.labels.update(labels)
        self.last_flush = time.monotonic()
        self._report()

    def _report(self) -> None:
        if self.progress and time.monotonic() - self.last_report >= 0.2:
            self.last_report = time.monotonic()
            self.progress({"seen": self.seen, "new": self.labels["new"], "changed": self.labels["changed"],
                           "skipped": sum(self.skipped.values()),
                           "failed": sum(v for k, v in self.labels.items() if k not in ("new", "changed")),
                           "requests": self.counter.snapshot() if self.counter else {}, **self.where})

    def _keep_lease(self) -> None:
        if time.monotonic() - self.last_renew < self.settings.crawl_lease_ttl_s / 4:
            return
        if not lease.renew(self.engine, LEASE_NAME, self.holder, self.settings.crawl_lease_ttl_s):
            self.lease_lost = True
            raise LeaseLost("the crawl lease lapsed and was taken by another process")
        self.last_renew = time.monotonic()

    def close(self) -> None:
        """Stop the workers; store what was already fetched unless the lease is gone (Ctrl-C, errors)."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.lease_lost:
            return
        for future, work in list(self.pending.items()):
            if future.done() and not future.cancelled() and future.exception() is None:
                work.fetched = future.result()
                self.ready.append(work)
        self.pending.clear()
        try:
            self._flush()
        except Exception:  # the run is ending anyway; what is not stored is fetched next time
            log.exception("could not store the last fetched configs")
        self._report_now()

    def _report_now(self) -> None:
        self.last_report = float("-inf")
        self._report()


@dataclass
class _Walk:
    top: datetime | None = None  # newest date seen: the next mark
    last: datetime | None = None  # oldest date seen
    complete: bool = False  # reached the stop (or the end of the listing)
    out_of_budget: bool = False
    info: dict = field(default_factory=dict)  # for the run's stats


def _one_line(exc: BaseException) -> str:
    """Exception text for a stored run and a CLI line: server messages often span lines."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _take_until(items: Iterator[Listed], size: int, stop: Callable[[Listed], bool]) -> list[Listed]:
    """Up to ``size`` items, ending early with (and including) the first one that is past the stop."""
    chunk = []
    for item in items:
        chunk.append(item)
        if stop(item) or len(chunk) >= size:
            break
    return chunk
