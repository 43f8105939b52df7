"""uptrain: the small-scale uptraining experiment's runs and cells

``uptrain_run`` holds one run of ``observatory uptrain`` (corpus hash, sizes, software, speeds);
``uptrain_cell`` one held-out evaluation per (pooling, K, uptraining fraction), the MHA control
included.

Revision ID: 0015_uptrain
Revises: 0014_perf
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0015_uptrain'
down_revision = '0014_perf'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'uptrain_run',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_key', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
        sa.Column('complete', sa.Boolean(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('started_at', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column('finished_at', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column('wall_s', sa.Float(), nullable=False),
        sa.Column('scale', sa.Float(), nullable=False),
        sa.Column('seed', sa.Integer(), nullable=False),
        sa.Column('corpus_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('corpus', sa.JSON(), nullable=False),
        sa.Column('sizes', sa.JSON(), nullable=False),
        sa.Column('software', sa.JSON(), nullable=False),
        sa.Column('base', sa.JSON(), nullable=True),
        sa.Column('speed', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('run_key'),
    )
    op.create_table(
        'uptrain_cell',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('method', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
        sa.Column('kv_heads', sa.Integer(), nullable=False),
        sa.Column('group_size', sa.Integer(), nullable=False),
        sa.Column('fraction', sa.Float(), nullable=False),
        sa.Column('uptrain_steps', sa.Integer(), nullable=False),
        sa.Column('loss', sa.Float(), nullable=False),
        sa.Column('perplexity', sa.Float(), nullable=False),
        sa.Column('bits_per_byte', sa.Float(), nullable=False),
        sa.Column('scored_bytes', sa.Integer(), nullable=False),
        sa.Column('kv_bytes_per_token', sa.Integer(), nullable=True),
        sa.Column('decode_tokens_per_s', sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(['run_id'], ['uptrain_run.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('run_id', 'method', 'kv_heads', 'fraction', name='uq_uptrain_cell'),
    )
    with op.batch_alter_table('uptrain_cell', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_uptrain_cell_run_id'), ['run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('uptrain_cell', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_uptrain_cell_run_id'))
    op.drop_table('uptrain_cell')
    op.drop_table('uptrain_run')
