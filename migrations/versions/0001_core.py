"""core tables

Revision ID: 0001_core
Revises: 
Create Date: 2026-11-30 21:59:13.230282
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0001_core'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    
    op.create_table('crawl_run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('scope', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('finished_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('seen', sa.Integer(), nullable=False),
    sa.Column('new', sa.Integer(), nullable=False),
    sa.Column('changed', sa.Integer(), nullable=False),
    sa.Column('skipped', sa.Integer(), nullable=False),
    sa.Column('failed', sa.Integer(), nullable=False),
    sa.Column('requests', sa.Integer(), nullable=False),
    sa.Column('failures_by_reason', sa.JSON(), nullable=False),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=True),
    sa.Column('stats', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_crawl_run'))
    )
    with op.batch_alter_table('crawl_run', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_crawl_run_scope'), ['scope'], unique=False)
        batch_op.create_index(batch_op.f('ix_crawl_run_started_at'), ['started_at'], unique=False)

    op.create_table('hub_model',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('author', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('last_modified', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('sha', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('downloads', sa.Integer(), nullable=False),
    sa.Column('likes', sa.Integer(), nullable=False),
    sa.Column('pipeline_tag', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('library_name', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('tags', sa.JSON(), nullable=False),
    sa.Column('gated', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('num_parameters', sa.Integer(), nullable=True),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('release_date_confidence', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('current_revision_id', sa.Integer(), nullable=True),
    sa.Column('first_seen_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('stats_refreshed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hub_model'))
    )
    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_hub_model_author'), ['author'], unique=False)
        batch_op.create_index(batch_op.f('ix_hub_model_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_hub_model_current_revision_id'), ['current_revision_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_hub_model_source'), ['source'], unique=False)

    op.create_table('config_revision',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('sha', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('raw_text', sa.Text(), nullable=False),
    sa.Column('fetched_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('provenance', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('parse_status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('parse_error', sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=True),
    sa.ForeignKeyConstraint(['model_id'], ['hub_model.id'], name=op.f('fk_config_revision_model_id_hub_model')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_config_revision')),
    sa.UniqueConstraint('model_id', 'sha', name='uq_config_revision_model_sha')
    )
    with op.batch_alter_table('config_revision', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_config_revision_model_id'), ['model_id'], unique=False)

    op.create_table('geometry',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('revision_id', sa.Integer(), nullable=False),
    sa.Column('model_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('parser_version', sa.Integer(), nullable=False),
    sa.Column('model_type', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('architectures', sa.JSON(), nullable=False),
    sa.Column('attention_kind', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('is_hybrid', sa.Boolean(), nullable=False),
    sa.Column('num_query_heads', sa.Integer(), nullable=True),
    sa.Column('num_kv_heads', sa.Integer(), nullable=True),
    sa.Column('group_size', sa.Float(), nullable=True),
    sa.Column('head_dim', sa.Integer(), nullable=True),
    sa.Column('v_head_dim', sa.Integer(), nullable=True),
    sa.Column('num_layers', sa.Integer(), nullable=True),
    sa.Column('kv_layers', sa.Integer(), nullable=True),
    sa.Column('sliding_window', sa.Integer(), nullable=True),
    sa.Column('sliding_layers', sa.Integer(), nullable=False),
    sa.Column('chunked', sa.Boolean(), nullable=False),
    sa.Column('hidden_size', sa.Integer(), nullable=True),
    sa.Column('kv_lora_rank', sa.Integer(), nullable=True),
    sa.Column('qk_rope_head_dim', sa.Integer(), nullable=True),
    sa.Column('qk_nope_head_dim', sa.Integer(), nullable=True),
    sa.Column('q_lora_rank', sa.Integer(), nullable=True),
    sa.Column('kv_elements_per_token', sa.Integer(), nullable=True),
    sa.Column('kv_bytes_per_token_bf16', sa.Integer(), nullable=True),
    sa.Column('sources', sa.JSON(), nullable=False),
    sa.Column('warnings', sa.JSON(), nullable=False),
    sa.Column('derived_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['hub_model.id'], name=op.f('fk_geometry_model_id_hub_model')),
    sa.ForeignKeyConstraint(['revision_id'], ['config_revision.id'], name=op.f('fk_geometry_revision_id_config_revision')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_geometry')),
    sa.UniqueConstraint('revision_id', name=op.f('uq_geometry_revision_id'))
    )
    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_geometry_attention_kind'), ['attention_kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_geometry_group_size'), ['group_size'], unique=False)
        batch_op.create_index(batch_op.f('ix_geometry_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_geometry_model_type'), ['model_type'], unique=False)

    


def downgrade() -> None:
    
    with op.batch_alter_table('geometry', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_geometry_model_type'))
        batch_op.drop_index(batch_op.f('ix_geometry_model_id'))
        batch_op.drop_index(batch_op.f('ix_geometry_group_size'))
        batch_op.drop_index(batch_op.f('ix_geometry_attention_kind'))

    op.drop_table('geometry')
    with op.batch_alter_table('config_revision', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_config_revision_model_id'))

    op.drop_table('config_revision')
    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_hub_model_source'))
        batch_op.drop_index(batch_op.f('ix_hub_model_current_revision_id'))
        batch_op.drop_index(batch_op.f('ix_hub_model_created_at'))
        batch_op.drop_index(batch_op.f('ix_hub_model_author'))

    op.drop_table('hub_model')
    with op.batch_alter_table('crawl_run', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_crawl_run_started_at'))
        batch_op.drop_index(batch_op.f('ix_crawl_run_scope'))

    op.drop_table('crawl_run')
    
