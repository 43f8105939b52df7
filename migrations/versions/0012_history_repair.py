"""history repair: what the edit of 0007_lineage added, for stores that applied it before the edit

``0007_lineage`` shipped, then gained ``author_key`` and its (author_key, created_at, id) index in
place of the (author, created_at, id) one. A store that applied the first 0007 records it as done
and never got either. This revision adds what is missing and changes nothing that is there, so it
is a no-op on every store made since. (The version-table side of the same edit, 0004_trends
recorded beside 0007, is dropped by ``observatory.store.history.drop_redundant_heads`` before any
migration runs.)

Revision ID: 0012_history_repair
Revises: 0011_tp_node
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0012_history_repair'
down_revision = '0011_tp_node'
branch_labels = None
depends_on = '0007_lineage'  # it repairs what 0007 made, so it runs after 0007 on every store

OLD_INDEX = 'ix_hub_model_author_created_at_id'
NEW_INDEX = 'ix_hub_model_author_key_created_at_id'


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    columns = {column['name'] for column in inspector.get_columns('hub_model')}
    indexes = {index['name'] for index in inspector.get_indexes('hub_model')}
    if 'author_key' in columns and OLD_INDEX not in indexes and NEW_INDEX in indexes:
        return
    with op.batch_alter_table('hub_model', schema=None) as batch_op:
        if 'author_key' not in columns:
            batch_op.add_column(sa.Column('author_key', sqlmodel.sql.sqltypes.AutoString(length=100),
                                          nullable=True))
        if OLD_INDEX in indexes:
            batch_op.drop_index(OLD_INDEX)
        if NEW_INDEX not in indexes:
            batch_op.create_index(NEW_INDEX, ['author_key', 'created_at', 'id'], unique=False)
    if 'author_key' not in columns:
        op.execute("UPDATE hub_model SET author_key = lower(author)")


def downgrade() -> None:
    # Nothing to undo: what upgrade adds is what 0007_lineage (as edited) has on every other store.
    pass
