"""The oracle's verdict on each config revision: transformers' reading beside ours.

One row per config revision (``observatory.oracle.check`` writes it): the status (agree, disagree,
unsupported, failed) and its reason, which transformers version read it and which parser version
ours came from, and the oracle's own numbers: per cached layer its K and V heads and head dims, the
elements one generated token adds (and one source token, for cross-attention), and the parameter
count of what it built. Kept in the store (not the oracle's package) because the store's read
queries use it: a ``disagree`` marks the geometry uncertain, as ``GeometryRow.uncertain`` does,
which keeps the model out of trends and headlines (``DISAGREES``).
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.store.tables import BigInt, utcnow


class OracleCheck(SQLModel, table=True):
    __tablename__ = "oracle_check"

    id: int | None = Field(default=None, primary_key=True)
    revision_id: int = Field(foreign_key="config_revision.id", unique=True)
    model_id: str = Field(foreign_key="hub_model.id", index=True, max_length=200)
    status: str = Field(max_length=20, index=True)  # agree | disagree | unsupported | failed
    reason: str | None = Field(default=None, max_length=2000)  # disagree: both values named; else why
    transformers_version: str | None = Field(default=None, max_length=40)  # None: no child got that far
    parser_version: int | None = None  # of the geometry it was compared with
    model_type: str | None = Field(default=None, max_length=100, index=True)  # as the config says
    query_heads: int | None = None
    # [[layer, k_heads, k_dim, v_heads, v_dim], ...]: per generated token, and per source token
    layers: list | None = Field(default=None, sa_type=sa.JSON)
    cross_layers: list | None = Field(default=None, sa_type=sa.JSON)
    elements_per_token: int | None = Field(default=None, sa_type=BigInt)
    cross_elements_per_source_token: int | None = Field(default=None, sa_type=BigInt)
    parameters: int | None = Field(default=None, sa_type=BigInt)  # what it built (no LM head, no towers)
    our_parameters: int | None = Field(default=None, sa_type=BigInt)  # our estimate of the same part
    differences: list[str] = Field(default_factory=list, sa_type=sa.JSON)  # listed differences relied on
    mismatches: list[str] = Field(default_factory=list, sa_type=sa.JSON)  # one line per differing value
    checked_at: datetime = Field(default_factory=utcnow, index=True)


_O = OracleCheck.__table__.c


def disagrees(revision_id_column) -> sa.ColumnElement[bool]:
    """True where the oracle disagrees with the geometry of that revision: read beside
    ``GeometryRow.uncertain`` wherever uncertain geometries are set apart."""
    return sa.exists().where(_O.revision_id == revision_id_column, _O.status == "disagree")
