"""Read queries over the oracle's verdicts: one model's, the per-model_type table, the counts."""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from sqlmodel import Session

from observatory.store.oracle_tables import OracleCheck
from observatory.store.tables import HubModel

_M, _O = HubModel.__table__.c, OracleCheck.__table__.c
STATUSES = ("agree", "disagree", "unsupported", "failed")


def _current() -> sa.Select:
    return sa.select().select_from(OracleCheck.__table__).join(
        HubModel.__table__, _M.current_revision_id == _O.revision_id)


def status_table(session: Session) -> list[dict]:
    """Per model_type of the models' current revisions: configs read, and how many agree, disagree,
    are unsupported or failed. Sorted by model_type; a config with no model_type comes last."""
    query = _current().add_columns(_O.model_type, _O.status, sa.func.count()).group_by(_O.model_type, _O.status)
    table: dict[str | None, Counter] = {}
    for model_type, status, n in session.execute(query):
        table.setdefault(model_type, Counter())[status] += n
    return [{"model_type": model_type, "configs": sum(c.values()), **{s: c[s] for s in STATUSES}}
            for model_type, c in sorted(table.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))]


def status_counts(session: Session) -> dict[str, int]:
    """How many current revisions have each verdict (every status present, 0 when none)."""
    rows = dict(session.execute(_current().add_columns(_O.status, sa.func.count()).group_by(_O.status)).all())
    return {status: rows.get(status, 0) for status in STATUSES}


def check_of(session: Session, revision_id: int | None) -> OracleCheck | None:
    if revision_id is None:
        return None
    return session.execute(sa.select(OracleCheck).where(_O.revision_id == revision_id)).scalar_one_or_none()
