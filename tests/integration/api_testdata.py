"""A small store for the API tests: hand-made models through the real write path
(``observatory.store.ingest``), chosen to exercise every filter, sort tie and NULL, and an
independent oracle that reads the SQLite file with plain ``sqlite3``."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timezone

from sqlalchemy.engine import Engine

from observatory.store.db import session_scope
from observatory.store.ingest import record_config, upsert_model


def llama(heads: int, kv: int, layers: int = 32, hidden: int = 4096) -> dict:
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": hidden,
            "num_attention_heads": heads, "num_key_value_heads": kv, "num_hidden_layers": layers,
            "max_position_embeddings": 131072}


CONFIGS: dict[str, dict | str] = {
    "mha": {**llama(32, 32), "model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"]},
    "mqa": {"model_type": "gpt_bigcode", "n_embd": 2048, "n_head": 16, "n_layer": 24, "multi_query": True},
    "g4": llama(32, 8),
    "g8": {**llama(64, 8, layers=80, hidden=8192), "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]},
    "g8b": llama(32, 4),
    "g32": llama(64, 2, layers=48, hidden=8192),
    "mla": {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "num_attention_heads": 128,
            "num_key_value_heads": 128, "num_hidden_layers": 61, "hidden_size": 7168, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536},
    "hybrid": {"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
               "head_dim": 256, "num_hidden_layers": 8,
               "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2},
    "none": {"model_type": "mamba", "num_hidden_layers": 24, "hidden_size": 768},
    "broken": "{\"model_type\": \"llama\", \"num_attention_heads\": ",  # not JSON: kept, no geometry
}


@dataclass(frozen=True)
class Spec:
    id: str
    config: str
    created: tuple | None
    downloads: int | None = 0  # None: unknown (a snapshot-like row)
    params: int | None = None
    relation: str | None = "original"
    bases: tuple[str, ...] = ()


B = 1_000_000_000
SPECS = [
    Spec("alpha/llama-7b", "g4", (2023, 2, 1), 5000, 7 * B),
    Spec("alpha/llama-13b", "mha", (2023, 2, 1), 5000, 13 * B),  # same created_at and downloads as above
    Spec("alpha/Llama_Chat", "g4", (2023, 7, 18), 120_000, 7 * B),
    Spec("alpha/llama-70b", "g8", (2024, 4, 18), 900_000, 70 * B),
    Spec("alpha/tiny", "g8b", (2024, 9, 25), 0, 1 * B),
    Spec("beta/coder-1b", "mqa", (2023, 5, 4), 800, 1 * B),
    Spec("beta/coder-15b", "mqa", (2023, 5, 4), 800, 15 * B),
    Spec("beta/wide-g32", "g32", (2025, 1, 10), 50, 40 * B),
    Spec("beta/undated", "g4", None, 300, 7 * B),
    Spec("beta/broken-config", "broken", (2025, 2, 2), 10),
    Spec("gamma/latent-v3", "mla", (2024, 12, 26), 2_000_000, 671 * B),
    Spec("gamma/latent-lite", "mla", (2024, 5, 6), 1000, None),
    Spec("gamma/next-hybrid", "hybrid", (2025, 9, 10), 70_000, 80 * B),
    Spec("gamma/mamba-130m", "none", (2023, 12, 1), 15, 130_000_000),
    Spec("gamma/qwen-72b", "g8", (2024, 9, 19), 1000, 72 * B),
    Spec("solo-model", "g8b", (2024, 9, 19), 1000, 3 * B),  # no organisation
    Spec("delta/a.b-c_d", "g4", (2025, 3, 3), 999, 8 * B),
    Spec("delta/unknown-downloads", "g8", (2024, 4, 18), None, 70 * B),  # sorts in the NULL tail
    # Derivatives of alpha/llama-70b: the same geometry, their own relation.
    Spec("fans/llama-70b-chat-ft", "g8", (2024, 5, 2), 40_000, 70 * B, "finetune", ("alpha/llama-70b",)),
    Spec("fans/llama-70b-awq", "g8", (2024, 5, 3), None, 70 * B, "quantized", ("alpha/llama-70b",)),
    Spec("fans/tiny-random-llama", "g4", (2024, 5, 4), 3, 2_000_000, "original"),  # a test repo
]


def raw_config(name: str) -> str:
    config = CONFIGS[name]
    return config if isinstance(config, str) else json.dumps(config, indent=2) + "\n"


def add_model(engine: Engine, spec: Spec, sha: str = "rev1") -> None:
    created = datetime(*spec.created, tzinfo=timezone.utc) if spec.created else None
    with session_scope(engine) as session:
        upsert_model(session, spec.id, created_at=created, downloads=spec.downloads, num_parameters=spec.params,
                     relation=spec.relation, base_models=list(spec.bases) or None,
                     is_test_repo=spec.id.startswith("fans/tiny-random"))
        record_config(session, spec.id, raw_config(spec.config), sha)


def build(engine: Engine) -> None:
    for spec in SPECS:
        add_model(engine, spec)


# --- the oracle: plain sqlite3, no SQLAlchemy ------------------------------------------------

ORACLE_SQL = """
SELECT m.id, m.author, m.created_at, m.downloads, g.attention_kind, g.is_hybrid, g.group_size,
       g.model_type, g.kv_bytes_per_token_bf16, m.relation, m.is_test_repo, m.base_models,
       COALESCE(m.num_parameters, g.params_estimate) AS params, g.num_kv_heads, g.kv_layers
FROM hub_model m LEFT JOIN geometry g ON g.revision_id = m.current_revision_id
"""


def oracle_rows(db_path: str) -> list[dict]:
    conn = sqlite3.connect(db_path)
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in conn.execute(ORACLE_SQL)]
    finally:
        conn.close()
    for r in rows:
        r["created_day"] = date.fromisoformat(r["created_at"][:10]) if r["created_at"] else None
        r["kv_bytes_per_token"] = r.pop("kv_bytes_per_token_bf16")
        r["kv_tp_max"] = even_tp(r)
    return rows


def even_tp(r: dict) -> int | None:
    """How far the KV heads shard (the test models declare one K for every layer): the largest
    power of two dividing K, written out independently of core.deployment."""
    if r["attention_kind"] in (None, "MLA", "none") or not r["kv_layers"] or not r["num_kv_heads"]:
        return None
    tp = 1
    while r["num_kv_heads"] % (tp * 2) == 0:
        tp *= 2
    return tp


def in_lineage(r: dict, lineage: str = "originals", min_params: float | None = None) -> bool:
    """The populations as the methodology page words them, written out independently."""
    floor = min_params if min_params is not None else (1e9 if lineage == "originals" else None)
    if lineage == "originals" and (r["relation"] != "original" or r["is_test_repo"]):
        return False
    if lineage == "derivatives" and r["relation"] not in ("finetune", "quantized", "adapter", "merge"):
        return False
    return not floor or (r["params"] is not None and r["params"] >= floor)


def family_downloads(rows: list[dict]) -> dict[str, int | None]:
    """Own downloads plus those of every derivative naming the model as a base (unknown own: unknown)."""
    extra: dict[str, int] = {}
    for r in rows:
        if r["relation"] in ("finetune", "quantized", "adapter", "merge") and r["base_models"]:
            for base in set(json.loads(r["base_models"])):
                extra[base] = extra.get(base, 0) + (r["downloads"] or 0)
    return {r["id"]: None if r["downloads"] is None else r["downloads"] + extra.get(r["id"], 0) for r in rows}


def oracle(rows: list[dict], *, kind=(), hybrid=None, g_min=None, g_max=None, author=None, model_type=None,
           created_from=None, created_to=None, min_downloads=None, q=None, sort="created_at",
           order="desc", relation=(), min_params=None) -> list[str]:
    """Model ids the list should return, in order: valued rows by (value, id), then NULLs by id."""
    def keep(r: dict) -> bool:
        g = r["group_size"]
        return all([
            not kind or r["attention_kind"] in kind,
            hybrid is None or (r["is_hybrid"] is not None and bool(r["is_hybrid"]) == hybrid),
            g_min is None or (g is not None and g >= g_min),
            g_max is None or (g is not None and g <= g_max),
            author is None or (r["author"] or "").lower() == author.lower(),
            not relation or r["relation"] in relation,
            min_params is None or (r["params"] is not None and r["params"] >= min_params),
            model_type is None or r["model_type"] == model_type,
            created_from is None or (r["created_day"] is not None and r["created_day"] >= created_from),
            created_to is None or (r["created_day"] is not None and r["created_day"] <= created_to),
            min_downloads is None or (r["downloads"] is not None and r["downloads"] >= min_downloads),
            q is None or q.lower() in r["id"].lower(),
        ])

    kept = [r for r in rows if keep(r)]
    key = {"created_at": "created_at", "kv_bytes_per_token": "kv_bytes_per_token"}.get(sort, sort)
    valued = sorted((r for r in kept if r[key] is not None), key=lambda r: (r[key], r["id"]),
                    reverse=order == "desc")
    nulls = sorted((r["id"] for r in kept if r[key] is None), reverse=order == "desc")
    return [r["id"] for r in valued] + nulls


def built_store(data_dir, *, refresh: bool = False, **settings_fields):
    """(settings, engine) for a migrated store in ``data_dir`` holding SPECS; trends refreshed
    when asked. The caller disposes of the engine."""
    from observatory.settings import Settings
    from observatory.store.db import make_engine, upgrade
    from observatory.store.trends import refresh_trends

    settings = Settings(data_dir=data_dir, autoload_snapshot=False, **settings_fields)
    upgrade(settings.resolved_database_url)
    engine = make_engine(settings.resolved_database_url)
    build(engine)
    if refresh:
        refresh_trends(engine)
    return settings, engine
