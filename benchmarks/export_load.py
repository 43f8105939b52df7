"""Mixed load with concurrent exports: answers outside the error shape, and p50/p99 per route.

    python benchmarks/export_load.py --label after                       # this checkout's server
    PYTHONPATH=/path/to/other python benchmarks/export_load.py --label before --server-root /path/to/other

Issue 21 asked for 32 clients, 20 of them exporting, on a 120,000-model store with a crawl
writing. Steps: (1) a SQLite store through the Alembic migrations, filled by
``benchmarks/api.py``'s generator (its realistic mix), trends refreshed; (2) ``uvicorn`` on
127.0.0.1 running the code under ``--server-root`` (so the same script measures another
checkout's server: "before"), its data package built before the load starts, as a server that
has run for a while has one; (3) for ``--seconds``, ``--exporters`` clients each fetch
``/api/v1/models.csv?size=500`` and follow its ``Link``/``X-Next-URL`` pages to the end (a
server that ignores ``size`` streams everything in one answer), every other export the data
package when the server has one; the remaining clients read JSON: a 50-row model page, the
trend endpoint, one model; a writer thread imitates a crawl's write transactions (``BEGIN
IMMEDIATE``, 200 rows' downloads updated and one model inserted, every 0.2 s). Every answer is
classified: ok (200, whole body), in the error shape (JSON ``ok/error/errors/status``, a 429 or
503), outside it (anything else: a plain-text 500, a body cut after its 200, a transport error).

Results go to ``benchmarks/results/export_load.json`` under ``--label``; the table printed
compares every label stored there. Numbers measured on a shared machine vary with its load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import api as store_bench  # noqa: E402  (benchmarks/api.py: the synthetic store)

from observatory.store.db import make_engine  # noqa: E402
from observatory.store.trends import refresh_trends  # noqa: E402
from observatory.testing.server import free_port  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "export_load.json"
ERROR_KEYS = {"ok", "error", "errors", "status"}
PACKAGE = "/api/v1/exports/gqa-observatory-models.zip"


def start_server(root: Path, db: Path, port: int, workers: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(root), "OBSERVATORY_DATABASE_URL": f"sqlite:///{db}",
           "OBSERVATORY_AUTOLOAD_SNAPSHOT": "false", "OBSERVATORY_SCHEDULER_ENABLED": "false",
           "OBSERVATORY_DATA_DIR": str(db.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "observatory.web.app:create_app", "--host", "127.0.0.1",
         "--port", str(port), "--workers", str(workers), "--log-level", "critical", "--no-access-log"],
        cwd=root, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/hardware", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("server did not answer within 180 s")


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.routes: dict[str, dict] = {}

    def add(self, route: str, kind: str, seconds: float, note: str | None = None) -> None:
        with self.lock:
            r = self.routes.setdefault(route, {"latencies": [], "ok": 0, "error_shape": 0, "outside": 0,
                                               "examples": []})
            r["latencies"].append(seconds)
            r[kind] += 1
            if kind == "outside" and note and len(r["examples"]) < 3:
                r["examples"].append(note[:160])


def classify(response: httpx.Response | None, error: Exception | None) -> tuple[str, str | None]:
    if error is not None:
        return "outside", f"{type(error).__name__}: {error}"
    if response.status_code == 200:
        return "ok", None
    try:
        body = response.json()
    except ValueError:
        return "outside", f"{response.status_code} {response.text[:100]!r}"
    if isinstance(body, dict) and set(body) == ERROR_KEYS and body.get("status") == response.status_code:
        return "error_shape", None
    return "outside", f"{response.status_code} {str(body)[:100]}"


def timed_get(client: httpx.Client, url: str) -> tuple[httpx.Response | None, Exception | None, float]:
    started = time.perf_counter()
    try:
        response = client.get(url)
        response.read()
        # A body cut after its 200 shows as a transport error above, or as a CSV without its end.
        if response.status_code == 200 and response.headers.get("content-type", "").startswith("text/csv") \
                and not response.text.endswith("\r\n"):
            return None, RuntimeError("CSV body cut short"), time.perf_counter() - started
        return response, None, time.perf_counter() - started
    except httpx.HTTPError as exc:
        return None, exc, time.perf_counter() - started


def exporter(base: str, stop: threading.Event, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=base, timeout=120) as client:
        turn = 0
        while not stop.is_set():
            turn += 1
            if turn % 2 == 0:
                response, error, seconds = timed_get(client, PACKAGE)
                if response is not None and response.status_code == 404:  # a server without one
                    turn += 1
                else:
                    kind, note = classify(response, error)
                    tally.add("export: data package", kind, seconds, note)
                    continue
            url: str | None = f"/api/v1/models.csv?size=500&sort={rng.choice(['id', 'created_at'])}"
            while url and not stop.is_set():
                response, error, seconds = timed_get(client, url)
                kind, note = classify(response, error)
                tally.add("export: models.csv page", kind, seconds, note)
                if kind != "ok":
                    if response is not None and response.headers.get("retry-after"):
                        stop.wait(min(5.0, float(response.headers["retry-after"])))
                    break
                url = response.headers.get("x-next-url")


def reader(base: str, stop: threading.Event, tally: Tally, ids: list[str], seed: int) -> None:
    rng = random.Random(seed)
    routes = [("json: models page", lambda: "/api/v1/models?size=50"),
              ("json: trends", lambda: "/api/v1/trends"),
              ("json: one model", lambda: f"/api/v1/models/{rng.choice(ids)}")]
    with httpx.Client(base_url=base, timeout=120) as client:
        i = seed
        while not stop.is_set():
            name, url = routes[i % len(routes)]
            i += 1
            response, error, seconds = timed_get(client, url())
            kind, note = classify(response, error)
            tally.add(name, kind, seconds, note)


def writer(db: Path, stop: threading.Event, counts: dict) -> None:
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    rng = random.Random(7)
    n = 0
    while not stop.wait(0.2):
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE hub_model SET downloads = downloads + 1 WHERE rowid IN "
                         "(SELECT rowid FROM hub_model ORDER BY random() LIMIT 200)")
            now = datetime.now(timezone.utc).isoformat(sep=" ")
            conn.execute("INSERT INTO hub_model (id, author, author_key, created_at, downloads, likes, tags, source, "
                         "relation, is_test_repo, first_seen_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                         (f"bench-writer/model-{n:06d}-{rng.randrange(10**6)}", "bench-writer", "bench-writer", now,
                          0, 0, "[]", "hub", "original", 0, now, now))
            conn.execute("COMMIT")
            n += 1
        except sqlite3.Error as exc:
            counts["errors"] = counts.get("errors", 0) + 1
            counts["last_error"] = str(exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    counts["transactions"] = n
    conn.close()


def warm_package(base: str, limit_s: float = 600.0) -> float | None:
    """A live server has had its data package for a while: ask for it (which starts the first
    build) and wait, bounded, until it is served. None when the server has no package route."""
    started = time.monotonic()
    with httpx.Client(base_url=base, timeout=60) as client:
        while time.monotonic() - started < limit_s:
            status = client.get(PACKAGE).status_code
            if status == 404:
                return None
            if status == 200:
                return round(time.monotonic() - started, 1)
            time.sleep(2)
    raise SystemExit(f"the data package was not built within {limit_s:g} s")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def summarise(tally: Tally) -> dict:
    out = {}
    for route, r in sorted(tally.routes.items()):
        lat = r["latencies"]
        out[route] = {"n": len(lat), "ok": r["ok"], "error_shape": r["error_shape"], "outside": r["outside"],
                      "p50_s": round(statistics.median(lat), 4) if lat else None,
                      "p99_s": round(pct(lat, 0.99), 4) if lat else None, "examples": r["examples"]}
    return out


def table(results: dict) -> str:
    lines = [f"{'label':<8} {'route':<26} {'n':>6} {'ok':>6} {'429/503':>8} {'outside':>8} {'p50 s':>8} {'p99 s':>8}"]
    for label, run in results.items():
        for route, r in run["routes"].items():
            lines.append(f"{label:<8} {route:<26} {r['n']:>6} {r['ok']:>6} {r['error_shape']:>8} {r['outside']:>8} "
                         f"{r['p50_s'] if r['p50_s'] is not None else '-':>8} "
                         f"{r['p99_s'] if r['p99_s'] is not None else '-':>8}")
    if {"before", "after"} <= set(results):
        lines.append("")
        lines.append("after / before, p99 per route (lower is better):")
        for route, r in results["after"]["routes"].items():
            b = results["before"]["routes"].get(route)
            if not b or not b["ok"]:  # nothing to compare with: no 200 at all before
                lines.append(f"  {route:<26} -  (before: no 200 answer)")
            elif r["p99_s"] is not None:
                lines.append(f"  {route:<26} {r['p99_s'] / b['p99_s']:.3f}x")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True, help="name of this run in the results file (before, after, ...)")
    ap.add_argument("--server-root", type=Path, default=ROOT, help="checkout whose server is measured")
    ap.add_argument("--models", type=int, default=120_000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--exporters", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--keep", type=Path, help="store path to reuse/keep (built if missing)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--table", action="store_true", help="only print the table of the stored results")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(RESULTS.read_text())))
        return

    tmp = Path(tempfile.mkdtemp(prefix="export-load-"))
    db = args.keep or tmp / "observatory.db"
    if not db.exists():
        built = store_bench.build_store(db, args.models)
        engine = make_engine(f"sqlite:///{db}")
        refresh_trends(engine)
        engine.dispose()
        print(f"store: {args.models} models built in {built:.1f} s", file=sys.stderr)
    with sqlite3.connect(db) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM hub_model ORDER BY random() LIMIT 500")]
        stored = conn.execute("SELECT count(*) FROM hub_model").fetchone()[0]
    # A copy per run: the writer changes the store, and a kept one should serve the next label unchanged.
    run_db = tmp / "run.db"
    with sqlite3.connect(db) as source, sqlite3.connect(run_db) as target:
        source.backup(target)
    port = free_port()
    proc = start_server(args.server_root.resolve(), run_db, port, args.workers)
    base = f"http://127.0.0.1:{port}"
    package_build_s = warm_package(base)
    tally, stop, counts = Tally(), threading.Event(), {}
    try:
        threads = [threading.Thread(target=exporter, args=(base, stop, tally, i)) for i in range(args.exporters)]
        threads += [threading.Thread(target=reader, args=(base, stop, tally, ids, i))
                    for i in range(args.clients - args.exporters)]
        threads.append(threading.Thread(target=writer, args=(run_db, stop, counts)))
        load = os.getloadavg()
        for t in threads:
            t.start()
        stop.wait(args.seconds)
        stop.set()
        for t in threads:
            t.join(180)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    run = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "models": stored,
           "clients": args.clients, "exporters": args.exporters, "seconds": args.seconds, "workers": args.workers,
           "server_root": str(args.server_root), "load_average_at_start": [round(x, 2) for x in load],
           "cpus": os.cpu_count(), "writer": counts, "package_first_build_s": package_build_s,
           "routes": summarise(tally)}
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[args.label] = run
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{stored} models, {args.clients} clients ({args.exporters} exporting), {args.seconds:g} s, "
          f"writer {counts.get('transactions', 0)} transactions ({counts.get('errors', 0)} failed); "
          f"load average at start {run['load_average_at_start']} on {run['cpus']} CPUs; "
          f"data package first built in {package_build_s} s (before the load; None: no such route)")
    print(table(results))


if __name__ == "__main__":
    main()
