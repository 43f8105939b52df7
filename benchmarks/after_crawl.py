"""After-crawl work (trend refresh, then alert evaluation) after a crawl that adds 1,000 models
to a large store, for two versions of the code side by side.

    python benchmarks/after_crawl.py --models 100000 --before /work/main      # prints, writes
    python benchmarks/after_crawl.py --models 10000 --before /work/main --results ''

Steps: (1) a synthetic store of N models (``benchmarks/api.py``'s generator, through the Alembic
migrations); (2) a full trend refresh and one alert evaluation (the built-in rules), so the store
is as a deployed one is between crawls; (3) for each version of the code (``--before``, a
checkout's root, and this one), on its own copy of that store and in a fresh process: 1,000 new
models stored through the real ingest path (``upsert_models`` + ``record_configs``, created in
the last 30 days, as a routine crawl finds them), then ``ensure_trends`` and ``evaluate`` as
``pipeline.after_crawl`` calls them, each timed. Wall time comes from a run without tracemalloc;
the peak heap (tracemalloc) from a second run on a second copy, since tracing slows Python
down. PSS and the anonymous memory (``/proc/self/smaps_rollup``) are read after each step of
the untraced run: RSS would count SQLite's file-backed pages once per mapping.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADDED = 1000


def smaps() -> dict[str, float]:
    """PSS and anonymous memory of this process, MB."""
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Pss", "Anonymous"):
            out[key.lower()] = int(rest.split()[0]) / 1024
    return out


def crawl(engine, added: int, seed: int = 7) -> None:
    """What a routine crawl stores: ``added`` new models from the last 30 days, each with a config."""
    import api  # the generator's configs

    from observatory.store.db import session_scope
    from observatory.store.ingest import ConfigItem, record_configs, upsert_models

    rng = random.Random(seed)
    configs = [json.dumps(cfg) for kind in api.templates().values() for cfg in kind]
    now = datetime.now(UTC)
    rows, items = {}, []
    for i in range(added):
        model_id = f"crawl{i % 97:03d}/new-{i:05d}"
        rows[model_id] = {"created_at": now - timedelta(seconds=rng.randrange(30 * 86400)),
                          "downloads": rng.randrange(50_000), "relation": "original", "is_test_repo": False}
        items.append(ConfigItem(model_id, rng.choice(configs), f"new{i:05d}"))
    with session_scope(engine) as session:
        upsert_models(session, rows)
        record_configs(session, items)


def measure(db: Path, traced: bool) -> dict:
    """One version's after-crawl work on its own copy of the store (run in a fresh process)."""
    from observatory.alerts.evaluate import evaluate
    from observatory.settings import Settings
    from observatory.store.db import make_engine
    from observatory.store.trends import ensure_trends

    engine = make_engine(f"sqlite:///{db}")
    settings = Settings(data_dir=db.parent, database_url=f"sqlite:///{db}")
    crawl(engine, ADDED)
    out: dict = {}
    for step, work in (("refresh", lambda: ensure_trends(engine)), ("evaluate", lambda: evaluate(engine, settings))):
        if traced:
            tracemalloc.start()
        started = time.perf_counter()
        result = work()
        out[f"{step}_s"] = time.perf_counter() - started
        if traced:
            out[f"{step}_heap_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        else:
            out.update({f"{step}_{k}_mb": v for k, v in smaps().items()})
        if step == "refresh":
            out["refresh_models"] = getattr(result, "models", None)
            out["refresh_points"] = getattr(result, "points", None)
        else:
            out["rules"], out["fired"] = result.rules, len(result.fired)
    return out


def child(code: Path, db: Path, traced: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run([sys.executable, __file__, "--measure", str(db), "--code", str(code)]
                          + (["--traced"] if traced else []), check=False, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode:
        raise SystemExit(f"measurement with {code} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100_000)
    parser.add_argument("--before", type=Path, required=True, help="root of the checkout to compare with")
    parser.add_argument("--keep", type=Path, help="build the store here (or reuse it if it exists)")
    parser.add_argument("--results", default="after_crawl", help="results file name ('' to skip)")
    args = parser.parse_args()

    import api
    from results import stamp, write

    from observatory.alerts.evaluate import evaluate
    from observatory.settings import Settings
    from observatory.store.db import make_engine
    from observatory.store.trends import refresh_trends

    run_stamp = stamp()
    work = Path(tempfile.mkdtemp(prefix="after-crawl-"))
    try:
        base = args.keep or work / "base.db"
        if not base.exists():
            print(f"building {args.models:,} models ...", flush=True)
            print(f"  built in {api.build_store(base, args.models):.1f} s", flush=True)
            engine = make_engine(f"sqlite:///{base}")
            refresh_trends(engine)
            evaluate(engine, Settings(data_dir=base.parent, database_url=f"sqlite:///{base}"))
            engine.dispose()
        results = {}
        for label, code in (("before", args.before.resolve()), ("after", ROOT)):
            runs = {}
            for traced in (False, True):
                copy = work / f"{label}-{int(traced)}.db"
                shutil.copyfile(base, copy)
                for suffix in ("-wal", "-shm"):
                    if Path(f"{base}{suffix}").exists():
                        shutil.copyfile(f"{base}{suffix}", f"{copy}{suffix}")
                runs.update(child(code, copy, traced))
                copy.unlink()
            results[label] = runs
            print(f"  {label}: {runs}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    columns = ["step", "code", "wall s", "peak heap MB (tracemalloc)", "PSS MB after", "anonymous MB after",
               "after / before (wall)"]
    rows = []
    for step in ("refresh", "evaluate"):
        for label in ("before", "after"):
            r = results[label]
            ratio = r[f"{step}_s"] / results["before"][f"{step}_s"]
            rows.append([{"refresh": "trend refresh", "evaluate": "alert evaluation"}[step], label,
                         f"{r[f'{step}_s']:.2f}", f"{r[f'{step}_heap_mb']:.1f}", f"{r[f'{step}_pss_mb']:.0f}",
                         f"{r[f'{step}_anonymous_mb']:.0f}", f"{ratio:.3f}x"])
    widths = [max(len(str(c)) for c in col) for col in zip(columns, *rows)]
    for row in (columns, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    notes = [(f"{args.models:,} synthetic models (benchmarks/api.py's generator), then {ADDED:,} new ones through "
              "the real ingest path; before = the code at --before, after = this checkout; each in a fresh process "
              "on its own copy of the store"),
             (f"refresh read {results['after']['refresh_models']:,} models and wrote "
              f"{results['after']['refresh_points']:,} points after ({results['before']['refresh_models']:,} and "
              f"{results['before']['refresh_points']:,} before); evaluation judged {results['after']['rules']} rules"),
             "wall time from a run without tracemalloc; peak heap from a second run with it",
             "a shared 2-core machine with other engineers' work running: wall times are noisy"]
    if args.results:
        print(write(args.results, run_stamp, columns, rows, notes))


if __name__ == "__main__":
    if "--measure" in sys.argv:
        code = Path(sys.argv[sys.argv.index("--code") + 1])
        sys.path.insert(0, str(code))
        import observatory  # noqa: F401 - this version's package first: api.py puts its own root on the path

        sys.path.insert(1, str(ROOT / "benchmarks"))
        print(json.dumps(measure(Path(sys.argv[sys.argv.index("--measure") + 1]), "--traced" in sys.argv)))
    else:
        sys.path.insert(0, str(ROOT))
        sys.path.insert(1, str(ROOT / "benchmarks"))
        main()
