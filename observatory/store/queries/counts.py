"""Counts over the whole store: models by source, the geometries the trends count apart, and where
the bundled snapshot ends."""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from sqlmodel import Session

from observatory.store.oracle_tables import disagrees
from observatory.store.tables import GeometryRow, HubModel

_M = HubModel.__table__.c
_G = GeometryRow.__table__.c


def store_counts(session: Session) -> dict[str, int]:
    """How many models the store tracks, in all and by source ("hub" and "snapshot" always,
    any other source present).

    Exact and cheap at a million models: the total is a bare ``count(*)``, which SQLite answers
    by counting the entries of its smallest index without reading rows (~4 ms; a GROUP BY over
    every model took ~50 ms). Rows of the other sources are few (the bundled snapshot), so they
    are counted through two range reads of the ``source`` index that skip every "hub" entry, and
    "hub" is what remains.
    """
    total = session.execute(sa.select(sa.func.count()).select_from(HubModel.__table__)).scalar_one()
    others = dict(session.execute(_OTHER_SOURCES).all())
    counts = {"snapshot": 0, **others, "hub": total - sum(others.values())}
    return {"total": total, **dict(sorted(counts.items()))}


def geometry_flags(session: Session) -> dict[str, int]:
    """Current geometries the trends count apart: uncertain ones (an unknown layer type counted as a
    full KV layer, or one the oracle disagrees with) and encoder-only models."""
    current = (sa.select(sa.func.count()).select_from(HubModel.__table__)
               .join(GeometryRow.__table__, _G.revision_id == _M.current_revision_id))
    return {"uncertain": session.execute(current.where(sa.or_(_G.uncertain.is_(sa.true()), disagrees(_G.revision_id)))).scalar_one(),
            "encoder_only": session.execute(current.where(_G.encoder_only.is_(sa.true()))).scalar_one()}


def _by_source(condition: sa.ColumnElement) -> sa.Select:
    return sa.select(_M.source, sa.func.count()).where(condition).group_by(_M.source)


_OTHER_SOURCES = sa.union_all(_by_source(_M.source < "hub"), _by_source(_M.source > "hub"))


def snapshot_end(session: Session) -> date | None:
    """The day the bundled snapshot's newest model was released, when the store holds nothing
    else (the embedded default): its trends stop there for want of data, not of releases. None
    once any crawled model is stored, or when the store is empty."""
    if session.execute(sa.select(_M.id).where(_M.source != "snapshot").limit(1)).first() is not None:
        return None
    newest = session.execute(sa.select(sa.func.max(_M.created_at)).where(_M.source == "snapshot")).scalar_one()
    return newest.date() if newest is not None else None
