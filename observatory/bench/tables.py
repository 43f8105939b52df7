"""Spot-benchmark results: one row per (model shape, device, dtype) measurement.

A row records what ran (device, software versions, dtype, shape), how fast (median time, bytes/s),
against what (the device's measured copy ceiling, the roofline prediction, each peer's time) and
when. Shapes that cannot be benchmarked (MLA, attention-free) are stored once as ``skipped`` with
the reason, so the scheduled job does not retry them on every run.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.tables import utcnow


class BenchResult(SQLModel, table=True):
    __tablename__ = "bench_result"

    id: int | None = Field(default=None, primary_key=True)
    # None for shapes benchmarked without a stored model (the comparison script's shapes).
    model_id: str | None = Field(default=None, foreign_key="hub_model.id", index=True, max_length=200)
    status: str = Field(default="ok", max_length=20)  # ok | skipped | failed
    reason: str | None = Field(default=None, max_length=1000)  # why skipped or failed
    device: str = Field(max_length=200, index=True)  # as the driver names it, e.g. "NVIDIA H200" or "cpu: <model>"
    device_type: str = Field(max_length=20)  # cpu | cuda
    catalog_device_id: str | None = Field(default=None, max_length=50)  # hardware.json id when matched
    software: dict = Field(default_factory=dict, sa_type=sa.JSON)  # torch, triton, python, threads, cc (CPU)
    backend: str | None = Field(default=None, max_length=20)  # triton | cpu | torch
    dtype: str = Field(max_length=10)  # fp32 | fp16 | bf16
    batch: int
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    context: int
    median_s: float | None = None
    min_s: float | None = None
    runs: int | None = None
    kv_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)  # K and V bytes one call reads
    bytes_per_s: float | None = None  # kv_bytes / median_s
    ceiling_bytes_per_s: float | None = None  # measured large copy: bytes read + written per second
    fraction_of_ceiling: float | None = None
    predicted_s: float | None = None  # roofline for one attention call on this device
    prediction_basis: str | None = Field(default=None, max_length=100)  # "catalog:<id>" or "measured-copy"
    peer_times_s: dict = Field(default_factory=dict, sa_type=sa.JSON)  # peer name -> median seconds
    peer_errors: dict = Field(default_factory=dict, sa_type=sa.JSON)  # peer name -> why it did not run
    created_at: datetime = Field(default_factory=utcnow, index=True)

    @property
    def speedups(self) -> dict[str, float]:
        """Peer time ÷ our time, per peer (> 1: ours is faster)."""
        if not self.median_s:
            return {}
        return {name: t / self.median_s for name, t in self.peer_times_s.items() if t}
