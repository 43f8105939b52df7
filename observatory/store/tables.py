"""Core tables: Hub models, their config revisions, the geometry derived from each, crawl runs, leases.

Named for what it holds: in this domain "model" means an ML model, so the SQLModel classes
live here, not in a ``models.py``. Alembic (``migrations/``) is the only DDL; these classes
must stay in step with the migrations (a test compares them).

Datetimes are timezone-aware UTC in Python (SQLModel's UTCDateTime refuses naive ones);
SQLite stores them without an offset.
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

# Named constraints so Alembic batch mode (SQLite) and PostgreSQL agree on names.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Numbers that outgrow 32 bits (parameters in the billions; whatever a config or the Hub says):
# BIGINT on PostgreSQL. SQLite's INTEGER already holds 64 bits and stays as it was.
BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class HubModel(SQLModel, table=True):
    """One repository on the Hub (or a snapshot entry standing in for one)."""

    __tablename__ = "hub_model"

    id: str = Field(primary_key=True, max_length=200)  # "org/name"
    author: str | None = Field(default=None, index=True, max_length=100)
    author_key: str | None = Field(default=None, max_length=100)  # lower(author): case-blind matching
    created_at: datetime | None = Field(default=None, index=True)  # Hub createdAt, or release date
    last_modified: datetime | None = None
    sha: str | None = Field(default=None, max_length=64)
    # The Hub's 30-day count; None = unknown (snapshot rows, and anything never listed).
    downloads: int | None = Field(default=None, sa_type=BigInt)
    likes: int | None = Field(default=None, sa_type=BigInt)
    pipeline_tag: str | None = Field(default=None, max_length=100)
    library_name: str | None = Field(default=None, max_length=100)
    tags: list[str] = Field(default_factory=list, sa_type=sa.JSON)
    gated: str | None = Field(default=None, max_length=20)  # "false" | "auto" | "manual"
    # Total parameters as disclosed: the listing's safetensors total, or a snapshot entry's
    # published count. The config-based estimate lives on the geometry (params_estimate).
    num_parameters: int | None = Field(default=None, sa_type=BigInt)
    parameters_source: str | None = Field(default=None, max_length=20)  # safetensors | published
    active_parameters: int | None = Field(default=None, sa_type=BigInt)  # MoE: published active count
    weight_dtypes: dict | None = Field(default=None, sa_type=sa.JSON)  # safetensors {"BF16": n, ...}
    # Lineage (core.lineage.classify): original | finetune | quantized | adapter | merge; None = unknown.
    relation: str | None = Field(default=None, max_length=20, index=True)
    base_models: list[str] | None = Field(default=None, sa_type=sa.JSON)
    quant_method: str | None = Field(default=None, max_length=50)  # config quantization_config.quant_method
    quant_bits: int | None = None
    is_test_repo: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    lineage_warnings: list[str] | None = Field(default=None, sa_type=sa.JSON)
    organisation: str | None = Field(default=None, max_length=100)  # the lab, where known (snapshot)
    # A snapshot entry's own facts: family, sources of its date and parameter count, notes.
    snapshot_meta: dict | None = Field(default=None, sa_type=sa.JSON)
    # "hub" for crawled rows, "snapshot" for the bundled notable-model snapshot.
    source: str = Field(default="hub", max_length=20, index=True)
    release_date_confidence: str | None = Field(default=None, max_length=20)
    # The revision whose geometry is current. A plain column, not a foreign key: the
    # reference would make hub_model and config_revision depend on each other.
    current_revision_id: int | None = Field(default=None, index=True)
    first_seen_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    stats_refreshed_at: datetime | None = None


class ConfigRevision(SQLModel, table=True):
    """A config.json as fetched (kept verbatim), one row per (model, sha)."""

    __tablename__ = "config_revision"
    __table_args__ = (sa.UniqueConstraint("model_id", "sha", name="uq_config_revision_model_sha"),)

    id: int | None = Field(default=None, primary_key=True)
    model_id: str = Field(foreign_key="hub_model.id", index=True, max_length=200)
    sha: str = Field(max_length=64)  # repo commit the file was read at ("snapshot:<n>" for snapshot rows)
    raw_text: str = Field(sa_type=sa.Text)  # verbatim bytes as text; reconstructed entries say so
    fetched_at: datetime = Field(default_factory=utcnow)
    # "verbatim" (a real config.json), "reconstructed" (published geometry, not a real file)
    provenance: str = Field(default="verbatim", max_length=20)
    source: str | None = Field(default=None, max_length=500)  # where a snapshot copy came from
    parse_status: str = Field(default="ok", max_length=20)  # "ok" | "error"
    parse_error: str | None = Field(default=None, max_length=1000)


class GeometryRow(SQLModel, table=True):
    """The attention geometry derived from one config revision."""

    __tablename__ = "geometry"

    id: int | None = Field(default=None, primary_key=True)
    revision_id: int = Field(foreign_key="config_revision.id", unique=True)
    model_id: str = Field(foreign_key="hub_model.id", index=True, max_length=200)
    parser_version: int = 1
    model_type: str | None = Field(default=None, max_length=100, index=True)
    architectures: list[str] = Field(default_factory=list, sa_type=sa.JSON)
    attention_kind: str = Field(max_length=10, index=True)  # MHA | MQA | GQA | MLA | none
    is_hybrid: bool = False
    num_query_heads: int | None = None
    num_kv_heads: int | None = None
    group_size: float | None = Field(default=None, index=True)
    head_dim: int | None = None
    v_head_dim: int | None = None
    num_layers: int | None = None
    kv_layers: int | None = None
    sliding_window: int | None = Field(default=None, sa_type=BigInt)  # up to config_dialects.MAX_TOKENS
    sliding_layers: int = 0
    chunked: bool = False
    hidden_size: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    q_lora_rank: int | None = None
    kv_elements_per_token: int | None = Field(default=None, sa_type=BigInt)
    kv_bytes_per_token_bf16: int | None = Field(default=None, sa_type=BigInt)
    # Largest power-of-two TP degree that shards every KV layer's heads evenly (core.deployment);
    # None for MLA (no heads to shard) and models without KV layers.
    kv_tp_max: int | None = None
    # Encoder-only models never decode: kind reported, no per-token cache, their own trend bucket.
    encoder_only: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    is_encoder_decoder: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    cross_kv_elements_per_source_token: int | None = Field(default=None, sa_type=BigInt)
    # An unknown layer type was counted as a full KV layer (an upper bound): kept out of trends.
    uncertain: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    fingerprint: str | None = Field(default=None, max_length=64, index=True)  # core.lineage
    params_estimate: int | None = Field(default=None, sa_type=BigInt)  # core.params, from the config
    active_params_estimate: int | None = Field(default=None, sa_type=BigInt)
    sources: dict = Field(default_factory=dict, sa_type=sa.JSON)
    warnings: list[str] = Field(default_factory=list, sa_type=sa.JSON)
    derived_at: datetime = Field(default_factory=utcnow)


class CrawlRun(SQLModel, table=True):
    """One crawl, whatever its outcome; kept forever so every run is visible later."""

    __tablename__ = "crawl_run"

    id: int | None = Field(default=None, primary_key=True)
    scope: str = Field(default="default", max_length=100, index=True)
    started_at: datetime = Field(default_factory=utcnow, index=True)
    finished_at: datetime | None = None
    status: str = Field(default="running", max_length=20)  # running | ok | failed | interrupted
    seen: int = 0
    new: int = 0
    changed: int = 0
    skipped: int = 0
    failed: int = 0
    requests: int = 0
    failures_by_reason: dict = Field(default_factory=dict, sa_type=sa.JSON)
    error: str | None = Field(default=None, max_length=2000)
    stats: dict = Field(default_factory=dict, sa_type=sa.JSON)


class Lease(SQLModel, table=True):
    """A named lease (``crawl``, ``scheduler``): one holder at a time, lapsing at ``expires_at``."""

    __tablename__ = "lease"

    name: str = Field(primary_key=True, max_length=50)
    holder: str = Field(max_length=200)  # "host:pid:token"
    acquired_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
