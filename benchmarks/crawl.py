"""Crawler benchmark against the stand-in Hub, beside the naive peer, in one run.

    python benchmarks/crawl.py                    # 5,000 repos, at 0, 5 and 25 ms per answer
    python benchmarks/crawl.py --repos 20000 --latency-ms 50 --json
    python benchmarks/crawl.py --models 10000 100000   # the scale table -> benchmarks/results/crawl.json

For each latency a fresh stand-in Hub (a separate process, so it does not share our GIL) serves
``--repos`` synthetic LM repos, and the script measures:

- **first crawl**: ``observatory.crawler.run.crawl`` from an empty store (models/s; requests per
  new model counted by the server, listing pages included);
- **re-crawl, nothing changed**: must make zero config requests;
- **re-crawl, N changed**: N repos got a new commit; only those are fetched;
- **lineage backfill**: the store's lineage and parameter counts wiped, as a crawl before issue
  10 left them; the next crawl reads them from listing pages alone (``models``: rows filled);
- **naive peer**: list, then ``model_info`` + ``hf_hub_download(revision=sha)`` per model, one
  after the other, storing through the same ``observatory.store.ingest`` path (a sample of
  ``--naive-models``; its rate does not depend on how many it does).

The latency stands in for the round trip to huggingface.co; both peers see the same. At 0 ms
both are bound by this machine's CPU: storing a model through ``observatory.store.ingest`` (ORM rows for
the model, the revision and its geometry) costs more than our one request, so the crawler can
only win by the naive peer's two extra requests. With any real network in between (5 ms is a
LAN; the Hub is tens of ms away) the naive loop pays three round trips per model in series while
the crawler pays one, overlapped.
Floors (issues 3 and 10): <= 1.01 requests per new model, listing pages included; 0 config
requests on the unchanged re-crawl and on the lineage backfill; >= 5x the naive peer's models/s.
"""

from __future__ import annotations

import os
import tempfile

# huggingface_hub reads these at import time: no telemetry/agent lookups, no token, no user cache.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ.pop("HF_TOKEN", None)
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="bench-hf-home-"))

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Self  # noqa: E402

import httpx2  # noqa: E402
from sqlalchemy import func, select, update  # noqa: E402

from observatory.pipeline import crawl  # noqa: E402  (the crawl and its after-crawl steps, as `observatory crawl`)
from observatory.settings import Settings  # noqa: E402
from observatory.store.db import make_engine, session_scope, upgrade  # noqa: E402
from observatory.store.ingest import record_config, upsert_model  # noqa: E402
from observatory.store.tables import HubModel  # noqa: E402

SINCE = datetime(2000, 1, 1, tzinfo=timezone.utc)


class StandIn:
    """The stand-in Hub in its own process, controlled over HTTP."""

    def __init__(self, repos: int, latency_ms: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "observatory.testing.hub_standin", "--repos", str(repos),
             "--latency-ms", str(latency_ms)], stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"stand-in did not start: {self.url!r}")
        self.control = httpx2.Client(base_url=self.url, timeout=120)

    def reset(self) -> None:
        self.control.post("/_standin/reset").raise_for_status()

    def counts(self) -> dict[str, int]:
        counts = self.control.get("/_standin/counts").json()
        counts.pop("other", None)
        return counts

    def touch(self, n: int) -> None:
        self.control.post("/_standin/touch", params={"n": n}).raise_for_status()

    def close(self) -> None:
        self.control.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _row(phase: str, models: int, seconds: float, counts: dict[str, int], store_count: int | None = None) -> dict:
    config = counts.get("resolve_get", 0) + counts.get("resolve_head", 0)
    total = sum(counts.values())
    return {"phase": phase, "models": models, "seconds": round(seconds, 2),
            "models_per_s": round(models / seconds, 1) if seconds and models else 0.0,
            "requests": total, "listing": counts.get("listing", 0), "model_info": counts.get("model_info", 0),
            "config": config, "requests_per_model": round(total / models, 3) if models else None,
            "stored": store_count}


def _store(work_dir: Path, name: str, concurrency: int, url: str) -> tuple[Settings, object]:
    # The stand-in is not the Hub: no request budget (the anonymous one would hold a 10k crawl to
    # 3,000 configs per 5 minutes and measure the budget, not the crawler).
    settings = Settings(data_dir=work_dir / name, hf_endpoint=url, crawl_concurrency=concurrency,
                        autoload_snapshot=False, hub_plan="unlimited")
    upgrade(settings.resolved_database_url)
    return settings, make_engine(settings.resolved_database_url)


def ours(hub: StandIn, work_dir: Path, concurrency: int, changed: int) -> list[dict]:
    settings, engine = _store(work_dir, "ours", concurrency, hub.url)
    rows = []
    hub.reset()
    started = time.perf_counter()
    run = crawl(engine, settings, since=SINCE)
    rows.append(_row("first crawl", run.new, time.perf_counter() - started, hub.counts(), run.new))
    hub.reset()
    started = time.perf_counter()
    again = crawl(engine, settings)
    rows.append(_row("re-crawl, nothing changed", again.new + again.changed, time.perf_counter() - started,
                     hub.counts(), again.new + again.changed))
    hub.touch(changed)
    hub.reset()
    started = time.perf_counter()
    third = crawl(engine, settings)
    rows.append(_row(f"re-crawl, {changed} changed", third.changed, time.perf_counter() - started, hub.counts(),
                     third.changed))
    with session_scope(engine) as session:
        session.execute(update(HubModel).values(relation=None, base_models=None, num_parameters=None,
                                                parameters_source=None, lineage_warnings=None))
    hub.reset()
    started = time.perf_counter()
    crawl(engine, settings)
    with session_scope(engine) as session:
        filled = session.scalar(select(func.count()).select_from(HubModel).where(HubModel.relation.is_not(None)))
    rows.append(_row("lineage backfill (no config fetched)", filled, time.perf_counter() - started, hub.counts(),
                     filled))
    engine.dispose()
    return rows


def naive(hub: StandIn, work_dir: Path, models: int) -> dict:
    from huggingface_hub import HfApi, hf_hub_download

    settings, engine = _store(work_dir, "naive", 1, hub.url)
    api = HfApi(endpoint=hub.url, token=False)
    cache = work_dir / "naive-hf-cache"
    hub.reset()
    started = time.perf_counter()
    stored = 0
    for info in api.list_models(sort="created_at"):
        if stored >= models:
            break
        info = api.model_info(info.id)
        path = hf_hub_download(info.id, "config.json", revision=info.sha, endpoint=hub.url, token=False,
                               cache_dir=cache)
        with session_scope(engine) as session:
            upsert_model(session, info.id, created_at=info.created_at, downloads=info.downloads or 0)
            record_config(session, info.id, Path(path).read_text(encoding="utf-8"), info.sha)
        stored += 1
    row = _row("naive: model_info + hf_hub_download", stored, time.perf_counter() - started, hub.counts(), stored)
    engine.dispose()
    return row


def table(results: list[dict]) -> str:
    head = (f"{'latency':>8}  {'phase':<36} {'models':>6} {'sec':>7} {'models/s':>9} {'requests':>8} "
            f"{'listing':>7} {'model_info':>10} {'config':>6} {'req/model':>9}")
    lines = [head, "-" * len(head)]
    for r in results:
        per = "-" if r["requests_per_model"] is None else f"{r['requests_per_model']:.3f}"
        lines.append(f"{r['latency_ms']:>6.0f}ms  {r['phase']:<36} {r['models']:>6} {r['seconds']:>7.2f} "
                     f"{r['models_per_s']:>9.1f} {r['requests']:>8} {r['listing']:>7} {r['model_info']:>10} "
                     f"{r['config']:>6} {per:>9}")
    return "\n".join(lines)


def floors(rows: list[dict]) -> list[str]:
    first, unchanged, _changed, backfill, peer = rows
    speedup = first["models_per_s"] / peer["models_per_s"] if peer["models_per_s"] else float("inf")
    checks = [
        (f"requests per new model {first['requests_per_model']:.3f} <= 1.01", first["requests_per_model"] <= 1.01),
        (f"config requests on the unchanged re-crawl: {unchanged['config']} == 0", unchanged["config"] == 0),
        (f"config requests on the lineage backfill: {backfill['config']} == 0, {backfill['models']} of "
         f"{first['models']} filled", backfill["config"] == 0 and backfill["models"] == first["models"]),
        (f"speed-up over the naive peer {speedup:.1f}x >= 5x", speedup >= 5),
    ]
    return [f"  [{'PASS' if ok else 'FAIL'}] {text}" for text, ok in checks]


class PssSampler:
    """Peak proportional set size of this process (``/proc/self/smaps_rollup``), sampled every
    0.25 s in a thread: RSS would count SQLite's file-backed mmap pages in full (issue 26)."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read_kb() -> int:
        try:
            for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.peak_kb = max(self.peak_kb, self.read_kb())

    def __enter__(self) -> Self:
        self.peak_kb = self.read_kb()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, self.read_kb())


def _measured(what):
    """(result, seconds, heap peak MB by tracemalloc, PSS peak MB) of ``what()``."""
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    with PssSampler() as pss:
        started = time.perf_counter()
        result = what()
        seconds = time.perf_counter() - started
    heap = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    return result, seconds, heap, pss.peak_kb / 1024


def scale(models: int, work_dir: Path, concurrency: int, changed: int) -> list[dict]:
    """At ``models`` repos (0 ms per answer): the first crawl, the after-crawl steps that follow
    it (trend refresh, alert evaluation), then a crawl of ``changed`` new commits and its
    after-crawl steps, as ``observatory crawl`` runs them; heap and PSS for each."""
    from observatory.crawler.run import crawl as crawl_only
    from observatory.pipeline import after_crawl

    hub = StandIn(models, 0.0)
    try:
        settings, engine = _store(work_dir, f"scale-{models}", concurrency, hub.url)
        settings = settings.model_copy(update={"oracle_enabled": False})
        rows = []
        for phase, prepare, options in (("first crawl", None, {"since": SINCE}),
                                        (f"re-crawl, {changed} changed", lambda: hub.touch(changed), {})):
            if prepare:
                prepare()
            hub.reset()
            run, seconds, heap, pss = _measured(lambda options=options: crawl_only(engine, settings, **options))
            counts = hub.counts()
            done = run.new + run.changed
            rows.append({"models": models, "phase": phase, "fetched": done, "seconds": round(seconds, 1),
                         "models_per_s": round(done / seconds, 1) if seconds and done else None,
                         "requests_per_model": round(sum(counts.values()) / done, 3) if done else None,
                         "heap_mb": round(heap, 1), "pss_mb": round(pss, 1), "status": run.status})
            steps, seconds, heap, pss = _measured(lambda run=run: after_crawl(engine, settings, run))
            rows.append({"models": models, "phase": f"after {phase} (trends, alerts)", "fetched": None,
                         "seconds": round(seconds, 1), "models_per_s": None, "requests_per_model": None,
                         "heap_mb": round(heap, 1), "pss_mb": round(pss, 1),
                         "status": "ok" if all(v == "ok" for v in steps.values()) else json.dumps(steps)})
        engine.dispose()
        return rows
    finally:
        hub.close()


SCALE_COLUMNS = ["models", "phase", "fetched", "wall s", "models/s", "requests/model", "heap MB (peak)",
                 "PSS MB (peak)", "status"]


def scale_cells(r: dict) -> list:
    dash = lambda v: "—" if v is None else v
    return [f"{r['models']:,}", r["phase"], dash(r["fetched"]), r["seconds"], dash(r["models_per_s"]),
            dash(r["requests_per_model"]), r["heap_mb"], r["pss_mb"], r["status"]]


def scale_main(args) -> int:
    import results

    run_stamp = results.stamp()
    tracemalloc.start()
    rows = []
    notes = _scale_notes(args.changed)
    with tempfile.TemporaryDirectory(prefix="bench-crawl-") as tmp:
        for n in args.models:
            rows += scale(n, Path(tmp), args.concurrency, args.changed)
            print(f"done: {n:,} models", file=sys.stderr, flush=True)
            if not args.no_write:  # after each size, so a long run cut short keeps what it measured
                results.write("crawl", run_stamp, SCALE_COLUMNS, [scale_cells(r) for r in rows], notes)
    tracemalloc.stop()
    cells = [scale_cells(r) for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(SCALE_COLUMNS, *cells, strict=True)]
    for line in [SCALE_COLUMNS, *cells]:
        print("  ".join(str(c).rjust(w) if i not in (1, 8) else str(c).ljust(w) for i, (c, w) in
                        enumerate(zip(line, widths, strict=True))))
    if not args.no_write:
        print(f"\nwrote {(results.RESULTS / 'crawl.json').relative_to(results.ROOT)}")
    return 0


def _scale_notes(changed: int) -> list[str]:
    return [
        "The stand-in Hub (observatory/testing/hub_standin.py, its own process) answers at once (0 ms), so "
        "wall time is this machine's CPU: the crawler, SQLite and the stand-in share its 2 cores with other "
        "work (see the load average).",
        "Wall times are measured with tracemalloc running (it traces every Python allocation and slows "
        "allocation-heavy code), so models/s is a lower bound of the untraced rate.",
        "heap MB: tracemalloc's peak of Python allocations above the start of the phase; PSS MB: the peak "
        "proportional set size of the whole benchmark process (sampled every 0.25 s), which counts "
        "SQLite's shared file pages once, unlike RSS.",
        "requests/model: requests counted by the stand-in (listing pages and config files) per model fetched; "
        "the stand-in serves config.json directly (1 request), the real Hub by a 307 to its resolve cache "
        "(2 requests, hub-api.md section 2).",
        f"after ... (trends, alerts): observatory.pipeline.after_crawl with the oracle off; the re-crawl "
        f"gives {changed:,} repos a new commit.",
    ]


BACKFILL_MODELS = 1_000_000
BACKFILL_COLUMNS = ["plan", "api / 5 min", "resolvers / 5 min", "configs / hour", "backfill of 1M configs",
                    "bound by"]


def backfill_main(args) -> int:
    """Requests per model measured against a stand-in that redirects ``/resolve/`` as the real Hub
    does (a 307 to its resolve cache), then the backfill time at each published plan's quota."""
    import results

    from observatory.crawler.run import crawl as crawl_only
    from observatory.hub.ratelimit import PUBLISHED_LIMITS, PUBLISHED_WINDOW_S
    from observatory.testing.hub_standin import HubStandin, populate

    run_stamp = results.stamp()
    with tempfile.TemporaryDirectory(prefix="bench-backfill-") as tmp, HubStandin(redirect_resolve=True) as hub:
        populate(hub, args.backfill_models)
        settings, engine = _store(Path(tmp), "backfill", args.concurrency, hub.url)
        run = crawl_only(engine, settings.model_copy(update={"oracle_enabled": False}), since=SINCE)
        engine.dispose()
        counts = dict(hub.counts)
    fetched = run.new + run.changed
    resolvers = (counts.get("resolve_get", 0) + counts.get("resolve_head", 0)) / fetched  # both hops
    api = counts.get("listing", 0) / fetched
    print(f"measured on {fetched:,} models: {resolvers:.3f} resolver and {api:.4f} api requests per model "
          f"(stand-in counts: {counts})")
    rows = []
    for plan, limits in PUBLISHED_LIMITS.items():
        per_window = {"resolvers": limits["resolvers"] / resolvers, "api": limits["api"] / api if api else float("inf")}
        bound = min(per_window, key=per_window.get)
        configs_per_hour = per_window[bound] * 3600 / PUBLISHED_WINDOW_S
        rows.append([plan, f"{limits['api']:,}", f"{limits['resolvers']:,}", f"{configs_per_hour:,.0f}",
                     _hours(BACKFILL_MODELS / configs_per_hour), bound])
    widths = [max(len(str(c)) for c in col) for col in zip(BACKFILL_COLUMNS, *rows, strict=True)]
    for line in [BACKFILL_COLUMNS, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)))
    notes = [
        f"Requests per model measured by crawling {fetched:,} synthetic repos from a stand-in Hub that answers "
        f"/resolve/ with a 307 to /api/resolve-cache/ as huggingface.co does (hub-api.md section 2.1): "
        f"{resolvers:.3f} resolver requests and {api:.4f} listing (api) requests per model, at the "
        f"stand-in's page size of 1,000 (the Hub's default page size is unconfirmed).",
        "Quotas: hub-docs docs/hub/rate-limits.md, 'current rate limits (in September 25)', 5-minute fixed "
        "windows; the anonymous and free figures are marked 'subject to change over time depending on "
        "platform health'. Org plans apply per member.",
        "Backfill time = 1M x requests per model / quota per window, for the bucket that binds; it assumes "
        "the crawl has the quota to itself (hub_plan / hub_quota set the budget it keeps to) and "
        "that the Hub answers faster than the quota allows.",
    ]
    if not args.no_write:
        path = results.write("crawl_backfill", run_stamp, BACKFILL_COLUMNS, rows, notes)
        print(f"\nwrote {path.relative_to(results.ROOT)}")
    return 0


def _hours(hours: float) -> str:
    return f"{hours:,.1f} h" if hours < 48 else f"{hours:,.0f} h ({hours / 24:.1f} days)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=5000)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 5.0, 25.0],
                        help="per-answer delay of the stand-in; one benchmark per value")
    parser.add_argument("--naive-models", type=int, default=300, help="models the naive peer fetches")
    parser.add_argument("--changed", type=int, default=100, help="repos given a new commit before the third crawl")
    parser.add_argument("--concurrency", type=int, default=Settings().crawl_concurrency)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--models", type=int, nargs="+",
                        help="instead: the scale table at these store sizes (wall, models/s, heap, PSS, after-crawl "
                             "timings), written to benchmarks/results/crawl.json")
    parser.add_argument("--no-write", action="store_true", help="with --models: print only, write no results file")
    parser.add_argument("--backfill", action="store_true",
                        help="instead: requests per model against a redirecting stand-in and the backfill time "
                             "at each published Hub plan, written to benchmarks/results/crawl_backfill.json")
    parser.add_argument("--backfill-models", type=int, default=500)
    args = parser.parse_args(argv)
    if args.backfill:
        return backfill_main(args)
    if args.models:
        return scale_main(args)

    results, verdicts = [], []
    for latency in args.latency_ms:
        hub = StandIn(args.repos, latency)
        try:
            with tempfile.TemporaryDirectory(prefix="bench-crawl-") as tmp:
                rows = [*ours(hub, Path(tmp), args.concurrency, args.changed), naive(hub, Path(tmp), args.naive_models)]
        finally:
            hub.close()
        for row in rows:
            row["latency_ms"] = latency
        results += rows
        verdicts.append((latency, floors(rows)))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"crawl benchmark: {args.repos} synthetic repos, concurrency {args.concurrency}, "
              f"naive sample {args.naive_models}; requests counted by the stand-in\n")
        print(table(results))
        for latency, lines in verdicts:
            print(f"\nfloors at {latency:.0f} ms per answer:")
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
