"""crawler state: scopes with their marks, failures per model, leases

Revision ID: 0002_crawler
Revises: 0001_core
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = "0002_crawler"
down_revision = "0001_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "crawl_scope",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("created_mark", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("floor", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("modified_mark", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("last_run_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_crawl_scope")),
    )
    op.create_table(
        "crawl_failure",
        sa.Column("model_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("sha", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("transient", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("detail", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("first_failed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("last_failed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("next_attempt_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("resolved_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("model_id", name=op.f("pk_crawl_failure")),
    )
    with op.batch_alter_table("crawl_failure", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_crawl_failure_reason"), ["reason"], unique=False)
        batch_op.create_index("ix_crawl_failure_due", ["transient", "resolved_at", "next_attempt_at"], unique=False)
    op.create_table(
        "lease",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("holder", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("acquired_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_lease")),
    )


def downgrade() -> None:
    op.drop_table("lease")
    with op.batch_alter_table("crawl_failure", schema=None) as batch_op:
        batch_op.drop_index("ix_crawl_failure_due")
        batch_op.drop_index(batch_op.f("ix_crawl_failure_reason"))
    op.drop_table("crawl_failure")
    op.drop_table("crawl_scope")
