"""The implementations our kernel is compared with, behind one calling convention.

Every peer takes our inputs, ``(q, k_cache, v_cache, cache_seqlens)`` in FlashAttention's layout
with every sequence the same length (benchmarks run uniform batches), and returns ``(batch, H, d)``.
A peer may need the caches in another layout: ``prepare`` builds that once, outside the timed
call, and ``run`` takes what ``prepare`` returned — so layout conversion is never timed.

- ``sdpa_gqa``: ``F.scaled_dot_product_attention(..., enable_gqa=True)`` (PyTorch ≥ 2.5) on
  ``(b, K, L, d)`` views of our caches — the same memory, strided.
- ``repeat_kv_sdpa``: transformers' ``repeat_kv`` (expand + reshape, materialising G copies of K
  and V) then plain SDPA, as HF does when ``enable_gqa`` cannot be used, on the same views.
- ``sdpa_gqa_bkld`` and ``repeat_kv_sdpa_bkld``: the same two calls on contiguous ``(b, K, L, d)``
  copies of the caches, the layout Hugging Face transformers keeps (their best case; the copies
  are made once, outside the timing).
- ``flash_attn``: ``flash_attn_with_kvcache`` when the ``flash_attn`` package is installed (CUDA).
- ``flashinfer``: ``flashinfer.decode.single_decode_with_kv_cache`` per sequence when installed (CUDA, batch 1).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Peer:
    name: str
    description: str
    prepare: Callable[..., Any]  # (q, k_cache, v_cache, cache_seqlens) -> prepared inputs
    run: Callable[[Any], torch.Tensor]  # prepared inputs -> out (batch, H, d)


def _uniform_length(cache_seqlens) -> int:
    lengths = set(cache_seqlens.tolist())
    if len(lengths) != 1:
        raise ValueError(f"peers take batches of equal lengths, got {sorted(lengths)}")
    return lengths.pop()


def _bkld_views(q, k_cache, v_cache, cache_seqlens):
    length = _uniform_length(cache_seqlens)
    return q, k_cache[:, :length].transpose(1, 2), v_cache[:, :length].transpose(1, 2)


def _bkld_contiguous(q, k_cache, v_cache, cache_seqlens):
    q, k, v = _bkld_views(q, k_cache, v_cache, cache_seqlens)
    return q, k.contiguous(), v.contiguous()


def _sdpa_gqa(prepared):
    q, k, v = prepared
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True).squeeze(2)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """transformers' ``repeat_kv``: (b, K, L, d) -> (b, K·n_rep, L, d), a materialised copy."""
    b, kv_heads, length, d = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    expanded = hidden_states[:, :, None, :, :].expand(b, kv_heads, n_rep, length, d)
    return expanded.reshape(b, kv_heads * n_rep, length, d)


def _repeat_kv_sdpa(prepared):
    q, k, v = prepared
    group = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q.unsqueeze(2), repeat_kv(k, group), repeat_kv(v, group)).squeeze(2)


def _flash_attn_prepare(q, k_cache, v_cache, cache_seqlens):
    return q.unsqueeze(1), k_cache, v_cache, cache_seqlens


def _flash_attn(prepared):
    from flash_attn import flash_attn_with_kvcache

    q, k_cache, v_cache, cache_seqlens = prepared
    return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens).squeeze(1)


def _flashinfer_prepare(q, k_cache, v_cache, cache_seqlens):
    length = _uniform_length(cache_seqlens)
    if q.shape[0] != 1:
        raise ValueError("the flashinfer peer runs single-sequence decode (batch 1)")
    return q[0], k_cache[0, :length], v_cache[0, :length]


def _flashinfer(prepared):
    import flashinfer

    q, k, v = prepared
    return flashinfer.single_decode_with_kv_cache(q, k, v, kv_layout="NHD", use_tensor_cores=True).unsqueeze(0)


def available_peers(device: torch.device, batch: int = 1) -> list[Peer]:
    """The peers that can run on ``device`` in this environment."""
    peers = [
        Peer("sdpa_gqa", "SDPA enable_gqa=True on (b,K,L,d) views of the same cache", _bkld_views, _sdpa_gqa),
        Peer("repeat_kv_sdpa", "transformers repeat_kv + SDPA on (b,K,L,d) views of the same cache",
             _bkld_views, _repeat_kv_sdpa),
        Peer("sdpa_gqa_bkld", "SDPA enable_gqa=True on a contiguous (b,K,L,d) copy (HF layout)",
             _bkld_contiguous, _sdpa_gqa),
        Peer("repeat_kv_sdpa_bkld", "transformers repeat_kv + SDPA on a contiguous (b,K,L,d) copy (HF layout)",
             _bkld_contiguous, _repeat_kv_sdpa),
    ]
    if device.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        peers.append(Peer("flash_attn", "flash_attn_with_kvcache", _flash_attn_prepare, _flash_attn))
    if device.type == "cuda" and batch == 1 and importlib.util.find_spec("flashinfer") is not None:
        peers.append(Peer("flashinfer", "flashinfer single_decode_with_kv_cache (tensor cores)",
                          _flashinfer_prepare, _flashinfer))
    return peers
