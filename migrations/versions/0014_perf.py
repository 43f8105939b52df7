"""perf: indexes that make the start-up stale checks a b-tree seek instead of a table scan

``trends_stale`` asks for ``max(hub_model.updated_at)`` and ``max(geometry.derived_at)``;
``stale_revision_ids`` for geometry of an older ``parser_version`` and for revisions whose
``parse_status`` is "error". Without these indexes each question read every row (about 1 GB
through SQLite's mmap on a 1M-model store, on every start of every worker).

Revision ID: 0014_perf
Revises: 0013_oracle
"""
from alembic import op


revision = '0014_perf'
down_revision = '0013_oracle'
branch_labels = None
depends_on = None

INDEXES = [
    ('ix_hub_model_updated_at', 'hub_model', ['updated_at']),
    ('ix_geometry_derived_at', 'geometry', ['derived_at']),
    ('ix_geometry_parser_version', 'geometry', ['parser_version']),
    ('ix_config_revision_parse_status', 'config_revision', ['parse_status']),
]


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        op.drop_index(name, table_name=table)
