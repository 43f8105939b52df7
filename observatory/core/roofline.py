"""Roofline estimates of decode cost: pure, no I/O.

One decode step reads every cached token of every KV layer once per sequence (and, for the whole
step, every weight once per step) and does a few FLOPs per byte. The estimate is

    time = calls × per_call_s + max(bytes / (bandwidth × efficiency), flops / peak_flops)

- **bytes**: the KV cache at ``context`` for ``batch`` sequences, from ``observatory.core.kvcache``
  (sliding/chunked layers capped at their window); plus the weights when a parameter count is
  given. Query/output traffic is left out: it is ``1/context`` of the cache traffic.
- **flops**: per cached token, a GQA layer with H query and K KV heads does ``2·H·(d + d_v)``
  (q·k and p·v), i.e. ``2·G`` FLOPs per cached element; an MLA layer in its absorbed form does
  ``2·H·(2·kv_lora_rank + rope)`` on a latent of ``kv_lora_rank + rope`` elements. So decode
  attention's arithmetic intensity is about G FLOP/byte for bf16 GQA and about 2H for MLA.
  The whole step adds ``2 × active parameters`` FLOPs per sequence.
- **per_call_s**: a fixed cost per attention call (one call per KV layer). Measured decode-attention
  kernels never finish in under ~8.4–11.5 µs per call on H100/H200/B200 (aiconfigurator's silicon
  tables), so the default is 10 µs; without it a batch-1 MQA call would be predicted at a few µs.
  The whole-step estimate adds no per-kernel cost for the weight GEMMs.
- **efficiency**: the fraction of spec bandwidth a kernel reaches; 1.0 (a true ceiling) by
  default. NVIDIA's aiconfigurator uses 0.8 (``AIC_BANDWIDTH_EFFICIENCY``) plus 3 µs per memory op;
  the best decode kernels reach 0.85–0.93 of spec when a call reads ≥ 0.5 GB.

``bound`` is "compute" when the compute time exceeds the memory time, else "memory"; a machine
with no published matrix throughput (Apple silicon, a CPU measured by its copy bandwidth) is
treated as memory-bound. The token-rate ceiling is ``batch / time``: for attention alone it is
what attention would allow if nothing else ran.

Memory: ``cache_fits`` says the KV cache alone fits; ``fits`` says the weights *and* the cache
fit (None when the parameter count is unknown, so it cannot be judged). A device with two memory
tiers (SRAM-first chips: on-chip SRAM and, on some, off-chip DRAM) holds the bytes fastest tier
first and reads the tiers concurrently (``core.tiers``); ``bytes_by_tier`` says where they sat.
``devices`` spreads one model over that many identical devices with ideal tensor parallelism
(memory and bandwidth add up); ``devices_for_weights`` is the fewest that hold the weights at all.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Iterable, Protocol

from observatory.core.geometry import Geometry
from observatory.core.kvcache import (
    cache_bytes,
    dtype_bytes,
    max_sequences,
    mha_counterfactual,
)
from observatory.core.tiers import place, read_seconds, tiers_of

DEFAULT_PER_CALL_S = 10e-6  # measured floor per decode-attention call: 8.4–11.5 µs (anchors §3.10)
AIC_BANDWIDTH_EFFICIENCY = 0.8  # aiconfigurator's mem_bw_empirical_scaling_factor, for callers who want it
CONTEXTS = (4096, 32768, 131072)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Machine(Protocol):
    """What the roofline needs of a device: ``hardware.Device`` and ``MeasuredMachine`` both fit.
    A device may also carry ``memory_tiers`` (``core.tiers.MemoryTier``, any order); without them
    it has one tier of ``memory_bytes`` at ``bandwidth_bytes_per_s``."""

    memory_bytes: int | None
    bandwidth_bytes_per_s: float

    def peak_flops(self, dtype: str = "bf16") -> float | None: ...


@dataclass(frozen=True)
class MeasuredMachine:
    """A device known only by measurement, e.g. the CPU a spot-benchmark ran on."""

    name: str
    bandwidth_bytes_per_s: float
    memory_bytes: int | None = None
    flops: float | None = None

    def peak_flops(self, dtype: str = "bf16") -> float | None:
        return self.flops


@dataclass(frozen=True)
class DecodeEstimate:
    context: int
    batch: int
    kv_dtype: str
    kv_bytes: int
    attention_flops: float
    weight_bytes: int  # 0 when no parameter count was given
    weight_flops: float
    bytes: int
    flops: float
    intensity: float  # FLOP per byte
    bound: str  # "memory" | "compute"
    calls: int
    memory_s: float
    compute_s: float
    time_s: float
    tokens_per_s: float
    devices: int  # identical devices the step is spread over (ideal tensor parallelism)
    cache_fits: bool | None  # the KV cache alone within the devices' memory; None when memory is unknown
    fits: bool | None  # weights and cache together; None when memory or the parameter count is unknown
    bytes_by_tier: dict[str, int] | None = None  # where the bytes sat, fastest tier first (one tier: all of them)

    def to_dict(self) -> dict:
        return asdict(self)


def attention_flops(geom: Geometry, context: int, batch: int = 1) -> float:
    """FLOPs of one decode step's attention over ``context`` cached tokens, all KV layers."""
    if context < 0 or batch < 1:
        raise ValueError(f"context must be >= 0 and batch >= 1, got {context}, {batch}")
    total = sum(per_token * (context if cap is None else min(context, cap))
                for cap, per_token in geom.memoised("_flop_terms", lambda: _flop_terms(geom)))
    return total * batch


def _flop_terms(geom: Geometry) -> tuple[tuple[int | None, float], ...]:
    """``(cap, FLOPs per cached token)`` summed over the layers sharing a cap: the per-layer walk
    done once per geometry, not once per device and context."""
    terms: dict[int | None, float] = {}
    for i, (elements, cap) in enumerate(zip(geom.layer_kv_elements(), geom.layer_windows())):
        if not elements:
            continue
        heads = geom.query_heads_per_layer[i] if geom.query_heads_per_layer else geom.num_query_heads
        if geom.mla is not None:
            rank, rope = geom.mla.kv_lora_rank, geom.mla.qk_rope_head_dim
            flops = 2.0 * heads * (2 * rank + rope)
        else:
            kv_heads = geom.kv_heads_per_layer[i] if geom.kv_heads_per_layer else geom.num_kv_heads
            # 2·G FLOPs per cached element (q·k, then p·v); a shared K = V element is read by both products
            flops = (4.0 if geom.k_equals_v else 2.0) * heads / kv_heads * elements
        terms[cap] = terms.get(cap, 0.0) + flops
    return tuple(terms.items())


def decode_estimate(geom: Geometry, machine: Machine, context: int, batch: int = 1, kv_dtype: str = "bf16", *,
                    params: float | None = None, active_params: float | None = None,
                    weight_dtype: str = "bf16", per_call_s: float = DEFAULT_PER_CALL_S,
                    efficiency: float = 1.0, devices: int = 1) -> DecodeEstimate:
    """Roofline of one decode step: attention alone, or the whole step when ``params`` is given.

    ``active_params`` (MoE) sets the FLOPs; all ``params`` are read and must fit in memory.
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be a whole number >= 1, got {devices!r}")
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    if per_call_s < 0:
        raise ValueError(f"per_call_s must be >= 0, got {per_call_s}")
    if params is not None and params <= 0 or active_params is not None and active_params <= 0:
        raise ValueError("params and active_params must be positive")
    kv = cache_bytes(geom, context, batch, kv_dtype)
    attn = attention_flops(geom, context, batch)
    weights = int(params * dtype_bytes(weight_dtype)) if params else 0
    weight_flops = 2.0 * (active_params or params or 0) * batch
    total_bytes, total_flops = kv + weights, attn + weight_flops
    tiers = tiers_of(machine)
    memory_s = read_seconds(total_bytes, tiers, devices, efficiency)
    peak = machine.peak_flops(_compute_dtype(kv_dtype))
    compute_s = total_flops / (peak * devices) if peak else 0.0
    memory = None if machine.memory_bytes is None else machine.memory_bytes * devices
    calls = geom.kv_layers
    time_s = calls * per_call_s + max(memory_s, compute_s)
    return DecodeEstimate(
        context=context, batch=batch, kv_dtype=kv_dtype, kv_bytes=kv, attention_flops=attn,
        weight_bytes=weights, weight_flops=weight_flops, bytes=total_bytes, flops=total_flops,
        intensity=total_flops / total_bytes if total_bytes else 0.0,
        bound="compute" if compute_s > memory_s else "memory", calls=calls, memory_s=memory_s,
        compute_s=compute_s, time_s=time_s, tokens_per_s=batch / time_s if time_s else float("inf"),
        devices=devices, cache_fits=None if memory is None else kv <= memory,
        fits=None if memory is None or not params else total_bytes <= memory,
        bytes_by_tier={t.name: b for t, b in zip(tiers, place(total_bytes, tiers, devices))})


def devices_for_weights(machine: Machine, params: float | None, weight_dtype: str = "bf16") -> int | None:
    """The fewest identical devices whose memory holds the weights (nothing else); None when
    the parameter count or the device's memory is unknown."""
    if not params or not machine.memory_bytes:
        return None
    return max(1, math.ceil(params * dtype_bytes(weight_dtype) / machine.memory_bytes))


def _compute_dtype(kv_dtype: str) -> str:
    return "fp8" if kv_dtype == "fp8" else "bf16"


def max_batch(geom: Geometry, machine: Machine, context: int, kv_dtype: str = "bf16", *,
              params: float | None = None, weight_dtype: str = "bf16") -> int | None:
    """Most sequences of ``context`` tokens whose cache fits beside the weights (if known).

    None when the device's memory is unknown or the model keeps no per-token cache; 0 when the
    weights alone do not fit.
    """
    if machine.memory_bytes is None:
        return None
    free = machine.memory_bytes - (int(params * dtype_bytes(weight_dtype)) if params else 0)
    if free < 0:
        return 0
    return max_sequences(geom, free, context, kv_dtype)


def sweep(geom: Geometry, machine: Machine, contexts: Iterable[int] = CONTEXTS, batches: Iterable[int] = BATCHES,
          kv_dtype: str = "bf16", **options) -> list[dict]:
    """Estimates at each (context, batch), with the MHA counterfactual side by side.

    Each row: ``context``, ``batch``, ``gqa`` and ``mha`` (``DecodeEstimate.to_dict()``), and
    ``speedup`` = MHA time / actual time. ``options`` go to ``decode_estimate``.
    """
    counter = mha_counterfactual(geom)
    rows = []
    for context in contexts:
        for batch in batches:
            actual = decode_estimate(geom, machine, context, batch, kv_dtype, **options)
            mha = decode_estimate(counter, machine, context, batch, kv_dtype, **options)
            rows.append({"context": context, "batch": batch, "gqa": actual.to_dict(), "mha": mha.to_dict(),
                         "speedup": mha.time_s / actual.time_s if actual.time_s else None})
    return rows


def ridge_point(machine: Machine, dtype: str = "bf16") -> float | None:
    """FLOP per byte at which a kernel stops being memory-bound: dense throughput ÷ bandwidth."""
    peak = machine.peak_flops(dtype)
    return peak / machine.bandwidth_bytes_per_s if peak else None


def ridge_points(devices: Iterable) -> list[dict]:
    """Per catalogued device, by release date: the data behind the hardware page's ridge chart."""
    rows = [{"id": d.id, "name": d.name, "vendor": d.vendor, "released": d.released.isoformat(),
             "bandwidth_bytes_per_s": d.bandwidth_bytes_per_s, "bf16_dense_flops": d.bf16_dense_flops,
             "ridge_bf16": ridge_point(d, "bf16"),
             "ridge_fp8": d.fp8_dense_flops / d.bandwidth_bytes_per_s if d.fp8_dense_flops else None}
            for d in devices]
    return sorted(rows, key=lambda row: (row["released"], row["id"]))


def one_layer(geom: Geometry) -> Geometry:
    """One full-attention KV layer with the model's heads: the unit a decode-attention call covers.

    Spot-benchmarks time one such call, so their prediction is ``decode_estimate(one_layer(g), ...)``.
    Per-layer head lists keep their first KV layer's counts.
    """
    first = next((i for i, elements in enumerate(geom.layer_kv_elements()) if elements), None)
    if first is None:
        raise ValueError("the model has no layer with a per-token KV cache")
    layer = replace(
        geom, num_layers=1, kv_layers=1, layer_kinds=("full",), sliding_layers=0, chunked=False,
        kv_heads_per_layer=geom.kv_heads_per_layer[first:first + 1] if geom.kv_heads_per_layer else None,
        query_heads_per_layer=geom.query_heads_per_layer[first:first + 1] if geom.query_heads_per_layer else None)
    return replace(layer, kv_elements_per_token=sum(layer.layer_kv_elements()))
