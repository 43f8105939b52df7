"""Spot-benchmark results in and out of the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from observatory.bench.tables import BenchResult
from observatory.store.db import session_scope

if TYPE_CHECKING:  # the runner imports torch; the web app reads results without it
    from observatory.bench.runner import CaseResult, LocalDevice
    from observatory.bench.shapes import AttentionShape

_REASON_CHARS = 1000


def result_row(case: CaseResult, device: LocalDevice, model_id: str | None = None) -> BenchResult:
    shape, cf = case.shape, case.counterfactual
    row = BenchResult(
        model_id=model_id, status="ok", device=device.name[:200], device_type=device.type,
        catalog_device_id=device.catalog.id if device.catalog else None, software=dict(device.software),
        backend=case.backend, kernel=shape.kernel, dtype=case.dtype, batch=shape.batch, num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim, head_dim_v=shape.value_dim,
        context=shape.context, median_s=case.ours.median_s, min_s=case.ours.min_s, runs=case.ours.runs,
        kv_bytes=case.kv_bytes, bytes_per_s=case.bytes_per_s, ceiling_bytes_per_s=case.ceiling_bytes_per_s,
        fraction_of_ceiling=case.fraction_of_ceiling, flops=case.flops, flops_per_s=case.flops_per_s,
        matmul_flops_per_s=case.matmul_flops_per_s, fraction_of_matmul=case.fraction_of_matmul,
        predicted_s=case.predicted_s, prediction_basis=case.prediction_basis, predicted_bound=case.predicted_bound,
        peer_times_s={name: t.median_s for name, t in case.peers.items()}, peer_errors=dict(case.peer_errors))
    if cf is not None:
        row.mha_head_dim, row.mha_head_dim_v, row.mha_kv_bytes = cf.shape.head_dim, cf.shape.value_dim, cf.kv_bytes
        row.mha_median_s = cf.timing.median_s if cf.timing else None
        row.mha_predicted_s, row.mha_error = cf.predicted_s, cf.error[:300] if cf.error else None
    return row


def unrun_row(model_id: str | None, status: str, reason: str, device: LocalDevice, dtype: str, batch: int,
              context: int, shape: AttentionShape | None = None) -> BenchResult:
    """A shape that was skipped (cannot be benchmarked) or failed, with the reason (and the shape, when known)."""
    row = BenchResult(model_id=model_id, status=status, reason=reason[:_REASON_CHARS], device=device.name[:200],
                      device_type=device.type, software=dict(device.software), dtype=dtype, batch=batch,
                      context=context)
    if shape is not None:
        row.kernel, row.num_heads, row.num_kv_heads = shape.kernel, shape.num_heads, shape.num_kv_heads
        row.head_dim, row.head_dim_v = shape.head_dim, shape.value_dim
    return row


def save(engine: Engine, rows: list[BenchResult]) -> list[BenchResult]:
    with session_scope(engine) as session:
        session.add_all(rows)
        session.flush()
        for row in rows:
            session.refresh(row)
    return rows


def row_dict(row: BenchResult) -> dict:
    """A result as the pages and the CLI show it: the stored fields plus speed-ups over each peer and
    over the MHA counterfactual (measured and roofline-predicted)."""
    return {
        "created_at": row.created_at, "model_id": row.model_id, "status": row.status, "reason": row.reason,
        "device": row.device, "backend": row.backend, "kernel": row.kernel, "dtype": row.dtype, "batch": row.batch,
        "num_heads": row.num_heads, "num_kv_heads": row.num_kv_heads, "head_dim": row.head_dim,
        "head_dim_v": row.head_dim_v, "context": row.context, "median_s": row.median_s, "runs": row.runs,
        "kv_bytes": row.kv_bytes, "bytes_per_s": row.bytes_per_s, "fraction_of_ceiling": row.fraction_of_ceiling,
        "ceiling_bytes_per_s": row.ceiling_bytes_per_s, "flops": row.flops, "flops_per_s": row.flops_per_s,
        "matmul_flops_per_s": row.matmul_flops_per_s, "fraction_of_matmul": row.fraction_of_matmul,
        "predicted_s": row.predicted_s, "prediction_basis": row.prediction_basis,
        "predicted_bound": row.predicted_bound,
        "mha_head_dim": row.mha_head_dim, "mha_head_dim_v": row.mha_head_dim_v, "mha_median_s": row.mha_median_s,
        "mha_kv_bytes": row.mha_kv_bytes, "mha_predicted_s": row.mha_predicted_s, "mha_error": row.mha_error,
        "measured_speedup": row.measured_speedup, "predicted_speedup": row.predicted_speedup,
        "peer_times_s": dict(row.peer_times_s), "speedups": row.speedups, "peer_errors": dict(row.peer_errors),
        "software": dict(row.software),
    }


def results_for_model(session: Session, model_id: str, limit: int = 50) -> list[dict]:
    """The model's results, newest first."""
    rows = session.exec(select(BenchResult).where(BenchResult.model_id == model_id)
                        .order_by(BenchResult.created_at.desc(), BenchResult.id.desc()).limit(limit)).all()
    return [row_dict(row) for row in rows]


def latest_results(session: Session, limit: int = 100) -> list[dict]:
    """All results, newest first (the benchmarks page)."""
    rows = session.exec(select(BenchResult).order_by(BenchResult.created_at.desc(), BenchResult.id.desc())
                        .limit(limit)).all()
    return [row_dict(row) for row in rows]


def benchmarked_models(session: Session, device_name: str) -> set[str]:
    """Models with any result (even skipped) on this device."""
    ids = session.exec(select(BenchResult.model_id).where(BenchResult.device == device_name[:200],
                                                          BenchResult.model_id.is_not(None)).distinct()).all()
    return set(ids)


def measured_gqa_dividend(session: Session, model_id: str) -> dict | None:
    """Our measured GQA dividend for ``model_id`` (MHA-twin time / own time), or None while the
    store holds none.

    The spot-benchmarks gain the MHA counterfactual with issue 15 part 1; a result carries the
    dividend once it has ``measured_speedup`` (and, beside it, the roofline's
    ``predicted_speedup``). This is the one place that reads it, so it follows that schema as it
    grows.
    """
    for row in results_for_model(session, model_id):
        speedup = row.get("measured_speedup")
        if row.get("status") == "ok" and speedup is not None:
            return {"speedup": speedup, "predicted_speedup": row.get("predicted_speedup"),
                    "context": row.get("context"), "batch": row.get("batch"), "device": row.get("device"),
                    "backend": row.get("backend"), "dtype": row.get("dtype"), "created_at": row.get("created_at")}
    return None
