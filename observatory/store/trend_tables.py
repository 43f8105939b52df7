"""Precomputed trend points, and the indexes the read queries rely on.

``trend_point`` holds one row per (period kind, population, weighting, period start), written
only by ``store.trends`` (``refresh_trends`` rewrites all of them, ``refresh_trends_since`` the
periods a crawl touched; each in one transaction, and both leave every row's ``computed_at`` at
the refresh's time), so a trend
request reads a few dozen rows instead of aggregating the model table. The field meanings are
those of ``observatory.core.trends.TrendPoint``.

The extra indexes on core tables serve ``observatory.store.queries.models`` (keyset pagination sorts on
(column, id) pairs) and the download-threshold populations; migration ``0004_trends`` creates
them. They are declared here so the tables-match-migrations test sees them.
"""

from __future__ import annotations

from datetime import date, datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.store.tables import BigInt, ConfigRevision, GeometryRow, HubModel, utcnow


class TrendPointRow(SQLModel, table=True):
    __tablename__ = "trend_point"
    __table_args__ = (
        # Also the read index: one series is a range scan ordered by period_start.
        sa.UniqueConstraint("period_kind", "population", "weighting", "period_start",
                            name="uq_trend_point_series"),
    )

    id: int | None = Field(default=None, primary_key=True)
    period_kind: str = Field(max_length=10)  # month | week | quarter
    population: str = Field(max_length=200)  # store.trends.Population.key, e.g. "all", "min_downloads=1000"
    weighting: str = Field(max_length=20)  # count | downloads | family_downloads
    period_start: date
    count: int
    weight_total: float
    # Attention kind among the attn_count models with attention layers (hybrids included).
    share_mha: float | None = None
    share_mqa: float | None = None
    share_gqa: float | None = None
    share_mla: float | None = None
    attn_count: int = 0
    # Stack type among all count models.
    stack_attention: float | None = None
    stack_hybrid: float | None = None
    stack_free: float | None = None
    weight_unknown: int = 0  # counted models whose weight is unknown
    encoder_only: int = 0  # left out: encoder-only models
    uncertain: int = 0  # left out: uncertain geometries
    g_count: int = 0
    g_p25: float | None = None
    g_median: float | None = None
    g_p75: float | None = None
    share_g_over_16: float | None = None
    kv_count: int = 0
    kv_median: float | None = None
    # Models whose KV heads fill a TP = 8 node without replication, among the tp8_count judged.
    tp8_count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    share_tp8_fill: float | None = None
    share_tp8_mla: float | None = None
    # {size class: {"count": n, "kv_median": x | null}} for every class in trends.SIZE_CLASSES
    kv_by_size: dict = Field(default_factory=dict, sa_type=sa.JSON)
    computed_at: datetime = Field(default_factory=utcnow)


class DerivativeStats(SQLModel, table=True):
    """Per base model: the derivatives the store holds that name it as a base, by relation, and
    their summed downloads. Derived data, rewritten by ``store.trends.refresh_trends``."""

    __tablename__ = "derivative_stats"

    model_id: str = Field(primary_key=True, max_length=200)  # the base (no foreign key: derived data)
    finetune: int = 0
    quantized: int = 0
    adapter: int = 0
    merge: int = 0
    downloads: int = Field(default=0, sa_type=BigInt)  # sum over derivatives whose count is known
    downloads_unknown: int = 0  # derivatives whose download count is unknown
    computed_at: datetime = Field(default_factory=utcnow)


# Keyset pagination orders by (sort column, id); a composite index lets SQLite walk it in
# either direction without a sort step.
sa.Index("ix_hub_model_created_at_id", HubModel.created_at, HubModel.id)
sa.Index("ix_hub_model_downloads_id", HubModel.downloads, HubModel.id)
# One organisation's models newest first (the default sort) without sorting all of them; author_key
# is the lower-cased organisation, so author= matches without regard to case, as on the Hub.
sa.Index("ix_hub_model_author_key_created_at_id", HubModel.author_key, HubModel.created_at, HubModel.id)
sa.Index("ix_geometry_group_size_model_id", GeometryRow.group_size, GeometryRow.model_id)
sa.Index("ix_geometry_kv_bytes_model_id", GeometryRow.kv_bytes_per_token_bf16, GeometryRow.model_id)

# Start-up's stale checks (trends_stale, stale_revision_ids) seek these instead of reading every
# row (migration 0014_perf).
sa.Index("ix_hub_model_updated_at", HubModel.updated_at)
sa.Index("ix_geometry_derived_at", GeometryRow.derived_at)
sa.Index("ix_geometry_parser_version", GeometryRow.parser_version)
sa.Index("ix_config_revision_parse_status", ConfigRevision.parse_status)
