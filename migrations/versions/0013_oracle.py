"""oracle: transformers' reading of each config revision beside ours (oracle_check)

One row per config revision: agree | disagree | unsupported | failed with its reason, the
transformers and parser versions compared, the oracle's per-layer K/V heads and head dims,
elements per token (and per source token), and its parameter count. Empty until the oracle runs
(after a crawl, on its schedule, or ``observatory oracle check``).

Revision ID: 0013_oracle
Revises: 0011_tp_node
"""
import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision = '0013_oracle'
down_revision = "0012_history_repair"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('oracle_check',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('model_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=True),
    sa.Column('transformers_version', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('parser_version', sa.Integer(), nullable=True),
    sa.Column('model_type', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('query_heads', sa.Integer(), nullable=True),
    sa.Column('layers', sa.JSON(), nullable=True),
    sa.Column('cross_layers', sa.JSON(), nullable=True),
    sa.Column('elements_per_token', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('cross_elements_per_source_token', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
              nullable=True),
    sa.Column('parameters', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('our_parameters', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('differences', sa.JSON(), nullable=False),
    sa.Column('mismatches', sa.JSON(), nullable=False),
    sa.Column('checked_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['hub_model.id'], name=op.f('fk_oracle_check_model_id_hub_model')),
    sa.ForeignKeyConstraint(['revision_id'], ['config_revision.id'],
                            name=op.f('fk_oracle_check_revision_id_config_revision')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_oracle_check')),
    sa.UniqueConstraint('revision_id', name=op.f('uq_oracle_check_revision_id'))
    )
    with op.batch_alter_table('oracle_check', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_oracle_check_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_oracle_check_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_oracle_check_model_type'), ['model_type'], unique=False)
        batch_op.create_index(batch_op.f('ix_oracle_check_checked_at'), ['checked_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('oracle_check', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_oracle_check_checked_at'))
        batch_op.drop_index(batch_op.f('ix_oracle_check_model_type'))
        batch_op.drop_index(batch_op.f('ix_oracle_check_status'))
        batch_op.drop_index(batch_op.f('ix_oracle_check_model_id'))
    op.drop_table('oracle_check')
