"""tp node: how far a model's KV heads shard, and the trend of models filling a TP = 8 node

``geometry.kv_tp_max`` is the largest power-of-two tensor-parallel degree whose ranks share every
KV layer's heads evenly (no replication; null for MLA, whose latent has no heads, and for models
without KV layers); re-derivation fills it for stored revisions (parser version 6).
``trend_point`` gains the share of models that fill a TP = 8 node without replication (K
divisible by 8, or MLA served with data-parallel attention), the MLA part of that share, and the
models behind both; the next refresh computes them.

Revision ID: 0011_tp_node
Revises: 0010_trends_v2
"""
from alembic import op
import sqlalchemy as sa


revision = '0011_tp_node'
down_revision = '0010_trends_v2'
branch_labels = None
depends_on = None

TREND_COLUMNS = [
    sa.Column('tp8_count', sa.Integer(), server_default='0', nullable=False),
    sa.Column('share_tp8_fill', sa.Float(), nullable=True),
    sa.Column('share_tp8_mla', sa.Float(), nullable=True),
]


def upgrade() -> None:
    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kv_tp_max', sa.Integer(), nullable=True))
    with op.batch_alter_table('trend_point', schema=None) as batch_op:
        for column in TREND_COLUMNS:
            batch_op.add_column(column)


def downgrade() -> None:
    with op.batch_alter_table('trend_point', schema=None) as batch_op:
        for column in reversed(TREND_COLUMNS):
            batch_op.drop_column(column.name)
    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.drop_column('kv_tp_max')
