"""reliability: token buckets for the anonymous write paths (rate_bucket)

Revision ID: 0008_reliability
Revises: 0005_alerts
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0008_reliability'
down_revision = '0005_alerts'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('rate_bucket',
    sa.Column('key', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('tokens', sa.Float(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_rate_bucket'))
    )
    with op.batch_alter_table('rate_bucket', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rate_bucket_updated_at'), ['updated_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('rate_bucket', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rate_bucket_updated_at'))
    op.drop_table('rate_bucket')
