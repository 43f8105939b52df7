"""API throughput and latency at 1, 16 and 64 clients on a store of synthetic models, beside
Datasette serving the same SQLite file and plain SQL on it.

    python benchmarks/api.py --models 100000 --keep /tmp/bench.db       # prints a table, writes
    python benchmarks/api.py --models 10000 --clients 1,16 --requests 200 --results ''

Steps: (1) build a SQLite store through the Alembic migrations and fill it with raw
``executemany`` (realistic mix: MHA early, GQA from 2023, MQA a 2022-23 bump, MLA from 2024,
hybrids from 2025; volume growing over time; heavy-tailed downloads; Zipf-distributed
organisations; every row is one of a few dozen template configs whose geometry and KV bytes
come from the real parser and ``kvcache``, so the model page can re-derive them);
(2) ``refresh_trends`` (timed); (3) uvicorn on 127.0.0.1 in a subprocess; N client threads on
keep-alive connections ask each question: the trend endpoint, a filtered model-list page, one
model's JSON and its HTML page (500 models, each asked once before the timed rounds; the first
row times 500 others on their very first request); (4) Datasette, from its own environment
(``--datasette``; never a project dependency), on the same file: the same trend series read
from the precomputed rows, the same list as SQL, the model's row as JSON and as its row page;
(5) the same questions as plain SQL from N threads (one read-only connection each). Latencies are
per request, from send to last byte; req/s is requests over the wall time of the round; a
round starts no request after 15 s (its n is what was answered).

The fair floor for the precomputed trends is reading the precomputed rows (Datasette's SQL and
plain SQL on ``trend_point``), not an aggregate over the model table. The table goes to
``benchmarks/results/<--results>.json``, which the README quotes (``benchmarks/results.py``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from observatory.core import kvcache  # noqa: E402
from observatory.core.geometry import PARSER_VERSION  # noqa: E402
from observatory.store.db import make_engine, upgrade  # noqa: E402
from observatory.store.ingest import derive  # noqa: E402
from observatory.store.trends import refresh_trends  # noqa: E402
from observatory.testing.server import free_port  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from results import stamp, write  # noqa: E402

START, END = date(2019, 1, 1), date(2026, 11, 1)
RELATION_MIX = ("original", "finetune", "quantized", "adapter", "merge")
RELATION_WEIGHTS = (15, 45, 30, 5, 5)


# --- synthetic data ---------------------------------------------------------------------------

def _llama(model_type, heads, kv, layers, head_dim=128):
    return {"model_type": model_type, "architectures": [f"{model_type.title()}ForCausalLM"],
            "hidden_size": heads * head_dim, "num_attention_heads": heads, "num_key_value_heads": kv,
            "num_hidden_layers": layers, "max_position_embeddings": 131072}


def templates() -> dict[str, list[dict]]:
    """Configs by kind bucket; each becomes (raw text, geometry) once through the real parser."""
    gqa = [_llama(t, h, k, layers) for t, h, k, layers in [
        ("llama", 32, 8, 32), ("llama", 64, 8, 80), ("llama", 24, 8, 28), ("llama", 32, 4, 24),
        ("qwen2", 28, 4, 28), ("qwen2", 40, 8, 48), ("qwen2", 64, 8, 64), ("qwen3", 32, 8, 36),
        ("qwen3", 64, 4, 94), ("mistral", 32, 8, 32), ("mistral", 96, 8, 88), ("gemma", 16, 8, 26),
        ("phi3", 40, 10, 40), ("llama", 128, 8, 126), ("qwen2", 16, 2, 24), ("llama", 64, 2, 64),
        ("falcon", 232, 8, 80), ("llama", 48, 16, 40), ("starcoder2", 48, 4, 40), ("granite", 32, 2, 40)]]
    mha = [_llama(t, h, h, layers, d) for t, h, layers, d in [
        ("gpt2", 12, 12, 64), ("gpt2", 25, 48, 64), ("gpt_neox", 32, 32, 128), ("llama", 32, 32, 128),
        ("llama", 40, 40, 128), ("opt", 32, 32, 64), ("bloom", 16, 24, 64), ("phi", 32, 32, 80)]]
    mqa = [{"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40, "multi_query": True},
           {"model_type": "gpt_bigcode", "n_embd": 2048, "n_head": 16, "n_layer": 24, "multi_query": True},
           {**_llama("falcon", 71, 1, 32, 64)}]
    mla = [{"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "num_attention_heads": h,
            "num_key_value_heads": h, "num_hidden_layers": layers, "hidden_size": hidden, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": q}
           for h, layers, hidden, q in [(128, 61, 7168, 1536), (16, 27, 2048, None), (64, 61, 7168, 1536)]]
    hybrid = [{"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
               "head_dim": 256, "num_hidden_layers": n,
               "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * (n // 4)}
              for n in (48, 64)]
    none = [{"model_type": "mamba", "num_hidden_layers": n, "hidden_size": w} for n, w in ((24, 768), (64, 2560))]
    return {"GQA": gqa, "MHA": mha, "MQA": mqa, "MLA": mla, "hybrid": hybrid, "none": none}


def kind_mix(t: float) -> dict[str, float]:
    """Share of each kind at fractional year t (2019.0 ... 2026.9)."""
    gqa = 1 / (1 + math.exp(-(t - 2023.6) * 2.2)) * 0.85
    mla = max(0.0, min(0.08, (t - 2024.3) * 0.05))
    hybrid = max(0.0, min(0.07, (t - 2025.0) * 0.05))
    mqa = 0.1 * math.exp(-((t - 2023.0) ** 2) / 0.6)
    none = 0.01
    return {"GQA": gqa, "MLA": mla, "hybrid": hybrid, "MQA": mqa, "none": none,
            "MHA": max(0.02, 1 - gqa - mla - hybrid - mqa - none)}


def generate(n: int, seed: int = 1):
    """Yield (hub_model row, config_revision row, geometry row) tuples for n models."""
    rng = random.Random(seed)
    prepared = {kind: [] for kind in ("GQA", "MHA", "MQA", "MLA", "hybrid", "none")}
    for kind, configs in templates().items():
        for cfg in configs:
            raw = json.dumps(cfg, separators=(",", ":"))
            derived = derive(raw)
            geom, error = derived.geometry, derived.error
            assert geom is not None, (cfg, error)
            prepared[kind].append((raw, geom, kvcache.bytes_per_token(geom, "bf16"), json.dumps(list(geom.architectures)),
                                   json.dumps(dict(geom.sources))))
    days = (END - START).days
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    authors = [f"org{i:05d}" for i in range(50000)]
    for i in range(n):
        # volume grows ~exponentially: invert the CDF of exp(k*x) on [0, 1]
        x = math.log(1 + rng.random() * (math.e ** 3 - 1)) / 3
        day = START + timedelta(days=int(x * days))
        created = datetime(day.year, day.month, day.day, rng.randrange(24), rng.randrange(60), rng.randrange(60),
                           tzinfo=timezone.utc)
        mix = kind_mix(day.year + (day.timetuple().tm_yday - 1) / 365)
        kind = rng.choices(list(mix), weights=list(mix.values()))[0]
        raw, geom, kv_bytes, archs, sources = rng.choice(prepared[kind])
        author = authors[int(len(authors) * rng.random() ** 3)]  # a few big uploaders, a long tail
        model_id = f"{author}/model-{i:07d}"
        downloads = int(rng.paretovariate(0.6)) - 1 if rng.random() < 0.7 else 0
        downloads = min(downloads, 50_000_000)
        params = None if rng.random() < 0.1 else int(rng.lognormvariate(math.log(7e9), 1.3))
        created_s = created.strftime("%Y-%m-%d %H:%M:%S.%f")
        rev_id = i + 1
        # The live Hub's mix: most repositories with a config are derivatives of a few bases.
        relation = rng.choices(RELATION_MIX, weights=RELATION_WEIGHTS)[0]
        bases = json.dumps([f"{authors[rng.randrange(50)]}/model-{rng.randrange(max(1, i)):07d}"]) \
            if relation != "original" else None
        yield (
            (model_id, author, author.lower(), created_s, downloads, rng.randrange(100), "[]", "hub", params,
             relation, bases, int(rng.random() < 0.01), rev_id, now, now),
            (rev_id, model_id, f"sha{i:07d}", raw, now, "verbatim", "ok"),
            (rev_id, rev_id, model_id, PARSER_VERSION, geom.model_type, archs, geom.attention_kind, int(geom.is_hybrid),
             geom.num_query_heads, geom.num_kv_heads, geom.group_size, geom.head_dim, geom.v_head_dim,
             geom.num_layers, geom.kv_layers, geom.sliding_window, geom.sliding_layers, int(geom.chunked),
             geom.hidden_size, geom.mla.kv_lora_rank if geom.mla else None,
             geom.mla.qk_rope_head_dim if geom.mla else None, geom.mla.qk_nope_head_dim if geom.mla else None,
             geom.mla.q_lora_rank if geom.mla else None, geom.kv_elements_per_token, kv_bytes, sources, "[]", now,
             params),
        )


def build_store(path: Path, n: int) -> float:
    started = time.perf_counter()
    upgrade(f"sqlite:///{path}")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")  # a benchmark fixture: durability is not the point
    conn.execute("PRAGMA cache_size=-400000")
    conn.execute("BEGIN")
    batch: tuple[list, list, list] = ([], [], [])
    sql = (
        "INSERT INTO hub_model (id, author, author_key, created_at, downloads, likes, tags, source, num_parameters, "
        "relation, base_models, is_test_repo, current_revision_id, first_seen_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "INSERT INTO config_revision (id, model_id, sha, raw_text, fetched_at, provenance, parse_status) "
        "VALUES (?,?,?,?,?,?,?)",
        "INSERT INTO geometry (id, revision_id, model_id, parser_version, model_type, architectures, attention_kind, "
        "is_hybrid, num_query_heads, num_kv_heads, group_size, head_dim, v_head_dim, num_layers, kv_layers, "
        "sliding_window, sliding_layers, chunked, hidden_size, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, "
        "q_lora_rank, kv_elements_per_token, kv_bytes_per_token_bf16, sources, warnings, derived_at, "
        "params_estimate) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    )
    for rows in generate(n):
        for target, row in zip(batch, rows):
            target.append(row)
        if len(batch[0]) >= 20000:
            for statement, target in zip(sql, batch):
                conn.executemany(statement, target)
                target.clear()
    for statement, target in zip(sql, batch):
        conn.executemany(statement, target)
    conn.execute("COMMIT")
    conn.close()  # no ANALYZE: a store the crawler filled has no planner statistics either
    return time.perf_counter() - started


# --- load -------------------------------------------------------------------------------------

def start_server(db: Path, port: int, workers: int) -> subprocess.Popen:
    env = {**os.environ, "OBSERVATORY_DATABASE_URL": f"sqlite:///{db}", "OBSERVATORY_AUTOLOAD_SNAPSHOT": "false",
           "OBSERVATORY_SCHEDULER_ENABLED": "false", "OBSERVATORY_DATA_DIR": str(db.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "observatory.web.app:create_app", "--host", "127.0.0.1",
         "--port", str(port), "--workers", str(workers), "--log-level", "warning", "--no-access-log",
         "--http", "observatory.web.tcp:NoDelayHttpToolsProtocol", "--loop", "uvloop"],  # as `observatory serve`
        cwd=ROOT, env=env)
    return wait_until_answering(proc, port, "/api/v1/hardware", "server")


def wait_until_answering(proc: subprocess.Popen, port: int, path: str, name: str) -> subprocess.Popen:
    """``proc`` once ``path`` answers 200 on ``port`` (bounded: 120 s), else it is stopped."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise SystemExit(f"{name} did not answer within 120 s")


def run_clients(clients: int, total: int, work, budget_s: float | None = None) -> list[float]:
    """``work(worker_state, i)`` for i in range(total) spread over ``clients`` threads; latencies.
    With ``budget_s``, no request starts after that many seconds (a slow peer's round ends early;
    its n says how many it answered)."""
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(total))
    deadline = None if budget_s is None else time.perf_counter() + budget_s

    def worker(state):
        mine = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None or deadline is not None and time.perf_counter() > deadline:
                break
            t0 = time.perf_counter()
            work(state, i)
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    states = [{} for _ in range(clients)]
    threads = [threading.Thread(target=worker, args=(s,)) for s in states]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for state in states:
        if "conn" in state:
            state["conn"].close()
    return latencies


def http_get(port: int, paths: list[str]):
    def work(state, i):
        conn = state.get("conn")
        if conn is None:
            conn = state["conn"] = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", paths[i % len(paths)])
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"{paths[i % len(paths)]} -> {response.status}: {body[:200]!r}")
    return work


def sql_run(db: Path, statements: list[tuple[str, tuple]]):
    def work(state, i):
        conn = state.get("conn")
        if conn is None:
            conn = state["conn"] = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
        for sql, params in statements[i % len(statements)]:
            conn.execute(sql, params).fetchall()
    return work


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# --- the questions ----------------------------------------------------------------------------

PLAIN_LIST = """
SELECT m.id, m.author, m.created_at, m.downloads, m.likes, m.num_parameters, m.source, g.model_type,
       g.attention_kind, g.is_hybrid, g.num_query_heads, g.num_kv_heads, g.group_size, g.head_dim, g.num_layers,
       g.kv_layers, g.sliding_window, g.kv_bytes_per_token_bf16
FROM hub_model m LEFT JOIN geometry g ON g.revision_id = m.current_revision_id
WHERE g.attention_kind || '' IN ('GQA') AND g.group_size + 0 >= ? AND m.downloads >= ? AND m.created_at < ?
  AND m.created_at IS NOT NULL
ORDER BY m.created_at DESC, m.id DESC LIMIT 51
"""  # the API's plan: walk (created_at, id) newest first; the "|| ''" / "+ 0" keep SQLite from
# driving through the kind or G index and sorting ~600k matches instead (no ANALYZE statistics)

PLAIN_MODEL = [
    ("SELECT * FROM hub_model WHERE id = ?", 0),
    ("SELECT * FROM geometry WHERE revision_id = (SELECT current_revision_id FROM hub_model WHERE id = ?)", 0),
    ("SELECT raw_text FROM config_revision WHERE id = (SELECT current_revision_id FROM hub_model WHERE id = ?)", 0),
    ("SELECT id, sha, fetched_at, provenance, source, parse_status, parse_error, length(raw_text) "
     "FROM config_revision WHERE model_id = ? ORDER BY fetched_at DESC, id DESC", 0),
]


def start_datasette(datasette: Path, db: Path, port: int) -> subprocess.Popen:
    """Datasette serving the same file (its own environment; never a project dependency)."""
    proc = subprocess.Popen([str(datasette), "serve", str(db), "--host", "127.0.0.1", "--port", str(port),
                             "--setting", "sql_time_limit_ms", "20000", "--setting", "default_cache_ttl", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return wait_until_answering(proc, port, f"/{db.stem}.json?sql=select+1", "datasette")


def tilde(value: str) -> str:
    """Datasette's tilde encoding of a primary key in a row URL ("/" -> "~2F")."""
    safe = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
    return "".join(c if c in safe else "+" if c == " " else "".join(f"~{b:02X}" for b in c.encode()) for c in value)


TREND_ROWS = ("SELECT * FROM trend_point WHERE period_kind = ? AND population = ? AND weighting = ? "
              "ORDER BY period_start")


ROUND_S = 15.0  # longest timed round


def measure(label: str, clients: int, requests: int, work) -> dict:
    t0 = time.perf_counter()
    latencies = run_clients(clients, requests, work, ROUND_S)
    wall = time.perf_counter() - t0
    return {"label": label, "clients": clients, "n": len(latencies), "rps": len(latencies) / wall,
            "p50": pct(latencies, .5), "p99": pct(latencies, .99)}


def rounds(label: str, client_counts: list[int], requests: int, questions: int, work) -> list[dict]:
    """A warm-up asking every question once (4 clients), then one timed round per client count;
    ``work()`` makes the per-request function."""
    run_clients(4, questions, work(), 2 * ROUND_S)
    out = [measure(label, clients, max(requests, clients * 4), work()) for clients in client_counts]
    print(f"  {label}: done", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=1_000_000)
    ap.add_argument("--clients", default="1,16,64", help="comma-separated client counts")
    ap.add_argument("--requests", type=int, default=400, help="requests per question and client count")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="uvicorn worker processes (default: one per CPU)")
    ap.add_argument("--datasette", type=Path, default=Path("/tmp/ds-venv/bin/datasette"),
                    help="a datasette executable in its own environment (python -m venv /tmp/ds-venv && "
                         "/tmp/ds-venv/bin/pip install datasette); skipped when missing")
    ap.add_argument("--keep", type=Path, help="store path to reuse/keep (built if missing)")
    ap.add_argument("--results", default="api", help="name of the results file under benchmarks/results/ "
                                                     "('' writes none)")
    args = ap.parse_args()
    client_counts = [int(c) for c in args.clients.split(",")]
    run_stamp = stamp()

    tmp = None
    if args.keep:
        db = args.keep.resolve()
    else:
        tmp = tempfile.TemporaryDirectory(prefix="observatory-bench-")
        db = Path(tmp.name) / "bench.db"
    if not db.exists():
        print(f"building {args.models:,} models in {db} ...", flush=True)
        built = build_store(db, args.models)
        print(f"  built in {built:.0f} s, {db.stat().st_size / 1e6:.0f} MB", flush=True)
    engine = make_engine(f"sqlite:///{db}")
    t0 = time.perf_counter()
    report = refresh_trends(engine)
    refresh_s = time.perf_counter() - t0
    engine.dispose()
    print(f"  refresh_trends: {report.models:,} models -> {report.points:,} points in {refresh_s:.1f} s", flush=True)

    rng = random.Random(5)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    total = conn.execute("SELECT max(rowid) FROM hub_model").fetchone()[0]
    picked = [row[0] for row in conn.execute("SELECT id FROM hub_model WHERE rowid IN (%s)" % ",".join(
        str(rng.randrange(1, total + 1)) for _ in range(1000)))]
    conn.close()
    ids, cold_ids = picked[:500], picked[500:]  # cold: never asked for before their one timed request
    cutoffs = [(date(2023, 6, 1) + timedelta(days=rng.randrange(1200))) for _ in range(200)]

    trend_series = [(pop, p, w, t) for pop in ("originals", "all", "derivatives") for p in ("month", "quarter")
                    for w in ("count", "downloads", "family_downloads") for t in (0, 1000)]
    trend_paths = [f"/api/v1/trends?{urlencode({'population': pop, 'period': p, 'weighting': w, 'min_downloads': t})}"
                   for pop, p, w, t in trend_series]
    list_paths = [f"/api/v1/models?{urlencode({'kind': 'GQA', 'g_min': 8, 'min_downloads': 10, 'created_to': c.isoformat(), 'size': 50})}"
                  for c in cutoffs]
    model_paths = [f"/api/v1/models/{quote(i)}" for i in ids]
    page_paths = [f"/models/{quote(i)}" for i in ids]

    day_after = lambda c: (datetime.combine(c + timedelta(days=1), datetime.min.time())).strftime("%Y-%m-%d %H:%M:%S.%f")
    series_key = lambda pop, p, w, t: (p, pop + (f";min_downloads={t}" if t else ""), w)
    plain_trends = [[(TREND_ROWS, series_key(*s))] for s in trend_series]
    plain_list = [[(PLAIN_LIST, (8, 10, day_after(c)))] for c in cutoffs]
    plain_model = [[(sql, (i,)) for sql, _ in PLAIN_MODEL] for i in ids]
    name = db.stem
    ds_trends = [f"/{name}.json?{urlencode({'sql': TREND_ROWS.replace('?', ':v', 1).replace('?', ':w', 1).replace('?', ':x', 1), 'v': a, 'w': b, 'x': c})}"
                 for a, b, c in (series_key(*s) for s in trend_series)]
    ds_list = [f"/{name}.json?{urlencode({'sql': PLAIN_LIST.replace('?', ':g', 1).replace('?', ':d', 1).replace('?', ':c', 1), 'g': 8, 'd': 10, 'c': day_after(c)})}"
               for c in cutoffs]
    ds_row_json = [f"/{name}/hub_model/{tilde(i)}.json" for i in ids]
    ds_row_html = [f"/{name}/hub_model/{tilde(i)}" for i in ids]

    rows: list[dict] = []
    port = free_port()
    server = start_server(db, port, args.workers)
    try:
        rows.append(measure("ours: model JSON, first visit", 1, len(cold_ids),
                            http_get(port, [f"/api/v1/models/{quote(i)}" for i in cold_ids])))
        for label, paths in (("ours: /api/v1/trends", trend_paths), ("ours: /api/v1/models filtered", list_paths),
                             ("ours: /api/v1/models/{id}", model_paths), ("ours: /models/{id} page", page_paths)):
            rows += rounds(label, client_counts, args.requests, len(paths), lambda paths=paths: http_get(port, paths))
    finally:
        server.terminate()
        server.wait(timeout=30)
    if args.datasette.exists():
        ds_port = free_port()
        ds = start_datasette(args.datasette, db, ds_port)
        try:
            for label, paths in (("Datasette: trend rows (SQL)", ds_trends), ("Datasette: same list (SQL)", ds_list),
                                 ("Datasette: row JSON", ds_row_json), ("Datasette: row page", ds_row_html)):
                rows += rounds(label, client_counts, args.requests, len(paths), lambda paths=paths: http_get(ds_port, paths))
        finally:
            ds.terminate()
            ds.wait(timeout=30)
    else:
        print(f"  no datasette at {args.datasette}: its rows are skipped", flush=True)
    for label, statements in (("SQL: trend rows", plain_trends), ("SQL: same list", plain_list),
                              ("SQL: model rows (4 queries)", plain_model)):
        rows += rounds(label, client_counts, args.requests, len(statements), lambda statements=statements: sql_run(db, statements))

    ms = lambda v: f"{v * 1000:.2f}"
    print()
    print(f"{args.models:,} models, loopback, uvicorn {args.workers} worker(s), {os.cpu_count()} CPUs, "
          f"load average at start {run_stamp['load_average_start']}")
    print(f"{'question':<36}{'clients':>8}{'n':>6}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for r in rows:
        print(f"{r['label']:<36}{r['clients']:>8}{r['n']:>6}{r['rps']:>9.0f}{ms(r['p50']):>9}{ms(r['p99']):>9}")
    by = {(r["label"], r["clients"]): r for r in rows}
    print()
    ratios = []
    for ours, peer in (("ours: /api/v1/models/{id}", "Datasette: row JSON"), ("ours: /models/{id} page", "Datasette: row page"),
                       ("ours: /api/v1/trends", "Datasette: trend rows (SQL)"),
                       ("ours: /api/v1/models filtered", "Datasette: same list (SQL)")):
        for clients in client_counts:
            a, b = by.get((ours, clients)), by.get((peer, clients))
            if a and b:
                ratios.append(f"{ours} vs {peer}, {clients} client(s): {a['rps'] / b['rps']:.2f}x the req/s, "
                              f"p99 {a['p99'] / b['p99']:.2f}x")
                print(ratios[-1])
    if args.results:
        path = write(args.results, run_stamp, ["question", "clients", "n", "req/s", "p50 ms", "p99 ms"],
                     [[r["label"], r["clients"], r["n"], f"{r['rps']:.0f}", ms(r["p50"]), ms(r["p99"])] for r in rows],
                     [f"{args.models:,} synthetic models; our server: uvicorn, {args.workers} worker(s); Datasette "
                      "0.65 (one process) on the same SQLite file; SQL: sqlite3 threads, one read-only connection "
                      "each; every client a thread of one Python process on the same machine",
                      f"refresh_trends {refresh_s:.1f} s for {report.models:,} models", *ratios])
        print(f"wrote {path.relative_to(ROOT)}")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
