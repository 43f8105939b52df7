"""Benchmarking stored models: the CLI's and the scheduler's entry points.

``bench_new_models`` is the scheduled job: it picks notable models (at least
``bench_min_downloads`` downloads, or from the bundled snapshot) that have a geometry and no result
yet on this device, newest first, and benchmarks up to ``limit`` of them at the settings' small
default shape, each beside its MHA counterfactual. Models that cannot be benchmarked
(attention-free, or inputs beyond the free memory) get a ``skipped`` row, so they are not picked again.

``DIVIDEND_CONTEXTS`` × ``DIVIDEND_BATCHES`` is the sweep ``observatory bench --dividend`` runs to
measure the GQA dividend: where grouping stops paying, e.g. when a shape turns compute-bound.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from observatory.bench import store
from observatory.bench.runner import DoesNotFit, LocalDevice, local_device, measure
from observatory.bench.shapes import SkipShape, attention_shape, counterfactual_shape
from observatory.bench.tables import BenchResult
from observatory.settings import Settings
from observatory.store.db import session_scope
from observatory.store.queries.models import current_geometry
from observatory.store.tables import HubModel

log = logging.getLogger(__name__)

DIVIDEND_CONTEXTS = (4096, 32768, 131072)
DIVIDEND_BATCHES = (1, 4, 16, 64)


class UnknownModel(LookupError):
    """No stored model with that id, or it has no parsed geometry."""


def default_dtype(device: LocalDevice) -> str:
    return "bf16" if device.type == "cuda" else "fp32"


def bench_models(engine: Engine, model_ids: Iterable[str], *, contexts: Iterable[int] = (4096,),
                 batches: Iterable[int] = (1,), dtype: str | None = None, device: LocalDevice | None = None,
                 peers: bool = True, counterfactual: bool = True, warmup: int = 1, repeats: int = 5,
                 store_results: bool = True, on_result: Callable[[BenchResult], None] | None = None,
                 **measure_options) -> list[BenchResult]:
    """Benchmark each model at every (context, batch), with its MHA counterfactual in the same rounds
    unless ``counterfactual`` is false; returns the rows (stored unless told not to).

    Raises ``UnknownModel`` before running anything when a model id is not in the store.
    ``measure_options`` go to ``runner.measure`` (``rotate_bytes``, ``copy_bytes``, ``backend``,
    ``memory_bytes``).
    """
    device = device or local_device()
    dtype = dtype or default_dtype(device)
    contexts, batches = list(contexts), list(batches)
    geometries = {}
    with session_scope(engine) as session:
        for model_id in model_ids:
            model = session.get(HubModel, model_id)
            if model is None:
                raise UnknownModel(f"no stored model {model_id!r}")
            geometries[model_id] = current_geometry(session, model)[1]
    rows = []
    for model_id, geom in geometries.items():
        for context in contexts:
            for batch in batches:
                row = _bench_one(model_id, geom, context, batch, dtype, device, counterfactual, peers=peers,
                                 warmup=warmup, repeats=repeats, **measure_options)
                if store_results:
                    store.save(engine, [row])
                if on_result is not None:
                    on_result(row)
                rows.append(row)
    return rows


def _bench_one(model_id, geom, context, batch, dtype, device, counterfactual, **options) -> BenchResult:
    if geom is None:
        return store.unrun_row(model_id, "skipped", "no parsed geometry for the current config", device, dtype,
                               batch, context)
    try:
        shape = attention_shape(geom, batch, context)
        mha = counterfactual_shape(geom, batch, context) if counterfactual else None
    except SkipShape as exc:
        return store.unrun_row(model_id, "skipped", str(exc), device, dtype, batch, context)
    try:
        case = measure(shape, dtype, device, geometry=geom, counterfactual=mha, **options)
    except DoesNotFit as exc:  # a shape this device cannot hold is not a failure of the kernel
        return store.unrun_row(model_id, "skipped", str(exc), device, dtype, batch, context, shape)
    except (RuntimeError, ValueError, MemoryError) as exc:  # e.g. out of memory: record it, go on
        log.warning("benchmark of %s %s failed: %s", model_id, shape.label(), exc)
        return store.unrun_row(model_id, "failed", f"{type(exc).__name__}: {exc}", device, dtype, batch, context,
                               shape)
    return store.result_row(case, device, model_id)


def notable_unbenchmarked(engine: Engine, device_name: str, min_downloads: int, limit: int) -> list[str]:
    """Notable models with a current config and no result on this device, newest first."""
    with session_scope(engine) as session:
        done = store.benchmarked_models(session, device_name)
        query = (sa.select(HubModel.id)
                 .where(HubModel.current_revision_id.is_not(None),
                        sa.or_(HubModel.downloads >= min_downloads, HubModel.source == "snapshot"))
                 .order_by(HubModel.first_seen_at.desc(), HubModel.id))
        picked = []
        for (model_id,) in session.execute(query):
            if model_id not in done:
                picked.append(model_id)
                if len(picked) >= limit:
                    break
    return picked


def bench_new_models(engine: Engine, settings: Settings, limit: int | None = None) -> list[BenchResult]:
    """The scheduled job: benchmark up to ``limit`` notable models not yet benchmarked here."""
    device = local_device()
    model_ids = notable_unbenchmarked(engine, device.name, settings.bench_min_downloads,
                                      settings.bench_job_limit if limit is None else limit)
    if not model_ids:
        return []
    log.info("benchmarking %d new model(s) on %s", len(model_ids), device.name)
    return bench_models(engine, model_ids, contexts=[settings.bench_context], batches=[settings.bench_batch],
                        device=device, repeats=settings.bench_repeats)
