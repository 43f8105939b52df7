"""Grouped decode attention in PyTorch ops: the implementation for inputs neither the Triton kernel
(CUDA) nor the C kernel (``cpu_decode.c``: CPU, a C compiler, head_dim a multiple of 16) can take,
and a second, independent implementation the tests hold the others to.

Two ideas, both borrowed from the GPU kernels:

1. **Group the query heads of a KV head into the query-length axis** (FlashAttention's
   ``seqlenq_ngroups_swapped``): ``q`` ``(b, H, d)`` is viewed as ``(b, K, G, d)``, i.e. K "heads" each
   with G "query positions", and attended against the caches viewed as ``(b, K, L, d)``. Every K/V
   element is then read once per KV head instead of once per query head, and nothing is repeated
   or copied: the views are strided over the FlashAttention layout ``(b, L, K, d)``.
2. **Cut the sequence into chunks and merge them by log-sum-exp** (Flash-Decoding). In the
   ``(b, L, K, d)`` layout one KV head's rows are ``d`` elements every ``K·d``, so a head-by-head pass
   over a long sequence strides through memory K times. Cutting it into chunks of about
   ``CHUNK_BYTES`` per cache, processed head after head while the chunk is still in the core's L2,
   keeps the K passes local; the chunks also give the CPU threads independent work when
   ``batch × K`` is small.

The per-chunk attention is PyTorch's fused CPU flash-attention kernel, which also returns the
log-sum-exp the merge needs; where it cannot serve (a CUDA device without Triton, value heads
narrower than key heads, as in MLA) a float32 matmul does the same job. Partials are merged in
float32:

    lse = log Σ_s exp(lse_s)          out = Σ_s exp(lse_s − lse) · out_s
"""

from __future__ import annotations

import itertools

import torch

CHUNK_BYTES = 1 << 20  # ~1 MiB of K (and of V) per chunk: fits a core's L2 (2 MiB here) with room to spare
# Where chunks run as plain matmuls (values narrower than keys: MLA's latent), the GEMMs want long
# chunks far more than L2 locality: 256-token chunks of a 576-wide latent ran 4x slower than 4096.
MATMUL_CHUNK_BYTES = 16 << 20
MIN_CHUNK_TOKENS = 256  # shorter chunks cost more per call than locality saves
_cpu_flash = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def gqa_decode_torch(q, k_cache, v_cache, cache_seqlens, block_table, scale, shape, out, chunk=None,
                     shared_kv=False):
    """Write the attention output into ``out`` and return the log-sum-exp ``(batch, H)`` float32.

    Inputs are already checked by ``kernels.api.check_inputs``. ``chunk`` overrides the tokens per
    chunk (tests use small ones to exercise the merge on short sequences). ``shared_kv``: the values
    are the leading elements of the key rows (MLA), so a paged cache is gathered once, not twice.
    """
    b, K, G, d = shape.batch, shape.num_kv_heads, shape.group_size, shape.head_dim
    budget = CHUNK_BYTES if shape.head_dim_v == d else MATMUL_CHUNK_BYTES
    chunk = chunk or chunk_tokens(K, d, q.element_size(), budget)
    lse = torch.empty(b, shape.num_heads, dtype=torch.float32, device=q.device)
    q_grouped = q.view(b, K, G, d)
    lengths = cache_seqlens.tolist()
    # Sequences of equal length are attended together; ragged batches fall back to runs of one.
    start = 0
    for length, run in itertools.groupby(lengths):
        stop = start + len(list(run))
        if length == 0:
            out[start:stop] = 0
            lse[start:stop] = float("-inf")
        else:
            keys, values = _cached(k_cache, v_cache, block_table, start, stop, length, shared_kv)
            o, l = _attend(q_grouped[start:stop], keys, values, scale, chunk)
            out[start:stop] = o.reshape(stop - start, shape.num_heads, shape.head_dim_v)
            lse[start:stop] = l.reshape(stop - start, shape.num_heads)
        start = stop
    return lse


def chunk_tokens(num_kv_heads: int, head_dim: int, element_size: int, budget: int = CHUNK_BYTES) -> int:
    """Tokens per chunk: a power of two near ``budget`` bytes of one cache, at least MIN_CHUNK_TOKENS."""
    tokens = budget // (num_kv_heads * head_dim * element_size)
    return max(MIN_CHUNK_TOKENS, 1 << max(tokens, 1).bit_length() - 1)


def _cached(k_cache, v_cache, block_table, start, stop, length, shared_kv=False):
    """The first ``length`` tokens of sequences ``start:stop`` as ``(n, length, K, d)`` caches.

    Contiguous caches are sliced (a view). Paged caches are gathered: one copy of the blocks in
    use, never repeated over the group (with ``shared_kv``, one copy for keys and values both); the
    Triton and C kernels read pages in place instead.
    """
    if block_table is None:
        return k_cache[start:stop, :length], v_cache[start:stop, :length]
    block_size = k_cache.shape[1]
    blocks = block_table[start:stop, : -(-length // block_size)].long()
    keys = k_cache[blocks].flatten(1, 2)[:, :length]
    if shared_kv:
        return keys, keys[..., : v_cache.shape[-1]]
    return keys, v_cache[blocks].flatten(1, 2)[:, :length]


def _attend(q, keys, values, scale, chunk):
    """q ``(n, K, G, d)`` against ``(n, L, K, d)`` caches → out ``(n, K, G, d)``, lse ``(n, K, G)``."""
    n, length = keys.shape[:2]
    threads = torch.get_num_threads()
    if n * q.shape[1] < 2 * threads:  # too few (sequence, KV head) pairs to keep every thread busy (MQA)
        chunk = min(chunk, max(MIN_CHUNK_TOKENS, length // (2 * threads)))
    if length < 2 * chunk:
        return _block_attention(q, keys.transpose(1, 2), values.transpose(1, 2), scale)
    out = q.new_empty(*q.shape[:-1], values.shape[-1])
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    full = length // chunk * chunk
    for i in range(n):  # chunks of one sequence share a stride only within that sequence
        o, l = merge(*_chunked(q[i], keys[i, :full], values[i, :full], scale, chunk))
        if full < length:
            tail_o, tail_l = _block_attention(q[i : i + 1], keys[i : i + 1, full:].transpose(1, 2),
                                              values[i : i + 1, full:].transpose(1, 2), scale)
            o, l = merge(torch.stack([o, tail_o[0]]), torch.stack([l, tail_l[0]]))
        out[i], lse[i] = o, l
    return out, lse


def _chunked(q, keys, values, scale, chunk):
    """One sequence, ``len(keys)`` a multiple of ``chunk``: one call with the chunks as the batch."""
    splits = keys.shape[0] // chunk
    as_batch = lambda cache: cache.unflatten(0, (splits, chunk)).transpose(1, 2)  # (S, K, chunk, d) view
    return _block_attention(q.expand(splits, *q.shape), as_batch(keys), as_batch(values), scale)


def merge(out, lse):
    """Merge partial results along dim 0 by their log-sum-exp (float32); empty partials have lse −inf."""
    total = torch.logsumexp(lse, dim=0)
    weights = torch.exp(lse - total).nan_to_num_(0.0)  # no tokens at all: total is -inf, every weight 0
    return (out.float() * weights.unsqueeze(-1)).sum(dim=0).to(out.dtype), total


def _block_attention(q, keys, values, scale):
    """q ``(B, K, G, d)``, keys ``(B, K, L, d)``, values ``(B, K, L, d_v)`` (any strides) → out
    ``(B, K, G, d_v)``, lse ``(B, K, G)`` float32."""
    if _cpu_flash is not None and q.device.type == "cpu" and keys.shape[-1] == values.shape[-1]:
        out, lse = _cpu_flash(q, keys, values, scale=scale)
        return out, lse.float()
    return matmul_attention(q, keys, values, scale)


def matmul_attention(q, keys, values, scale):
    """``_block_attention`` in plain float32 matmuls, for devices without the fused CPU kernel."""
    scores = torch.matmul(q.float(), keys.float().transpose(-1, -2)) * scale
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), values.float())
    return out.to(q.dtype), lse
