"""bench v2: MLA results, FLOP rates against the measured matmul ceiling, the MHA counterfactual

Adds to ``bench_result``: which kernel ran (``gqa`` or ``mla``) and the value head dim (MLA: the
latent rank, the keys being ``kv_lora_rank + rope`` wide); the FLOPs of one call, the rate achieved
and the device's matmul rate measured in the same rounds; the bound of the roofline prediction; and
the MHA counterfactual (same H and head dims, K = H) timed in the same rounds, with its roofline
prediction, or why it did not run.

Revision ID: 0009_bench_v2
Revises: 0003_bench
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = "0009_bench_v2"
down_revision = "0003_bench"
branch_labels = None
depends_on = None

COLUMNS = [
    sa.Column("kernel", sqlmodel.sql.sqltypes.AutoString(length=10), nullable=True),
    sa.Column("head_dim_v", sa.Integer(), nullable=True),
    sa.Column("flops", sa.Float(), nullable=True),
    sa.Column("flops_per_s", sa.Float(), nullable=True),
    sa.Column("matmul_flops_per_s", sa.Float(), nullable=True),
    sa.Column("fraction_of_matmul", sa.Float(), nullable=True),
    sa.Column("predicted_bound", sqlmodel.sql.sqltypes.AutoString(length=10), nullable=True),
    sa.Column("mha_head_dim", sa.Integer(), nullable=True),
    sa.Column("mha_head_dim_v", sa.Integer(), nullable=True),
    sa.Column("mha_median_s", sa.Float(), nullable=True),
    sa.Column("mha_kv_bytes", sa.BigInteger(), nullable=True),
    sa.Column("mha_predicted_s", sa.Float(), nullable=True),
    sa.Column("mha_error", sqlmodel.sql.sqltypes.AutoString(length=300), nullable=True),
]


def upgrade() -> None:
    with op.batch_alter_table("bench_result", schema=None) as batch_op:
        for column in COLUMNS:
            batch_op.add_column(column)


def downgrade() -> None:
    with op.batch_alter_table("bench_result", schema=None) as batch_op:
        for column in reversed(COLUMNS):
            batch_op.drop_column(column.name)
