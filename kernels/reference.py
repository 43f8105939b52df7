"""Float64 reference for decode attention: slow, obvious, and what every implementation is tested against.

It spells the definition out with nothing clever: gather each sequence's tokens (through the block
table when paged), repeat every KV head G times exactly as ``repeat_interleave`` does, and apply
softmax(q·kᵀ·scale)·v in float64.
"""

from __future__ import annotations

import torch

from kernels.api import check_inputs, default_scale, latent_views


def cached_tokens(cache, seq: int, length: int, block_table=None):
    """The first ``length`` cached tokens of sequence ``seq`` as ``(length, K, d)``."""
    if block_table is None:
        return cache[seq, :length]
    block_size = cache.shape[1]
    positions = torch.arange(length)
    blocks = block_table[seq].long().cpu()[positions // block_size]
    return cache[blocks.to(cache.device), (positions % block_size).to(cache.device)]


def gqa_decode_reference(q, k_cache, v_cache, cache_seqlens, block_table=None, scale=None):
    """Return ``(out, lse)`` in float64 on the CPU: ``out`` ``(batch, H, d_v)``, ``lse`` ``(batch, H)``."""
    shape = check_inputs(q, k_cache, v_cache, cache_seqlens, block_table, scale)
    scale = default_scale(shape.head_dim) if scale is None else float(scale)
    out = torch.zeros(shape.batch, shape.num_heads, shape.head_dim_v, dtype=torch.float64)
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


def mla_decode_reference(q, latent_cache, cache_seqlens, block_table=None, scale=None, *, head_dim_v):
    """Absorbed MLA decode, spelled out on its own terms (not through the GQA reference), in float64.

    With ``c_t`` the latent row of token t (``kv_lora_rank + rope`` elements) and ``q_h`` query head
    h already in the latent space, ``s_ht = scale · q_h · c_t`` and ``out_h = Σ_t softmax_t(s_h) ·
    c_t[:head_dim_v]``: one cache row is both key and (its first ``head_dim_v`` elements) value.
    Returns ``(out, lse)``: ``(batch, H, head_dim_v)`` and ``(batch, H)``.
    """
    keys, values = latent_views(q, latent_cache, head_dim_v)
    shape = check_inputs(q, keys, values, cache_seqlens, block_table, scale)
    scale = default_scale(shape.head_dim) if scale is None else float(scale)
    out = torch.zeros(shape.batch, shape.num_heads, head_dim_v, dtype=torch.float64)
    lse = torch.full((shape.batch, shape.num_heads), float("-inf"), dtype=torch.float64)
    for seq, length in enumerate(cache_seqlens.tolist()):
        if length == 0:
            continue
        rows = cached_tokens(latent_cache, seq, length, block_table).double().cpu()  # (length, rank + rope)
        scores = q[seq].double().cpu() @ rows.T * scale  # (H, length)
        lse[seq] = torch.logsumexp(scores, dim=-1)
        out[seq] = torch.softmax(scores, dim=-1) @ rows[:, :head_dim_v]
    return out, lse
