"""``gqa_decode`` and ``mla_decode``: the entry points, their input checks and the choice of implementation.

Layouts follow FlashAttention's ``flash_attn_with_kvcache`` so callers can swap one for the other:

- ``q``: ``(batch, H, d)``, one new token per sequence;
- contiguous caches: ``(batch, max_seqlen, K, d)`` for keys, ``(batch, max_seqlen, K, d_v)`` for
  values (``d_v`` is usually ``d``; DeepSeek's MHA keeps 192-wide keys and 128-wide values);
- paged caches: ``(num_blocks, block_size, K, d)`` with ``block_table`` ``(batch, max_blocks)`` int32,
  token ``t`` of sequence ``b`` living at ``cache[block_table[b, t // block_size], t % block_size]``;
- ``cache_seqlens``: ``(batch,)`` int32, how many cached tokens each sequence attends to;
- output ``(batch, H, d_v)`` in q's dtype; with ``return_lse`` also the natural-log log-sum-exp of
  the scaled scores, ``(batch, H)`` float32 (FlashAttention's ``softmax_lse``).

Query head ``h`` attends with KV head ``h // G`` where ``G = H // K`` (PyTorch's ``enable_gqa`` and
``repeat_interleave`` semantics). A sequence with zero cached tokens has nothing to attend to: its
output is zeros and its log-sum-exp is ``-inf`` (the empty sum), in every implementation.

``mla_decode`` is multi-head latent attention in its absorbed form (FlashMLA's
``flash_mla_with_kvcache`` layout, with the latent's single KV head left out): queries already
multiplied into the latent space, ``q`` ``(batch, H, kv_lora_rank + rope)``, and one latent cache
``(batch or blocks, tokens, kv_lora_rank + rope)``. It is grouped attention with one KV head that
all H query heads share, keys the whole latent row and values its first ``head_dim_v``
(= ``kv_lora_rank``) elements, so it runs on the same kernels with K = 1 and the value cache a view
of the key cache: each latent row is fetched once for all H heads. The output
``(batch, H, head_dim_v)`` is still in the latent space; the caller multiplies it by ``W_UV``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
BACKENDS = ("auto", "triton", "cpu", "torch")


@dataclass(frozen=True)
class DecodeShape:
    """The sizes of one decode call, read off validated inputs."""

    batch: int
    num_heads: int
    num_kv_heads: int
    head_dim: int  # of queries and keys
    head_dim_v: int  # of values and the output
    capacity: int  # the most tokens a sequence can hold: max_seqlen, or max_blocks * block_size
    block_size: int | None  # None for a contiguous cache

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def paged(self) -> bool:
        return self.block_size is not None


def check_inputs(q, k_cache, v_cache, cache_seqlens, block_table=None, scale=None, out=None) -> DecodeShape:
    """Raise ``ValueError`` naming the first thing wrong with the inputs; return their sizes.

    Sequence lengths and block indices are checked against the cache only for CPU tensors: on a GPU
    that check would wait for the device on every call (FlashAttention does not check either).
    """
    tensors = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "cache_seqlens": cache_seqlens}
    if block_table is not None:
        tensors["block_table"] = block_table
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if q.dim() != 3:
        raise ValueError(f"q must be (batch, num_heads, head_dim), got shape {tuple(q.shape)}")
    if k_cache.dim() != 4:
        raise ValueError(
            "k_cache must be (batch, max_seqlen, num_kv_heads, head_dim) or "
            f"(num_blocks, block_size, num_kv_heads, head_dim), got shape {tuple(k_cache.shape)}")
    if v_cache.dim() != 4 or v_cache.shape[:3] != k_cache.shape[:3] or v_cache.shape[3] < 1:
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} differs from k_cache shape {tuple(k_cache.shape)} "
                         "(only the last, head_dim, dimension may differ)")
    if q.dtype not in DTYPES:
        raise ValueError(f"q dtype must be one of float16, bfloat16, float32, got {q.dtype}")
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"q, k_cache and v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    devices = {t.device for t in tensors.values()}
    if len(devices) != 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(map(str, devices))}")

    batch, num_heads, head_dim = q.shape
    _, slots, num_kv_heads, cache_head_dim = k_cache.shape
    head_dim_v = v_cache.shape[3]
    if batch < 1 or num_heads < 1 or head_dim < 1 or num_kv_heads < 1:
        raise ValueError(f"empty dimension in q {tuple(q.shape)} or k_cache {tuple(k_cache.shape)}")
    if cache_head_dim != head_dim:
        raise ValueError(f"head_dim of q ({head_dim}) and of the caches ({cache_head_dim}) differ")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("q, k_cache and v_cache must be contiguous in their last (head_dim) dimension")

    if cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (batch,):
        raise ValueError(
            f"cache_seqlens must be int32 of shape ({batch},), got {cache_seqlens.dtype} {tuple(cache_seqlens.shape)}")

    if block_table is None:
        if k_cache.shape[0] != batch:
            raise ValueError(f"k_cache batch ({k_cache.shape[0]}) differs from q batch ({batch}); "
                             "pass block_table for a paged cache")
        capacity, block_size = slots, None
    else:
        if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
            raise ValueError(f"block_table must be int32 of shape ({batch}, max_blocks), "
                             f"got {block_table.dtype} {tuple(block_table.shape)}")
        capacity, block_size = block_table.shape[1] * slots, slots

    out_shape = (batch, num_heads, head_dim_v)
    if out is not None and (not isinstance(out, torch.Tensor) or out.shape != out_shape or out.dtype != q.dtype
                            or out.device != q.device or out.stride(-1) != 1):
        raise ValueError(f"out must be a tensor of shape {out_shape}, {q.dtype}, on {q.device}, "
                         "contiguous in its last dimension")
    if scale is not None and not (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                                  and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number or None, got {scale!r}")

    if cache_seqlens.device.type == "cpu":
        lengths = cache_seqlens
        if bool((lengths < 0).any()) or bool((lengths > capacity).any()):
            raise ValueError(f"cache_seqlens must lie in [0, {capacity}], got {lengths.tolist()}")
        if block_table is not None:
            used = torch.arange(block_table.shape[1]) < ((lengths + block_size - 1) // block_size)[:, None]
            blocks = block_table[used]
            if blocks.numel() and (int(blocks.min()) < 0 or int(blocks.max()) >= k_cache.shape[0]):
                raise ValueError(f"block_table entries in use must lie in [0, {k_cache.shape[0]})")
    return DecodeShape(batch, num_heads, num_kv_heads, head_dim, head_dim_v, capacity, block_size)


def latent_views(q, latent_cache, head_dim_v):
    """Check ``mla_decode``'s own inputs; return the key and value caches it attends over: the
    latent as a one-head key cache and its first ``head_dim_v`` elements as a view of the same
    memory (so nothing is copied and every row is fetched once)."""
    if not isinstance(latent_cache, torch.Tensor):
        raise ValueError(f"latent_cache must be a torch.Tensor, got {type(latent_cache).__name__}")
    if latent_cache.dim() != 3:
        raise ValueError("latent_cache must be (batch, max_seqlen, kv_lora_rank + rope) or "
                         f"(num_blocks, block_size, kv_lora_rank + rope), got shape {tuple(latent_cache.shape)}")
    width = latent_cache.shape[-1]
    if isinstance(head_dim_v, bool) or not isinstance(head_dim_v, int) or not 0 < head_dim_v <= width:
        raise ValueError(f"head_dim_v must be a whole number in [1, {width}] (the latent rank), got {head_dim_v!r}")
    if isinstance(q, torch.Tensor) and q.dim() == 3 and q.shape[-1] != width:
        raise ValueError(f"q width ({q.shape[-1]}) and latent_cache width ({width}) differ: queries must be "
                         "projected into the latent space (q_nope·W_UK concatenated with q_rope)")
    keys = latent_cache.unsqueeze(2)
    return keys, keys[..., :head_dim_v]


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def choose_backend(device: torch.device, backend: str = "auto", dtype: torch.dtype = torch.float32,
                   head_dim: int = 128, head_dim_v: int | None = None) -> str:
    """The implementation a call runs: ``auto`` is Triton on CUDA, the C kernel on the CPU where it
    builds and takes the inputs, the PyTorch path elsewhere."""
    from kernels import cpu_decode

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    head_dims = (head_dim, head_dim if head_dim_v is None else head_dim_v)
    if backend == "auto":
        if device.type == "cuda" and triton_available():
            return "triton"
        return "cpu" if cpu_decode.unsupported(device, dtype, *head_dims) is None else "torch"
    if backend == "triton" and not triton_available():
        raise ValueError("backend='triton' needs the triton package (pip install 'gqa-observatory[triton]')")
    if backend == "cpu" and (why := cpu_decode.unsupported(device, dtype, *head_dims)):
        raise ValueError(f"backend='cpu' cannot run these inputs: {why}")
    return backend


def gqa_decode(q, k_cache, v_cache, cache_seqlens, block_table=None, scale=None, return_lse=False,
               *, out=None, backend="auto", num_splits=None):
    """Decode attention for one new token per sequence over a (possibly paged) KV cache.

    ``backend="auto"`` runs the Triton kernel on CUDA when Triton is installed, the C kernel on the
    CPU (``kernels/cpu_decode.c``, compiled on first use) and the PyTorch path where neither can;
    ``"triton"`` on CPU tensors runs the kernel in Triton's interpreter (slow: tests only).
    ``num_splits`` overrides how many pieces the Triton or C kernel cuts each sequence into. ``out``, a
    preallocated ``(batch, H, d_v)`` tensor, receives the result (every element is written).
    Returns the output or, with ``return_lse``, ``(output, lse)``.
    """
    shape = check_inputs(q, k_cache, v_cache, cache_seqlens, block_table, scale, out)
    return _decode(q, k_cache, v_cache, cache_seqlens, block_table, scale, return_lse, shape, out, backend,
                   num_splits, shared_kv=False)


def mla_decode(q, latent_cache, cache_seqlens, block_table=None, scale=None, return_lse=False, *, head_dim_v,
               out=None, backend="auto", num_splits=None):
    """Absorbed multi-head latent attention decode (see the module docstring for the layouts).

    ``head_dim_v`` is the latent rank (512 for DeepSeek-V3), the leading part of each latent row
    that serves as the value. ``scale`` defaults to ``1/sqrt(kv_lora_rank + rope)``, as FlashMLA's
    does; DeepSeek's models use ``1/sqrt(qk_nope + rope)`` (times the YaRN factor), so pass it.
    Backends, ``out``, ``num_splits`` and the return value are as for ``gqa_decode``.
    """
    keys, values = latent_views(q, latent_cache, head_dim_v)
    shape = check_inputs(q, keys, values, cache_seqlens, block_table, scale, out)
    return _decode(q, keys, values, cache_seqlens, block_table, scale, return_lse, shape, out, backend, num_splits,
                   shared_kv=True)


def _decode(q, k_cache, v_cache, cache_seqlens, block_table, scale, return_lse, shape, out, backend, num_splits,
            shared_kv):
    """Run checked inputs on the chosen implementation. ``shared_kv``: the value cache is the leading
    part of the key cache's rows (MLA), which lets the kernels fetch each row once for both."""
    out = q.new_empty(shape.batch, shape.num_heads, shape.head_dim_v) if out is None else out
    scale = default_scale(shape.head_dim) if scale is None else float(scale)
    backend = choose_backend(q.device, backend, q.dtype, shape.head_dim, shape.head_dim_v)
    if backend == "triton":
        from kernels.triton_decode import gqa_decode_triton
        if q.dtype == torch.bfloat16 and q.device.type != "cuda":
            raise ValueError("the Triton interpreter cannot compute in bfloat16; use float16 or float32 on CPU")
        lse = gqa_decode_triton(q, k_cache, v_cache, cache_seqlens, block_table, scale, shape, out,
                                num_splits=num_splits, shared_kv=shared_kv)
    elif backend == "cpu":
        from kernels.cpu_decode import gqa_decode_cpu
        lse = gqa_decode_cpu(q, k_cache, v_cache, cache_seqlens, block_table, scale, shape, out,
                             splits=num_splits)
    else:
        from kernels.torch_decode import gqa_decode_torch
        lse = gqa_decode_torch(q, k_cache, v_cache, cache_seqlens, block_table, scale, shape, out,
                               shared_kv=shared_kv)
    return (out, lse) if return_lse else out
