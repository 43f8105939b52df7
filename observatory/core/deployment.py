"""Capacity as deployed: a model tensor-parallel over TP devices, its KV heads sharded or
replicated, MLA's latent replicated or kept per rank by data-parallel attention. Pure.

The rules are vLLM's; ``tests/unit/test_deployment.py`` quotes each one's source line (repository,
path, commit). Which are laws of head-sharded attention and which are vLLM's choices:

1. **KV heads per rank** = ``max(1, K // TP)`` (vLLM ``ModelConfig.get_num_kv_heads``). That a head
   is never split across ranks is a law of head-sharded attention: a head's softmax needs all of
   its dimensions on one rank. That every rank keeps *at least one* head is vLLM's choice: it
   replicates instead of splitting the sequence (its decode context parallelism is the opt-in
   alternative, not modelled here).
2. **Replicas** of each KV head = ``TP // K`` when TP >= K, else 1 (``QKVParallelLinear``). So a
   K = 8 model stores its cache twice at TP = 16, an MQA model eight times at TP = 8.
3. **What vLLM refuses**: H not divisible by TP (``verify_with_parallel_config``), and K that
   neither divides nor is divided by TP (``divide`` asserts). vLLM's choices; padding heads would
   lift both.
4. **MLA**: one latent per token per layer and no KV head to shard (``get_num_kv_heads`` returns 1
   for MLA), so under plain TP every rank holds the whole latent of every sequence: the cache is
   stored TP times over. A law of the latent under head-sharded TP.
5. **Data-parallel attention** (vLLM's data-parallel deployment for DeepSeek-style MLA, SGLang's
   DP attention): each rank runs attention for its own sequences, so their latent is stored
   once; the attention weights are then replicated on every rank while the experts and MLPs
   stay sharded. Offered for MLA models.
6. **Megatron-LM** divides the query groups by the TP degree (``divide(num_query_groups, TP)``):
   no replication at all, so TP must divide K. Not applicable to MLA.

Memory per rank is the device's (every tier); weights are bf16 by default and split evenly over
the ranks (vLLM shards every linear layer and the vocabulary; norms, and the K/V projections of
replicated heads, are small and left out). Nothing is reserved for activations or the runtime:
the figures are ceilings, as the single-device ones are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from observatory.core.geometry import Geometry
from observatory.core.kvcache import cache_bytes, dtype_bytes

TP_DEGREES = (1, 2, 4, 8, 16)
NODE_TP = 8  # GPUs in one NVLink node: the TP degree the trend asks about
TP_MODE, DP_ATTENTION = "tp", "dp_attention"


def kv_heads_per_rank(total_kv_heads: int, tp: int) -> int:
    """vLLM's KV heads on each rank (rule 1)."""
    _check_tp(tp)
    return max(1, total_kv_heads // tp)


def kv_head_replicas(total_kv_heads: int, tp: int) -> int:
    """How many ranks hold each KV head (rule 2)."""
    _check_tp(tp)
    return tp // total_kv_heads if tp >= total_kv_heads else 1


def layer_kv_heads(geom: Geometry) -> list[int]:
    """K of every layer that caches per-token K/V (per-layer lists respected); [] for MLA and
    models without KV layers."""
    if geom.mla is not None or geom.num_kv_heads is None:
        return []
    return [geom.kv_heads_per_layer[i] if geom.kv_heads_per_layer else geom.num_kv_heads
            for i, elements in enumerate(geom.layer_kv_elements()) if elements]


def max_even_tp(geom: Geometry) -> int | None:
    """The largest power-of-two TP degree whose ranks share every KV layer's heads evenly with no
    replication (it divides every layer's K); None for MLA (no heads to shard) and for models
    without KV layers."""
    ks = layer_kv_heads(geom)
    if not ks:
        return None
    common = math.gcd(*ks)
    return common & -common  # the largest power of two dividing the common factor


def fills_node(geom: Geometry, tp: int = NODE_TP) -> bool | None:
    """Whether a TP = ``tp`` node holds the cache without replication: every KV layer's K divisible
    by ``tp``, or MLA (with data-parallel attention). None without KV layers."""
    if geom.mla is not None:
        return geom.kv_layers > 0
    even = max_even_tp(geom)
    return None if even is None else even >= tp


def vllm_refusal(geom: Geometry, tp: int) -> str | None:
    """Why vLLM would not start this model at this TP degree (rule 3), or None."""
    _check_tp(tp)
    heads = geom.num_query_heads
    if heads and heads % tp:
        return f"{heads} query heads do not divide by TP = {tp}"
    for k in sorted(set(layer_kv_heads(geom))):
        if k % tp and tp % k:
            return f"{k} KV heads neither divide by nor divide TP = {tp}"
    return None


def megatron_divisible(geom: Geometry, tp: int) -> bool | None:
    """Megatron-LM's rule 6: every layer's query groups (K) divide by TP. None for MLA and
    attention-free models, where it does not apply."""
    _check_tp(tp)
    ks = layer_kv_heads(geom)
    return all(k % tp == 0 for k in ks) if ks else None


def rank_geometry(geom: Geometry, tp: int) -> Geometry:
    """The cache one rank holds per sequence under plain TP: K_local = max(1, K // TP) heads per
    layer; MLA's whole latent (rule 4)."""
    _check_tp(tp)
    if geom.mla is not None or geom.num_kv_heads is None:
        return geom
    per_layer = (tuple(kv_heads_per_rank(k, tp) for k in geom.kv_heads_per_layer)
                 if geom.kv_heads_per_layer else None)
    local = replace(geom, num_kv_heads=kv_heads_per_rank(geom.num_kv_heads, tp), kv_heads_per_layer=per_layer)
    return replace(local, kv_elements_per_token=sum(local.layer_kv_elements()))


@dataclass(frozen=True)
class Layout:
    """One model at one TP degree, in one attention mode."""

    tp: int
    mode: str  # TP_MODE | DP_ATTENTION
    kv_heads_per_rank: int | None  # the most KV heads one rank holds in a layer; None for MLA
    replicas: int | None  # the most ranks any one KV head (or MLA's latent) is stored on
    copies: float | None  # KV bytes the TP group stores per token ÷ the model's own bytes per token
    rank_bytes_per_token: int | None  # what one rank caches per token of one of its sequences, all KV layers
    # (these three are None where vLLM refuses the degree: there is no layout to describe)
    vllm_refusal: str | None
    megatron_divisible: bool | None

    def to_dict(self) -> dict:
        return {"tp": self.tp, "mode": self.mode, "kv_heads_per_rank": self.kv_heads_per_rank,
                "replicas": self.replicas, "copies": self.copies, "rank_bytes_per_token": self.rank_bytes_per_token,
                "vllm_refusal": self.vllm_refusal, "megatron_divisible": self.megatron_divisible}


def layout(geom: Geometry, tp: int, mode: str = TP_MODE, kv_dtype: str = "bf16") -> Layout:
    """Heads, replicas and bytes per rank of ``geom`` at TP = ``tp`` (rules 1-6)."""
    if mode not in (TP_MODE, DP_ATTENTION):
        raise ValueError(f"mode must be {TP_MODE!r} or {DP_ATTENTION!r}, got {mode!r}")
    if mode == DP_ATTENTION and geom.mla is None:
        raise ValueError("data-parallel attention is offered for MLA models only")
    width = dtype_bytes(kv_dtype)
    own = geom.kv_elements_per_token * width
    refusal = vllm_refusal(geom, tp)
    if refusal is not None:
        return Layout(tp, mode, None, None, None, None, refusal, megatron_divisible(geom, tp))
    if geom.mla is not None:
        replicas = 1 if mode == DP_ATTENTION else tp
        return Layout(tp, mode, None, replicas, float(replicas) if own else 0.0, own, None, None)
    local = rank_geometry(geom, tp)
    ks = layer_kv_heads(geom)
    rank = local.kv_elements_per_token * width
    return Layout(tp, mode, max((kv_heads_per_rank(k, tp) for k in ks), default=None),
                  max((kv_head_replicas(k, tp) for k in ks), default=1),
                  rank * tp / own if own else 0.0, rank, None, megatron_divisible(geom, tp))


def replication_starts(geom: Geometry, degrees: Sequence[int] = TP_DEGREES) -> dict | None:
    """The first TP degree at which plain TP stores the cache more than once, and how many times;
    None when no degree in ``degrees`` replicates (or the model keeps no per-token cache)."""
    for tp in degrees:
        here = layout(geom, tp)
        if here.copies is not None and here.copies > 1:
            return {"tp": tp, "copies": here.copies}
    return None


def replication_sentence(geom: Geometry, degrees: Sequence[int] = TP_DEGREES) -> str:
    """One line for a person: where replication starts, and where vLLM stops (the model page says
    it under its table)."""
    if not geom.kv_elements_per_token:
        return "This model keeps no per-token KV cache: tensor parallelism stores nothing twice."
    layouts = [layout(geom, tp) for tp in degrees]
    allowed = [lay for lay in layouts if lay.copies is not None]
    refused = [lay for lay in layouts if lay.copies is None]
    limit = (f" vLLM refuses TP = {_listing([lay.tp for lay in refused])} ({refused[0].vllm_refusal})."
             if refused else "")
    start = replication_starts(geom, degrees)
    if start is None:
        reach = allowed[-1].tp if allowed else None
        if reach is None:
            return f"vLLM cannot run this model at any of TP = {_listing(list(degrees))}.{limit}"
        if reach == 1:
            return f"On one device the cache is stored once.{limit}"
        return (f"Up to TP = {reach} every rank holds its own share of the KV heads: the cache is never stored "
                f"twice.{limit}")
    top = allowed[-1]
    times = _times(start["copies"])
    if geom.mla is not None:
        return (f"MLA's latent has no heads to shard: from TP = {start['tp']} plain tensor parallelism stores the "
                f"whole cache on every rank ({times} at TP = {start['tp']}, {_times(top.copies)} at TP = "
                f"{top.tp}); data-parallel attention stores it once.{limit}")
    first = f"From TP = {start['tp']} this model stores its KV {times}"
    if top.tp != start["tp"]:
        first += f" ({_times(top.copies)} at TP = {top.tp})"
    fewest = min(layer_kv_heads(geom))
    heads = "its one KV head" if fewest == 1 else f"{fewest} KV heads"
    return first + f": {heads} cannot be split over more ranks.{limit}"


def _listing(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _times(copies: float) -> str:
    whole = round(copies)
    if abs(copies - whole) > 1e-9:
        return f"{copies:.2f} times over"
    return {1: "once", 2: "twice"}.get(whole, f"{whole} times over")


# ---- capacity of a TP group ----------------------------------------------------------------------

@dataclass(frozen=True)
class GroupCapacity:
    tp: int
    mode: str
    weights_per_rank: int | None  # bytes; None when the parameter count (or, for DP attention, the
                                  # attention parameters) is unknown
    max_sequences: int | None  # concurrent sequences the group holds; 0: the weights alone do not fit;
                               # None: unknown (memory or parameters) or no per-token cache
    vllm_refusal: str | None

    def to_dict(self) -> dict:
        return {"tp": self.tp, "mode": self.mode, "weights_per_rank": self.weights_per_rank,
                "max_sequences": self.max_sequences, "vllm_refusal": self.vllm_refusal}


def weights_per_rank(params: float | None, tp: int, mode: str = TP_MODE, attention_params: float | None = None,
                     weight_dtype: str = "bf16") -> int | None:
    """Weight bytes on each rank: all of them split TP ways, or under data-parallel attention the
    attention weights whole on every rank and the rest split."""
    _check_tp(tp)
    if not params:
        return None
    width = dtype_bytes(weight_dtype)
    if mode == TP_MODE:
        return math.ceil(params * width / tp)
    if attention_params is None:
        return None
    return math.ceil(attention_params * width + (params - attention_params) * width / tp)


def group_capacity(geom: Geometry, memory_bytes: int | None, tp: int, context: int, mode: str = TP_MODE, *,
                   params: float | None = None, attention_params: float | None = None, kv_dtype: str = "bf16",
                   weight_dtype: str = "bf16") -> GroupCapacity:
    """Concurrent sequences of ``context`` tokens that ``tp`` devices of ``memory_bytes`` each hold
    beside the weights. Plain TP: every sequence has its share on every rank, so the group holds
    what one rank does. Data-parallel attention: each rank holds whole latents of its own
    sequences, so the group holds TP times one rank's count."""
    lay = layout(geom, tp, mode, kv_dtype)
    weights = weights_per_rank(params, tp, mode, attention_params, weight_dtype)
    per_sequence = cache_bytes(rank_geometry(geom, tp), context, 1, kv_dtype)
    return _fit(lay, weights, per_sequence, memory_bytes)


def _fit(lay: Layout, weights: int | None, per_sequence: int, memory_bytes: int | None) -> GroupCapacity:
    if memory_bytes is None or not per_sequence or weights is None or lay.vllm_refusal:
        return GroupCapacity(lay.tp, lay.mode, weights, None, lay.vllm_refusal)
    free = memory_bytes - weights
    fits = free // per_sequence if free > 0 else 0
    return GroupCapacity(lay.tp, lay.mode, weights, fits * lay.tp if lay.mode == DP_ATTENTION else fits,
                         lay.vllm_refusal)


def modes_for(geom: Geometry) -> tuple[str, ...]:
    return (TP_MODE, DP_ATTENTION) if geom.mla is not None else (TP_MODE,)


def capacity_table(geom: Geometry, devices: Iterable, context: int, *, params: float | None = None,
                   attention_params: float | None = None, kv_dtype: str = "bf16",
                   degrees: Sequence[int] = TP_DEGREES) -> dict:
    """Per device (anything with ``id``, ``name``, ``memory_bytes``) and TP degree: weights per rank
    and the most sequences of ``context`` tokens, for each attention mode the model offers; with
    the layouts and the replication sentence."""
    modes = modes_for(geom)
    # what depends on the degree alone, once per (mode, degree); each device then costs a division
    per_degree = [(layout(geom, tp, mode, kv_dtype), weights_per_rank(params, tp, mode, attention_params),
                   cache_bytes(rank_geometry(geom, tp), context, 1, kv_dtype))
                  for mode in modes for tp in degrees]
    return {
        "context": context, "kv_dtype": kv_dtype, "degrees": list(degrees), "modes": list(modes),
        "layouts": [lay.to_dict() for lay, _, _ in per_degree],
        "replication": replication_starts(geom, degrees),
        "sentence": replication_sentence(geom, degrees),
        "rows": [{"hardware_id": d.id, "name": d.name, "memory_bytes": d.memory_bytes,
                  "cells": [_fit(lay, weights, sequence, d.memory_bytes).to_dict()
                            for lay, weights, sequence in per_degree]}
                 for d in devices],
    }


def _check_tp(tp: int) -> None:
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be a whole number >= 1, got {tp!r}")
