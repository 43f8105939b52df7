"""Uptraining results: one run of the experiment, and one row per (pooling, K, fraction) cell.

A run is stored when it starts and rewritten as it goes (``complete`` false until the grid and the
speed table are done), so the pages never show a half-finished grid as a result. ``run_key`` is the
work folder's id: resuming a run updates the same row.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.store.tables import utcnow


class UptrainRun(SQLModel, table=True):
    __tablename__ = "uptrain_run"

    id: int | None = Field(default=None, primary_key=True)
    run_key: str = Field(max_length=36, unique=True)
    complete: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    started_at: str = Field(max_length=40)  # ISO 8601, as the work folder recorded it
    finished_at: str | None = Field(default=None, max_length=40)
    wall_s: float  # summed over the invocations that ran it
    scale: float
    seed: int
    corpus_sha256: str = Field(max_length=64)
    corpus: dict = Field(default_factory=dict, sa_type=sa.JSON)  # python, files, bytes, split rule
    sizes: dict = Field(default_factory=dict, sa_type=sa.JSON)  # model shape, steps, batch, lr
    software: dict = Field(default_factory=dict, sa_type=sa.JSON)  # python, torch, threads, machine
    base: dict | None = Field(default=None, sa_type=sa.JSON)  # the MHA model before uptraining
    speed: dict | None = Field(default=None, sa_type=sa.JSON)  # kernel decode timing per K


class UptrainCell(SQLModel, table=True):
    __tablename__ = "uptrain_cell"
    __table_args__ = (sa.UniqueConstraint("run_id", "method", "kv_heads", "fraction", name="uq_uptrain_cell"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="uptrain_run.id", index=True)
    method: str = Field(max_length=10)  # mean | first | random | mha (the control)
    kv_heads: int
    group_size: int
    fraction: float  # of the base steps spent uptraining
    uptrain_steps: int
    loss: float  # held-out nats per byte
    perplexity: float  # per byte
    bits_per_byte: float
    scored_bytes: int  # held-out bytes behind the number: its n
    kv_bytes_per_token: int | None = None  # bf16, all layers
    decode_tokens_per_s: float | None = None  # attention only, the bundled kernel, this machine
