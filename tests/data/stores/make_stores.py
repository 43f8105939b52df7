"""Build one populated SQLite store for every past migration head (run from the repository root).

    PYTHONPATH=$PWD /work/main/.venv/bin/python tests/data/stores/make_stores.py [STEM ...]

For each head in ``HEADS`` this takes that commit's ``migrations/versions/*.py`` verbatim from git
history (``git show <commit>:<path>``), runs them with Alembic into an empty file, then fills every
table with realistic rows in plain SQL (models with their configs and geometry, lineage, trend
points, crawl runs and marks, benchmarks, alert rules, alerts, events, subscriptions, webhook
deliveries and their attempts). The rows are made from each table's columns as that revision
defined them, so one filler serves every head. ``tests/integration/test_old_stores.py`` upgrades a
copy of each file with today's code and checks that every row survived.

The files are small on purpose: 512-byte pages, journal mode DELETE, vacuumed, then gzipped
(``<stem>.sqlite.gz``, a few kilobytes each). They are committed; run this again only to add a head
(the README beside it names the commits).
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

# (file stem, commit, what a store made then holds). Every state of migrations/ that main has had,
# and the two branch states that other worktrees ran before they merged.
HEADS = [
    ("h01_core", "c24ab1c", "0001 only"),
    ("h02_trends_v1", "a49af36", "0002, and 0004 before it gained the author index"),
    ("h03_alerts", "c9e24c1", "0005 beside the first 0004"),
    ("h04_bench", "4f59c26", "0003 and 0004 as it shipped"),
    ("h05_bigint", "ea74ad8", "0006: the 0006 era (fails at DROP TABLE hub_model on main)"),
    ("h06_lineage_v1", "c25cfda", "0007 before it gained depends_on and author_key"),
    ("h07_trends_v2", "7365f83", "0007 as edited, and 0010"),
    ("h08_reliability", "168c93c", "0008"),
    ("h09_bench_v2", "e7025a0", "0009"),
    ("h10_tp_node", "ee63b28", "0011 (the head of main when this was written)"),
    ("h11_history_repair", "eafa703", "0012 (issue 21's repair of the edited 0004 and 0007)"),
    ("h12_oracle", "07a8fdc", "0013: the oracle's verdicts"),
    ("h13_perf", "dd4b36b", "0014: the indexes of the start-up stale scans"),
    ("h14_uptrain", "12ce072", "0015 as first merged (uptrain_run.created_at a plain DateTime)"),
    ("b01_bench_v2_branch", "6a1b315", "branch wt-kernels: 0009 on a store without 0007"),
    ("b02_reliability_branch", "a051b14", "branch wt-reliability: 0008 beside the first 0007"),
]

# The engine of the time (observatory/db.py then): foreign keys on, one transaction per migration.
ENV_PY = '''
from alembic import context
from sqlalchemy import create_engine, event

engine = create_engine(context.config.get_main_option("sqlalchemy.url"))


@event.listens_for(engine, "connect")
def _pragmas(dbapi_connection, _record):
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA foreign_keys=ON")


@event.listens_for(engine, "begin")
def _begin(conn):
    conn.exec_driver_sql("BEGIN IMMEDIATE")


with engine.connect() as connection:
    context.configure(connection=connection, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
'''

CONFIGS = [
    {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
     "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
     "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072,
     "torch_dtype": "bfloat16"},
    {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
     "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
     "num_hidden_layers": 32, "vocab_size": 32000, "sliding_window": 4096, "torch_dtype": "bfloat16"},
    {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_head": 12,
     "n_layer": 12, "n_positions": 1024, "vocab_size": 50257},
    {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
     "num_attention_heads": 128, "num_key_value_heads": 128, "num_hidden_layers": 61,
     "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
     "v_head_dim": 128, "vocab_size": 129280, "intermediate_size": 18432,
     "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 8},
]
MODELS = ["meta-llama/Llama-3.1-8B", "mistralai/Mistral-7B-v0.1", "openai-community/gpt2",
          "deepseek-ai/DeepSeek-V3", "someone/Llama-3.1-8B-finetune", "quant/Mistral-7B-AWQ"]
N = len(MODELS)

# Values a column of this name takes, by row number; anything else gets a default for its type.
BY_NAME = {
    "hub_model.id": lambda i: MODELS[i],
    "author": lambda i: MODELS[i % N].split("/")[0],
    "author_key": lambda i: MODELS[i % N].split("/")[0].lower(),
    "model_id": lambda i: MODELS[i % N],
    "sha": lambda i: f"{i:040x}",
    "raw_text": lambda i: json.dumps(CONFIGS[i % len(CONFIGS)]),
    "downloads": lambda i: [120000, 95000, 1000000, 300000, 12, 870][i % N],
    "likes": lambda i: [4000, 2500, 2700, 3900, 0, 3][i % N],
    "tags": lambda i: json.dumps(["transformers", "safetensors", "text-generation"]),
    "hub_model.source": lambda i: "crawl",
    "config_revision.source": lambda i: "https://huggingface.co/" + MODELS[i % N] + "/raw/main/config.json",
    "provenance": lambda i: "hub",
    "parse_status": lambda i: "ok",
    "relation": lambda i: ["original", "original", "original", "original", "finetune", "quantized"][i % N],
    "base_models": lambda i: json.dumps([] if i % N < 4 else [MODELS[i % N - 4]]),
    "attention_kind": lambda i: ["GQA", "GQA", "MHA", "MLA", "GQA", "GQA"][i % N],
    "model_type": lambda i: CONFIGS[i % len(CONFIGS)]["model_type"],
    "architectures": lambda i: json.dumps(CONFIGS[i % len(CONFIGS)]["architectures"]),
    "num_query_heads": lambda i: [32, 32, 12, 128, 32, 32][i % N],
    "num_kv_heads": lambda i: [8, 8, 12, 128, 8, 8][i % N],
    "group_size": lambda i: [4.0, 4.0, 1.0, None, 4.0, 4.0][i % N],
    "uptrain_cell.group_size": lambda i: [1, 2, 4, 8, 16, 2][i % N],  # an integer G there, never unknown
    "parser_version": lambda i: 1,
    "status": None,  # per table, below
    "period_kind": lambda i: "month",
    "population": lambda i: "all" if i % 2 else "originals",
    "weighting": lambda i: "count" if i % 3 else "downloads",
    "period_start": lambda i: f"2025-{1 + i % 12:02d}-01",
    "rule_key": lambda i: f"rule-{i}",
    "fingerprint": lambda i: f"{i + 1:064x}",
    "public_id": lambda i: f"pub_{i:08d}",
    "webhook_id": lambda i: f"msg_{i:08d}",
    "feed_token": lambda i: f"feed{i:060x}",
    "email_unsubscribe_token": lambda i: f"unsub{i:059x}",
    "url": lambda i: f"https://hooks.example.com/observatory/{i}",
    "payload": lambda i: json.dumps({"type": "alert.firing", "data": {"n": i}}),
    "channel": lambda i: "webhook",
    "scope": lambda i: "all",
    "device": lambda i: "cpu",
    "device_type": lambda i: "cpu",
    "dtype": lambda i: "bfloat16",
    "kernel": lambda i: "gqa",
    "key": lambda i: f"owners:198.51.100.{i}",
    "kind": None,
}
STATUS = {"crawl_run": "succeeded", "alert": "firing", "alert_delivery": "delivered",
          "alert_subscription": "active", "webhook_endpoint": "active", "bench_result": "ok"}
KIND = {"alert_rule": "median_g_shift", "alert_notice": "verified"}


def _default(table: str, column: str, decl: str, notnull: bool, i: int):
    decl = decl.upper()
    if column == "status":
        return STATUS.get(table, "ok")
    if column == "kind":
        return KIND.get(table, "rule")
    for key in (f"{table}.{column}", column):
        if BY_NAME.get(key):
            return BY_NAME[key](i)
    if not notnull:
        return None  # what an optional column holds until something fills it
    if "DATETIME" in decl:
        return f"2025-{1 + i % 12:02d}-15 12:00:00.000000"
    if decl == "DATE":
        return f"2025-{1 + i % 12:02d}-01"
    if "JSON" in decl:
        return "{}"
    if "BOOL" in decl:
        return 0
    if "INT" in decl:
        return i + 1
    if "FLOAT" in decl or "REAL" in decl or "NUMERIC" in decl:
        return 0.25 * (i + 1)
    if "VARCHAR(" in decl:
        width = int(decl.split("(")[1].rstrip(")"))
        return f"{column}-{i}"[:width]
    return f"{column}-{i}"


def _tables_in_order(conn: sqlite3.Connection) -> list[str]:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                        "AND name NOT LIKE 'sqlite_%' AND name != 'alembic_version'")]
    parents = {t: {r[2] for r in conn.execute(f'PRAGMA foreign_key_list("{t}")')} - {t} for t in names}
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = sorted(t for t in names if t not in ordered and parents[t] <= set(ordered))
        if not ready:
            raise RuntimeError(f"foreign key cycle among {set(names) - set(ordered)}")
        ordered.extend(ready)
    return ordered


def fill(conn: sqlite3.Connection) -> dict[str, int]:
    """Insert N rows into every table; a foreign key points at the parent row of the same number."""
    counts = {}
    for table in _tables_in_order(conn):
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        fks = {r[3]: (r[2], r[4]) for r in conn.execute(f'PRAGMA foreign_key_list("{table}")')}
        for i in range(N):
            row = {}
            for _cid, column, decl, notnull, _dflt, _pk in info:
                if column in fks:
                    parent, parent_col = fks[column]
                    parent_col = parent_col or "id"
                    keys = [r[0] for r in conn.execute(f'SELECT "{parent_col}" FROM "{parent}" ORDER BY rowid')]
                    row[column] = keys[i % len(keys)]
                elif column == "id" and "INT" in decl.upper():
                    row[column] = i + 1
                else:
                    row[column] = _default(table, column, decl, bool(notnull), i)
            if table == "hub_model" and "current_revision_id" in row:
                row["current_revision_id"] = None  # set once its config_revision exists, below
            cols = ", ".join(f'"{c}"' for c in row)
            conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(row))})',
                         list(row.values()))
        counts[table] = N
    if {"hub_model", "config_revision"} <= set(counts):
        columns = {r[1] for r in conn.execute("PRAGMA table_info(hub_model)")}
        if "current_revision_id" in columns:
            conn.execute("UPDATE hub_model SET current_revision_id = "
                         "(SELECT id FROM config_revision c WHERE c.model_id = hub_model.id)")
    return counts


# Stores an upgrade left part-way: (file stem, made at, then upgraded with, what it holds).
HALF_MIGRATED = [
    ("x01_half_migrated_0006", "ea74ad8", "ee63b28",
     "the 0006 era after main's upgrade failed at DROP TABLE hub_model: 0008-0011 applied, 0007 not"),
]


def build(stem: str, commit: str, out_dir: Path = HERE, *, then: str | None = None) -> Path:
    with tempfile.TemporaryDirectory(prefix="observatory-old-store-") as tmp:
        target = Path(tmp) / f"{stem}.sqlite"
        # gzip's mtime=0 below keeps the packing stable; Alembic's batch rebuilds are not byte-stable.
        with sqlite3.connect(target) as conn:
            conn.execute("PRAGMA page_size=512")
            conn.execute("VACUUM")
        _migrate(target, commit, Path(tmp) / "made")
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("BEGIN")
        fill(conn)
        conn.execute("COMMIT")
        conn.close()
        if then is not None:
            try:
                _migrate(target, then, Path(tmp) / "then")
            except Exception as exc:  # noqa: BLE001 (that upgrade failing is the point)
                print(f"{stem}: the upgrade with {then} failed as it did then: {type(exc).__name__}")
            else:
                raise RuntimeError(f"{stem}: the upgrade with {then} was expected to fail")
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
        conn.close()
        packed = out_dir / f"{stem}.sqlite.gz"
        with target.open("rb") as src, gzip.GzipFile(packed, "wb", compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    return packed


def _migrate(target: Path, commit: str, scripts: Path) -> None:
    """Run ``commit``'s migrations, taken verbatim from git history, on ``target``."""
    from alembic import command
    from alembic.config import Config

    (scripts / "versions").mkdir(parents=True)
    (scripts / "env.py").write_text(ENV_PY)
    files = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", commit, "migrations/versions/"],
                           check=True, capture_output=True, text=True).stdout
    for path in files.split():
        if path.endswith(".py"):
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], check=True,
                                  capture_output=True, text=True).stdout
            (scripts / "versions" / Path(path).name).write_text(text)
    config = Config()
    config.set_main_option("script_location", str(scripts))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{target}")
    command.upgrade(config, "heads")


def main(only: list[str]) -> None:
    """Build every store, or only those whose stems are named (so adding a head rewrites no other file)."""
    for stem, commit, _note in HEADS:
        if only and stem not in only:
            continue
        path = build(stem, commit)
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")
    for stem, commit, then, _note in HALF_MIGRATED:
        if only and stem not in only:
            continue
        path = build(stem, commit, then=then)
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
