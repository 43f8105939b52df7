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

MLA peers (``available_mla_peers``) take ``(q, latent_cache, cache_seqlens)`` as ``mla_decode`` does
and return ``(batch, H, kv_lora_rank)``:

- ``mla_matmul``: the naive absorbed form in PyTorch matmuls, as DeepSeek's reference inference code
  writes it (scores for every cached token materialised, a float32 softmax, a second matmul);
- ``flash_mla``: DeepSeek's ``flash_mla_with_kvcache`` when the ``flash_mla`` package is installed
  (CUDA; pages of 64 tokens, made as a view of our cache);
- ``flashinfer_mla``: ``flashinfer.mla.BatchMLAPagedAttentionWrapper`` when installed (CUDA; the latent
  split into its compressed-KV and rope parts, copied once outside the timing).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Peer:
    name: str
    description: str
    prepare: Callable[..., Any]  # (q, k_cache, v_cache, cache_seqlens) -> prepared inputs
    run: Callable[[Any], torch.Tensor]  # prepared inputs -> out (batch, H, d)
    # Bytes the peer allocates for one input tuple beyond our inputs (its prepared copies plus what a
    # call materialises), so a benchmark can leave out a peer that would not fit; an estimate.
    scratch: Callable[..., int] = lambda *inputs: 0


def _uniform_length(cache_seqlens) -> int:
    lengths = set(cache_seqlens.tolist())
    if len(lengths) != 1:
        raise ValueError(f"peers take batches of equal lengths, got {sorted(lengths)}")
    return lengths.pop()


def _bkld_views(q, k_cache, v_cache, cache_seqlens):
    length = _uniform_length(cache_seqlens)
    return q, k_cache[:, :length].transpose(1, 2), v_cache[:, :length].transpose(1, 2)


def _cache_bytes(q, k_cache, v_cache, cache_seqlens):
    return k_cache.nbytes + v_cache.nbytes


def _repeated_bytes(q, k_cache, v_cache, cache_seqlens):  # G copies of K and V
    return (k_cache.nbytes + v_cache.nbytes) * (q.shape[1] // k_cache.shape[2])


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
             _bkld_views, _repeat_kv_sdpa, _repeated_bytes),
        Peer("sdpa_gqa_bkld", "SDPA enable_gqa=True on a contiguous (b,K,L,d) copy (HF layout)",
             _bkld_contiguous, _sdpa_gqa, _cache_bytes),
        Peer("repeat_kv_sdpa_bkld", "transformers repeat_kv + SDPA on a contiguous (b,K,L,d) copy (HF layout)",
             _bkld_contiguous, _repeat_kv_sdpa, lambda *inputs: _cache_bytes(*inputs) + _repeated_bytes(*inputs)),
    ]
    if device.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        peers.append(Peer("flash_attn", "flash_attn_with_kvcache", _flash_attn_prepare, _flash_attn))
    if device.type == "cuda" and batch == 1 and importlib.util.find_spec("flashinfer") is not None:
        peers.append(Peer("flashinfer", "flashinfer single_decode_with_kv_cache (tensor cores)",
                          _flashinfer_prepare, _flashinfer))
    return peers


# -- MLA --------------------------------------------------------------------------------------------

FLASH_PAGE = 64  # FlashMLA's page size; FlashInfer is given the same pages


def _latent_prepare(q, latent_cache, cache_seqlens):
    length = _uniform_length(cache_seqlens)
    return q, latent_cache[:, :length]


def _mla_matmul(rank, prepared):
    q, latent = prepared
    scores = torch.matmul(q, latent.transpose(1, 2)) * q.shape[-1] ** -0.5  # (b, H, L): every score kept
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(weights, latent[..., :rank])


def _paged(latent_cache, cache_seqlens):
    """Our contiguous ``(b, L, width)`` cache as pages of FLASH_PAGE tokens (a view) and their table."""
    length = _uniform_length(cache_seqlens)
    b, capacity, width = latent_cache.shape
    if capacity % FLASH_PAGE:
        raise ValueError(f"paged MLA peers need the cache length to be a multiple of {FLASH_PAGE}, got {capacity}")
    pages = latent_cache.view(b * capacity // FLASH_PAGE, FLASH_PAGE, width)
    table = torch.arange(b * capacity // FLASH_PAGE, dtype=torch.int32, device=latent_cache.device).view(b, -1)
    return pages, table, length


def _flash_mla_prepare(rank, q, latent_cache, cache_seqlens):
    from flash_mla import get_mla_metadata

    pages, table, _ = _paged(latent_cache, cache_seqlens)
    # Older releases return (tile metadata, splits); newer ones (scheduler state, None). Both are
    # passed on as they came.
    metadata, splits = get_mla_metadata(cache_seqlens, q.shape[1], 1)
    return q.unsqueeze(1), pages.unsqueeze(2), table, cache_seqlens, rank, metadata, splits


def _flash_mla(prepared):
    from flash_mla import flash_mla_with_kvcache

    q, pages, table, seqlens, rank, metadata, splits = prepared
    return flash_mla_with_kvcache(q, pages, table, seqlens, rank, metadata, splits, causal=False)[0].squeeze(1)


def _flashinfer_mla_prepare(rank, q, latent_cache, cache_seqlens):
    import flashinfer

    pages, table, length = _paged(latent_cache, cache_seqlens)
    b, heads, width = q.shape
    device = q.device
    wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(torch.empty(128 * 2**20, dtype=torch.int8, device=device))
    per_seq = table.shape[1]
    wrapper.plan(torch.arange(b + 1, dtype=torch.int32, device=device),
                 torch.arange(b + 1, dtype=torch.int32, device=device) * per_seq, table.flatten(),
                 cache_seqlens, heads, rank, width - rank, FLASH_PAGE, False, width ** -0.5, q.dtype, pages.dtype)
    return (wrapper, q[..., :rank].contiguous(), q[..., rank:].contiguous(), pages[..., :rank].contiguous(),
            pages[..., rank:].contiguous())


def _flashinfer_mla(prepared):
    wrapper, q_nope, q_pe, ckv, kpe = prepared
    return wrapper.run(q_nope, q_pe, ckv, kpe)


def available_mla_peers(device: torch.device, head_dim_v: int) -> list[Peer]:
    """The MLA peers that can run on ``device`` here, for a latent whose first ``head_dim_v`` elements are values."""
    def scores_bytes(q, latent_cache, cache_seqlens):  # float32 scores and their softmax
        return 2 * 4 * q.shape[0] * q.shape[1] * latent_cache.shape[1]

    peers = [Peer("mla_matmul", "naive absorbed MLA: q·latentᵀ, float32 softmax, ·latent[:, :rank] (PyTorch matmuls)",
                  _latent_prepare, partial(_mla_matmul, head_dim_v), scores_bytes)]
    if device.type == "cuda" and importlib.util.find_spec("flash_mla") is not None:
        peers.append(Peer("flash_mla", "FlashMLA flash_mla_with_kvcache (pages of 64)",
                          partial(_flash_mla_prepare, head_dim_v), _flash_mla))
    if device.type == "cuda" and importlib.util.find_spec("flashinfer") is not None:
        peers.append(Peer("flashinfer_mla", "FlashInfer BatchMLAPagedAttentionWrapper (pages of 64)",
                          partial(_flashinfer_mla_prepare, head_dim_v), _flashinfer_mla,
                          lambda q, latent_cache, seqlens: latent_cache.nbytes))
    return peers
