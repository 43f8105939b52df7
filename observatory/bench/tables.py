"""Spot-benchmark results: one row per (model shape, device, dtype) measurement.

A row records what ran (device, software versions, dtype, shape, GQA or MLA kernel), how fast
(median time, bytes/s, FLOP/s), against what (the device's measured copy and matmul ceilings, the
roofline prediction, each peer's time, the model's MHA counterfactual timed in the same rounds) and
when. Shapes that cannot be benchmarked (attention-free, inputs beyond the device's free memory)
are stored once as ``skipped`` with the reason, so the scheduled job does not retry them on every run.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from observatory.store.tables import utcnow


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
    kernel: str | None = Field(default=None, max_length=10)  # gqa | mla (absorbed, one shared latent)
    dtype: str = Field(max_length=10)  # fp32 | fp16 | bf16
    batch: int
    num_heads: int | None = None
    num_kv_heads: int | None = None  # MLA: 1, the shared latent
    head_dim: int | None = None  # of keys; MLA: kv_lora_rank + rope
    head_dim_v: int | None = None  # of values; MLA: kv_lora_rank
    context: int
    median_s: float | None = None
    min_s: float | None = None
    runs: int | None = None
    kv_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)  # K and V bytes one call reads
    bytes_per_s: float | None = None  # kv_bytes / median_s
    ceiling_bytes_per_s: float | None = None  # measured large copy: bytes read + written per second
    fraction_of_ceiling: float | None = None
    flops: float | None = None  # FLOPs one call does: 2·b·L·H·(head_dim + head_dim_v)
    flops_per_s: float | None = None  # flops / median_s
    matmul_flops_per_s: float | None = None  # a large matmul in this dtype, measured in the same rounds
    fraction_of_matmul: float | None = None
    predicted_s: float | None = None  # roofline for one attention call on this device
    # "catalog:<id>", or "measured-copy-and-matmul" (a CPU: its measured ceilings stand in for a spec)
    prediction_basis: str | None = Field(default=None, max_length=100)
    predicted_bound: str | None = Field(default=None, max_length=10)  # memory | compute
    # The MHA counterfactual (K = H, same H, head dims and layers; for MLA the MHA it replaces),
    # timed in the same interleaved rounds; None with mha_error when it did not run, and for MHA models.
    mha_head_dim: int | None = None
    mha_head_dim_v: int | None = None
    mha_median_s: float | None = None
    mha_kv_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)
    mha_predicted_s: float | None = None
    mha_error: str | None = Field(default=None, max_length=300)
    peer_times_s: dict = Field(default_factory=dict, sa_type=sa.JSON)  # peer name -> median seconds
    peer_errors: dict = Field(default_factory=dict, sa_type=sa.JSON)  # peer name -> why it did not run
    created_at: datetime = Field(default_factory=utcnow, index=True)

    @property
    def measured_speedup(self) -> float | None:
        """The MHA counterfactual's time ÷ ours, measured in the same rounds (> 1: the cache layout pays)."""
        return self.mha_median_s / self.median_s if self.mha_median_s and self.median_s else None

    @property
    def predicted_speedup(self) -> float | None:
        """The same ratio from the roofline."""
        return self.mha_predicted_s / self.predicted_s if self.mha_predicted_s and self.predicted_s else None

    @property
    def speedups(self) -> dict[str, float]:
        """Peer time ÷ our time, per peer (> 1: ours is faster)."""
        if not self.median_s:
            return {}
        return {name: t / self.median_s for name, t in self.peer_times_s.items() if t}
