"""``observatory crawl``: one crawl of the Hub now, or a look at past runs and open failures."""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
from datetime import datetime, timedelta, timezone

import click

from observatory.commands.errors import describe
from observatory.settings import get_settings

_DURATION = re.compile(r"^(\d+)\s*([dhm])$")


def parse_since(value: str) -> datetime:
    """An ISO date/datetime (UTC unless it says otherwise) or a span back from now: 7d, 12h, 30m."""
    text = value.strip()
    if match := _DURATION.match(text):
        amount, unit = int(match[1]), match[2]
        span = {"d": timedelta(days=amount), "h": timedelta(hours=amount), "m": timedelta(minutes=amount)}[unit]
        return datetime.now(timezone.utc) - span
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a date (2026-01-31, 2026-01-31T12:00) nor a span (7d, 12h)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


class _Since(click.ParamType):
    name = "DATE|SPAN"

    def convert(self, value, param, ctx):
        return value if isinstance(value, datetime) else parse_since(value)


@click.command("crawl")
@click.option("--scope", "scope_name", default="default", show_default=True,
              help="Name of the crawl scope; each scope keeps its own marks. Presets: default (language "
                   "models), all (any repo with a config.json).")
@click.option("--since", type=_Since(), help="How far back a first run reads (date or span such as 7d). "
                                             "Older than the mark, it also backfills.")
@click.option("--max-models", type=click.IntRange(min=1), help="Fetch at most this many models in this run.")
@click.option("--pipeline-tag", "pipeline_tags", multiple=True, help="Only these pipeline tags (repeatable).")
@click.option("--any-pipeline", is_flag=True, help="Any pipeline tag, or none.")
@click.option("--library", "libraries", multiple=True, help="Only these libraries (repeatable).")
@click.option("--min-downloads", type=click.IntRange(min=0), help="Only models listed with this many downloads.")
@click.option("--author", help="Only this user or organisation (filtered by the Hub).")
@click.option("--hub-filter", "hub_filter", multiple=True, help="Hub tag filter, e.g. transformers (repeatable).")
@click.option("--no-retry", is_flag=True, help="Do not retry earlier transient failures in this run.")
@click.option("--list", "list_runs", is_flag=True, help="Show past runs instead of crawling.")
@click.option("--failures", "list_failures", is_flag=True, help="Show open failures instead of crawling.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Rows shown by --list / --failures.")
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def crawl(scope_name, since, max_models, pipeline_tags, any_pipeline, libraries, min_downloads, author,
          hub_filter, no_retry, list_runs, list_failures, limit, no_progress, as_json) -> None:
    """Crawl the Hub once: new models' config.json files, newest first, down to the scope's mark.

    Prints a summary (seen, new, changed, skipped, failed by reason, requests, duration); every
    run is stored and shown by --list. A first run reads back --since (default: the
    crawl_first_run_days setting) or --max-models models; later runs stop at the mark.
    Progress goes to stderr: a bar on a terminal, otherwise a line as each pass begins and every
    30 s, each with the rate and the projected time left (bound by the pace so far or by the
    request budget, the Hub's published quota: see the hub_plan setting).
    With --json the result is always one JSON object on stdout, "ok" false on failure.
    SIGINT/SIGTERM stop the run within a second, stored as interrupted.
    Exit status 1: the crawl failed or the Hub could not be reached; 3: the run stopped early
    (interrupted, or the Hub asked for a long wait); what was fetched is stored and the next run
    resumes.
    """
    from observatory.crawler.health import open_failures, recent_runs, run_to_dict
    from observatory.store.db import get_engine, session_scope, upgrade

    settings = get_settings()
    if list_runs or list_failures:
        upgrade(settings.resolved_database_url)
        with session_scope(get_engine(settings)) as session:
            if list_runs:
                rows = [run_to_dict(r) for r in recent_runs(session, limit)]
                _emit(rows, as_json, _runs_table)
            else:
                rows = [_failure_dict(f) for f in open_failures(session, limit)]
                _emit(rows, as_json, _failures_table)
        return
    try:
        try:
            upgrade(settings.resolved_database_url)
        except Exception as exc:
            raise click.ClickException(f"cannot prepare the store at {settings.resolved_database_url}: "
                                       f"{describe(exc)}") from None
        run = _crawl_now(get_engine(settings), settings, scope_name, since, max_models, pipeline_tags, any_pipeline,
                         libraries, min_downloads, author, hub_filter, no_retry, no_progress)
    except click.ClickException as exc:
        if as_json:
            click.echo(json.dumps({"ok": False, "error": exc.message}, indent=2))
        raise
    result = {"ok": run.status == "ok", **run_to_dict(run)}
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif run.status not in ("failed", "unreachable"):
        click.echo(_summary(result))
    if run.status in ("failed", "unreachable"):
        hint = f" ({UNREACHABLE_HINT})" if run.status == "unreachable" else ""
        raise click.ClickException(f"crawl {run.status}: {run.error}{hint}")
    if run.status != "ok":
        sys.exit(3)  # stopped early (interrupted, rate limited); the marks stayed put, the next run resumes


UNREACHABLE_HINT = "set HF_ENDPOINT to a Hub or mirror this machine can reach, or a proxy such as HTTPS_PROXY"


def _crawl_now(engine, settings, scope_name, since, max_models, pipeline_tags, any_pipeline, libraries,
               min_downloads, author, hub_filter, no_retry, no_progress):
    from observatory.commands.crawl_progress import CrawlProgress
    from observatory.crawler.run import CrawlBusy
    from observatory.crawler.scope import ScopeMismatch, build_scope
    from observatory.pipeline import crawl as run_crawl
    from observatory.store.integrity import StoreCorrupt

    scope = build_scope(scope_name, pipeline_tags=pipeline_tags, any_pipeline=any_pipeline, libraries=libraries,
                        min_downloads=min_downloads, author=author, hub_filter=hub_filter)
    bar = CrawlProgress(settings, enabled=not no_progress)
    progress = bar.update

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run_crawl(engine, settings, scope=scope, since=since, max_models=max_models, retry=not no_retry,
                         progress=progress, should_stop=stop.is_set)
    except (CrawlBusy, ScopeMismatch, StoreCorrupt) as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # the store, the disk, or a bug; the run is stored as failed if it can be
        raise click.ClickException(f"crawl failed: {describe(exc)}") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        bar.close()


def _summary(run: dict) -> str:
    stats = run["stats"] or {}
    lines = [
        f"crawl #{run['id']} {run['status']} in {stats.get('duration_s', 0):.1f}s (scope {run['scope']})",
        f"  seen {run['seen']}  new {run['new']}  changed {run['changed']}  skipped {run['skipped']}"
        f"  failed {run['failed']}",
    ]
    if skipped := stats.get("skipped_by_reason"):
        lines.append("  skipped: " + ", ".join(f"{k} {v}" for k, v in skipped.items()))
    if run["failures_by_reason"]:
        lines.append("  failed: " + ", ".join(f"{k} {v}" for k, v in run["failures_by_reason"].items()))
    kinds = stats.get("requests_by_kind") or {}
    detail = ", ".join(f"{k} {v}" for k, v in kinds.items())
    lines.append(f"  requests {run['requests']}" + (f" ({detail})" if detail else ""))
    if mark := (stats.get("passes") or {}).get("created", {}).get("mark"):
        lines.append(f"  mark: newest createdAt read {mark}")
    if run["error"]:
        lines.append(f"  stopped: {run['error']}")
    return "\n".join(lines)


def _failure_dict(f) -> dict:
    return {"model_id": f.model_id, "sha": f.sha, "reason": f.reason, "transient": f.transient,
            "attempts": f.attempts, "next_attempt_at": f.next_attempt_at.isoformat() if f.next_attempt_at else None,
            "last_failed_at": f.last_failed_at.isoformat(), "detail": f.detail}


def _emit(rows: list[dict], as_json: bool, table) -> None:
    click.echo(json.dumps(rows, indent=2) if as_json else table(rows))


def _runs_table(rows: list[dict]) -> str:
    if not rows:
        return "no crawl runs yet"
    out = [f"{'id':>5}  {'status':<11} {'started (UTC)':<19} {'seen':>7} {'new':>6} {'chg':>5} {'fail':>5} {'req':>7}  scope"]
    for r in rows:
        out.append(f"{r['id']:>5}  {r['status']:<11} {r['started_at'][:19]:<19} {r['seen']:>7} {r['new']:>6} "
                   f"{r['changed']:>5} {r['failed']:>5} {r['requests']:>7}  {r['scope']}")
    return "\n".join(out)


def _failures_table(rows: list[dict]) -> str:
    if not rows:
        return "no open failures"
    out = [f"{'reason':<22} {'kind':<9} {'tries':>5}  {'next try (UTC)':<19}  model"]
    for r in rows:
        kind = "transient" if r["transient"] else "permanent"
        out.append(f"{r['reason']:<22} {kind:<9} {r['attempts']:>5}  {(r['next_attempt_at'] or '-')[:19]:<19}  "
                   f"{r['model_id']}")
    return "\n".join(out)
