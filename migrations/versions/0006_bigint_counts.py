"""bigint counts: 64-bit integers where values outgrow 32 bits, on PostgreSQL

Parameter counts are in the billions, and the Hub's counts and a config's window or widths can
be anything up to the parser's bounds. SQLite's INTEGER is already 64-bit, so nothing changes
there (``observatory.tables.BigInt`` keeps those columns INTEGER on SQLite).

Revision ID: 0006_bigint_counts
Revises: 0001_core
"""
from alembic import op
import sqlalchemy as sa


revision = '0006_bigint_counts'
down_revision = '0001_core'
branch_labels = None
depends_on = None

COLUMNS = {
    "hub_model": ("downloads", "likes", "num_parameters"),
    "geometry": ("sliding_window", "kv_elements_per_token", "kv_bytes_per_token_bf16"),
}


def _alter(to: sa.types.TypeEngine, existing: sa.types.TypeEngine) -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, names in COLUMNS.items():
        for name in names:
            op.alter_column(table, name, type_=to, existing_type=existing)


def upgrade() -> None:
    _alter(sa.BigInteger(), sa.Integer())


def downgrade() -> None:
    _alter(sa.Integer(), sa.BigInteger())
