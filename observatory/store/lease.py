"""Named leases in the store: at most one holder of ``crawl`` or ``scheduler`` at a time.

A lease lapses at ``expires_at`` unless its holder renews it, so a holder that dies frees it
after one TTL. A holder on this same machine whose process is gone (SIGKILL, OOM) frees it at
once: the holder id names host and pid, and a dead pid here cannot be crawling.

The read-modify-write runs in one write transaction (``BEGIN IMMEDIATE`` on SQLite, a row lock
on PostgreSQL), and a racing first insert loses on the primary key, so two processes never
both think they hold a lease.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from sqlalchemy import delete, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from observatory.store.db import session_scope
from observatory.store.tables import Lease, utcnow

_HOST = socket.gethostname()[:100]


def new_holder() -> str:
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def holder_is_dead(holder: str) -> bool:
    """True only when the holder ran on this host and its process no longer exists."""
    host, _, pid_text = holder.rpartition(":")[0].rpartition(":")  # "host:pid:token"
    if host != _HOST or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists but is not ours to signal
        return False
    return False


def acquire(engine: Engine, name: str, holder: str, ttl_s: float) -> bool:
    now = utcnow()
    try:
        with session_scope(engine) as session:
            row = session.exec(select(Lease).where(Lease.name == name).with_for_update()).first()
            if row is None:
                session.add(Lease(name=name, holder=holder, acquired_at=now,
                                  expires_at=now + timedelta(seconds=ttl_s)))
                return True
            if row.holder != holder and row.expires_at > now and not holder_is_dead(row.holder):
                return False
            if row.holder != holder:
                row.acquired_at = now
            row.holder = holder
            row.expires_at = now + timedelta(seconds=ttl_s)
            return True
    except IntegrityError:
        return False


def renew(engine: Engine, name: str, holder: str, ttl_s: float) -> bool:
    """Extend a lease we hold; False if it is no longer ours (it lapsed and was taken)."""
    with session_scope(engine) as session:
        result = session.exec(
            update(Lease).where(Lease.name == name, Lease.holder == holder)
            .values(expires_at=utcnow() + timedelta(seconds=ttl_s))
        )
        return result.rowcount == 1


def release(engine: Engine, name: str, holder: str) -> None:
    with session_scope(engine) as session:
        session.exec(delete(Lease).where(Lease.name == name, Lease.holder == holder))


def current(session: Session, name: str) -> Lease | None:
    """The live lease on ``name``, if any."""
    row = session.get(Lease, name)
    if row is None or row.expires_at <= utcnow() or holder_is_dead(row.holder):
        return None
    return row
