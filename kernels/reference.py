"""Float64 reference for decode attention: slow, obvious, and what every implementation is tested against.

It spells the definition out with nothing clever: gather each sequence's tokens (through the block
table when paged), repeat every KV head G times exactly as ``repeat_interleave`` does, and apply
softmax(q·kᵀ·scale)·v in float64.
"""

from __future__ import annotations

import torch

from kernels.api import check_inputs, default_scale


def cached_tokens(cache, seq: int, length: int, block_table=None):
    """The first ``length`` cached tokens of sequence ``seq`` as ``(length, K, d)``."""
    if block_table is None:
        return cache[seq, :length]
    block_size = cache.shape[1]
    positions = torch.arange(length)
    blocks = block_table[seq].long().cpu()[positions // block_size]
    return cache[blocks.to(cache.device), (positions % block_size).to(cache.device)]


def gqa_decode_reference(q, k_cache, v_cache, cache_seqlens, block_table=None, scale=None):
    """Return ``(out, lse)`` in float64 on the CPU: ``out`` ``(batch, H, d)``, ``lse`` ``(batch, H)``."""
    shape = check_inputs(q, k_cache, v_cache, cache_seqlens, block_table, scale)
    scale = default_scale(shape.head_dim) if scale is None else float(scale)
    out = torch.zeros(shape.batch, shape.num_heads, shape.head_dim, dtype=torch.float64)
    lse = torch.full((shape.batch, shape.num_heads), float("-inf"), dtype=torch.float64)
    for seq, length in enumerate(cache_seqlens.tolist()):
        if length == 0:
            continue  # nothing to attend to: zeros and the empty sum's -inf
        keys = cached_tokens(k_cache, seq, length, block_table).double().cpu()
        values = cached_tokens(v_cache, seq, length, block_table).double().cpu()
        keys = keys.repeat_interleave(shape.group_size, dim=1)  # (length, H, d): query head h uses KV head h // G
        values = values.repeat_interleave(shape.group_size, dim=1)
        scores = torch.einsum("hd,lhd->hl", q[seq].double().cpu(), keys) * scale
        lse[seq] = torch.logsumexp(scores, dim=-1)
        out[seq] = torch.einsum("hl,lhd->hd", torch.softmax(scores, dim=-1), values)
    return out, lse
