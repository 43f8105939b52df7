"""lineage, parameter counts, unknown download counts, and geometry round 2

hub_model gains what the listing says about a repository's lineage and weights (issue 10):
its relation to its base(s), the bases, the parameter count's source, active parameters of
mixture-of-experts models, weight dtypes, a declared quantization, the test-repo flag; and the
snapshot's own facts (organisation, sources) in ``snapshot_meta``. Downloads and likes become
nullable: a snapshot model's counts are unknown, and unknown is NULL, never 0 (issue 13).

geometry gains encoder-only / encoder-decoder flags, the cross-attention cache per source
token, the ``uncertain`` mark (an unknown layer type counted as a full KV layer), the
architecture fingerprint and the config-based parameter estimate (issue 11, issue 10).

``author_key`` is the organisation lower-cased, so ``author=Meta-Llama`` finds meta-llama as it
does on the Hub; its (author_key, created_at, id) index replaces the one on author (which is
why this revision depends on 0004_trends, where that index was made).

Revision ID: 0007_lineage
Revises: 0006_bigint_counts
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0007_lineage'
down_revision = '0006_bigint_counts'
branch_labels = None
depends_on = '0004_trends'

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Edited once more after shipping (issue 21), and only so: 0004_trends as first shipped made no
    # author index, so a store of that era has none to drop. Every store that has it drops it as before.
    author_index = 'ix_hub_model_author_created_at_id' in {
        index['name'] for index in sa.inspect(op.get_bind()).get_indexes('hub_model')}
    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        batch_op.alter_column('downloads', existing_type=BigInt, nullable=True)
        batch_op.alter_column('likes', existing_type=BigInt, nullable=True)
        batch_op.add_column(sa.Column('relation', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True))
        batch_op.add_column(sa.Column('base_models', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('parameters_source', sqlmodel.sql.sqltypes.AutoString(length=20),
                                      nullable=True))
        batch_op.add_column(sa.Column('active_parameters', BigInt, nullable=True))
        batch_op.add_column(sa.Column('weight_dtypes', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('quant_method', sqlmodel.sql.sqltypes.AutoString(length=50), nullable=True))
        batch_op.add_column(sa.Column('quant_bits', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('is_test_repo', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('lineage_warnings', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('organisation', sqlmodel.sql.sqltypes.AutoString(length=100),
                                      nullable=True))
        batch_op.add_column(sa.Column('snapshot_meta', sa.JSON(), nullable=True))
        batch_op.create_index(batch_op.f('ix_hub_model_relation'), ['relation'], unique=False)
        batch_op.add_column(sa.Column('author_key', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True))
        if author_index:
            batch_op.drop_index('ix_hub_model_author_created_at_id')
        batch_op.create_index('ix_hub_model_author_key_created_at_id', ['author_key', 'created_at', 'id'],
                              unique=False)
    op.execute("UPDATE hub_model SET author_key = lower(author)")
    # Snapshot rows never had a download count: 0 stood for "unknown" until now.
    op.execute("UPDATE hub_model SET downloads = NULL, likes = NULL WHERE source = 'snapshot'")

    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.add_column(sa.Column('encoder_only', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('is_encoder_decoder', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column('cross_kv_elements_per_source_token', BigInt, nullable=True))
        batch_op.add_column(sa.Column('uncertain', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('fingerprint', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch_op.add_column(sa.Column('params_estimate', BigInt, nullable=True))
        batch_op.add_column(sa.Column('active_params_estimate', BigInt, nullable=True))
        batch_op.create_index(batch_op.f('ix_geometry_fingerprint'), ['fingerprint'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_geometry_fingerprint'))
        for name in ('active_params_estimate', 'params_estimate', 'fingerprint', 'uncertain',
                     'cross_kv_elements_per_source_token', 'is_encoder_decoder', 'encoder_only'):
            batch_op.drop_column(name)
    op.execute("UPDATE hub_model SET downloads = 0 WHERE downloads IS NULL")
    op.execute("UPDATE hub_model SET likes = 0 WHERE likes IS NULL")
    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        batch_op.drop_index('ix_hub_model_author_key_created_at_id')
        batch_op.create_index('ix_hub_model_author_created_at_id', ['author', 'created_at', 'id'], unique=False)
        batch_op.drop_column('author_key')
        batch_op.drop_index(batch_op.f('ix_hub_model_relation'))
        for name in ('snapshot_meta', 'organisation', 'lineage_warnings', 'is_test_repo', 'quant_bits',
                     'quant_method', 'weight_dtypes', 'active_parameters', 'parameters_source',
                     'base_models', 'relation'):
            batch_op.drop_column(name)
        batch_op.alter_column('likes', existing_type=BigInt, nullable=False)
        batch_op.alter_column('downloads', existing_type=BigInt, nullable=False)
