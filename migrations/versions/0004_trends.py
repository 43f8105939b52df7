"""trends: precomputed trend points, and indexes for keyset pagination of the model list

Revision ID: 0004_trends
Revises: 0001_core
Create Date: 2026-11-30 22:04:17.218420
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0004_trends'
down_revision = '0001_core'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('trend_point',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('period_kind', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('population', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('weighting', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('period_start', sa.Date(), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.Column('weight_total', sa.Float(), nullable=False),
    sa.Column('share_mha', sa.Float(), nullable=True),
    sa.Column('share_mqa', sa.Float(), nullable=True),
    sa.Column('share_gqa', sa.Float(), nullable=True),
    sa.Column('share_mla', sa.Float(), nullable=True),
    sa.Column('share_hybrid', sa.Float(), nullable=True),
    sa.Column('share_none', sa.Float(), nullable=True),
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
    # Sorting the model list by (column, id) walks these in either direction.
    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.create_index('ix_geometry_group_size_model_id', ['group_size', 'model_id'], unique=False)
        batch_op.create_index('ix_geometry_kv_bytes_model_id', ['kv_bytes_per_token_bf16', 'model_id'], unique=False)

    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        batch_op.create_index('ix_hub_model_created_at_id', ['created_at', 'id'], unique=False)
        batch_op.create_index('ix_hub_model_downloads_id', ['downloads', 'id'], unique=False)
        batch_op.create_index('ix_hub_model_author_created_at_id', ['author', 'created_at', 'id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        batch_op.drop_index('ix_hub_model_author_created_at_id')
        batch_op.drop_index('ix_hub_model_downloads_id')
        batch_op.drop_index('ix_hub_model_created_at_id')

    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.drop_index('ix_geometry_kv_bytes_model_id')
        batch_op.drop_index('ix_geometry_group_size_model_id')

    op.drop_table('trend_point')
