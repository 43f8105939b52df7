"""spot-benchmark results

Revision ID: 0003_bench
Revises: 0001_core
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = "0003_bench"
down_revision = "0001_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bench_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=True),
        sa.Column("device", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("device_type", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("catalog_device_id", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=True),
        sa.Column("software", sa.JSON(), nullable=False),
        sa.Column("backend", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
        sa.Column("dtype", sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("num_heads", sa.Integer(), nullable=True),
        sa.Column("num_kv_heads", sa.Integer(), nullable=True),
        sa.Column("head_dim", sa.Integer(), nullable=True),
        sa.Column("context", sa.Integer(), nullable=False),
        sa.Column("median_s", sa.Float(), nullable=True),
        sa.Column("min_s", sa.Float(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=True),
        sa.Column("kv_bytes", sa.BigInteger(), nullable=True),
        sa.Column("bytes_per_s", sa.Float(), nullable=True),
        sa.Column("ceiling_bytes_per_s", sa.Float(), nullable=True),
        sa.Column("fraction_of_ceiling", sa.Float(), nullable=True),
        sa.Column("predicted_s", sa.Float(), nullable=True),
        sa.Column("prediction_basis", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
        sa.Column("peer_times_s", sa.JSON(), nullable=False),
        sa.Column("peer_errors", sa.JSON(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["hub_model.id"], name=op.f("fk_bench_result_model_id_hub_model")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_result")),
    )
    with op.batch_alter_table("bench_result", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bench_result_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_bench_result_device"), ["device"], unique=False)
        batch_op.create_index(batch_op.f("ix_bench_result_created_at"), ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("bench_result")
