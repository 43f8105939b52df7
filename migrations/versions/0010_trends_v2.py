"""trends v2: attention kind and stack type apart, who was left out, wider weighting names

``trend_point`` holds derived rows only (``trend_store.refresh_trends`` rewrites all of them),
so it is dropped and created again in its new shape; the next start-up refreshes it.
Attention-kind shares are now among models with attention layers (hybrids by the kind of
their attention layers, ``attn_count`` the denominator), and the stack type (pure attention,
hybrid, attention-free) is its own set of shares. Each point also says how many models it left
out: encoder-only ones, uncertain geometries, and unknown weights. ``derivative_stats`` (also
derived) counts each base model's derivatives.

Revision ID: 0010_trends_v2
Revises: 0004_trends
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0010_trends_v2'
down_revision = '0004_trends'
branch_labels = None
depends_on = None


def _trend_point(*extra: sa.Column, weighting_length: int) -> None:
    op.create_table('trend_point',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('period_kind', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('population', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('weighting', sqlmodel.sql.sqltypes.AutoString(length=weighting_length), nullable=False),
    sa.Column('period_start', sa.Date(), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.Column('weight_total', sa.Float(), nullable=False),
    sa.Column('share_mha', sa.Float(), nullable=True),
    sa.Column('share_mqa', sa.Float(), nullable=True),
    sa.Column('share_gqa', sa.Float(), nullable=True),
    sa.Column('share_mla', sa.Float(), nullable=True),
    *extra,
    sa.Column('g_count', sa.Integer(), nullable=False),
    sa.Column('g_p25', sa.Float(), nullable=True),
    sa.Column('g_median', sa.Float(), nullable=True),
    sa.Column('g_p75', sa.Float(), nullable=True),
    sa.Column('share_g_over_16', sa.Float(), nullable=True),
    sa.Column('kv_count', sa.Integer(), nullable=False),
    sa.Column('kv_median', sa.Float(), nullable=True),
    sa.Column('kv_by_size', sa.JSON(), nullable=False),
    sa.Column('computed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_trend_point')),
    sa.UniqueConstraint('period_kind', 'population', 'weighting', 'period_start', name='uq_trend_point_series')
    )


def upgrade() -> None:
    op.drop_table('trend_point')
    _trend_point(
        sa.Column('attn_count', sa.Integer(), nullable=False),
        sa.Column('stack_attention', sa.Float(), nullable=True),
        sa.Column('stack_hybrid', sa.Float(), nullable=True),
        sa.Column('stack_free', sa.Float(), nullable=True),
        sa.Column('weight_unknown', sa.Integer(), nullable=False),
        sa.Column('encoder_only', sa.Integer(), nullable=False),
        sa.Column('uncertain', sa.Integer(), nullable=False),
        weighting_length=20,
    )
    op.create_table('derivative_stats',
    sa.Column('model_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('finetune', sa.Integer(), nullable=False),
    sa.Column('quantized', sa.Integer(), nullable=False),
    sa.Column('adapter', sa.Integer(), nullable=False),
    sa.Column('merge', sa.Integer(), nullable=False),
    sa.Column('downloads', sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column('downloads_unknown', sa.Integer(), nullable=False),
    sa.Column('computed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('model_id', name=op.f('pk_derivative_stats'))
    )


def downgrade() -> None:
    op.drop_table('derivative_stats')
    op.drop_table('trend_point')
    _trend_point(
        sa.Column('share_hybrid', sa.Float(), nullable=True),
        sa.Column('share_none', sa.Float(), nullable=True),
        weighting_length=10,
    )
